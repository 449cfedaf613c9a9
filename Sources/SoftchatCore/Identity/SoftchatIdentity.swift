import CSecp256k1
import Synchronization

/// A Nostr signing identity: a secp256k1 secret key and its x-only public key.
///
/// The secret lives in one heap buffer that is zeroed by ``erase()`` or when the identity is
/// released, and is never printed: `description`, errors and logs show the public key only.
/// Every holder (an app's code, a managed transport answering NIP-42, the C ABI's handle) holds
/// this one object, so ``erase()`` ends signing for all of them at once.
public final class SoftchatIdentity: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    // @unchecked: the keypair buffer is written in init and afterwards read, or zeroed by
    // erase(), only while `live` is locked.
    private let keypair: UnsafeMutablePointer<secp256k1_keypair>
    /// False once ``erase()`` zeroed the keypair; its lock guards every use of the keypair.
    private let live = Mutex(true)
    /// The x-only public key, 64 lowercase hex characters.
    public let publicKeyHex: String

    private init(secret: UnsafeRawBufferPointer) throws(SoftchatError) {
        keypair = .allocate(capacity: 1)
        let ok = secp256k1_keypair_create(Schnorr.context, keypair, secret.bindMemory(to: UInt8.self).baseAddress!)
        guard ok == 1 else {
            secureZero(UnsafeMutableRawBufferPointer(start: keypair, count: MemoryLayout<secp256k1_keypair>.size))
            keypair.deallocate()
            throw .invalidRelayAuthentication("secret key is not a valid secp256k1 secret (zero or not below the curve order)")
        }
        var xonly = secp256k1_xonly_pubkey()
        var parity: Int32 = 0
        precondition(secp256k1_keypair_xonly_pub(Schnorr.context, &xonly, &parity, keypair) == 1)
        var out = [UInt8](repeating: 0, count: 32)
        precondition(secp256k1_xonly_pubkey_serialize(Schnorr.context, &out, &xonly) == 1)
        publicKeyHex = Hex.encode(out)
    }

    deinit {
        secureZero(UnsafeMutableRawBufferPointer(start: keypair, count: MemoryLayout<secp256k1_keypair>.size))
        keypair.deallocate()
    }

    /// A new identity from the operating system's CSPRNG.
    ///
    /// - Returns: An identity with a fresh random secret key.
    public static func generate() -> SoftchatIdentity {
        var secret = [UInt8](repeating: 0, count: 32)
        defer { secret.withUnsafeMutableBytes { secureZero($0) } }
        while true {
            secret.withUnsafeMutableBytes { SecureRandom.fill($0) }
            // A uniformly random 32-byte value is a valid key except with probability ~2^-128.
            if case .success(let identity) = secret.withUnsafeBytes({ buffer in
                Result { () throws(SoftchatError) in try SoftchatIdentity(secret: buffer) }
            }) {
                return identity
            }
        }
    }

    /// Imports a 32-byte secret given as 64 hex characters (either case; whitespace trimmed).
    ///
    /// - Parameter secretHex: The secret key as 64 hex characters; spaces, tabs and line breaks
    ///   around it are ignored.
    /// - Returns: The identity of that secret.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` when the text is not 64 hex
    ///   characters or the secret is zero or not below the curve order.
    public static func importSecretHex(_ secretHex: String) throws(SoftchatError) -> SoftchatIdentity {
        var text = secretHex
        // withUTF8 reads a native string in place (a bridged one is made native first).
        return try text.withUTF8 { utf8 in
            Result { () throws(SoftchatError) in try importSecretHex(utf8: UnsafeRawBufferPointer(utf8)) }
        }.get()
    }

    /// Imports a 32-byte secret given as the UTF-8 bytes of 64 hex characters (either case;
    /// spaces, tabs and line breaks around them ignored), read in place: no string or other
    /// copy of the secret is made except the 32-byte working buffer, zeroed before returning.
    /// The C ABI's `softchat_identity_import_secret_hex` uses this, so a host's key text is
    /// never copied into a string the library cannot wipe.
    ///
    /// - Parameter utf8: The secret key's hex text; the caller owns (and wipes) it.
    /// - Returns: The identity of that secret.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` when the text is not 64 hex
    ///   characters or the secret is zero or not below the curve order.
    public static func importSecretHex(utf8: UnsafeRawBufferPointer) throws(SoftchatError) -> SoftchatIdentity {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
        var start = 0
        var end = utf8.count
        while start < end, isSpace(utf8[start]) { start += 1 }
        while end > start, isSpace(utf8[end - 1]) { end -= 1 }
        guard end - start == 64 else { throw .invalidRelayAuthentication("secret key must be 64 hex characters") }
        var secret = [UInt8](repeating: 0, count: 32)
        defer { secret.withUnsafeMutableBytes { secureZero($0) } }
        // Constant-time in the key's digits: every character is looked at the same way.
        var bad: UInt8 = 0
        for i in 0..<32 {
            let hi = Hex.secretNibble(utf8[start + 2 * i])
            let lo = Hex.secretNibble(utf8[start + 2 * i + 1])
            bad |= hi | lo
            secret[i] = hi << 4 | (lo & 0x0F)
        }
        guard bad & 0xF0 == 0 else { throw .invalidRelayAuthentication("secret key must be 64 hex characters") }
        return try secret.withUnsafeBytes { buffer in
            Result { () throws(SoftchatError) in try SoftchatIdentity(secret: buffer) }
        }.get()
    }

    /// The secret as 64 lowercase hex characters. Sensitive: for writing a key file with
    /// owner-only permissions, never for logs.
    ///
    /// - Returns: The 32-byte secret key as 64 lowercase hex characters.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` after ``erase()``.
    public func exportSecretHex() throws(SoftchatError) -> String {
        let hex: String? = withKeypair { keypair in
            var secret = [UInt8](repeating: 0, count: 32)
            defer { secret.withUnsafeMutableBytes { secureZero($0) } }
            guard secp256k1_keypair_sec(Schnorr.context, &secret, keypair) == 1 else { return nil }
            return Hex.encode(secret)
        }
        guard let hex else { throw Self.erasedError }
        return hex
    }

    /// The NIP-44 conversation key between this identity and another party's public key.
    ///
    /// - Parameter publicKeyHex: The other party's x-only public key, 64 lowercase hex characters.
    /// - Returns: The 32-byte conversation key (a secret: the caller zeroes it after use).
    /// - Throws: ``Nip44Failure/invalidPublicKey`` for a key that is not a curve point, or
    ///   ``Nip44Failure/invalidSecretKey`` once the identity is erased.
    package func conversationKey(with publicKeyHex: String) throws(Nip44Failure) -> [UInt8] {
        guard publicKeyHex.utf8.count == 64, let publicKey = Hex.decodeLowercase(publicKeyHex) else { throw .invalidPublicKey }
        let result: Result<[UInt8], Nip44Failure>? = withKeypair { keypair in
            var secret = [UInt8](repeating: 0, count: 32)
            defer { secret.withUnsafeMutableBytes { secureZero($0) } }
            guard secp256k1_keypair_sec(Schnorr.context, &secret, keypair) == 1 else { return .failure(.invalidSecretKey) }
            return Result { () throws(Nip44Failure) in try Nip44.conversationKey(secretKey: secret, publicKey: publicKey) }
        }
        guard let result else { throw .invalidSecretKey }
        return try result.get()
    }

    /// Encrypts `plaintext` to `publicKeyHex` with NIP-44 v2 (a fresh random nonce).
    ///
    /// - Parameters:
    ///   - plaintext: 1 to 65,535 UTF-8 bytes.
    ///   - publicKeyHex: The recipient's x-only public key, 64 lowercase hex characters.
    /// - Returns: The Base64 payload.
    /// - Throws: ``SoftchatError`` with code `invalid_private_message` naming the reason (a bad
    ///   length or public key, or an erased identity).
    public func nip44Encrypt(_ plaintext: String, to publicKeyHex: String) throws(SoftchatError) -> String {
        do throws(Nip44Failure) {
            var key = try conversationKey(with: publicKeyHex)
            defer { key.withUnsafeMutableBytes { secureZero($0) } }
            return try Nip44.encrypt(plaintext, conversationKey: key)
        } catch {
            throw error.error(operation: .relayPublish)
        }
    }

    /// Decrypts a NIP-44 v2 payload from `publicKeyHex`.
    ///
    /// - Parameters:
    ///   - payload: The Base64 payload.
    ///   - publicKeyHex: The other party's x-only public key, 64 lowercase hex characters.
    /// - Returns: The plaintext.
    /// - Throws: ``SoftchatError`` with code `invalid_private_message` naming the failed check.
    public func nip44Decrypt(_ payload: String, from publicKeyHex: String) throws(SoftchatError) -> String {
        do throws(Nip44Failure) {
            var key = try conversationKey(with: publicKeyHex)
            defer { key.withUnsafeMutableBytes { secureZero($0) } }
            return try Nip44.decrypt(payload, conversationKey: key)
        } catch {
            throw error.error()
        }
    }

    /// Zeroes the secret now, for every holder of this identity: later signatures, NIP-42
    /// answers and exports fail with `invalid_relay_authentication`. Idempotent; the public key
    /// stays readable.
    public func erase() {
        live.withLock { alive in
            guard alive else { return }
            secureZero(UnsafeMutableRawBufferPointer(start: keypair, count: MemoryLayout<secp256k1_keypair>.size))
            alive = false
        }
    }

    /// Whether ``erase()`` has run.
    public var isErased: Bool { live.withLock { !$0 } }

    package static var erasedError: SoftchatError { .invalidRelayAuthentication("the identity was erased") }

    /// `body` with the keypair, under the lock that ``erase()`` takes; nil once erased.
    private func withKeypair<R: Sendable>(_ body: (UnsafeMutablePointer<secp256k1_keypair>) -> R?) -> R? {
        let keypair = self.keypair
        return live.withLock { alive in alive ? body(keypair) : nil }
    }

    /// Signs a draft: fills in the pubkey, computes the NIP-01 id and a BIP-340 signature with
    /// fresh auxiliary randomness, and verifies the result before returning it.
    ///
    /// - Parameter draft: The event to sign; its `pubkey`, when set, must be this identity's.
    /// - Returns: The signed, verified event.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the draft's kind is outside
    ///   0–65535, its `created_at` is negative, a tag has no string, its `pubkey` is another key, or
    ///   signing fails.
    public func sign(_ draft: UnsignedEvent) throws(SoftchatError) -> VerifiedEvent {
        do throws(EventIssue) {
            try draft.validate()
            if let given = draft.pubkey, given != publicKeyHex {
                throw EventIssue("pubkey \(given) is not this identity's public key \(publicKeyHex)")
            }
            return try sign(draft, auxRandom: SecureRandom.bytes(32))
        } catch {
            if isErased { throw Self.erasedError }
            throw .invalidRelayFrame("cannot sign event: \(error.message)")
        }
    }

    package func sign(_ draft: UnsignedEvent, auxRandom: [UInt8]) throws(EventIssue) -> VerifiedEvent {
        let id = CanonicalSerialization.digest(
            pubkey: publicKeyHex, createdAt: draft.createdAt, kind: draft.kind, tags: draft.tags, content: draft.content)
        guard let sig = withKeypair({ Schnorr.sign(message: id, keypair: $0, auxRandom: auxRandom) }) else {
            throw EventIssue(isErased ? "the identity was erased" : "libsecp256k1 failed to sign")
        }
        let unverified = UnverifiedEvent(
            unchecked: Hex.encode(id), pubkey: publicKeyHex, createdAt: draft.createdAt, kind: draft.kind,
            tags: draft.tags, content: EventContent(draft.content), sig: Hex.encode(sig))
        // Verifying our own signature guards against faults (BIP-340 recommends it).
        return try EventVerifier.verify(unverified)
    }

    /// BIP-340 signature of an arbitrary message with the given auxiliary randomness, for
    /// test vectors and interop checks.
    ///
    /// - Parameters:
    ///   - message: The message to sign, of any length; it is not hashed first.
    ///   - auxRandom: BIP-340's 32 bytes of auxiliary randomness.
    /// - Returns: The 64-byte signature, or nil when `auxRandom` is not 32 bytes or signing fails.
    public func signMessage(_ message: [UInt8], auxRandom: [UInt8]) -> [UInt8]? {
        guard auxRandom.count == 32 else { return nil }
        return withKeypair { Schnorr.sign(message: message, keypair: $0, auxRandom: auxRandom) }
    }

    /// A NIP-42 authentication event (kind 22242) for exactly this relay URL and challenge,
    /// with a `relay` and a `challenge` tag and empty content.
    ///
    /// - Parameters:
    ///   - challenge: The challenge the relay sent.
    ///   - relayURL: The relay's URL, written into the `relay` tag as given.
    ///   - createdAt: The event's creation time in Unix seconds (the relay compares it with its clock).
    /// - Returns: The signed, verified authentication event, for ``RelaySession/authenticate(_:now:)``.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` when `challenge` is empty,
    ///   `relayURL` is not a `ws://`, `wss://` or `noise://` URL, or the event cannot be signed.
    public func createNip42Authentication(challenge: String, relayURL: String, createdAt: Int64) throws(SoftchatError)
        -> VerifiedEvent
    {
        guard !challenge.isEmpty else { throw .invalidRelayAuthentication("challenge must not be empty") }
        do throws(SoftchatError) {
            _ = try RelayURL(relayURL)
        } catch {
            throw .invalidRelayAuthentication(error.message)
        }
        do throws(EventIssue) {
            return try sign(
                UnsignedEvent(
                    createdAt: createdAt, kind: Nip42.authenticationKind,
                    tags: [["relay", relayURL], ["challenge", challenge]], content: ""),
                auxRandom: SecureRandom.bytes(32))
        } catch {
            if isErased { throw Self.erasedError }
            throw .invalidRelayAuthentication("cannot sign authentication: \(error.message)")
        }
    }

    /// The public key only, so an identity is safe to print.
    public var description: String { "SoftchatIdentity(publicKey: \(publicKeyHex))" }
    /// The same as ``SoftchatIdentity/description``: the secret never appears in debug output either.
    public var debugDescription: String { description }
}

extension String {
    /// Trims leading and trailing scalars found in `set` (scalars, so "\r\n" is two).
    func trimmingCharacters(in set: String) -> String {
        let scalars = Set(set.unicodeScalars)
        var s = Substring(self).unicodeScalars[...]
        while let f = s.first, scalars.contains(f) { s.removeFirst() }
        while let l = s.last, scalars.contains(l) { s.removeLast() }
        return String(String.UnicodeScalarView(s))
    }
}
