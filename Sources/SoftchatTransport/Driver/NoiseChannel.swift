/// The initiator's side of a softchat-relay/1 Noise session without I/O, for the
/// event-driven driver: the same handshake, 2-byte length framing, prologue, pinned-key check
/// and rekey schedule as `NoiseStream(client:)` (both run `NoiseTransportMessages`), fed with
/// whatever bytes the socket had and returning what must be sent.
final class NoiseChannel {
    let pattern: NoiseHandshakePattern
    let rekeyAfterMessages: UInt64
    private let pinned: [UInt8]?
    private var handshake: NoiseHandshakeState?
    private var sendCipher: NoiseCipherState?
    private var receiveCipher: NoiseCipherState?
    /// Received bytes not yet framed: `inbound[inboundStart...]`.
    private var inbound: [UInt8] = []
    private var inboundStart = 0

    var isEstablished: Bool { sendCipher != nil }
    /// A frame has begun but not ended (a cut here is a truncated message).
    var hasPartialFrame: Bool { inbound.count > inboundStart }
    /// What the handshake is, for messages ("the Noise IK handshake with the relay").
    var handshakeDescription: String { "the Noise \(pattern.name) handshake with the relay" }

    /// Starts the handshake: `localStatic` for patterns that send the initiator's static key,
    /// `remoteStatic` the relay's key from the URL (required or pinned, by pattern).
    init(
        pattern: NoiseHandshakePattern, localStatic: NoiseKeyPair?, remoteStatic: [UInt8]?,
        rekeyAfterMessages: UInt64
    ) throws(TransportError) {
        self.pattern = pattern
        self.rekeyAfterMessages = rekeyAfterMessages
        pinned = remoteStatic
        handshake = try NoiseTransportMessages.clientHandshake(pattern: pattern, localStatic: localStatic, remoteStatic: remoteStatic)
    }

    /// The handshake messages it is our turn to send, framed (appended to `out`).
    func handshakeOutput(into out: inout [UInt8]) throws(TransportError) {
        guard let hs = handshake else { return }
        while hs.isMyTurn {
            out += NoiseTransportMessages.framed(try NoiseTransportMessages.handshakeStep(pattern) { () throws(NoiseError) in try hs.writeMessage() })
        }
        finishIfComplete()
    }

    /// Takes bytes from the socket. During the handshake it reads the relay's messages and
    /// appends our answers to `out`; once established it appends the plaintext of every
    /// complete transport message to `plaintext` (bytes after the last handshake message are
    /// transport messages already).
    func receive(_ bytes: UnsafeRawBufferPointer, plaintext: inout [UInt8], out: inout [UInt8]) throws(TransportError) {
        if inboundStart == inbound.count {
            inbound.removeAll(keepingCapacity: inbound.capacity <= 1 << 17)
            inboundStart = 0
        } else if inboundStart > 1 << 16 {
            inbound.removeFirst(inboundStart)
            inboundStart = 0
        }
        inbound.append(contentsOf: bytes)
        while let frame = nextFrame() {
            if let hs = handshake {
                try NoiseTransportMessages.clientRead(hs, frame, pinned: pinned)
                try handshakeOutput(into: &out)
            } else if let cipher = receiveCipher {
                plaintext += try NoiseTransportMessages.open(frame, with: cipher, rekeyAfterMessages: rekeyAfterMessages, peer: "the relay")
            }
        }
    }

    /// Seals `plaintext` as transport messages appended to `out`.
    func seal(_ plaintext: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(TransportError) {
        guard let cipher = sendCipher else { throw TransportError(.handshake, "the Noise channel is not established") }
        try NoiseTransportMessages.seal(plaintext, with: cipher, rekeyAfterMessages: rekeyAfterMessages, into: &out)
    }

    /// Why the stream ended early: a cut inside a frame or before the handshake finished.
    func endOfStreamError() -> TransportError? {
        if !isEstablished {
            return TransportError(.handshake, "the connection closed during \(handshakeDescription)\(NoiseTransportMessages.closedHint(pattern))")
        }
        if hasPartialFrame { return TransportError(.protocolViolation, "the relay closed the connection in the middle of a Noise frame") }
        return nil
    }

    private func finishIfComplete() {
        guard let hs = handshake, hs.isComplete else { return }
        sendCipher = hs.sendCipher
        receiveCipher = hs.receiveCipher
        handshake = nil
    }

    private func nextFrame() -> [UInt8]? {
        let available = inbound.count - inboundStart
        guard available >= 2 else { return nil }
        let length = Int(inbound[inboundStart]) << 8 | Int(inbound[inboundStart + 1])
        guard available >= 2 + length else { return nil }
        let frame = Array(inbound[(inboundStart + 2)..<(inboundStart + 2 + length)])
        inboundStart += 2 + length
        return frame
    }
}
