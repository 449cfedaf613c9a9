/// The `CipherState` of noise.md §5.1: a key `k` (possibly empty) and a 64-bit nonce `n`.
/// The key is erased when the state is released or rekeyed.
public final class NoiseCipherState: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: one owner drives a cipher state at a time.
    private var key: NoiseSecret?
    /// `n`: the nonce the next encryption or decryption uses. It counts the messages under
    /// this state, is reset by `InitializeKey` and left alone by ``NoiseCipherState/rekey()``.
    public private(set) var nonce: UInt64 = 0

    /// A state with an empty key, under which encryption and decryption pass data through
    /// unchanged until a key is set.
    public init() {}

    init(key: NoiseSecret) { self.key = key }

    /// `InitializeKey(key)`: sets `k` (nil = empty) and `n = 0`. The key is copied into
    /// erased-on-release memory; the caller's array is the caller's to erase.
    /// - Parameter newKey: A 32-byte cipher key, or nil for the empty key.
    /// - Throws: ``NoiseError`` with kind `.invalidKey` when `newKey` is not 32 bytes.
    public func initializeKey(_ newKey: [UInt8]?) throws(NoiseError) {
        if let newKey {
            guard newKey.count == NoiseCrypto.keyLength else { throw NoiseError(.invalidKey, "a cipher key is 32 bytes, not \(newKey.count)") }
            key = newKey.withUnsafeBytes { NoiseSecret($0) }
        } else {
            key = nil
        }
        nonce = 0
    }

    func initializeKey(secret: NoiseSecret?) {
        key = secret
        nonce = 0
    }

    /// `HasKey()`.
    public var hasKey: Bool { key != nil }

    /// `SetNonce(nonce)`, for out-of-order delivery (§11.4) and tests.
    /// - Parameter n: The nonce the next encryption or decryption uses.
    public func setNonce(_ n: UInt64) { nonce = n }

    /// `EncryptWithAd(ad, plaintext)`: with a key, the ciphertext plus its 16-byte tag under
    /// `n++`; without one, the plaintext. `.nonceExhausted` once `n` reached 2^64-1.
    /// - Parameters:
    ///   - ad: Associated data, authenticated but not encrypted.
    ///   - plaintext: The bytes to encrypt; at most 65,519 with a key.
    /// - Returns: The ciphertext followed by its 16-byte tag, or `plaintext` without a key.
    /// - Throws: ``NoiseError``: `.nonceExhausted` once `n` reached 2^64-1, `.messageTooLong`
    ///   when the ciphertext would exceed 65,535 bytes, `.crypto` when libcrypto fails.
    public func encrypt(ad: [UInt8] = [], _ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        try noiseWithBytes(plaintext) { raw throws(NoiseError) in try encrypt(ad: ad, raw) }
    }

    func encrypt(ad: [UInt8], _ plaintext: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8] {
        guard let key else { return Array(plaintext) }
        guard nonce != UInt64.max else { throw NoiseError(.nonceExhausted, "the sending nonce is exhausted (2^64-1 messages); the session must end") }
        guard plaintext.count + NoiseCrypto.tagLength <= NoiseCrypto.maxMessageLength else {
            throw NoiseError(.messageTooLong, "a plaintext of \(plaintext.count) bytes does not fit a 65,535-byte Noise message")
        }
        let out = try NoiseCrypto.encrypt(key: key.bytes, nonce: nonce, ad: ad, plaintext: plaintext)
        nonce += 1
        return out
    }

    /// `DecryptWithAd(ad, ciphertext)`: with a key, the authenticated plaintext under `n++`
    /// (`n` is not advanced when authentication fails); without one, the ciphertext.
    /// - Parameters:
    ///   - ad: The associated data the sender authenticated.
    ///   - ciphertext: The ciphertext with its 16-byte tag, at most 65,535 bytes.
    /// - Returns: The authenticated plaintext, or `ciphertext` without a key.
    /// - Throws: ``NoiseError``: `.decryptFailed` when the tag does not verify,
    ///   `.malformedMessage` when `ciphertext` is shorter than the tag, `.nonceExhausted` once
    ///   `n` reached 2^64-1, `.messageTooLong` over 65,535 bytes, `.crypto` when libcrypto fails.
    public func decrypt(ad: [UInt8] = [], _ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        try noiseWithBytes(ciphertext) { raw throws(NoiseError) in try decrypt(ad: ad, raw) }
    }

    func decrypt(ad: [UInt8], _ ciphertext: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8] {
        guard let key else { return Array(ciphertext) }
        guard nonce != UInt64.max else {
            throw NoiseError(.nonceExhausted, "the receiving nonce is exhausted (2^64-1 messages); the session must end")
        }
        guard ciphertext.count <= NoiseCrypto.maxMessageLength else {
            throw NoiseError(.messageTooLong, "a ciphertext of \(ciphertext.count) bytes exceeds the 65,535-byte Noise message limit")
        }
        let out = try NoiseCrypto.decrypt(key: key.bytes, nonce: nonce, ad: ad, ciphertext: ciphertext)
        nonce += 1
        return out
    }

    /// `Rekey()`: `k = REKEY(k)`, the first 32 bytes of ENCRYPT(k, 2^64-1, "", 32 zeros) (§4.2);
    /// `n` is unchanged.
    /// - Throws: ``NoiseError``: `.unexpectedState` when the state has no key, `.crypto` when
    ///   libcrypto fails.
    public func rekey() throws(NoiseError) {
        guard let key else { throw NoiseError(.unexpectedState, "rekey of a cipher state without a key") }
        let zeros = [UInt8](repeating: 0, count: 32)
        var next = try noiseWithBytes(zeros) { z throws(NoiseError) in
            try NoiseCrypto.encrypt(key: key.bytes, nonce: UInt64.max, ad: [], plaintext: z)
        }
        var first = Array(next[0..<32])
        noiseWipe(&next)
        self.key = NoiseSecret(consuming: &first)
    }

    /// Whether a key is set, and `n`; never the key.
    public var description: String { "NoiseCipherState(hasKey: \(hasKey), n: \(nonce))" }
}

