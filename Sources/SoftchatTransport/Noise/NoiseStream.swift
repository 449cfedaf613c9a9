#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Noise session over a byte stream (TCP), as a `ByteStream`: the handshake runs in the
/// initializer, then every write is carried in transport messages of at most 65,535 bytes
/// (≤ 65,519 bytes of plaintext each), each preceded by its 2-byte big-endian length. Handshake
/// messages use the same framing. WebSocket runs over it unchanged.
///
/// Any failure closes the stream with a clear `TransportError`: `.handshake` while
/// handshaking (a wrong pinned key, a refused or failed handshake), `.protocolViolation`
/// afterwards (a transport message that fails authentication — tampered, replayed or forged —
/// a frame too short to hold a tag, a connection cut mid-frame, an exhausted nonce).
public final class NoiseStream: ByteStream, @unchecked Sendable {
    // @unchecked: one owner drives a stream at a time; `close()` from another thread only
    // flags and closes the socket.

    /// The prologue every Softchat relay connection mixes into its handshake.
    public static let prologue: [UInt8] = Array("softchat-relay/1".utf8)
    /// The most plaintext one transport message carries: 65,535 − the 16-byte tag.
    public static let maxPlaintextPerMessage = NoiseCrypto.maxMessageLength - NoiseCrypto.tagLength
    /// Interactive patterns a relay connection can use: the initiator's static key is never
    /// known in advance (it is sent, or there is none), and no PSK is configured.
    public static let streamPatterns: Set<String> = ["NN", "NK", "NX", "XN", "XK", "XX", "IN", "IK", "IX"]

    public let underlying: any ByteStream
    public let noiseProtocol: NoiseProtocol
    public let isInitiator: Bool
    /// The peer's static public key, when the pattern has one.
    public let remoteStaticKey: [UInt8]?
    /// The final handshake hash (channel binding).
    public let handshakeHash: [UInt8]
    /// Why the stream failed after the handshake, if it did.
    public private(set) var failure: TransportError?

    private let sendCipher: NoiseCipherState
    private let receiveCipher: NoiseCipherState
    private var inbound: [UInt8] = []
    private var inboundStart = 0
    private var plaintext: [UInt8] = []
    private var plaintextStart = 0
    private var closed = false
    private var scratch = [UInt8](repeating: 0, count: 65537)
    private var peer: String { isInitiator ? "the relay" : "the client" }

    /// Checks that `pattern` can carry a relay connection.
    public static func checkStreamPattern(_ pattern: NoiseHandshakePattern, kind: TransportError.Kind = .handshake) throws(TransportError) {
        guard streamPatterns.contains(pattern.name) else {
            throw TransportError(kind, "Noise pattern \(pattern.name) is not available for relay connections (use one of \(streamPatterns.sorted().joined(separator: ", ")))")
        }
    }

    /// Client (initiator) side. `remoteStatic` is the relay's static public key: required by
    /// patterns that know it in advance (NK, XK, IK); for patterns that transmit it (NX, XX,
    /// IX) it pins it — a different key ends the handshake before our static key is sent.
    /// `localStatic` is required by patterns that send the initiator's static key (X*, I*).
    public init(client stream: any ByteStream, pattern: NoiseHandshakePattern, localStatic: NoiseKeyPair?,
                remoteStatic: [UInt8]?, timeoutMilliseconds: Int32) throws(TransportError) {
        underlying = stream
        isInitiator = true
        do throws(TransportError) {
            try Self.checkStreamPattern(pattern)
            let proto = NoiseProtocol(pattern: pattern)
            let knowsRemote = pattern.responderPreMessage.contains(.s)
            let hs: NoiseHandshakeState
            do {
                hs = try NoiseHandshakeState(protocol: proto, initiator: true, prologue: Self.prologue, localStatic: localStatic,
                                             remoteStatic: knowsRemote ? remoteStatic : nil)
            } catch {
                throw TransportError(.handshake, "cannot start the Noise \(pattern.name) handshake: \(error.message)")
            }
            var reader = FrameReader()
            let hint = knowsRemote ? " (the relay refused our first message: is the pinned key=… its static key?)" : ""
            while !hs.isComplete {
                if hs.isMyTurn {
                    try Self.writeFrame(stream, try Self.handshake(pattern) { () throws(NoiseError) in try hs.writeMessage() })
                } else {
                    let frame = try reader.next(stream, timeoutMilliseconds: timeoutMilliseconds, during: "the Noise \(pattern.name) handshake with the relay",
                        closedHint: hint)
                    let payload = try Self.handshake(pattern, hint: knowsRemote ? " (is the pinned key=… the relay's static key?)" : "") {
                        () throws(NoiseError) in try hs.readMessage(frame)
                    }
                    try Self.checkEmpty(payload, pattern)
                    if let pinned = remoteStatic, !knowsRemote, let got = hs.remoteStaticKey, got != pinned {
                        throw TransportError(.handshake, "the relay's Noise static key \(NoiseHex.encode(got)) is not the pinned key \(NoiseHex.encode(pinned)); connection refused")
                    }
                }
            }
            noiseProtocol = proto
            remoteStaticKey = hs.remoteStaticKey
            handshakeHash = hs.handshakeHash
            sendCipher = hs.sendCipher!
            receiveCipher = hs.receiveCipher!
            inbound = reader.leftover
        } catch {
            stream.close()
            throw error
        }
    }

