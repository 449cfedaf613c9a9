public import SoftchatJSON

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
    static func verify(_ e: UnverifiedEvent) throws(EventIssue) -> VerifiedEvent {
        guard let idBytes = Hex.decodeLowercase(e.id), let pubkeyBytes = Hex.decodeLowercase(e.pubkey),
            let sigBytes = Hex.decodeLowercase(e.sig)
        else { throw EventIssue("id, pubkey and sig must be lowercase hex") }
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
        let valid = pubkeyBytes.withUnsafeBytes { pk -> Bool? in
            guard var key = PublicKeyCache.shared.publicKey(pk) else { return nil }
            return sigBytes.withUnsafeBytes { s in idBytes.withUnsafeBytes { m in Schnorr.verify(signature: s, message: m, publicKey: &key) } }
        }
        guard let valid else { throw EventIssue("pubkey is not a valid secp256k1 x-only public key") }
        guard valid else { throw EventIssue("signature does not verify") }
        return VerifiedEvent(e)
    }
}
