public import SoftchatCore

/// Where a relay is and how to reach it: `ws://`, `wss://`, or
/// `noise://host:port?pattern=IK&key=<64 hex>` (WebSocket over a Noise channel; see
/// `NoiseRelayParameters`).
public struct RelayEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The URL exactly as given.
    public let url: String
    /// Whether the connection runs TLS (`wss://`); false for `ws://` and `noise://`.
    public let secure: Bool
    /// The host, lowercased: a name or an IP literal (an IPv6 literal keeps its brackets).
    public let host: String
    /// The TCP port: the URL's, or 80 for `ws://` and 443 for `wss://` when it names none.
    public let port: Int
    /// Path and query sent in the HTTP request line.
    public let resource: String
    /// For `noise://` URLs: the handshake pattern and the relay's static key.
    public let noise: NoiseRelayParameters?

    /// Parses a relay URL.
    /// - Parameter url: A `ws://`, `wss://` or `noise://host:port[/path][?pattern=…&key=…]` URL.
    /// - Throws: ``TransportError`` with kind `.connect` when `url` is not a usable relay URL:
    ///   another scheme, no host, a bad port, or Noise parameters that are unknown, malformed
    ///   or do not fit the pattern (see ``NoiseRelayParameters``).
    public init(_ url: String) throws(TransportError) {
        // One parser checks every scheme first: nothing that is not printable ASCII in its
        // grammar reaches the request line or the Host header.
        let parsed: RelayURL
        do {
            parsed = try RelayURL(url)
        } catch {
            throw TransportError(.connect, error.message)
        }
        if parsed.scheme == "noise" {
            let parsed = try NoiseRelayParameters.parse(url)
            self.url = url
            secure = false
            host = parsed.host
            port = parsed.port
            resource = parsed.resource
            noise = parsed.noise
            return
        }
        noise = nil
        self.url = url
        secure = parsed.isSecure
        host = parsed.host
        port = parsed.port
        resource = parsed.path
    }

    /// `Host:` header value: the port only when it is not the scheme's default (noise://
    /// has no default port: always host:port).
    var hostHeader: String {
        if noise != nil { return "\(host):\(port)" }
        return (secure ? port == 443 : port == 80) ? host : "\(host):\(port)"
    }

    /// The URL exactly as given.
    public var description: String { url }
}

/// Options for opening a relay connection.
public struct ConnectionOptions: Sendable, Hashable {
    /// TLS settings for `wss://` relays.
    public var tls: TLSOptions
    /// How long opening a connection may take: the TCP connect, the TLS or Noise handshake and
    /// the HTTP exchange (the blocking client applies it to each step, ``IODriver`` to the whole
    /// open). NIP-11 fetches use it as their read timeout too.
    public var connectTimeoutMilliseconds: Int32
    /// The largest WebSocket message accepted, in bytes. A larger one ends a blocking
    /// `WebSocket` (close code 1009); the `IODriver` skips it as it arrives and reports
    /// `IOEvent.oversized`, so the connection goes on.
    public var maxMessageBytes: Int
    /// For noise:// relays: the file holding this client's 32-byte X25519 static secret,
    /// created (mode 0600) on first use — by default `<account database>.noise-key` beside the
    /// account (the managed transport fills it in). Never the Nostr secret, and never sent as it
    /// is: each relay gets a static key of its own derived from it (`NoiseKeyPair.forRelay`), so
    /// two relays cannot link the user by the key. When nil, each connection uses a fresh static
    /// key.
    public var noiseStaticKeyFile: String?
    /// Whether a `noise://` URL without a pinned relay key (`unauthenticated=yes`) may be dialled.
    /// False by default: such a relay is not authenticated (anyone on the path can answer it),
    /// and relay URLs come from other people's events, so the URL alone never opts in — only
    /// the app's own configuration does.
    public var allowsUnauthenticatedNoise: Bool
    /// Whether a relay may be reached at an address of this machine or of a private network
    /// (127/8, 10/8, 172.16/12, 192.168/16, 169.254/16, 100.64/10, ::1, fc00::/7, fe80::/10…),
    /// however its URL spells the host. True by default (a relay on this machine or the LAN);
    /// an app that dials relay URLs taken from other people's events (NIP-65, NIP-17 inbox
    /// lists) sets it false, so no event can make it probe the user's own network. Checked on
    /// the addresses a name resolves to, before connecting.
    public var allowsPrivateAddresses: Bool
    /// For noise:// relays: transport messages per key in each direction before the Noise
    /// `Rekey()` (noise.md §11.3; see `NoiseStream.defaultRekeyAfterMessages`), 0 for never.
    /// The relay must rekey on the same schedule: softchat's relay side does with the same
    /// interval; an independent responder that never rekeys needs 0 here.
    public var noiseRekeyAfterMessages: UInt64

