package import CSecp256k1

/// Why a NIP-44 operation failed: the stable reasons behind the `invalid_private_message` code.
public enum Nip44Failure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The payload is empty, starts with `#` (a future non-Base64 encoding), or its version byte is
    /// not 2.
    case unknownVersion
    /// The payload is outside 132–87,472 characters, or its decoded bytes outside 99–65,603.
    case invalidPayloadLength
    /// The payload is not canonical standard Base64.
    case invalidBase64
    /// The HMAC-SHA256 over the nonce and ciphertext does not verify.
    case invalidMAC
    /// The decrypted length prefix does not match the padding rule.
    case invalidPadding
    /// The decrypted text is not UTF-8.
    case invalidUTF8
    /// A plaintext to encrypt is empty or over 65,535 UTF-8 bytes.
    case invalidPlaintextLength
    /// A secret key that is zero or not below the curve order.
    case invalidSecretKey
    /// A public key that is not 32 bytes of an x coordinate on secp256k1.
    case invalidPublicKey

    /// The reason as the error message states it.
    public var description: String {
        switch self {
        case .unknownVersion: "unknown encryption version"
        case .invalidPayloadLength: "invalid payload length"
        case .invalidBase64: "invalid base64"
        case .invalidMAC: "invalid MAC"
        case .invalidPadding: "invalid padding"
        case .invalidUTF8: "plaintext is not UTF-8"
        case .invalidPlaintextLength: "plaintext must be 1 to 65,535 UTF-8 bytes"
        case .invalidSecretKey: "secret key is not a valid secp256k1 secret"
        case .invalidPublicKey: "public key is not a valid secp256k1 x-only public key"
        }
    }

    /// The failure as Softchat's error: code `invalid_private_message`, `nip44:` and the reason.
    public func error(operation: SoftchatOperation = .relayIngestion) -> SoftchatError {
        .invalidPrivateMessage("nip44: \(description)", operation: operation)
    }
}

/// NIP-44 version 2: the encryption of Nostr private messages (a secp256k1 ECDH conversation key,
/// HKDF-SHA256 message keys, padded ChaCha20, HMAC-SHA256 over nonce and ciphertext).
///
/// Everything here is portable (the WebAssembly core runs the same code). Keys and plaintexts
/// never appear in errors: a failure names its reason only.
public enum Nip44 {
    /// The smallest and largest plaintext, in UTF-8 bytes.
    public static let plaintextBytes = 1...65_535
    /// The payload's bounds, in characters of Base64.
    public static let payloadCharacters = 132...87_472
    /// The decoded payload's bounds, in bytes (version, nonce, at least 32 padded bytes and the
    /// length prefix, MAC).
    public static let payloadBytes = 99...65_603
    private static let salt = Array("nip44-v2".utf8)

    /// The conversation key of a secret key and another party's x-only public key: HKDF-Extract
    /// with salt `nip44-v2` of the unhashed x coordinate of their ECDH point. Symmetric: each
    /// side's secret with the other's public key gives the same key.
    ///
    /// - Parameters:
    ///   - secretKey: 32 bytes, nonzero and below the curve order.
    ///   - publicKey: 32 bytes, the x coordinate of a curve point (its even-y lift is used).
    /// - Returns: The 32-byte conversation key.
    /// - Throws: ``Nip44Failure/invalidSecretKey`` or ``Nip44Failure/invalidPublicKey``.
    public static func conversationKey(secretKey: [UInt8], publicKey: [UInt8]) throws(Nip44Failure) -> [UInt8] {
        guard secretKey.count == 32, secp256k1_ec_seckey_verify(Schnorr.context, secretKey) == 1 else {
            throw .invalidSecretKey
        }
        var shared = try sharedX(secretKey: secretKey, publicKey: publicKey)
        defer { shared.withUnsafeMutableBytes { secureZero($0) } }
        return HMACSHA256.extract(salt: salt, inputKeyMaterial: shared)
    }

    /// The x coordinate of secretKey × lift_x(publicKey), unhashed (NIP-44 hashes it itself).
    package static func sharedX(secretKey: UnsafePointer<UInt8>, publicKey: [UInt8]) throws(Nip44Failure) -> [UInt8] {
        guard publicKey.count == 32 else { throw .invalidPublicKey }
        var point = secp256k1_pubkey()
        let compressed = [0x02] + publicKey
        guard secp256k1_ec_pubkey_parse(Schnorr.context, &point, compressed, 33) == 1 else { throw .invalidPublicKey }
        var x = [UInt8](repeating: 0, count: 32)
        let copyX: secp256k1_ecdh_hash_function = { output, x32, _, _ in
            guard let output, let x32 else { return 0 }
            output.update(from: x32, count: 32)
            return 1
        }
        guard secp256k1_ecdh(Schnorr.context, &x, &point, secretKey, copyX, nil) == 1 else { throw .invalidSecretKey }
        return x
    }

