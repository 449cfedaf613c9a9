/// The transport phase of softchat-relay/1, shared by the blocking `NoiseStream` and the
/// event-driven driver's Noise codec so the two cannot drift apart: how plaintext becomes
/// length-prefixed transport messages, how a received message is authenticated, and when
/// each direction's key is replaced.
///
/// Rekey (noise.md §11.3): after every `rekeyAfterMessages` transport messages in one
/// direction, that direction's `CipherState` runs `Rekey()`. The schedule is a pure function
/// of the message count (the nonce, which `Rekey()` leaves alone), so the sender and the
/// receiver replace the key at the same message without exchanging anything; both ends must
/// be configured with the same interval. 0 disables rekeying. A compromised current key then
/// exposes at most the messages since the last rekey, and no key encrypts more than the
/// interval's worth of messages.
enum NoiseTransportMessages {
    /// The default rekey interval: 0, no rekey by count — a peer that does not rekey in step
    /// (any other softchat-relay/1 implementation) could not read us after the first rekey, so
    /// both ends opt in with the same count. The nonce limit (2^64 − 1) still ends a session.
    static let defaultRekeyAfterMessages: UInt64 = 0

    /// Runs `Rekey()` on `cipher` when the message just processed completed an interval.
    static func rekeyIfDue(_ cipher: NoiseCipherState, every interval: UInt64) throws(NoiseError) {
        guard interval > 0, cipher.nonce > 0, cipher.nonce % interval == 0 else { return }
        try cipher.rekey()
    }

    /// Encrypts `bytes` as transport messages of at most 65,535 bytes (≤ 65,519 bytes of
    /// plaintext each), each preceded by its 2-byte big-endian length, appended to `out`.
    static func seal(
        _ bytes: UnsafeRawBufferPointer, with cipher: NoiseCipherState, rekeyAfterMessages interval: UInt64,
        into out: inout [UInt8]
    ) throws(TransportError) {
        guard bytes.count > 0 else { return }
        out.reserveCapacity(out.count + bytes.count + (bytes.count / NoiseStream.maxPlaintextPerMessage + 1) * 18)
        var offset = 0
        repeat {
            let end = min(offset + NoiseStream.maxPlaintextPerMessage, bytes.count)
            let ciphertext: [UInt8]
            do {
                ciphertext = try cipher.encrypt(ad: [], UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                try rekeyIfDue(cipher, every: interval)
            } catch {
                throw TransportError(.protocolViolation, "cannot encrypt a Noise transport message: \(error.message); connection closed")
            }
            out.append(UInt8(ciphertext.count >> 8))
            out.append(UInt8(ciphertext.count & 0xFF))
            out += ciphertext
            offset = end
        } while offset < bytes.count
    }

    /// Authenticates and decrypts one transport message (without its length prefix) from
    /// `peer` ("the relay", "the client"). Every failure is a `.protocolViolation` that ends
    /// the connection: a frame too short to hold a tag, a bad MAC (tampered, replayed or
    /// forged), an exhausted nonce.
    static func open(
        _ frame: [UInt8], with cipher: NoiseCipherState, rekeyAfterMessages interval: UInt64,
        peer: String
    ) throws(TransportError) -> [UInt8] {
        guard frame.count >= NoiseCrypto.tagLength else {
            throw TransportError(
                .protocolViolation, "\(peer) sent a Noise frame of \(frame.count) bytes, shorter than the 16-byte tag; connection closed")
        }
        do {
            let plaintext = try cipher.decrypt(frame)
            try rekeyIfDue(cipher, every: interval)
            return plaintext
        } catch {
            switch error.kind {
            case .decryptFailed:
                throw TransportError(
                    .protocolViolation,
                    "a Noise transport message from \(peer) failed authentication (bad MAC: tampered, replayed or forged ciphertext); connection closed"
                )
            case .nonceExhausted:
                throw TransportError(.protocolViolation, "the Noise receiving nonce is exhausted; connection closed")
            default:
                throw TransportError(.protocolViolation, "a Noise transport message from \(peer) was refused: \(error.message); connection closed")
            }
        }
    }

    /// The initiator's handshake state for a relay connection: the pattern checked, the
    /// relay's static key given in advance only when the pattern's pre-message has it.
    static func clientHandshake(
        pattern: NoiseHandshakePattern, localStatic: NoiseKeyPair?,
        remoteStatic: [UInt8]?
    ) throws(TransportError) -> NoiseHandshakeState {
        try NoiseStream.checkStreamPattern(pattern)
        let knowsRemote = pattern.responderPreMessage.contains(.s)
        do {
            return try NoiseHandshakeState(
                protocol: NoiseProtocol(pattern: pattern), initiator: true, prologue: NoiseStream.prologue,
                localStatic: localStatic, remoteStatic: knowsRemote ? remoteStatic : nil)
        } catch {
            throw TransportError(.handshake, "cannot start the Noise \(pattern.name) handshake: \(error.message)")
        }
    }

    /// Reads one of the responder's handshake messages on the initiator's side: the payload
    /// must be empty, and a pinned key (patterns that transmit the relay's static key) must
    /// match before the handshake goes on — so our static key is never sent to an impostor.
    static func clientRead(_ hs: NoiseHandshakeState, _ frame: [UInt8], pinned: [UInt8]?) throws(TransportError) {
        let pattern = hs.noiseProtocol.pattern
        let knowsRemote = pattern.responderPreMessage.contains(.s)
        let payload = try handshakeStep(pattern, hint: knowsRemote ? " (is the pinned key=… the relay's static key?)" : "") {
            () throws(NoiseError) in try hs.readMessage(frame)
        }
        try checkEmptyPayload(payload, pattern)
        if let pinned, !knowsRemote, let got = hs.remoteStaticKey, got != pinned {
            throw TransportError(
                .handshake,
                "the relay's Noise static key \(NoiseHex.encode(got)) is not the pinned key \(NoiseHex.encode(pinned)); connection refused")
        }
    }

    /// The hint added when the relay closes during a handshake whose first message depends on
    /// the pinned key (it could not decrypt it).
    static func closedHint(_ pattern: NoiseHandshakePattern) -> String {
        pattern.responderPreMessage.contains(.s) ? " (the relay refused our first message: is the pinned key=… its static key?)" : ""
    }

    /// Runs one handshake step, turning a `NoiseError` into a `.handshake` failure.
    static func handshakeStep<R>(_ pattern: NoiseHandshakePattern, hint: String = "", _ body: () throws(NoiseError) -> R) throws(TransportError) -> R
    {
        do {
            return try body()
        } catch {
            throw TransportError(.handshake, "Noise \(pattern.name) handshake failed: \(error.message)\(error.kind == .decryptFailed ? hint : "")")
        }
    }

    /// Handshake payloads of softchat-relay/1 are empty (nothing is sent before the channel
    /// is established).
    static func checkEmptyPayload(_ payload: [UInt8], _ pattern: NoiseHandshakePattern) throws(TransportError) {
        guard payload.isEmpty else {
            throw TransportError(
                .handshake,
                "Noise \(pattern.name) handshake failed: a handshake message carried a \(payload.count)-byte payload; softchat-relay/1 handshake payloads are empty"
            )
        }
    }

    /// `message` with its 2-byte big-endian length prefix.
    static func framed(_ message: [UInt8]) -> [UInt8] {
        [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
    }
}