    /// Creates connection options; every default suits a public relay.
    /// - Parameters:
    ///   - tls: TLS settings for `wss://` relays (the system's trusted roots by default).
    ///   - connectTimeoutMilliseconds: How long opening a connection may take (10 s by default).
    ///   - maxMessageBytes: The largest message accepted (relay.wire's frame bound by default).
    ///   - noiseStaticKeyFile: For noise:// relays, the file of this client's X25519 static
    ///     secret; nil for a fresh key per connection.
    ///   - noiseRekeyAfterMessages: For noise:// relays, transport messages per key in each
    ///     direction before a rekey; 0 (the default) never rekeys by count.
    ///   - allowsUnauthenticatedNoise: Whether `noise://` URLs without a pinned key may be dialled
    ///     (false by default).
    ///   - allowsPrivateAddresses: Whether relays at loopback or private-network addresses may be
    ///     reached (true by default).
    public init(
        tls: TLSOptions = TLSOptions(), connectTimeoutMilliseconds: Int32 = 10_000,
        maxMessageBytes: Int = RelayWireContract.maxFrameBytes.value, noiseStaticKeyFile: String? = nil,
        noiseRekeyAfterMessages: UInt64 = NoiseStream.defaultRekeyAfterMessages, allowsUnauthenticatedNoise: Bool = false,
        allowsPrivateAddresses: Bool = true
    ) {
        self.allowsUnauthenticatedNoise = allowsUnauthenticatedNoise
        self.allowsPrivateAddresses = allowsPrivateAddresses
        self.tls = tls
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.maxMessageBytes = maxMessageBytes
        self.noiseStaticKeyFile = noiseStaticKeyFile
        self.noiseRekeyAfterMessages = noiseRekeyAfterMessages
    }
}

/// The client side of a relay connection: the secure layer, then the RFC 6455 opening
/// handshake, on the calling thread.
public enum WebSocketClient {
    /// Opens TCP (and TLS for wss), performs the RFC 6455 opening handshake with its
    /// Sec-WebSocket-Accept check, and returns the connected WebSocket.
    /// For noise:// the Noise handshake runs in place of TLS, with the static key that
    /// `options` names when the pattern sends one.
    /// - Parameters:
    ///   - endpoint: The relay to connect to.
    ///   - options: TLS, Noise, timeout and message-size settings.
    /// - Returns: The open WebSocket, in the client role.
    /// - Throws: ``TransportError``: `.resolve` or `.connect` when no TCP connection is made;
    ///   `.timeout` when the whole of it (TCP, TLS or Noise, the upgrade) takes longer than
    ///   `options.connectTimeoutMilliseconds`;
    ///   `.tls` or `.certificate` for wss; `.handshake` when the Noise handshake fails (or the
    ///   static key file cannot be used) or the HTTP upgrade does (a status other than 101, or
    ///   a wrong Sec-WebSocket-Accept). The connection is closed on every failure.
    public static func connect(_ endpoint: RelayEndpoint, options: ConnectionOptions = ConnectionOptions()) throws(TransportError) -> WebSocket {
        let deadline = Deadline(afterMilliseconds: options.connectTimeoutMilliseconds)
        let stream = try openStream(endpoint, options: options, deadline: deadline)
        let key = HandshakeCrypto.randomKey()
        do throws(TransportError) {
            try stream.write(upgradeRequest(endpoint, key: key))
            let (head, leftover) = try readHead(stream, deadline: deadline)
            try checkUpgradeResponse(head, key: key)
            return WebSocket(stream: stream, role: .client, leftover: leftover, maxMessageBytes: options.maxMessageBytes)
        } catch {
            stream.close()
            throw error
        }
    }