    /// Server (responder) side: reads the first handshake message and takes the first of
    /// `patterns` that reads it with an empty payload — a pattern whose first message is
    /// authenticated (NK, IK) only when it decrypts, the others (XX, NN, IX…) by length
    /// (32 bytes for `-> e`, 64 for `-> e, s`); patterns with the same first message (XX and
    /// NN) cannot both be told apart, the first listed wins. Then it completes that
    /// handshake with `localStatic`.
    public init(server stream: any ByteStream, patterns: [NoiseHandshakePattern], localStatic: NoiseKeyPair,
                timeoutMilliseconds: Int32) throws(TransportError) {
        underlying = stream
        isInitiator = false
        do throws(TransportError) {
            guard !patterns.isEmpty else { throw TransportError(.handshake, "no Noise pattern is accepted") }
            for p in patterns { try Self.checkStreamPattern(p) }
            var reader = FrameReader()
            let first = try reader.next(stream, timeoutMilliseconds: timeoutMilliseconds, during: "the Noise handshake with the client", closedHint: "")
            var chosen: NoiseHandshakeState?
            var errors: [String] = []
            for p in patterns {
                do throws(NoiseError) {
                    let hs = try NoiseHandshakeState(protocol: NoiseProtocol(pattern: p), initiator: false, prologue: Self.prologue,
                                                     localStatic: localStatic)
                    // softchat-relay/1 handshake payloads are empty: a first message read
                    // under the wrong pattern leaves bytes over and is not taken.
                    let payload = try hs.readMessage(first)
                    guard payload.isEmpty else {
                        throw NoiseError(.malformedMessage, "\(first.count) bytes leave a \(payload.count)-byte payload; handshake payloads are empty")
                    }
                    chosen = hs
                    break
                } catch {
                    errors.append("\(p.name): \(error.message)")
                }
            }
            guard let hs = chosen else {
                throw TransportError(.handshake, "the client's first Noise handshake message (\(first.count) bytes) fits no accepted pattern — \(errors.joined(separator: "; "))")
            }
            let pattern = hs.noiseProtocol.pattern
            while !hs.isComplete {
                if hs.isMyTurn {
                    try Self.writeFrame(stream, try Self.handshake(pattern) { () throws(NoiseError) in try hs.writeMessage() })
                } else {
                    let frame = try reader.next(stream, timeoutMilliseconds: timeoutMilliseconds, during: "the Noise \(pattern.name) handshake with the client", closedHint: "")
                    try Self.checkEmpty(try Self.handshake(pattern) { () throws(NoiseError) in try hs.readMessage(frame) }, pattern)
                }
            }
            noiseProtocol = hs.noiseProtocol
            remoteStaticKey = hs.remoteStaticKey
            handshakeHash = hs.handshakeHash
            sendCipher = hs.sendCipher!
            receiveCipher = hs.receiveCipher!
            inbound = reader.leftover
        } catch {
            stream.close()
            throw error
        }
    }

    deinit { close() }

    private static func handshake<R>(_ pattern: NoiseHandshakePattern, hint: String = "", _ body: () throws(NoiseError) -> R) throws(TransportError) -> R {
        do {
            return try body()
        } catch {
            throw TransportError(.handshake, "Noise \(pattern.name) handshake failed: \(error.message)\(error.kind == .decryptFailed ? hint : "")")
        }
    }

    /// Handshake payloads of softchat-relay/1 are empty (nothing is sent before the channel
    /// is established).
    private static func checkEmpty(_ payload: [UInt8], _ pattern: NoiseHandshakePattern) throws(TransportError) {
        guard payload.isEmpty else {
            throw TransportError(.handshake, "Noise \(pattern.name) handshake failed: a handshake message carried a \(payload.count)-byte payload; softchat-relay/1 handshake payloads are empty")
        }
    }

