import COpenSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The crypto functions of Noise_*_25519_ChaChaPoly_SHA256 (noise.md §4, §12) over libcrypto:
// X25519, ChaCha20-Poly1305 with the 32-zero-bit + 64-bit little-endian nonce, SHA-256, and
// the HMAC-SHA256 HKDF that §4.3 defines.

/// Secret bytes (private keys, cipher keys, chaining keys) in memory of their own, erased when
/// released (best effort: copies made by callers are theirs to erase). Never printed.
final class NoiseSecret: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    // @unchecked: written only while its owner holds it exclusively.
    let buffer: UnsafeMutableRawBufferPointer

    init(count: Int) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        self.count = count
    }

    convenience init(_ bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count)
        if let base = bytes.baseAddress, bytes.count > 0 { buffer.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
    }

    /// Copies `bytes` in, then erases the caller's array.
    convenience init(consuming bytes: inout [UInt8]) {
        self.init(count: bytes.count)
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress, raw.count > 0 { buffer.baseAddress!.copyMemory(from: base, byteCount: raw.count) }
        }
        noiseWipe(&bytes)
    }

    let count: Int

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<count]) }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try body(bytes) }

    /// Replaces the contents with `bytes` (same length), erasing the caller's array.
    func replace(consuming newBytes: inout [UInt8]) {
        precondition(newBytes.count == count)
        newBytes.withUnsafeBytes { raw in buffer.baseAddress!.copyMemory(from: raw.baseAddress!, byteCount: count) }
        noiseWipe(&newBytes)
    }

    deinit {
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }

    var description: String { "NoiseSecret(\(count) bytes, redacted)" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `bytes.withUnsafeBytes` with a typed throw.
func noiseWithBytes<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(NoiseError) -> R) throws(NoiseError) -> R {
    let result: Result<R, NoiseError> = bytes.withUnsafeBytes { raw in Result { () throws(NoiseError) in try body(raw) } }
    return try result.get()
}

/// Overwrites an array's bytes (best effort erasure of a temporary secret).
func noiseWipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { raw in
        if let base = raw.baseAddress, raw.count > 0 { OPENSSL_cleanse(base, raw.count) }
    }
}

enum NoiseHex {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

enum NoiseCrypto {
    static let dhLength = 32
    static let hashLength = 32
    static let tagLength = 16
    static let keyLength = 32
    /// Every Noise message (handshake or transport) is at most 65,535 bytes (§3).
    static let maxMessageLength = 65535

    static func libcryptoError(_ what: String) -> NoiseError {
        let code = ERR_get_error()
        ERR_clear_error()
        return NoiseError(.crypto, code == 0 ? "\(what) failed" : "\(what) failed (libcrypto error \(code))")
    }

    // MARK: X25519

    /// The public key of a 32-byte X25519 private key (clamped by libcrypto per RFC 7748).
    static func x25519PublicKey(_ privateKey: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8] {
        guard privateKey.count == dhLength else { throw NoiseError(.invalidKey, "an X25519 private key is 32 bytes, not \(privateKey.count)") }
        guard let pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey.bindMemory(to: UInt8.self).baseAddress, dhLength) else {
            throw libcryptoError("X25519 private key import")
        }
        defer { EVP_PKEY_free(pkey) }
        var out = [UInt8](repeating: 0, count: dhLength)
        var length = dhLength
        guard EVP_PKEY_get_raw_public_key(pkey, &out, &length) == 1, length == dhLength else {
            throw libcryptoError("X25519 public key")
        }
        return out
    }