    /// The client's opening handshake request (RFC 6455 §4.1) for `endpoint` with `key`.
    static func upgradeRequest(_ endpoint: RelayEndpoint, key: String) -> [UInt8] {
        let request =
            "GET \(endpoint.resource) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\nUser-Agent: softchat\r\n\r\n"
        return Array(request.utf8)
    }

    /// Checks the relay's answer to `upgradeRequest`: 101, Upgrade/Connection, and the
    /// Sec-WebSocket-Accept value derived from `key` (RFC 6455 §4.2.2).
    static func checkUpgradeResponse(_ head: HTTPHead, key: String) throws(TransportError) {
        let parts = head.firstLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1] == "101" else {
            throw TransportError(.handshake, "the relay answered \"\(head.firstLine)\" instead of 101 Switching Protocols")
        }
        guard head.header("upgrade")?.lowercased() == "websocket",
            head.header("connection")?.lowercasedTokens.contains("upgrade") == true
        else { throw TransportError(.handshake, "the relay's 101 lacks Upgrade: websocket / Connection: Upgrade") }
        guard head.header("sec-websocket-accept") == HandshakeCrypto.acceptValue(forKey: key) else {
            throw TransportError(.handshake, "Sec-WebSocket-Accept does not match the key")
        }
    }

    /// TCP, then TLS for wss:// or the Noise handshake for noise://, all before `deadline`.
    static func openStream(_ endpoint: RelayEndpoint, options: ConnectionOptions, deadline: Deadline) throws(TransportError) -> any ByteStream {
        let tcp = try TCPStream.connect(
            host: endpoint.host, port: endpoint.port, timeoutMilliseconds: deadline.remaining,
            allowsPrivateAddresses: options.allowsPrivateAddresses)
        if let noise = endpoint.noise {
            do {
                try options.checkNoiseAuthentication(noise)
                let localStatic = noise.pattern.initiatorSendsStatic ? try options.noiseStaticKey(for: endpoint) : nil
                return try NoiseStream(
                    client: tcp, pattern: noise.pattern, localStatic: localStatic,
                    remoteStatic: noise.relayStaticKey, timeoutMilliseconds: deadline.remaining,
                    rekeyAfterMessages: options.noiseRekeyAfterMessages)
            } catch {
                tcp.close()
                throw error
            }
        }
        guard endpoint.secure else { return tcp }
        do {
            return try TLSStream(client: tcp, host: endpoint.host, options: options.tls, timeoutMilliseconds: deadline.remaining)
        } catch {
            tcp.close()
            throw error
        }
    }

    /// The reader of a relay's answer to the upgrade request: the head alone; the bytes after it
    /// are the WebSocket's.
    static func answerReader() -> HTTPMessageReader {
        HTTPMessageReader(framing: .headOnly, kind: .handshake, what: "the WebSocket upgrade answer")
    }

    /// Reads an HTTP head (at most 16 KiB, strictly parsed) and whatever followed it, within
    /// `timeoutMilliseconds` in all.
    static func readHead(_ stream: any ByteStream, timeoutMilliseconds: Int32) throws(TransportError) -> (HTTPHead, [UInt8]) {
        try readHead(stream, deadline: Deadline(afterMilliseconds: timeoutMilliseconds))
    }

    /// Reads an HTTP head (at most 16 KiB, strictly parsed) and whatever followed it, before
    /// `deadline`.
    static func readHead(_ stream: any ByteStream, deadline: Deadline) throws(TransportError) -> (HTTPHead, [UInt8]) {
        var reader = HTTPMessageReader(framing: .headOnly, kind: .handshake, what: "the HTTP head")
        guard case .head(let head, let rest) = try read(stream, with: &reader, deadline: deadline) else {
            throw TransportError(.handshake, "the HTTP head: no head")  // .headOnly yields heads only
        }
        return (head, rest)
    }

    /// Feeds `reader` from `stream` until it produces a head or a message (blocking, until
    /// `deadline` at most: a peer trickling bytes cannot hold it longer).
    static func read(
        _ stream: any ByteStream, with reader: inout HTTPMessageReader, deadline: Deadline
    ) throws(TransportError) -> HTTPMessageReader.Progress {
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n: Int
            if deadline.hasPassed { throw TransportError(.timeout, "the HTTP exchange did not complete in time") }
            do {
                n = try readChunk(stream, &chunk, timeoutMilliseconds: deadline.remaining)
            } catch  where error.kind == .closed {
                n = 0
            }
            let progress = n == 0 ? try reader.finish() : try reader.feed(chunk[0..<n])
            if progress != .needMore { return progress }
            if n == 0 { throw TransportError(.closed, "the connection closed during the HTTP exchange") }
        }
    }
}

