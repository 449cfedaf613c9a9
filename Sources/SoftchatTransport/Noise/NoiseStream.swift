import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A Noise session over a byte stream (TCP), as a `ByteStream`: the handshake runs in the
/// initializer, then every write is carried in transport messages of at most 65,535 bytes
/// (≤ 65,519 bytes of plaintext each), each preceded by its 2-byte big-endian length. Handshake
/// messages use the same framing. WebSocket runs over it unchanged. Each direction rekeys
/// after every `rekeyAfterMessages` transport messages (see `NoiseTransportMessages`); both
/// ends must use the same interval.
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
    /// The default number of transport messages per key in each direction before `Rekey()`
    /// (noise.md §11.3): 0, no rekey by count, because a peer that does not rekey in step could
    /// not read us after the first rekey. Both ends opt in with the same count.
    public static let defaultRekeyAfterMessages: UInt64 = NoiseTransportMessages.defaultRekeyAfterMessages

    /// The stream (TCP) the length-prefixed Noise messages travel over.
    public let underlying: any ByteStream
    /// The protocol the handshake ran: the pattern used and the crypto functions.
    public let noiseProtocol: NoiseProtocol
    /// Whether this side is the client, the handshake's initiator.
    public let isInitiator: Bool
    /// The peer's static public key, when the pattern has one.
    public let remoteStaticKey: [UInt8]?
    /// The final handshake hash (channel binding).
    public let handshakeHash: [UInt8]
    /// Why the stream failed after the handshake, if it did.
    public private(set) var failure: TransportError?
    /// Transport messages per key in each direction before rekeying (0: never).
    public let rekeyAfterMessages: UInt64

    private let sendCipher: NoiseCipherState
    private let receiveCipher: NoiseCipherState
    private var inbound: [UInt8] = []
    private var inboundStart = 0
    private var plaintext: [UInt8] = []
    private var plaintextStart = 0
    /// Set by close() or a failure; close() may come from another thread than a blocked read's.
    private let closed = Atomic(false)
    private var scratch = [UInt8](repeating: 0, count: 65537)
    private var peer: String { isInitiator ? "the relay" : "the client" }

    /// Checks that `pattern` can carry a relay connection.
    /// - Parameters:
    ///   - pattern: The pattern to check; its full name, modifiers included, must be one of
    ///     ``NoiseStream/streamPatterns``.
    ///   - kind: The kind of the error thrown when it is not.
    /// - Throws: ``TransportError`` of `kind` when the pattern cannot carry a relay connection.
    public static func checkStreamPattern(_ pattern: NoiseHandshakePattern, kind: TransportError.Kind = .handshake) throws(TransportError) {
        guard streamPatterns.contains(pattern.name) else {
            throw TransportError(
                kind,
                "Noise pattern \(pattern.name) is not available for relay connections (use one of \(streamPatterns.sorted().joined(separator: ", ")))"
            )
        }
    }

    /// Client (initiator) side. `remoteStatic` is the relay's static public key: required by
    /// patterns that know it in advance (NK, XK, IK); for patterns that transmit it (NX, XX,
    /// IX) it pins it — a different key ends the handshake as soon as the relay's key arrives,
    /// which with XX is before our static key is sent (with IX ours goes out in the first
    /// message). `localStatic` is required by patterns that send the initiator's static key
    /// (X*, I*).
    /// - Parameters:
    ///   - stream: The connected stream to run Noise over; it is closed if the handshake fails.
    ///   - pattern: The handshake pattern, one of ``NoiseStream/streamPatterns``.
    ///   - localStatic: This client's static key pair, for patterns that send it.
    ///   - remoteStatic: The relay's static public key, required in advance or pinned.
    ///   - timeoutMilliseconds: The longest wait for the whole handshake.
    ///   - rekeyAfterMessages: Transport messages per key in each direction before a rekey;
    ///     0 for never. The relay must use the same interval.
    /// - Throws: ``TransportError``: `.handshake` when the pattern is not available, a key is
    ///   missing or wrong, the relay's static key is not the pinned one, a handshake message
    ///   fails or carries a payload, or the connection closes or fails mid-handshake;
    ///   `.timeout` when a handshake message does not arrive in time; or the stream's failure
    ///   to write.
    public init(
        client stream: any ByteStream, pattern: NoiseHandshakePattern, localStatic: NoiseKeyPair?,
        remoteStatic: [UInt8]?, timeoutMilliseconds: Int32,
        rekeyAfterMessages: UInt64 = NoiseStream.defaultRekeyAfterMessages
    ) throws(TransportError) {
        underlying = stream
        isInitiator = true
        self.rekeyAfterMessages = rekeyAfterMessages
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        do throws(TransportError) {
            let hs = try NoiseTransportMessages.clientHandshake(pattern: pattern, localStatic: localStatic, remoteStatic: remoteStatic)
            var reader = FrameReader()
            let hint = NoiseTransportMessages.closedHint(pattern)
            while !hs.isComplete {
                if hs.isMyTurn {
                    try Self.writeFrame(stream, try Self.handshake(pattern) { () throws(NoiseError) in try hs.writeMessage() })
                } else {
                    let frame = try reader.next(
                        stream, deadline: deadline, during: "the Noise \(pattern.name) handshake with the relay",
                        closedHint: hint)
                    try NoiseTransportMessages.clientRead(hs, frame, pinned: remoteStatic)
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

    /// Server (responder) side: reads the first handshake message and takes the first of
    /// `patterns` that reads it with an empty payload — a pattern whose first message is
    /// authenticated (NK, IK) only when it decrypts, the others (XX, NN, IX…) by length
    /// (32 bytes for `-> e`, 64 for `-> e, s`); patterns with the same first message (XX and
    /// NN) cannot both be told apart, the first listed wins. Then it completes that
    /// handshake with `localStatic`.
    /// - Parameters:
    ///   - stream: The accepted stream to run Noise over; it is closed if the handshake fails.
    ///   - patterns: The patterns accepted, in order of preference, each one of
    ///     ``NoiseStream/streamPatterns``.
    ///   - localStatic: The relay's static key pair.
    ///   - timeoutMilliseconds: The longest wait for the whole handshake.
    ///   - rekeyAfterMessages: Transport messages per key in each direction before a rekey;
    ///     0 for never. The client must use the same interval.
    /// - Throws: ``TransportError``: `.handshake` when `patterns` is empty or holds one that is
    ///   not available, the first message fits no accepted pattern, a later handshake message
    ///   fails or carries a payload, or the connection closes or fails mid-handshake;
    ///   `.timeout` when a handshake message does not arrive in time; or the stream's failure
    ///   to write.
    public init(
        server stream: any ByteStream, patterns: [NoiseHandshakePattern], localStatic: NoiseKeyPair,
        timeoutMilliseconds: Int32, rekeyAfterMessages: UInt64 = NoiseStream.defaultRekeyAfterMessages
    ) throws(TransportError) {
        underlying = stream
        isInitiator = false
        self.rekeyAfterMessages = rekeyAfterMessages
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        do throws(TransportError) {
            guard !patterns.isEmpty else { throw TransportError(.handshake, "no Noise pattern is accepted") }
            for p in patterns { try Self.checkStreamPattern(p) }
            var reader = FrameReader()
            let first = try reader.next(
                stream, deadline: deadline, during: "the Noise handshake with the client", closedHint: "")
            var chosen: NoiseHandshakeState?
            var errors: [String] = []
            for p in patterns {
                do throws(NoiseError) {
                    let hs = try NoiseHandshakeState(
                        protocol: NoiseProtocol(pattern: p), initiator: false, prologue: Self.prologue,
                        localStatic: localStatic)
                    // softchat-relay/1 handshake payloads are empty: a first message read
                    // under the wrong pattern leaves bytes over and is not taken.
                    let payload = try hs.readMessage(first)
                    guard payload.isEmpty else {
                        throw NoiseError(
                            .malformedMessage, "\(first.count) bytes leave a \(payload.count)-byte payload; handshake payloads are empty")
                    }
                    chosen = hs
                    break
                } catch {
                    errors.append("\(p.name): \(error.message)")
                }
            }
            guard let hs = chosen else {
                throw TransportError(
                    .handshake,
                    "the client's first Noise handshake message (\(first.count) bytes) fits no accepted pattern — \(errors.joined(separator: "; "))")
            }
            let pattern = hs.noiseProtocol.pattern
            while !hs.isComplete {
                if hs.isMyTurn {
                    try Self.writeFrame(stream, try Self.handshake(pattern) { () throws(NoiseError) in try hs.writeMessage() })
                } else {
                    let frame = try reader.next(
                        stream, deadline: deadline, during: "the Noise \(pattern.name) handshake with the client",
                        closedHint: "")
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

    private static func handshake<R>(_ pattern: NoiseHandshakePattern, _ body: () throws(NoiseError) -> R) throws(TransportError) -> R {
        try NoiseTransportMessages.handshakeStep(pattern, body)
    }

    private static func checkEmpty(_ payload: [UInt8], _ pattern: NoiseHandshakePattern) throws(TransportError) {
        try NoiseTransportMessages.checkEmptyPayload(payload, pattern)
    }

    private static func writeFrame(_ stream: any ByteStream, _ message: [UInt8]) throws(TransportError) {
        try stream.write(NoiseTransportMessages.framed(message))
    }

    /// Reads length-prefixed frames during the handshake; keeps what arrives after them.
    private struct FrameReader {
        var buffer: [UInt8] = []
        var leftover: [UInt8] { buffer }

        /// The next handshake message, read before `deadline`.
        mutating func next(_ stream: any ByteStream, deadline: Deadline, during: String, closedHint: String) throws(TransportError) -> [UInt8] {
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
                do throws(TransportError) {
                    if deadline.hasPassed { throw TransportError(.timeout, "no time left") }
                    n = try readChunk(stream, &chunk, timeoutMilliseconds: deadline.remaining)
                } catch {
                    if error.kind == .timeout { throw TransportError(.timeout, "\(during) did not complete in time") }
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
        closed.store(true, ordering: .releasing)
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

    /// Reads decrypted bytes, up to `buffer.count`, authenticating transport messages as they
    /// arrive.
    /// - Parameters:
    ///   - buffer: Where the plaintext goes.
    ///   - timeoutMilliseconds: The longest wait for each read of the underlying stream, or -1
    ///     to wait without limit.
    /// - Returns: The number of bytes read, or 0 when the stream ended between two messages.
    /// - Throws: ``TransportError``: `.protocolViolation` for a message that fails
    ///   authentication, is shorter than its tag or exhausts the nonce, or a stream that ends
    ///   mid-message (the stream is then closed, and every later call throws the same error);
    ///   `.closed` once the stream is closed; `.timeout` when nothing arrived in time; or the
    ///   underlying stream's failures.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int {
        if let failure { throw failure }
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        // One deadline for the whole call, however the frame is trickled.
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        while plaintextStart >= plaintext.count {
            if let frame = takeBufferedFrame() {
                do {
                    plaintext = try NoiseTransportMessages.open(frame, with: receiveCipher, rekeyAfterMessages: rekeyAfterMessages, peer: peer)
                    plaintextStart = 0
                } catch {
                    throw failStream(error.message)
                }
                continue
            }
            if deadline.hasPassed { throw TransportError(.timeout, "no whole Noise frame within \(timeoutMilliseconds) ms") }
            let n = try readChunk(underlying, &scratch, timeoutMilliseconds: deadline.remaining)
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

    /// Encrypts `bytes` into transport messages of at most 65,519 plaintext bytes each and
    /// writes them, length-prefixed, to the underlying stream.
    /// - Parameter bytes: The plaintext to send; an empty buffer sends nothing.
    /// - Throws: ``TransportError``: the stream's earlier failure, if any; `.closed` once the
    ///   stream is closed; `.protocolViolation` when encryption fails (an exhausted nonce),
    ///   which closes the stream; or the underlying stream's write failures.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        if let failure { throw failure }
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        guard bytes.count > 0 else { return }
        var out: [UInt8] = []
        do {
            try NoiseTransportMessages.seal(bytes, with: sendCipher, rekeyAfterMessages: rekeyAfterMessages, into: &out)
        } catch {
            throw failStream(error.message)
        }
        try underlying.write(out)
    }

    /// Whether a read would not block: decrypted bytes or a whole transport message are
    /// buffered, or the underlying stream has input.
    /// - Returns: `true` when a read can make progress without waiting.
    public func hasBufferedInput() -> Bool {
        if plaintextStart < plaintext.count { return true }
        let available = inbound.count - inboundStart
        if available >= 2 {
            let length = Int(inbound[inboundStart]) << 8 | Int(inbound[inboundStart + 1])
            if available >= 2 + length { return true }
        }
        return underlying.hasBufferedInput()
    }

    /// Closes the underlying stream; later reads and writes throw `.closed`. Idempotent, and
    /// safe from another thread than one blocked in a read.
    public func close() {
        guard closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        underlying.close()
    }
}
