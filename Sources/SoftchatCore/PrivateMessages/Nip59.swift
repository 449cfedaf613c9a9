public import SoftchatJSON

/// A NIP-59 rumor: an event that is never signed, so it cannot be published on its own. Its id
/// is NIP-01's digest of its fields, recomputed whenever one is read.
public struct Rumor: Sendable, Hashable {
    /// NIP-01's id of the fields below, 64 lowercase hex characters.
    public let id: String
    /// The author's x-only public key.
    public let pubkey: String
    /// The author's creation time, in Unix seconds.
    public let createdAt: Int64
    /// 14 (a chat message), 15 (a file message), 7 (a reaction) or 5 (a deletion of the
    /// author's earlier messages), the kinds NIP-17 sends in a conversation.
    public let kind: Int
    /// The tags: `p` for each recipient, `e` for a reply, `subject` for a room's title.
    public let tags: [[String]]
    /// The text (kind 14) or the file's URL (kind 15).
    public let content: String

    /// The kinds NIP-17 carries: chat messages (14), file messages (15), reactions (7) and
    /// deletions of the author's own messages (5).
    public static let kinds: Set<Int> = [5, 7, 14, 15]
    /// The kinds a room shows as messages.
    public static let messageKinds: Set<Int> = [14, 15]

    /// A rumor from its fields, with its id computed.
    ///
    /// - Parameters:
    ///   - pubkey: The author's public key, 64 lowercase hex characters.
    ///   - createdAt: The creation time, in Unix seconds (not negative).
    ///   - kind: 14, 15, 7 or 5.
    ///   - tags: The tags, each with at least one string.
    ///   - content: The text.
    /// - Throws: ``SoftchatError`` with code `invalid_private_message` when a field breaks NIP-01's
    ///   rules or the kind is not 5, 7, 14 or 15.
    public init(pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String) throws(SoftchatError) {
        do throws(EventIssue) {
            try self.init(checking: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content, id: nil)
        } catch {
            throw .invalidPrivateMessage("rumor: \(error.message)", operation: .relayPublish)
        }
    }

    private init(checking pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String, id: String?) throws(EventIssue) {
        guard Hex.isLowercase(pubkey, count: 64) else { throw EventIssue("pubkey must be 64 lowercase hex characters") }
        try UnsignedEvent(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content).validate()
        guard Self.kinds.contains(kind) else { throw EventIssue("kind \(kind) is not sent in a NIP-17 conversation (5, 7, 14 or 15)") }
        let computed = Hex.encode(
            CanonicalSerialization.digest(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content))
        if let id, id != computed { throw EventIssue("id \(id) is not the digest of its fields") }
        self.id = computed
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
    }

    /// Reads a rumor's JSON strictly: NIP-01's fields without `sig` (an `id`, when present, must
    /// be the digest of the others).
    init(text: String) throws(EventIssue) {
        let json: JSONValue
        do throws(JSONError) { json = try JSONReader().parse(text) } catch { throw EventIssue("not JSON: \(error)") }
        guard case .object(let object) = json else { throw EventIssue("a rumor must be a JSON object, not \(json.typeName)") }
        var id: String?
        var pubkey: String?
        var createdAt: Int64?
        var kind: Int?
        var tags: [[String]]?
        var content: String?
        for member in object {
            switch member.key {
            case "id": id = try UnverifiedEvent.hex(member.value, field: "id", count: 64)
            case "pubkey": pubkey = try UnverifiedEvent.hex(member.value, field: "pubkey", count: 64)
            case "created_at": createdAt = try UnverifiedEvent.createdAt(member.value)
            case "kind": kind = try UnverifiedEvent.kind(member.value)
            case "tags": tags = try UnverifiedEvent.tags(member.value)
            case "content":
                guard case .string(let s) = member.value else { throw EventIssue("content must be a string") }
                content = s
            case "sig": throw EventIssue("a rumor is never signed")
            default: throw EventIssue("unknown field \"\(member.key.prefix(64))\"")
            }
        }
        guard let pubkey, let createdAt, let kind, let tags, let content else {
            throw EventIssue("a rumor needs pubkey, created_at, kind, tags and content")
        }
        try self.init(checking: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content, id: id)
    }

    /// Reads a rumor the account stored (its id is recomputed and must match).
    package init(stored text: String) throws(SoftchatError) {
        do throws(EventIssue) { try self.init(text: text) } catch {
            throw .invalidPersistenceResult("stored rumor: \(error.message)", operation: .relayIngestion)
        }
    }

    /// The rumor as compact JSON with its id, in NIP-01 field order (no `sig`).
    public var jsonText: String {
        VerifiedEvent.jsonText(id: id, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: EventContent(content), sig: nil)
    }

    /// The room: the author and every `p` tag's value, sorted and without repeats. NIP-17 names
    /// a conversation by this set, so a reply with the same members lands in the same room.
    public var room: [String] {
        var members: Set<String> = [pubkey]
        for tag in tags where tag.count >= 2 && tag[0] == "p" && Hex.isLowercase(tag[1], count: 64) { members.insert(tag[1]) }
        return members.sorted()
    }
}

/// A private message as its gift wrap delivered it: a rumor whose author signed the seal that
/// carried it. Only ``GiftWrap/unwrap(_:with:)`` makes one (its initializer is not public), so
/// holding one proves the checks ran, as ``VerifiedEvent`` does for an event.
public struct UnwrappedMessage: Sendable, Hashable {
    /// The gift wrap's event id (kind 1059).
    public let wrapID: String
    /// The message; its `pubkey` is the seal's signer.
    public let rumor: Rumor
    /// When the message disappears (NIP-40, Unix seconds): the earliest `expiration` of the
    /// wrap, the seal and the rumor, or nil when none has one.
    public let expiration: Int64?