/// The `SymmetricState` of noise.md §5.2 for SHA-256: a cipher state, the chaining key `ck`
/// (secret) and the handshake hash `h`.
public final class NoiseSymmetricState: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: one owner drives it.
    /// The cipher state that `mixKey(_:)` keys and the hashing encryption and decryption use.
    public let cipher = NoiseCipherState()
    private let chainingKey = NoiseSecret(count: NoiseCrypto.hashLength)
    /// `h`: the hash of the protocol name and of everything mixed in since.
    public private(set) var handshakeHash: [UInt8]

    /// `InitializeSymmetric(protocol_name)`.
    /// - Parameter protocolName: The protocol name's bytes: zero-padded to 32 bytes, or hashed
    ///   when longer, they become both `h` and `ck`; the cipher state starts without a key.
    public init(protocolName: [UInt8]) {
        if protocolName.count <= NoiseCrypto.hashLength {
            handshakeHash = protocolName + [UInt8](repeating: 0, count: NoiseCrypto.hashLength - protocolName.count)
        } else {
            handshakeHash = NoiseCrypto.sha256(protocolName)
        }
        var ck = handshakeHash
        chainingKey.replace(consuming: &ck)
    }

    /// `MixKey(input_key_material)`: a new `ck` and cipher key from HKDF(`ck`, input), `n = 0`.
    /// - Parameter inputKeyMaterial: The key material to mix in, normally a DH output.
    public func mixKey(_ inputKeyMaterial: [UInt8]) {
        inputKeyMaterial.withUnsafeBytes { mixKey($0) }
    }

    func mixKey(_ ikm: UnsafeRawBufferPointer) {
        var out = NoiseCrypto.hkdf(chainingKey.bytes, ikm, outputs: 2)
        chainingKey.replace(consuming: &out[0])
        cipher.initializeKey(secret: NoiseSecret(consuming: &out[1]))
    }

    /// `MixHash(data)`: `h = HASH(h || data)`.
    /// - Parameter data: The bytes to hash into `h`.
    public func mixHash(_ data: [UInt8]) {
        handshakeHash = NoiseCrypto.sha256(handshakeHash, data)
    }

    /// `MixKeyAndHash(input_key_material)`, for PSKs (§9): a new `ck`, a value mixed into `h`,
    /// and a new cipher key, all from HKDF(`ck`, input).
    /// - Parameter inputKeyMaterial: The key material to mix in, normally a PSK.
    public func mixKeyAndHash(_ inputKeyMaterial: [UInt8]) {
        inputKeyMaterial.withUnsafeBytes { mixKeyAndHash($0) }
    }

    func mixKeyAndHash(_ ikm: UnsafeRawBufferPointer) {
        var out = NoiseCrypto.hkdf(chainingKey.bytes, ikm, outputs: 3)
        chainingKey.replace(consuming: &out[0])
        mixHash(out[1])
        noiseWipe(&out[1])
        cipher.initializeKey(secret: NoiseSecret(consuming: &out[2]))
    }

    /// `EncryptAndHash(plaintext)`: encrypts with `h` as associated data, then mixes the
    /// ciphertext into `h`.
    /// - Parameter plaintext: The bytes to encrypt.
    /// - Returns: The ciphertext with its tag, or `plaintext` while the cipher has no key.
    /// - Throws: ``NoiseError``, as ``NoiseCipherState`` encryption throws it
    ///   (`.nonceExhausted`, `.messageTooLong`, `.crypto`).
    public func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(ad: handshakeHash, plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    /// `DecryptAndHash(ciphertext)`: decrypts with `h` as associated data, then mixes the
    /// ciphertext into `h`.
    /// - Parameter ciphertext: The bytes to decrypt, with their tag when the cipher has a key.
    /// - Returns: The authenticated plaintext, or `ciphertext` while the cipher has no key.
    /// - Throws: ``NoiseError``, as ``NoiseCipherState`` decryption throws it (`.decryptFailed`
    ///   for a bad tag, `.malformedMessage`, `.nonceExhausted`, `.messageTooLong`, `.crypto`);
    ///   `h` is then unchanged.
    public func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ad: handshakeHash, ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// `Split()`: the initiator→responder and responder→initiator cipher states.
    /// - Returns: Two new cipher states, keyed from `ck` by HKDF, each with `n = 0`: first the
    ///   initiator→responder one, then the responder→initiator one.
    public func split() -> (NoiseCipherState, NoiseCipherState) {
        var out = NoiseCrypto.hkdf(chainingKey.bytes, UnsafeRawBufferPointer(start: nil, count: 0), outputs: 2)
        let c1 = NoiseCipherState(key: NoiseSecret(consuming: &out[0]))
        let c2 = NoiseCipherState(key: NoiseSecret(consuming: &out[1]))
        return (c1, c2)
    }

    /// `h` in hex and the cipher state; never the chaining key or the cipher key.
    public var description: String { "NoiseSymmetricState(h: \(NoiseHex.encode(handshakeHash)), cipher: \(cipher))" }
}