    /// X25519(private, public) into a fresh secret. libcrypto refuses inputs that give the
    /// all-zero output (low-order points); §12.1 allows signalling that as an error.
    static func x25519(_ privateKey: UnsafeRawBufferPointer, _ publicKey: [UInt8]) throws(NoiseError) -> NoiseSecret {
        guard publicKey.count == dhLength else { throw NoiseError(.invalidKey, "an X25519 public key is 32 bytes, not \(publicKey.count)") }
        guard let mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey.bindMemory(to: UInt8.self).baseAddress, dhLength) else {
            throw libcryptoError("X25519 private key import")
        }
        defer { EVP_PKEY_free(mine) }
        guard let theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, publicKey, dhLength) else {
            throw libcryptoError("X25519 public key import")
        }
        defer { EVP_PKEY_free(theirs) }
        guard let ctx = EVP_PKEY_CTX_new(mine, nil) else { throw libcryptoError("EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1 else { throw libcryptoError("X25519 derive init") }
        guard EVP_PKEY_derive_set_peer(ctx, theirs) == 1 else { throw libcryptoError("X25519 peer key") }
        let shared = NoiseSecret(count: dhLength)
        var length = dhLength
        guard EVP_PKEY_derive(ctx, shared.buffer.bindMemory(to: UInt8.self).baseAddress, &length) == 1, length == dhLength else {
            ERR_clear_error()
            throw NoiseError(.invalidKey, "X25519 with public key \(NoiseHex.encode(publicKey)) gives no shared secret (a low-order point)")
        }
        return shared
    }

    // MARK: SHA-256, HMAC, HKDF

    static func sha256(_ parts: [UInt8]...) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        EVP_DigestInit_ex(ctx, EVP_sha256(), nil)
        for p in parts { EVP_DigestUpdate(ctx, p, p.count) }
        var out = [UInt8](repeating: 0, count: hashLength)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(ctx, &out, &length)
        return out
    }

    static func hmacSHA256(key: UnsafeRawBufferPointer, _ data: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: hashLength)
        var length: UInt32 = 0
        let keyBase = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        let dataBase = data.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let ok = HMAC(EVP_sha256(), keyBase, Int32(key.count), dataBase, data.count, &out, &length)
        precondition(ok != nil && length == UInt32(hashLength), "HMAC-SHA256 failed")
        return out
    }

    /// HKDF(chaining_key, input_key_material, n) of §4.3, n = 2 or 3. The outputs are secrets;
    /// the caller erases them once copied.
    static func hkdf(_ chainingKey: UnsafeRawBufferPointer, _ inputKeyMaterial: UnsafeRawBufferPointer, outputs: Int) -> [[UInt8]] {
        var tempKey = hmacSHA256(key: chainingKey, inputKeyMaterial)
        defer { noiseWipe(&tempKey) }
        var results: [[UInt8]] = []
        var previous: [UInt8] = []
        for i in 1...outputs {
            var input = previous + [UInt8(i)]
            let output = tempKey.withUnsafeBytes { k in input.withUnsafeBytes { hmacSHA256(key: k, $0) } }
            noiseWipe(&input)
            results.append(output)
            previous = output
        }
        return results
    }

    // MARK: ChaCha20-Poly1305

    static func nonce(_ n: UInt64) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { out[4 + i] = UInt8((n >> (8 * UInt64(i))) & 0xFF) }
        return out
    }

    /// AEAD_CHACHA20_POLY1305 (RFC 7539): ciphertext with the 16-byte tag appended.
    static func encrypt(key: UnsafeRawBufferPointer, nonce n: UInt64, ad: [UInt8], plaintext: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8] {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw libcryptoError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let iv = nonce(n)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        let ok: Bool = out.withUnsafeMutableBytes { outRaw in
            let o = outRaw.bindMemory(to: UInt8.self).baseAddress!
            guard EVP_EncryptInit_ex(ctx, EVP_chacha20_poly1305(), nil, key.bindMemory(to: UInt8.self).baseAddress, iv) == 1 else { return false }
            var length: Int32 = 0
            if !ad.isEmpty {
                guard EVP_EncryptUpdate(ctx, nil, &length, ad, Int32(ad.count)) == 1 else { return false }
            }
            var written = 0
            if plaintext.count > 0 {
                guard EVP_EncryptUpdate(ctx, o, &length, plaintext.bindMemory(to: UInt8.self).baseAddress, Int32(plaintext.count)) == 1 else {
                    return false
                }
                written = Int(length)
            }
            guard EVP_EncryptFinal_ex(ctx, o + written, &length) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), o + plaintext.count) == 1
        }
        guard ok else { throw libcryptoError("ChaCha20-Poly1305 encryption") }
        return out
    }

    /// Decrypts and authenticates; a bad tag is `.decryptFailed`.
    static func decrypt(key: UnsafeRawBufferPointer, nonce n: UInt64, ad: [UInt8], ciphertext: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8] {
        guard ciphertext.count >= tagLength else {
            throw NoiseError(.malformedMessage, "a ciphertext of \(ciphertext.count) bytes is shorter than the 16-byte tag")
        }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw libcryptoError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let iv = nonce(n)
        let bodyLength = ciphertext.count - tagLength
        var out = [UInt8](repeating: 0, count: bodyLength)
        var tag = Array(ciphertext[bodyLength...])
        enum Outcome { case ok, badTag, failed }
        let outcome: Outcome = out.withUnsafeMutableBytes { outRaw in
            let o = outRaw.bindMemory(to: UInt8.self).baseAddress
            let c = ciphertext.bindMemory(to: UInt8.self).baseAddress
            guard EVP_DecryptInit_ex(ctx, EVP_chacha20_poly1305(), nil, key.bindMemory(to: UInt8.self).baseAddress, iv) == 1 else { return .failed }
            var length: Int32 = 0
            if !ad.isEmpty {
                guard EVP_DecryptUpdate(ctx, nil, &length, ad, Int32(ad.count)) == 1 else { return .failed }
            }
            var written = 0
            if bodyLength > 0 {
                guard EVP_DecryptUpdate(ctx, o, &length, c, Int32(bodyLength)) == 1 else { return .failed }
                written = Int(length)
            }
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), &tag) == 1 else { return .failed }
            var finalLength: Int32 = 0
            var scratch: UInt8 = 0
            let rc = withUnsafeMutablePointer(to: &scratch) { s in EVP_DecryptFinal_ex(ctx, o.map { $0 + written } ?? s, &finalLength) }
            return rc == 1 ? .ok : .badTag
        }
        switch outcome {
        case .ok: return out
        case .badTag:
            ERR_clear_error()
            noiseWipe(&out)
            throw NoiseError(.decryptFailed, "a ciphertext failed authentication (bad MAC): tampered, replayed, or encrypted under another key")
        case .failed:
            noiseWipe(&out)
            throw libcryptoError("ChaCha20-Poly1305 decryption")
        }
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&out, Int32(count)) == 1, "RAND_bytes failed")
        return out
    }
}