/// The server side of the opening handshake, for the embedded test relay: either a WebSocket
/// upgrade, or a plain HTTP request (NIP-11) the caller answers itself.
public enum ServerHandshake {
    /// The client asked for a WebSocket upgrade and was answered 101: the connection as a
    /// server-side ``WebSocket``.
    case websocket(WebSocket)
    /// A GET without a WebSocket upgrade (for instance NIP-11): its request target, its
    /// `Accept` header if any, and the stream to write the answer to.
    case http(path: String, accept: String?, stream: any ByteStream)

    /// Reads a client's HTTP request head from `stream` and either completes a WebSocket
    /// upgrade or returns a plain GET for the caller to answer.
    /// - Parameters:
    ///   - stream: The accepted connection (TCP, TLS or Noise).
    ///   - timeoutMilliseconds: The longest wait for the whole request head.
    ///   - maxMessageBytes: The largest message the resulting WebSocket accepts.
    /// - Returns: ``ServerHandshake/websocket(_:)`` after a successful upgrade, or
    ///   ``ServerHandshake/http(path:accept:stream:)`` for a GET without one.
    /// - Throws: ``TransportError``: `.http` for a request that is not a well-formed GET
    ///   (answered 405);
    ///   `.handshake` for a WebSocket version other than 13 (answered 426), a malformed head,
    ///   a head over 16 KiB, or a connection closed mid-request; `.timeout` when the head did not
    ///   arrive in time; or the stream's failure to write the 101 answer.
    public static func accept(
        _ stream: any ByteStream, timeoutMilliseconds: Int32,
        maxMessageBytes: Int = RelayWireContract.maxFrameBytes.value
    ) throws(TransportError) -> ServerHandshake {
        let (head, leftover) = try WebSocketClient.readHead(stream, timeoutMilliseconds: timeoutMilliseconds)
        let parts = head.firstLine.split(separator: " ")
        guard parts.count == 3, parts[0] == "GET" else {
            try? stream.write(Array("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            throw TransportError(.http, "unsupported request \"\(head.firstLine)\"")
        }
        guard head.header("upgrade")?.lowercased() == "websocket", let key = head.header("sec-websocket-key") else {
            return .http(path: String(parts[1]), accept: head.header("accept"), stream: stream)
        }
        guard head.header("sec-websocket-version") == "13" else {
            try? stream.write(Array("HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n".utf8))
            throw TransportError(.handshake, "unsupported WebSocket version")
        }
        let response =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(HandshakeCrypto.acceptValue(forKey: key))\r\n\r\n"
        try stream.write(Array(response.utf8))
        return .websocket(WebSocket(stream: stream, role: .server, leftover: leftover, maxMessageBytes: maxMessageBytes))
    }
}

/// Reads once from `stream` into `chunk` (typed throws through the buffer closure).
func readChunk(_ stream: any ByteStream, _ chunk: inout [UInt8], timeoutMilliseconds: Int32) throws(TransportError) -> Int {
    let result: Result<Int, TransportError> = chunk.withUnsafeMutableBytes { raw in
        Result { () throws(TransportError) -> Int in try stream.read(into: raw, timeoutMilliseconds: timeoutMilliseconds) }
    }
    return try result.get()
}