    private static func writeFrame(_ stream: any ByteStream, _ message: [UInt8]) throws(TransportError) {
        try stream.write([UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message)
    }

    /// Reads length-prefixed frames during the handshake; keeps what arrives after them.
    private struct FrameReader {
        var buffer: [UInt8] = []
        var leftover: [UInt8] { buffer }

        mutating func next(_ stream: any ByteStream, timeoutMilliseconds: Int32, during: String, closedHint: String) throws(TransportError) -> [UInt8] {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                if buffer.count >= 2 {
                    let length = Int(buffer[0]) << 8 | Int(buffer[1])
                    if buffer.count >= 2 + length {
                        let frame = Array(buffer[2..<(2 + length)])
                        buffer.removeFirst(2 + length)
                        return frame
                    }
                }
                let n: Int
                do {
                    n = try readChunk(stream, &chunk, timeoutMilliseconds: timeoutMilliseconds)
                } catch {
                    if error.kind == .timeout { throw TransportError(.timeout, "\(during) timed out after \(timeoutMilliseconds) ms") }
                    throw TransportError(.handshake, "\(during) failed: \(error.message)\(closedHint)")
                }
                if n == 0 { throw TransportError(.handshake, "the connection closed during \(during)\(closedHint)") }
                buffer += chunk[0..<n]
            }
        }
    }

    // MARK: ByteStream

    private func failStream(_ message: String) -> TransportError {
        let error = TransportError(.protocolViolation, message)
        failure = error
        closed = true
        underlying.close()
        return error
    }

    /// The next complete frame in `inbound`, if one is there.
    private func takeBufferedFrame() -> [UInt8]? {
        let available = inbound.count - inboundStart
        guard available >= 2 else { return nil }
        let length = Int(inbound[inboundStart]) << 8 | Int(inbound[inboundStart + 1])
        guard available >= 2 + length else { return nil }
        let frame = Array(inbound[(inboundStart + 2)..<(inboundStart + 2 + length)])
        inboundStart += 2 + length
        if inboundStart == inbound.count {
            inbound.removeAll(keepingCapacity: true)
            inboundStart = 0
        } else if inboundStart > 1 << 17 {
            inbound.removeFirst(inboundStart)
            inboundStart = 0
        }
        return frame
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int {
        if let failure { throw failure }
        guard !closed else { throw TransportError(.closed, "the connection is closed") }
        while plaintextStart >= plaintext.count {
            if let frame = takeBufferedFrame() {
                guard frame.count >= NoiseCrypto.tagLength else {
                    throw failStream("\(peer) sent a Noise frame of \(frame.count) bytes, shorter than the 16-byte tag; connection closed")
                }
                do {
                    plaintext = try receiveCipher.decrypt(frame)
                    plaintextStart = 0
                } catch {
                    switch error.kind {
                    case .decryptFailed:
                        throw failStream("a Noise transport message from \(peer) failed authentication (bad MAC: tampered, replayed or forged ciphertext); connection closed")
                    case .nonceExhausted:
                        throw failStream("the Noise receiving nonce is exhausted; connection closed")
                    default:
                        throw failStream("a Noise transport message from \(peer) was refused: \(error.message); connection closed")
                    }
                }
                continue
            }
            let n = try readChunk(underlying, &scratch, timeoutMilliseconds: timeoutMilliseconds)
            if n == 0 {
                if inbound.count > inboundStart {
                    throw failStream("\(peer) closed the connection in the middle of a Noise frame")
                }
                return 0
            }
            inbound += scratch[0..<n]
        }
        let count = min(buffer.count, plaintext.count - plaintextStart)
        plaintext.withUnsafeBytes { raw in
            buffer.baseAddress!.copyMemory(from: raw.baseAddress! + plaintextStart, byteCount: count)
        }
        plaintextStart += count
        if plaintextStart == plaintext.count {
            plaintext.removeAll(keepingCapacity: true)
            plaintextStart = 0
        }
        return count
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        if let failure { throw failure }
        guard !closed else { throw TransportError(.closed, "the connection is closed") }
        guard bytes.count > 0 else { return }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + (bytes.count / Self.maxPlaintextPerMessage + 1) * 18)
        var offset = 0
        repeat {
            let end = min(offset + Self.maxPlaintextPerMessage, bytes.count)
            let ciphertext: [UInt8]
            do {
                ciphertext = try sendCipher.encrypt(ad: [], UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            } catch {
                throw failStream("cannot encrypt a Noise transport message: \(error.message); connection closed")
            }
            out.append(UInt8(ciphertext.count >> 8))
            out.append(UInt8(ciphertext.count & 0xFF))
            out += ciphertext
            offset = end
        } while offset < bytes.count
        try underlying.write(out)
    }

    public func hasBufferedInput() -> Bool {
        if plaintextStart < plaintext.count { return true }
        let available = inbound.count - inboundStart
        if available >= 2 {
            let length = Int(inbound[inboundStart]) << 8 | Int(inbound[inboundStart + 1])
            if available >= 2 + length { return true }
        }
        return underlying.hasBufferedInput()
    }

    public func close() {
        guard !closed else { return }
        closed = true
        underlying.close()
    }
}
