/// The `HandshakeState` of noise.md §5.3, driven by a pattern table (any pattern of §7.4,
/// §7.5 and §18.1, with psk modifiers). Any failure while writing or reading a message ends
/// the handshake: later calls throw `.unexpectedState` (a call out of turn changes nothing).
/// Local private keys stay in erased-on-release memory.
public final class NoiseHandshakeState: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: one owner drives a handshake.
    /// The protocol being run: the pattern and the crypto functions.
    public let noiseProtocol: NoiseProtocol
    /// Whether this side writes the first handshake message.
    public let isInitiator: Bool
    private let symmetric: NoiseSymmetricState
    private let localStatic: NoiseKeyPair?
    private var localEphemeral: NoiseKeyPair?
    private var ephemeralSent = false
    /// The peer's static public key: given in advance, or once received; nil until then and
    /// for patterns in which the peer has none.
    public private(set) var remoteStaticKey: [UInt8]?
    /// The peer's ephemeral public key: given in advance, or once received.
    public private(set) var remoteEphemeralKey: [UInt8]?
    private var psks: [NoiseSecret]
    private var pskIndex = 0
    private var messageIndex = 0
    private var failure: NoiseError?

    /// After the last handshake message: the transport cipher state for messages to the peer
    /// (nil before then, and for the responder of a one-way pattern, which never sends).
    public private(set) var sendCipher: NoiseCipherState?
    /// After the last handshake message: the transport cipher state for messages from the
    /// peer (nil before then, and for the initiator of a one-way pattern, which never receives).
    public private(set) var receiveCipher: NoiseCipherState?
    /// Whether the last handshake message has been written or read, so that the transport
    /// cipher states are set.
    public private(set) var isComplete = false

    /// `Initialize(handshake_pattern, initiator, prologue, s, e, rs, re)` plus the PSKs in the
    /// order the pattern's psk tokens use them. `localEphemeral` fixes the key pair the first
    /// `e` token sends (test vectors); normally it is generated then. `remoteStatic` and
    /// `remoteEphemeral` are only for keys the pattern's pre-messages list.
    /// - Parameters:
    ///   - noiseProtocol: The protocol to run.
    ///   - initiator: Whether this side writes the first message.
    ///   - prologue: Data both sides must agree on, mixed into `h` before anything else.
    ///   - localStatic: This side's static key pair, when the pattern sends it or lists it in a
    ///     pre-message.
    ///   - localEphemeral: A fixed ephemeral key pair (test vectors, or an `e` pre-message).
    ///   - remoteStatic: The peer's static public key, when a pre-message lists it.
    ///   - remoteEphemeral: The peer's ephemeral public key, when a pre-message lists it.
    ///   - psks: The 32-byte pre-shared keys, in the order the `psk` tokens use them.
    /// - Throws: ``NoiseError``: `.invalidKey` for a PSK or remote static key that is not 32
    ///   bytes; `.missingKey` for fewer PSKs than the pattern uses or a key a pre-message lists
    ///   that was not given; `.unexpectedState` for a remote key given that the pattern
    ///   transmits instead.
    public init(
        protocol noiseProtocol: NoiseProtocol, initiator: Bool, prologue: [UInt8],
        localStatic: NoiseKeyPair? = nil, localEphemeral: NoiseKeyPair? = nil,
        remoteStatic: [UInt8]? = nil, remoteEphemeral: [UInt8]? = nil, psks: [[UInt8]] = []
    ) throws(NoiseError) {
        let pattern = noiseProtocol.pattern
        self.noiseProtocol = noiseProtocol
        isInitiator = initiator
        self.localStatic = localStatic
        self.localEphemeral = localEphemeral
        symmetric = NoiseSymmetricState(protocolName: Array(noiseProtocol.name.utf8))
        var secrets: [NoiseSecret] = []
        for (i, psk) in psks.enumerated() {
            guard psk.count == 32 else { throw NoiseError(.invalidKey, "PSK \(i) is \(psk.count) bytes; a PSK is 32") }
            secrets.append(psk.withUnsafeBytes { NoiseSecret($0) })
        }
        self.psks = secrets
        guard psks.count >= pattern.pskCount else {
            throw NoiseError(.missingKey, "\(pattern.name) uses \(pattern.pskCount) PSK(s); \(psks.count) given")
        }
        let remotePre = initiator ? pattern.responderPreMessage : pattern.initiatorPreMessage
        if let remoteStatic {
            guard remotePre.contains(.s) else {
                throw NoiseError(.unexpectedState, "\(pattern.name) transmits the remote static key; pin it after the handshake instead")
            }
            guard remoteStatic.count == NoiseCrypto.dhLength else {
                throw NoiseError(.invalidKey, "a remote static key is 32 bytes, not \(remoteStatic.count)")
            }
        } else if remotePre.contains(.s) {
            throw NoiseError(.missingKey, "\(pattern.name) needs the remote party's static public key in advance")
        }
        if remoteEphemeral != nil && !remotePre.contains(.e) {
            throw NoiseError(.unexpectedState, "\(pattern.name) transmits the remote ephemeral key; none can be given in advance")
        }
        if remotePre.contains(.e) && remoteEphemeral == nil {
            throw NoiseError(.missingKey, "\(pattern.name) needs the remote party's ephemeral public key in advance")
        }
        remoteStaticKey = remoteStatic
        remoteEphemeralKey = remoteEphemeral
        symmetric.mixHash(prologue)
        // Pre-messages: the initiator's keys first, each in listed order (§5.3).
        for (side, tokens) in [(true, pattern.initiatorPreMessage), (false, pattern.responderPreMessage)] {
            let mine = side == initiator
            for token in tokens {
                let key: [UInt8]
                switch (token, mine) {
                case (.s, true):
                    guard let s = localStatic else { throw NoiseError(.missingKey, "\(pattern.name) needs the local static key pair") }
                    key = s.publicKey
                case (.s, false): key = remoteStatic!
                case (.e, true):
                    guard let e = localEphemeral else {
                        throw NoiseError(.missingKey, "\(pattern.name) needs the local ephemeral key pair in advance")
                    }
                    ephemeralSent = true
                    key = e.publicKey
                case (.e, false): key = remoteEphemeral!
                default: throw NoiseError(.unsupportedProtocol, "a pre-message can only hold e and s")
                }
                symmetric.mixHash(key)
                if token == .e && pattern.usesPSK { symmetric.mixKey(key) }
            }
        }
    }

    /// Convenience: `init(protocol:)` from a full protocol name.
    /// - Parameters:
    ///   - protocolName: A full name such as `Noise_XX_25519_ChaChaPoly_SHA256`.
    ///   - initiator: Whether this side writes the first message.
    ///   - prologue: Data both sides must agree on, mixed into `h` before anything else.
    ///   - localStatic: This side's static key pair, when the pattern needs it.
    ///   - localEphemeral: A fixed ephemeral key pair (test vectors, or an `e` pre-message).
    ///   - remoteStatic: The peer's static public key, when a pre-message lists it.
    ///   - psks: The 32-byte pre-shared keys, in the order the `psk` tokens use them.
    /// - Throws: ``NoiseError``: `.unsupportedProtocol` for a name ``NoiseProtocol`` cannot
    ///   parse, otherwise as the designated initializer throws.
    public convenience init(
        protocolName: String, initiator: Bool, prologue: [UInt8], localStatic: NoiseKeyPair? = nil,
        localEphemeral: NoiseKeyPair? = nil, remoteStatic: [UInt8]? = nil, psks: [[UInt8]] = []
    ) throws(NoiseError) {
        try self.init(
            protocol: NoiseProtocol(protocolName), initiator: initiator, prologue: prologue, localStatic: localStatic,
            localEphemeral: localEphemeral, remoteStatic: remoteStatic, psks: psks)
    }

    private var pattern: NoiseHandshakePattern { noiseProtocol.pattern }

    /// True when the next handshake message is ours to write.
    public var isMyTurn: Bool { !isComplete && failure == nil && (messageIndex % 2 == 0) == isInitiator }

    /// `h`: the handshake hash (channel binding; final once `isComplete`).
    public var handshakeHash: [UInt8] { symmetric.handshakeHash }

    /// The protocol name, the role, the next message's index, and whether the handshake is
    /// complete or failed; never a key.
    public var description: String {
        "NoiseHandshakeState(\(noiseProtocol.name), \(isInitiator ? "initiator" : "responder"), message \(messageIndex)\(isComplete ? ", complete" : "")\(failure != nil ? ", failed" : ""))"
    }

    private func checkTurn(writing: Bool) throws(NoiseError) {
        if let failure { throw NoiseError(.unexpectedState, "the handshake already failed (\(failure.kind.rawValue)); start a new one") }
        if isComplete { throw NoiseError(.unexpectedState, "the \(pattern.name) handshake is complete; use the transport cipher states") }
        let ours = (messageIndex % 2 == 0) == isInitiator
        if writing && !ours { throw NoiseError(.unexpectedState, "handshake message \(messageIndex + 1) of \(pattern.name) is the peer's to send") }
        if !writing && ours {
            throw NoiseError(.unexpectedState, "handshake message \(messageIndex + 1) of \(pattern.name) is ours to send, not to read")
        }
    }

    /// The length of the current message for a payload of `payloadLength` bytes.
    private func messageLength(payloadLength: Int) -> Int {
        var hasKey = symmetric.cipher.hasKey
        var length = 0
        for token in pattern.messages[messageIndex] {
            switch token {
            case .e:
                length += NoiseCrypto.dhLength
                if pattern.usesPSK { hasKey = true }
            case .s: length += NoiseCrypto.dhLength + (hasKey ? NoiseCrypto.tagLength : 0)
            case .ee, .es, .se, .ss, .psk: hasKey = true
            }
        }
        return length + payloadLength + (hasKey ? NoiseCrypto.tagLength : 0)
    }

    private func fail(_ error: NoiseError) -> NoiseError {
        failure = error
        return error
    }

    /// `WriteMessage(payload)`: the next handshake message.
    /// - Parameter payload: Bytes to carry in the message, encrypted once a key exists.
    /// - Returns: The message to send to the peer; after the last one ``NoiseHandshakeState/isComplete``
    ///   is true.
    /// - Throws: ``NoiseError``: `.unexpectedState` when it is not this side's turn or the
    ///   handshake is complete or has failed; `.messageTooLong` when the message would exceed
    ///   65,535 bytes; `.missingKey` when a key the message needs was not given; `.invalidKey`
    ///   when a DH gives no shared secret; `.crypto` when libcrypto fails.
    public func writeMessage(payload: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        try checkTurn(writing: true)
        let total = messageLength(payloadLength: payload.count)
        guard total <= NoiseCrypto.maxMessageLength else {
            throw fail(NoiseError(.messageTooLong, "handshake message \(messageIndex + 1) would be \(total) bytes; the limit is 65,535"))
        }
        do throws(NoiseError) {
            var out: [UInt8] = []
            out.reserveCapacity(total)
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    guard !ephemeralSent else { throw NoiseError(.unexpectedState, "a second e token in \(pattern.name)") }
                    let e = localEphemeral ?? NoiseKeyPair.generate()
                    localEphemeral = e
                    ephemeralSent = true
                    out += e.publicKey
                    symmetric.mixHash(e.publicKey)
                    if pattern.usesPSK { symmetric.mixKey(e.publicKey) }
                case .s:
                    guard let s = localStatic else { throw NoiseError(.missingKey, "\(pattern.name) sends the local static key, and none was given") }
                    out += try symmetric.encryptAndHash(s.publicKey)
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            out += try symmetric.encryptAndHash(payload)
            advance()
            return out
        } catch {
            throw fail(error)
        }
    }

    /// `ReadMessage(message)`: the payload of the peer's next handshake message.
    /// - Parameter message: The handshake message the peer sent.
    /// - Returns: The payload it carried; after the last message
    ///   ``NoiseHandshakeState/isComplete`` is true.
    /// - Throws: ``NoiseError``: `.unexpectedState` when it is this side's turn to write or the
    ///   handshake is complete or has failed; `.messageTooLong` over 65,535 bytes;
    ///   `.malformedMessage` when shorter than the pattern requires; `.decryptFailed` when an
    ///   encrypted static key or the payload fails authentication; `.invalidKey` when a DH
    ///   gives no shared secret; `.missingKey` when a key a DH needs is absent.
    public func readMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        try checkTurn(writing: false)
        guard message.count <= NoiseCrypto.maxMessageLength else {
            throw fail(NoiseError(.messageTooLong, "a handshake message of \(message.count) bytes exceeds the 65,535-byte limit"))
        }
        let minimum = messageLength(payloadLength: 0)
        guard message.count >= minimum else {
            throw fail(
                NoiseError(
                    .malformedMessage,
                    "handshake message \(messageIndex + 1) of \(pattern.name) is \(message.count) bytes; it needs at least \(minimum)"))
        }
        do throws(NoiseError) {
            var offset = 0
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    guard remoteEphemeralKey == nil else { throw NoiseError(.unexpectedState, "the peer's ephemeral key arrived twice") }
                    let re = Array(message[offset..<(offset + NoiseCrypto.dhLength)])
                    offset += NoiseCrypto.dhLength
                    remoteEphemeralKey = re
                    symmetric.mixHash(re)
                    if pattern.usesPSK { symmetric.mixKey(re) }
                case .s:
                    guard remoteStaticKey == nil else { throw NoiseError(.unexpectedState, "the peer's static key arrived twice") }
                    let length = NoiseCrypto.dhLength + (symmetric.cipher.hasKey ? NoiseCrypto.tagLength : 0)
                    let rs = try symmetric.decryptAndHash(Array(message[offset..<(offset + length)]))
                    offset += length
                    remoteStaticKey = rs
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            let payload = try symmetric.decryptAndHash(Array(message[offset...]))
            advance()
            return payload
        } catch {
            throw fail(error)
        }
    }

    private func mixPSK() throws(NoiseError) {
        guard pskIndex < psks.count else { throw NoiseError(.missingKey, "\(pattern.name) needs PSK \(pskIndex)") }
        symmetric.mixKeyAndHash(psks[pskIndex].bytes)
        pskIndex += 1
    }

    /// ee, es, se, ss: which local private key meets which remote public key (§5.3).
    private func mixDH(_ token: NoiseToken) throws(NoiseError) {
        // (local is static?, remote is static?) for this side.
        let localStaticSide: Bool
        let remoteStaticSide: Bool
        switch token {
        case .ee: (localStaticSide, remoteStaticSide) = (false, false)
        case .ss: (localStaticSide, remoteStaticSide) = (true, true)
        case .es: (localStaticSide, remoteStaticSide) = isInitiator ? (false, true) : (true, false)
        case .se: (localStaticSide, remoteStaticSide) = isInitiator ? (true, false) : (false, true)
        default: return
        }
        guard let local = localStaticSide ? localStatic : localEphemeral else {
            throw NoiseError(.missingKey, "\(token.rawValue) in \(pattern.name) needs the local \(localStaticSide ? "static" : "ephemeral") key")
        }
        guard let remote = remoteStaticSide ? remoteStaticKey : remoteEphemeralKey else {
            throw NoiseError(.missingKey, "\(token.rawValue) in \(pattern.name) needs the remote \(remoteStaticSide ? "static" : "ephemeral") key")
        }
        let shared = try local.dh(remote)
        symmetric.mixKey(shared.bytes)
    }

    private func advance() {
        messageIndex += 1
        guard messageIndex == pattern.messages.count else { return }
        let (c1, c2) = symmetric.split()
        if pattern.isOneWay {
            sendCipher = isInitiator ? c1 : nil
            receiveCipher = isInitiator ? nil : c1
        } else {
            sendCipher = isInitiator ? c1 : c2
            receiveCipher = isInitiator ? c2 : c1
        }
        isComplete = true
        // The ephemeral private key is no longer needed: release (and erase) it.
        localEphemeral = nil
    }
}