    /// The three per-message keys NIP-44 derives from a conversation key and a 32-byte nonce:
    /// HKDF-Expand to 76 bytes, split as ChaCha20 key (32), ChaCha20 nonce (12), HMAC key (32).
    package struct MessageKeys {
        package var chachaKey: [UInt8]
        package var chachaNonce: [UInt8]
        package var hmacKey: [UInt8]

        package init(conversationKey: [UInt8], nonce: [UInt8]) {
            precondition(conversationKey.count == 32 && nonce.count == 32)
            var keys = HMACSHA256.expand(pseudorandomKey: conversationKey, info: nonce, length: 76)
            chachaKey = Array(keys[0..<32])
            chachaNonce = Array(keys[32..<44])
            hmacKey = Array(keys[44..<76])
            keys.withUnsafeMutableBytes { secureZero($0) }
        }

        package mutating func erase() {
            chachaKey.withUnsafeMutableBytes { secureZero($0) }
            chachaNonce.withUnsafeMutableBytes { secureZero($0) }
            hmacKey.withUnsafeMutableBytes { secureZero($0) }
        }
    }

    /// The padded length of a plaintext of `unpaddedLength` bytes: 32 up to 32 bytes, then a
    /// multiple of a chunk that is an eighth of the next power of two (32 up to 256).
    ///
    /// - Parameter unpaddedLength: The plaintext's length in bytes, at least 1.
    /// - Returns: The length the plaintext is padded to, before the 2-byte length prefix.
    public static func paddedLength(_ unpaddedLength: Int) -> Int {
        precondition(unpaddedLength >= 1, "NIP-44 pads 1 byte or more")
        guard unpaddedLength > 32 else { return 32 }
        let nextPower = 1 << (Int.bitWidth - (unpaddedLength - 1).leadingZeroBitCount)
        let chunk = nextPower <= 256 ? 32 : nextPower / 8
        return chunk * ((unpaddedLength - 1) / chunk + 1)
    }

    /// Encrypts `plaintext` under `conversationKey` with a fresh random nonce.
    ///
    /// - Parameters:
    ///   - plaintext: 1 to 65,535 UTF-8 bytes.
    ///   - conversationKey: The 32-byte key from ``conversationKey(secretKey:publicKey:)``.
    /// - Returns: The Base64 payload.
    /// - Throws: ``Nip44Failure/invalidPlaintextLength``.
    public static func encrypt(_ plaintext: String, conversationKey: [UInt8]) throws(Nip44Failure) -> String {
        try encrypt(plaintext, conversationKey: conversationKey, nonce: SecureRandom.bytes(32))
    }

    /// Encrypts with a given 32-byte nonce: for test vectors only (a nonce must never repeat
    /// under one conversation key).
    package static func encrypt(_ plaintext: String, conversationKey: [UInt8], nonce: [UInt8]) throws(Nip44Failure) -> String {
        precondition(conversationKey.count == 32 && nonce.count == 32)
        var text = Array(plaintext.utf8)
        defer { text.withUnsafeMutableBytes { secureZero($0) } }
        guard plaintextBytes.contains(text.count) else { throw .invalidPlaintextLength }
        var padded = [UInt8(text.count >> 8), UInt8(text.count & 0xff)] + text
        padded += [UInt8](repeating: 0, count: paddedLength(text.count) - text.count)
        var keys = MessageKeys(conversationKey: conversationKey, nonce: nonce)
        defer { keys.erase() }
        ChaCha20.xor(&padded, key: keys.chachaKey, nonce: keys.chachaNonce)
        let mac = HMACSHA256.mac(key: keys.hmacKey, nonce, padded)
        return Base64.encode([2] + nonce + padded + mac)
    }

    /// Decrypts a NIP-44 v2 payload: checks the version, lengths and MAC (in constant time)
    /// before decrypting, then the padding and UTF-8.
    ///
    /// - Parameters:
    ///   - payload: The Base64 payload, as an event's content carries it.
    ///   - conversationKey: The 32-byte conversation key.
    /// - Returns: The plaintext.
    /// - Throws: ``Nip44Failure`` naming the first check that failed.
    public static func decrypt(_ payload: String, conversationKey: [UInt8]) throws(Nip44Failure) -> String {
        precondition(conversationKey.count == 32)
        let text = payload.utf8
        guard let first = text.first, first != UInt8(ascii: "#") else {
            throw text.isEmpty ? .invalidPayloadLength : .unknownVersion
        }
        guard payloadCharacters.contains(text.count) else { throw .invalidPayloadLength }
        guard let data = Base64.decode(text) else { throw .invalidBase64 }
        guard payloadBytes.contains(data.count) else { throw .invalidPayloadLength }
        guard data[0] == 2 else { throw .unknownVersion }
        let nonce = Array(data[1..<33])
        var ciphertext = Array(data[33..<(data.count - 32)])
        let mac = Array(data[(data.count - 32)...])
        var keys = MessageKeys(conversationKey: conversationKey, nonce: nonce)
        defer { keys.erase() }
        guard HMACSHA256.constantTimeEqual(HMACSHA256.mac(key: keys.hmacKey, nonce, ciphertext), mac) else { throw .invalidMAC }
        ChaCha20.xor(&ciphertext, key: keys.chachaKey, nonce: keys.chachaNonce)
        defer { ciphertext.withUnsafeMutableBytes { secureZero($0) } }
        let length = Int(ciphertext[0]) << 8 | Int(ciphertext[1])
        guard length >= 1, ciphertext.count == 2 + paddedLength(length) else { throw .invalidPadding }
        guard let plaintext = String(validating: ciphertext[2..<(2 + length)], as: UTF8.self) else { throw .invalidUTF8 }
        return plaintext
    }
}