    package init(wrapID: String, rumor: Rumor, expiration: Int64? = nil) {
        self.wrapID = wrapID
        self.rumor = rumor
        let own = rumor.tags.first { $0.count >= 2 && $0[0] == "expiration" }.flatMap { Int64($0[1]) }
        self.expiration = [expiration, own].compactMap { $0 }.min()
    }

    /// The author: the seal's signer and the rumor's pubkey, which the unwrap checked are one.
    public var sender: String { rumor.pubkey }
}

/// NIP-59 gift wrapping for NIP-17: a rumor sealed (kind 13, signed by the author, NIP-44 to the
/// recipient) inside a gift wrap (kind 1059, signed by a one-time key, NIP-44 to the recipient,
/// `p`-tagged to the recipient). Both `created_at`s are randomized up to two days back so
/// relays learn nothing from the times.
public enum GiftWrap {
    /// NIP-59's seal kind.
    public static let sealKind = 13
    /// NIP-59's gift wrap kind.
    public static let wrapKind = 1059
    /// How far back a seal's and a wrap's `created_at` are randomized: two days, in seconds. A
    /// sync of the account's wraps must look back this far past its cursor.
    public static let backdatingSeconds: Int64 = 2 * 24 * 60 * 60

    /// Seals `rumor` by `sender` and wraps it for `recipient`.
    ///
    /// - Parameters:
    ///   - rumor: The message; its pubkey must be `sender`'s.
    ///   - sender: The author's identity: it signs the seal.
    ///   - recipient: The x-only public key the wrap is for (the author's own for a self-copy).
    ///   - now: The current time in Unix seconds; the seal's and wrap's times are randomized up
    ///     to ``backdatingSeconds`` before it.
    /// - Returns: The gift wrap, a verified kind-1059 event signed by a fresh one-time key.
    /// - Throws: ``SoftchatError`` with code `invalid_private_message` (a bad recipient key, or
    ///   a rumor too long for NIP-44), or `signer_refused` (an erased identity).
    public static func wrap(_ rumor: Rumor, from sender: SoftchatIdentity, to recipient: String, now: Int64) throws(SoftchatError)
        -> VerifiedEvent
    {
        try wrap(rumor, signer: sender, to: recipient, now: now, timeoutMilliseconds: 0)
    }

    /// A time up to ``backdatingSeconds`` before `now`, uniformly (never negative).
    static func randomizedTime(_ now: Int64) -> Int64 {
        var bytes = SecureRandom.bytes(8)
        defer { bytes.withUnsafeMutableBytes { secureZero($0) } }
        let random = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Swift.max(0, now - Int64(random % UInt64(backdatingSeconds + 1)))
    }

    /// Unwraps a gift wrap addressed to `identity`: decrypts the wrap to its seal, verifies the
    /// seal (id, signature, kind 13), decrypts the seal to its rumor, and checks that the rumor's
    /// author is the seal's signer — the batch ``unwrap(_:with:timeoutMilliseconds:)`` with one wrap.
    ///
    /// - Parameters:
    ///   - wrap: A verified kind-1059 event.
    ///   - identity: The recipient's identity.
    /// - Returns: The authenticated message.
    /// - Throws: ``SoftchatError`` with code `invalid_private_message` naming the step that failed
    ///   (`wrap:`, `seal:`, `rumor:`) and why, or `signer_refused` once `identity` is erased.
    public static func unwrap(_ wrap: VerifiedEvent, with identity: SoftchatIdentity) throws(SoftchatError) -> UnwrappedMessage {
        let outcome = unwrap([wrap], with: identity, timeoutMilliseconds: 0)
        guard case .approved(let results) = outcome, let result = results.first else {
            throw outcome.refusal("unwrap", operation: .relayIngestion) ?? .invalidPrivateMessage("wrap: not unwrapped", operation: .relayIngestion)
        }
        return try result.get()
    }

    /// The seal in `text`, verified: id, signature, kind 13.
    package static func seal(_ text: String) throws(UnwrapFailure) -> VerifiedEvent {
        let seal: VerifiedEvent
        do throws(SoftchatError) { seal = try VerifiedEvent(text: text) } catch { throw UnwrapFailure("seal: \(error.message)") }
        guard seal.kind == sealKind else { throw UnwrapFailure("seal: kind \(seal.kind) is not a seal (13)") }
        return seal
    }

    /// The message in a seal's decrypted rumor text, authenticated by the seal.
    package static func message(wrap: VerifiedEvent, seal: VerifiedEvent, rumorText: String) throws(UnwrapFailure) -> UnwrappedMessage {
        let rumor: Rumor
        do throws(EventIssue) { rumor = try Rumor(text: rumorText) } catch { throw UnwrapFailure("rumor: \(error.message)") }
        guard rumor.pubkey == seal.pubkey else { throw UnwrapFailure("rumor: pubkey is not the seal's signer") }
        let layers = [wrap.firstTagValue("expiration"), seal.firstTagValue("expiration")].compactMap { $0.flatMap { Int64($0) } }
        return UnwrappedMessage(wrapID: wrap.id, rumor: rumor, expiration: layers.min())
    }
}

/// Why a gift wrap did not unwrap: the step and reason an `invalid_private_message` names.
package struct UnwrapFailure: Error, Sendable, Hashable {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
    package var error: SoftchatError { .invalidPrivateMessage(reason, operation: .relayIngestion) }
}
