/// The Noise part of a `noise://host:port[/path]?pattern=IK&key=<64 hex>` relay URL.
///
/// - `pattern`: the handshake pattern (default XX); one of `NoiseStream.streamPatterns`.
/// - `key`: the relay's static X25519 public key. Required by patterns that know it in
///   advance (NK, XK, IK); with patterns that transmit it (NX, XX, IX) it pins it, and a relay
///   presenting another key is refused.
/// - `unauthenticated=yes`: without `key` the relay is not authenticated — anyone on the path
///   can answer, and with XX or IX it receives this client's static key before anything proves
///   who it is — so a URL without `key` is refused unless it says `unauthenticated=yes`
///   (the only way with NN, XN and IN, whose relay has no static key).
public struct NoiseRelayParameters: Sendable, Hashable, CustomStringConvertible {
    /// The handshake pattern, one of ``NoiseStream/streamPatterns``.
    public let pattern: NoiseHandshakePattern
    /// The relay's 32-byte static X25519 public key: known in advance or pinned; nil when the
    /// URL names none.
    public let relayStaticKey: [UInt8]?
    /// The URL said `unauthenticated=yes`: no key is pinned and the caller accepts that the
    /// relay is not authenticated.
    public let unauthenticated: Bool

    /// Checks that `pattern` and `relayStaticKey` make a usable relay connection.
    /// - Parameters:
    ///   - pattern: The handshake pattern.
    ///   - relayStaticKey: The relay's static public key, or nil.
    ///   - unauthenticated: True to connect without a pinned key, accepting a relay nobody
    ///     authenticated.
    /// - Throws: ``TransportError`` with kind `.connect` when the pattern is not one of
    ///   ``NoiseStream/streamPatterns``, the key is not 32 bytes, the pattern needs the key in
    ///   advance and none is given, a key is given for a pattern in which the relay has no
    ///   static key, no key is given without `unauthenticated`, or both are given.
    public init(pattern: NoiseHandshakePattern, relayStaticKey: [UInt8]?, unauthenticated: Bool = false) throws(TransportError) {
        try NoiseStream.checkStreamPattern(pattern, kind: .connect)
        if let key = relayStaticKey, key.count != 32 {
            throw TransportError(.connect, "a Noise relay key is 32 bytes (64 hex characters), not \(key.count)")
        }
        let responderHasStatic = pattern.responderHasStatic
        if pattern.responderPreMessage.contains(.s) && relayStaticKey == nil {
            throw TransportError(.connect, "Noise pattern \(pattern.name) needs the relay's static key: add key=<64 hex> to the URL")
        }
        if relayStaticKey != nil && !responderHasStatic {
            throw TransportError(.connect, "Noise pattern \(pattern.name) has no relay static key to pin; drop key= or use XX or IK")
        }
        if relayStaticKey != nil && unauthenticated {
            throw TransportError(.connect, "a Noise relay URL gives both key= and unauthenticated=yes: the pinned key authenticates the relay")
        }
        if relayStaticKey == nil && !unauthenticated {
            throw TransportError(
                .connect,
                "noise:// without key= does not authenticate the relay (anyone on the path can answer, and with XX or IX it "
                    + "receives this client's static key): pin the relay's key with key=<64 hex>, or add unauthenticated=yes to accept that")
        }
        self.pattern = pattern
        self.relayStaticKey = relayStaticKey
        self.unauthenticated = unauthenticated
    }

    /// The URL query that names these parameters: `pattern=<name>`, then `&key=<hex>` or
    /// `&unauthenticated=yes`.
    public var description: String {
        "pattern=\(pattern.name)" + (relayStaticKey.map { "&key=\(NoiseHex.encode($0))" } ?? "") + (unauthenticated ? "&unauthenticated=yes" : "")
    }

    /// Parses a `noise://` URL into host, port, resource and parameters.
    static func parse(_ url: String) throws(TransportError) -> (host: String, port: Int, resource: String, noise: NoiseRelayParameters) {
        func refuse(_ why: String) -> TransportError { TransportError(.connect, "\"\(url)\" is not a valid noise:// relay URL: \(why)") }
        guard url.lowercased().hasPrefix("noise://") else { throw refuse("the scheme is not noise") }
        var rest = Substring(url.dropFirst("noise://".count))
        var query = ""
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...])
            rest = rest[..<q]
        }
        var path = "/"
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
        }
        var authority = String(rest)
        guard !authority.isEmpty, !authority.contains("@") else { throw refuse("no host") }
        let portColon: String.Index?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw refuse("an unclosed IPv6 host") }
            portColon = authority[close...].firstIndex(of: ":")
        } else {
            portColon = authority.lastIndex(of: ":")
        }
        guard let colon = portColon, let port = Int(authority[authority.index(after: colon)...]), port > 0, port < 65536 else {
            throw refuse("a port is required (noise://host:port)")
        }
        authority = String(authority[..<colon])
        guard !authority.isEmpty else { throw refuse("no host") }
        var patternName = "XX"
        var key: [UInt8]? = nil
        var unauthenticated = false
        for item in query.split(separator: "&") where !item.isEmpty {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(pair[0])
            let value = pair.count > 1 ? String(pair[1]) : ""
            switch name {
            case "pattern":
                patternName = value
            case "key":
                guard value.utf8.count == 64, let bytes = NoiseHex.decode(value) else {
                    throw refuse("key must be the relay's static public key as 64 hex characters")
                }
                key = bytes
            case "unauthenticated":
                guard value == "yes" else { throw refuse("unauthenticated takes the value yes (unauthenticated=yes)") }
                unauthenticated = true
            default:
                throw refuse("unknown parameter \"\(name)\" (only pattern, key and unauthenticated)")
            }
        }
        let pattern: NoiseHandshakePattern
        do {
            pattern = try NoiseHandshakePattern(patternName)
        } catch {
            throw refuse(error.message)
        }
        return (authority.lowercased(), port, path, try NoiseRelayParameters(pattern: pattern, relayStaticKey: key, unauthenticated: unauthenticated))
    }
}

extension ConnectionOptions {
    /// The client's Noise static key for `endpoint`: derived for that relay
    /// (`NoiseKeyPair.forRelay`) from the secret in `noiseStaticKeyFile` (loaded, or created
    /// mode 0600), or a fresh key for this connection when no file is set.
    func noiseStaticKey(for endpoint: RelayEndpoint) throws(TransportError) -> NoiseKeyPair {
        guard let path = noiseStaticKeyFile else { return NoiseKeyPair.generate() }
        do {
            return try NoiseKeyPair.loadOrCreate(path: path).forRelay(host: endpoint.host, port: endpoint.port)
        } catch {
            throw TransportError(.handshake, error.message)
        }
    }

    /// Refuses a relay without a pinned key unless the app opted in
    /// (``ConnectionOptions/allowsUnauthenticatedNoise``): the URL's `unauthenticated=yes` is
    /// somebody else's word.
    func checkNoiseAuthentication(_ noise: NoiseRelayParameters) throws(TransportError) {
        guard noise.unauthenticated, !allowsUnauthenticatedNoise else { return }
        throw TransportError(
            .connect,
            "this Noise relay has no pinned key (unauthenticated=yes): anyone on the path could answer it; "
                + "dialling one takes the app's ConnectionOptions.allowsUnauthenticatedNoise, never the URL alone")
    }
}