/// An X25519 key pair. The private key lives in erased-on-release memory and is never printed;
/// `description` shows the public key only.
public final class NoiseKeyPair: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    // @unchecked: immutable after init.
    let privateKey: NoiseSecret
    /// The 32-byte X25519 public key.
    public let publicKey: [UInt8]

    /// From a 32-byte X25519 private key; the caller's array is erased.
    /// - Parameter privateKey: The private key; it is copied into erased-on-release memory and
    ///   the array is overwritten with zeros, whether or not the initializer succeeds.
    /// - Throws: ``NoiseError``: `.invalidKey` when the key is not 32 bytes, `.crypto` when
    ///   libcrypto cannot derive the public key.
    public convenience init(privateKey: inout [UInt8]) throws(NoiseError) {
        let secret = NoiseSecret(consuming: &privateKey)
        try self.init(secret: secret)
    }

    init(secret: NoiseSecret) throws(NoiseError) {
        privateKey = secret
        publicKey = try NoiseCrypto.x25519PublicKey(secret.bytes)
    }

    /// A fresh key pair from libcrypto's CSPRNG.
    /// - Returns: A new key pair; the process stops if the CSPRNG fails.
    public static func generate() -> NoiseKeyPair {
        var bytes = NoiseCrypto.randomBytes(32)
        // A 32-byte buffer always imports: X25519 clamps any value.
        return try! NoiseKeyPair(privateKey: &bytes)
    }

    /// The static key this client shows one relay: X25519 of HMAC-SHA256(this secret,
    /// "softchat noise static key v1 " + the relay's lowercased host + ":" + port). Each relay
    /// sees a key of its own, so relays comparing the keys they saw cannot link the user; a
    /// relay still sees the same key on every connection (an allowlist of clients keeps
    /// working). The derived secret lives in erased-on-release memory like this one.
    /// - Parameters:
    ///   - host: The relay's host, as its URL names it.
    ///   - port: The relay's port.
    /// - Returns: The key pair for that relay.
    public func forRelay(host: String, port: Int) throws(NoiseError) -> NoiseKeyPair {
        // One spelling per name: lowercased, without a trailing root dot.
        var name = host.lowercased()
        while name.count > 1, name.hasSuffix(".") { name.removeLast() }
        let label = Array("softchat noise static key v1 \(name):\(port)".utf8)
        var derived = label.withUnsafeBytes { NoiseCrypto.hmacSHA256(key: privateKey.bytes, $0) }
        return try NoiseKeyPair(privateKey: &derived)
    }

    /// The public key as 64 lowercase hex characters, as the `key=` of a noise:// URL takes it.
    public var publicKeyHex: String { NoiseHex.encode(publicKey) }

    func dh(_ remotePublicKey: [UInt8]) throws(NoiseError) -> NoiseSecret {
        try NoiseCrypto.x25519(privateKey.bytes, remotePublicKey)
    }

    /// The public key in hex; never the private key.
    public var description: String { "NoiseKeyPair(public: \(publicKeyHex))" }
    /// The same as ``NoiseKeyPair/description``: the public key only.
    public var debugDescription: String { description }
    /// A mirror with the public key (in hex) as its only child, so that `dump` and debuggers
    /// never show the private key.
    public var customMirror: Mirror { Mirror(self, children: ["publicKey": publicKeyHex]) }

    // MARK: Key files

    /// Loads the 32-byte X25519 secret at `path`, or creates one (mode 0600, never
    /// overwriting) when the file does not exist. The file holds the 32 raw bytes, so a Nostr
    /// key file (64 hex characters) is refused rather than reused.
    /// - Parameter path: The key file's path.
    /// - Returns: The key pair the file holds, or the one just generated and written there.
    /// - Throws: ``NoiseError`` with kind `.keyFile` when the file cannot be read, created or
    ///   written, grants any permission to group or others, or does not hold exactly 32
    ///   bytes; `.crypto` when libcrypto cannot derive the public key.
    public static func loadOrCreate(path: String) throws(NoiseError) -> NoiseKeyPair {
        if let existing = try load(path: path, missingIsNil: true) { return existing }
        let pair = generate()
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd < 0 {
            // Another process created it meanwhile: use theirs.
            if errno == EEXIST, let existing = try load(path: path, missingIsNil: true) { return existing }
            throw NoiseError(.keyFile, "cannot create the Noise key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let written = write(fd, pair.privateKey.buffer.baseAddress, 32)
        guard written == 32, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw NoiseError(.keyFile, "cannot write the Noise key file \(path): \(reason)")
        }
        return pair
    }

    /// Loads the 32-byte X25519 secret at `path`.
    /// - Parameter path: The key file's path.
    /// - Returns: The key pair the file holds.
    /// - Throws: ``NoiseError`` with kind `.keyFile` when the file is missing or unreadable,
    ///   grants any permission to group or others, or does not hold exactly 32 bytes; `.crypto`
    ///   when libcrypto cannot derive the public key.
    public static func load(path: String) throws(NoiseError) -> NoiseKeyPair {
        try load(path: path, missingIsNil: false)!
    }

    private static func load(path: String, missingIsNil: Bool) throws(NoiseError) -> NoiseKeyPair? {
        let fd = open(path, O_RDONLY)
        if fd < 0 {
            if errno == ENOENT && missingIsNil { return nil }
            throw NoiseError(.keyFile, "cannot read the Noise key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw NoiseError(.keyFile, "cannot stat the Noise key file \(path)") }
        guard info.st_mode & 0o077 == 0 else {
            throw NoiseError(
                .keyFile, "the Noise key file \(path) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
        }
        let secret = NoiseSecret(count: 32)
        var scratch = [UInt8](repeating: 0, count: 64)
        defer { noiseWipe(&scratch) }
        let n = scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n == 32 else {
            throw NoiseError(
                .keyFile,
                "the Noise key file \(path) must hold exactly 32 bytes (an X25519 secret), it holds \(max(n, 0))"
                    + (n == 64 || n == 65 ? " — it looks like a hex key file; the Nostr secret is never used for Noise" : ""))
        }
        scratch.withUnsafeBytes { secret.buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 32) }
        return try NoiseKeyPair(secret: secret)
    }
}
