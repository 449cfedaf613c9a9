public import SoftchatJSON
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Nostr event whose id is the SHA-256 of its NIP-01 serialization and whose BIP-340
/// signature verifies against its pubkey.
///
/// The type is the proof: its initializer is private to this file, reachable only through
/// `EventVerifier`, so every `VerifiedEvent` anywhere in Softchat passed both checks.
public struct VerifiedEvent: Sendable, Hashable, CustomStringConvertible {
    public let id: String
    public let pubkey: String
    public let createdAt: Int64
    public let kind: Int
    public let tags: [[String]]
    public let content: String
    public let sig: String

    fileprivate init(_ e: UnverifiedEvent) {
        id = e.id
        pubkey = e.pubkey
        createdAt = e.createdAt
        kind = e.kind
        tags = e.tags
        content = e.content
        sig = e.sig
    }

    /// Parses event JSON text and verifies it (`invalid_relay_frame` when either step fails).
    public init(text: String) throws(SoftchatError) {
        self = try UnverifiedEvent(text: text).verified()
    }

    public init(json: JSONValue) throws(SoftchatError) {
        self = try UnverifiedEvent(json: json).verified()
    }

    /// Re-reads an event that was verified before it was stored by Softchat's own account:
    /// the id is re-hashed (catching corruption of any field), the signature — checked when the
    /// event arrived — is not checked again. Never use this for text from a socket.
    package init(storedJSON text: String) throws(SoftchatError) {
        let e = try UnverifiedEvent(text: text)
        do throws(EventIssue) {
            try EventVerifier.checkID(e)
        } catch {
            throw .invalidPersistenceResult("stored event \(e.id): \(error.message)", operation: .relayIngestion)
        }
        self.init(e)
    }

    public static func == (a: VerifiedEvent, b: VerifiedEvent) -> Bool {
        // Equal ids mean equal serializations (SHA-256), and verified ids are honest; sig may
        // differ (BIP-340 signatures are randomized), so it is compared too.
        a.id == b.id && a.sig == b.sig
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The event as compact JSON in NIP-01 field order.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            "id": .string(id), "pubkey": .string(pubkey), "created_at": .integer(createdAt),
            "kind": .integer(Int64(kind)), "tags": .array(tags.map { .array($0.map(JSONValue.string)) }),
            "content": .string(content), "sig": .string(sig),
        ]))
    }

    public var jsonText: String { jsonValue.jsonText }

    /// The first value of the first tag named `name` (`"p"` → the recipient), if any.
    public func firstTagValue(_ name: String) -> String? {
        for tag in tags where tag.count >= 2 && tag[0] == name { return tag[1] }
        return nil
    }

    public var description: String { "VerifiedEvent(id: \(id), kind: \(kind), pubkey: \(pubkey))" }
}

/// The id and signature checks that make a `VerifiedEvent`.
enum EventVerifier {
    /// Verifies every event, spreading the work over the machine's cores for larger inputs
    /// (each check is independent; libsecp256k1's context is safe to share). Results are in
    /// input order.
    static func verifyInParallel(_ events: [UnverifiedEvent]) -> [Result<VerifiedEvent, EventIssue>] {
        let n = events.count
        guard n >= 8, parallelism > 1 else {
            return events.map { e in Result { () throws(EventIssue) in try verify(e) } }
        }
        var results = [Result<VerifiedEvent, EventIssue>](repeating: .failure(EventIssue("not verified")), count: n)
        results.withUnsafeMutableBufferPointer { buffer in
            nonisolated(unsafe) let out = buffer.baseAddress!
            let chunks = min(parallelism * 4, n)
            DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                var i = chunk * n / chunks
                let end = (chunk + 1) * n / chunks
                while i < end {
                    out[i] = Result { () throws(EventIssue) in try verify(events[i]) }
                    i += 1
                }
            }
        }
        return results
    }

    static let parallelism = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    static func verify(_ e: UnverifiedEvent) throws(EventIssue) -> VerifiedEvent {
        let idBytes = try checkID(e)
        guard let pubkeyBytes = Hex.decodeLowercase(e.pubkey), let sigBytes = Hex.decodeLowercase(e.sig)
        else { throw EventIssue("pubkey and sig must be lowercase hex") }
        let valid = pubkeyBytes.withUnsafeBytes { pk -> Bool? in
            guard var key = PublicKeyCache.shared.publicKey(pk) else { return nil }
            return sigBytes.withUnsafeBytes { s in idBytes.withUnsafeBytes { m in Schnorr.verify(signature: s, message: m, publicKey: &key) } }
        }
        guard let valid else { throw EventIssue("pubkey is not a valid secp256k1 x-only public key") }
        guard valid else { throw EventIssue("signature does not verify") }
        return VerifiedEvent(e)
    }

    /// Checks that the id is the SHA-256 of either serialization (see CanonicalSerialization)
    /// and returns its bytes.
    @discardableResult
    static func checkID(_ e: UnverifiedEvent) throws(EventIssue) -> [UInt8] {
        guard let idBytes = Hex.decodeLowercase(e.id) else { throw EventIssue("id must be lowercase hex") }
        var digest = SHA256.hash(
            CanonicalSerialization.bytes(pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags, content: e.content))
        if digest != idBytes {
            // NIP-01 read literally leaves the other control characters verbatim; an id over that
            // form is an honest hash of the same values too (see CanonicalSerialization).
            guard e.tags.contains(where: { $0.contains(where: CanonicalSerialization.hasUnlistedControlCharacter) })
                || CanonicalSerialization.hasUnlistedControlCharacter(e.content)
            else { throw EventIssue("id does not match the NIP-01 serialization") }
            digest = SHA256.hash(
                CanonicalSerialization.bytes(pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags,
                    content: e.content, escaping: .nip01))
            guard digest == idBytes else {
                throw EventIssue("id does not match the NIP-01 serialization")
            }
        }
        return idBytes
    }
}
