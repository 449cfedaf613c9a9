public import SoftchatCore
import SoftchatJSON

/// A NIP-17 private message as the account keeps it: the rumor its seal authenticated, the gift
/// wrap that carried it, and its room.
public struct PrivateMessage: Sendable, Hashable {
    /// The message: its `id` is the rumor's, its `pubkey` the sender (the seal's signer).
    public let rumor: Rumor
    /// The id of the gift wrap it was read from (for a message this account sent, its self-copy).
    public let wrapID: String
    /// The room: the sender and every `p` tag, sorted.
    public let room: [String]

    /// The rumor's id.
    public var id: String { rumor.id }
    /// The sender's public key.
    public var sender: String { rumor.pubkey }
    /// The sender's `created_at` (the rumor's; the wrap's and seal's are randomized).
    public var createdAt: Int64 { rumor.createdAt }
    /// The text (kind 14) or the file URL (kind 15).
    public var content: String { rumor.content }
    /// The recipients: the room without the sender.
    public var recipients: [String] { room.filter { $0 != rumor.pubkey } }
    /// 14 (a chat message) or 15 (a file message).
    public var kind: Int { rumor.kind }
    /// The rumor's tags (`p` per recipient, `e` for a reply, `subject`).
    public var tags: [[String]] { rumor.tags }
    /// Where a page ending at this message ends, for the next page's `before`.
    public var cursor: PrivateMessageCursor { PrivateMessageCursor(createdAt: rumor.createdAt, id: rumor.id) }
}

/// Where a page of a room's messages ended: its last message, in the newest-first order pages
/// are served in (`createdAt` descending, ties by id descending).
public struct PrivateMessageCursor: Sendable, Hashable {
    /// The last served message's `created_at`.
    public let createdAt: Int64
    /// The last served message's id.
    public let id: String

    /// A cursor at a message.
    ///
    /// - Parameters:
    ///   - createdAt: The message's `created_at`.
    ///   - id: The message's (rumor's) id.
    public init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }
}

/// One room in the room list: its members, newest message and counts.
public struct PrivateRoom: Sendable, Hashable {
    /// The members (sender and recipients of its messages), sorted; the account's own key included.
    public let members: [String]
    /// The newest message that is not deleted or expired, or nil when none is left.
    public let latest: PrivateMessage?
    /// How many messages the room has received.
    public let messages: Int
    /// Messages from others since the room was last marked read (deleted ones not counted).
    public let unread: Int
}

/// A private message sent: its rumor and, per recipient (the sender's self-copy included), the
/// wrap and the durable publish intents that carry it.
public struct SentPrivateMessage: Sendable, Hashable {
    /// The message as the rooms show it.
    public let message: PrivateMessage
    /// One delivery per recipient, then the self-copy.
    public let deliveries: [PrivateMessageDelivery]
}

/// One recipient's wrap of a sent message and the durable intents that carry it.
public struct PrivateMessageDelivery: Sendable, Hashable {
    /// The recipient's public key (the sender's own for the self-copy).
    public let recipient: String
    /// The gift wrap's event id.
    public let wrapID: String
    /// The recipient's inbox relays (kind 10050) the wrap is queued to.
    public let relayURLs: [String]
    /// The publish intents, one per relay, in `relayURLs` order.
    public let intentIDs: [String]
}

/// A wrap the account kept but could not read, with its stable code's reason.
public struct FailedWrap: Sendable, Hashable {
    /// The gift wrap's event id.
    public let wrapID: String
    /// `invalid_private_message: ` and the step and reason.
    public let reason: String
}

/// NIP-17 private messages: unwrapped once, inside the transaction that stores their wraps;
/// sent as durable wraps to each recipient's inbox relays; read by room.
///
/// Unwrapping needs the recipient's signer: ``unlock(_:now:)`` gives it. From then on every
/// ingestion that stores a gift wrap `p`-tagged to the signer's key unwraps it in the same
/// transaction, so after a crash the wrap and its message are both stored or neither is; a wrap
/// already stored is never decrypted again (its outcome, the message or the failure, is kept
/// with it). Wraps stored while no signer was unlocked, or while the signer refused, wait; the
/// next ``unlock(_:now:)`` unwraps them.
public struct AccountMessages: Sendable {
    let store: AccountStore

    /// How long one signer call may take while a write transaction waits on it, in milliseconds.
    public static let signerTimeoutMilliseconds = 10_000
    /// The most messages or rooms one read returns.
    public static let maxPage = 1_000

    /// Unwraps for `signer` from now on, keeps its gift wraps and inbox list synced (the
    /// ``inboxSubscriptionID`` subscription in the account's policy), and unwraps every stored
    /// wrap addressed to it that has no outcome yet, in transactions of at most 1,000 wraps.
    ///
    /// - Parameters:
    ///   - signer: The recipient's signer; it replaces any signer unlocked before.
    ///   - now: The current time in Unix seconds, stored as the messages' arrival time.
    /// - Returns: How many stored wraps this call unwrapped into messages.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `signer_refused` when the signer refuses the catch-up (the signer stays unlocked).
    @discardableResult
    public func unlock(_ signer: any SoftchatSigner, now: Int64) throws(SoftchatError) -> Int {
        store.signer.withLock { $0 = signer }
        let key = signer.publicKeyHex
        let filters = JSONValue.array([
            .string(##"{"kinds":[\##(GiftWrap.wrapKind)],"#p":["\##(key)"]}"##), .string(#"{"kinds":[10050],"authors":["\#(key)"]}"#),
        ])
        try store.write("unlock", observed: true) { db in
            try SubscriptionPolicyStore.write(db, id: Self.inboxSubscriptionID, filtersJSON: filters.jsonText, relayURL: nil)
        }
        var unwrapped = 0
        while true {
            let step = try store.write("unlock", observed: true) { db -> PrivateMessageStore.Unwrapped? in
                let pending = try PrivateMessageStore.pendingWraps(db, owner: signer.publicKeyHex, limit: 1_000)
                return try PrivateMessageStore.unwrap(db, pending, signer: signer, store: store, receivedAt: now)
            }
            // A refusal leaves the batch pending: stop rather than ask again in a loop.
            guard let step else { throw .signerRefused("unlock: the signer did not decrypt the stored wraps", operation: .relayIngestion) }
            unwrapped += step.messages
            // Every pass records an outcome for each wrap it was given; one that records none
            // has nothing left it can do (and must not spin).
            if step.outcomes == 0 { break }
        }
        return unwrapped
    }

    /// The subscription ``unlock(_:now:)`` keeps in the account's policy: the key's gift wraps
    /// (`{"kinds":[1059],"#p":[key]}`, whose sync horizon covers NIP-59's two days of
    /// backdating) and its own inbox list.
    public static let inboxSubscriptionID = "nip17-inbox"
    /// The subscription ``watchInboxLists(publicKeys:)`` keeps: the kind-10050 lists of the keys
    /// this account sends to, kept current (they are replaceable) by the managed transport.
    public static let inboxListsSubscriptionID = "nip17-inbox-lists"
    /// The authors one filter of the inbox-lists subscription names; more keys take more filters.
    static let authorsPerFilter = 500

    /// Keeps the kind-10050 inbox lists of `publicKeys` synced: they join the authors of the
    /// ``inboxListsSubscriptionID`` subscription in the account's policy (a running managed
    /// transport subscribes to the new filters on its next connection).
    ///
    /// - Parameter publicKeys: x-only public keys, 64 lowercase hex characters each.
    /// - Throws: `SoftchatError` with code `invalid_private_message` for a key that is not 64
    ///   lowercase hex characters (nothing changes), or `account_storage_failed`.
    public func watchInboxLists(publicKeys: [String]) throws(SoftchatError) {
        for key in publicKeys where !Hex.isLowercase(key, count: 64) {
            throw .invalidPrivateMessage("watchInboxLists: \(key.prefix(80)) is not 64 lowercase hex characters", operation: .relayIngestion)
        }
        try store.write("watchInboxLists") { db in
            let current = try db.statement("SELECT filters_json FROM subscription_policy WHERE subscription_id = ?")
                .bind(.text(Self.inboxListsSubscriptionID))
            var authors: [String] = []
            if try current.step() {
                for filter in (try? JSONReader().parse(current.text(0)))?.arrayValue ?? [] {
                    guard let text = filter.stringValue, let object = (try? JSONReader().parse(text))?.objectValue else { continue }
                    for author in object["authors"]?.arrayValue ?? [] { if let a = author.stringValue { authors.append(a) } }
                }
            }
            current.reset()
            var known = Set(authors)
            for key in publicKeys where known.insert(key).inserted { authors.append(key) }
            var filters: [JSONValue] = []
            var offset = 0
            while offset < authors.count {
                let chunk = authors[offset..<Swift.min(offset + Self.authorsPerFilter, authors.count)]
                let filter = JSONValue.object(JSONObject(["kinds": .array([.integer(10050)]), "authors": .array(chunk.map(JSONValue.string))]))
                filters.append(.string(filter.jsonText))
                offset += Self.authorsPerFilter
            }
            guard !filters.isEmpty else { return }
            try SubscriptionPolicyStore.write(db, id: Self.inboxListsSubscriptionID, filtersJSON: JSONValue.array(filters).jsonText, relayURL: nil)
        }
    }

    /// Stops unwrapping: later wraps are stored and wait for the next ``unlock(_:now:)``.
    public func lock() { store.signer.withLock { $0 = nil } }

    /// How many gift wraps this open account has asked a signer to unwrap (each is two NIP-44
    /// decryptions). A reopened account starts at 0; listing never decrypts.
    public var decryptions: Int { store.decryptions.load(ordering: .relaxed) }

    /// The inbox relays a key's newest stored kind-10050 list names (its `relay` tags that are
    /// usable relay URLs, in order, without repeats).
    ///
    /// - Parameter publicKeyHex: The key whose list to read.
    /// - Returns: The relay URLs; empty when no list is stored or it names none.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails.
    public func inboxRelays(publicKey publicKeyHex: String) throws(SoftchatError) -> [String] {
        try store.read("inboxRelays") { db in try PrivateMessageStore.inboxRelays(db, publicKeyHex) }
    }

    /// Sends a private message: makes the rumor, seals and wraps it for every recipient and for
    /// the sender, and in ONE transaction stores the message in its room and enqueues each wrap
    /// as durable publish intents to its recipient's inbox relays (the self-copy to the sender's).
    ///
    /// - Parameters:
    ///   - recipients: The recipients' x-only public keys (1 to 100; the sender's own is ignored).
    ///   - text: The message, 1 to 65,535 UTF-8 bytes before sealing (the wrap must fit NIP-44's
    ///     bound too, so the practical bound is about 47,000 bytes).
    ///   - signer: The sender's signer.
    ///   - now: The current time in Unix seconds: the rumor's `created_at`.
    ///   - tags: Extra rumor tags (`e` for a reply, `subject`), after the `p` tags.
    /// - Returns: The message and every delivery.
    /// - Throws: `SoftchatError` with code `recipient_has_no_inbox_relays` (nothing queued) when
    ///   a recipient or the sender has no stored kind-10050 list with a usable relay (the
    ///   recipients' lists are watched all the same, ``watchInboxLists(publicKeys:)``),
    ///   `invalid_private_message` for a bad key or text, `signer_refused`, or
    ///   `account_storage_failed`.
    public func send(to recipients: [String], text: String, signer: any SoftchatSigner, now: Int64, tags: [[String]] = [])
        throws(SoftchatError) -> SentPrivateMessage
    {
        let me = signer.publicKeyHex
        var others: [String] = []
        for r in recipients where r != me && !others.contains(r) {
            guard Hex.isLowercase(r, count: 64) else {
                throw .invalidPrivateMessage("send: recipient \(r.prefix(80)) is not 64 lowercase hex characters", operation: .relayPublish)
            }
            others.append(r)
        }
        guard (1...100).contains(others.count) else {
            throw .invalidPrivateMessage("send: \(others.count) recipients; a message goes to 1 to 100 others", operation: .relayPublish)
        }
        // Every inbox list is read before anything is made: a missing one refuses the whole send.
        // Their lists are kept current from now on; a missing one may arrive for the next try.
        try watchInboxLists(publicKeys: others)
        var relays: [String: [String]] = [:]
        for key in others + [me] {
            let list = try inboxRelays(publicKey: key)
            guard !list.isEmpty else {
                throw .recipientHasNoInboxRelays(
                    key == me
                        ? "send: the sender \(me) has no inbox relays (kind 10050); publish one first"
                        : "send: recipient \(key) has no inbox relays (kind 10050)", operation: .relayPublish)
            }
            relays[key] = list
        }
        let rumor = try Rumor(pubkey: me, createdAt: now, kind: 14, tags: others.map { ["p", $0] } + tags, content: text)
        var wraps: [(String, VerifiedEvent)] = []
        for key in others + [me] {
            wraps.append((key, try GiftWrap.wrap(rumor, signer: signer, to: key, now: now, timeoutMilliseconds: Self.signerTimeoutMilliseconds)))
        }
        let selfWrap = wraps.last!.1
        let message = UnwrappedMessage(wrapID: selfWrap.id, rumor: rumor)
        let operations = wraps.map { key, wrap in
            OutgoingOperation(operationID: "dm:\(rumor.id):\(key)", events: [wrap], relayURLs: relays[key]!)
        }
        var fingerprints: [String] = []
        for op in operations { fingerprints.append(try AccountOutgoing.check(op)) }
        let intentIDs = try store.senderWrite("send") { db in
            // The message and its self-copy's outcome first: the self-copy stored below is
            // then known, and never decrypted when it comes back from a relay.
            try PrivateMessageStore.record(db, message, owner: me, receivedAt: now)
            var sequence: Int64?
            var writer = EventWriter(db: db, receivedAt: now, layout: store.layout)
            return try operations.indices.map { i in
                try AccountOutgoing.enqueue(operations[i], fingerprint: fingerprints[i], db: db, writer: &writer, sequence: &sequence, now: now)
            }
        }
        store.notifyOutgoing()
        return SentPrivateMessage(
            message: PrivateMessage(rumor: rumor, wrapID: selfWrap.id, room: rumor.room),
            deliveries: wraps.indices.map { i in
                PrivateMessageDelivery(recipient: wraps[i].0, wrapID: wraps[i].1.id, relayURLs: relays[wraps[i].0]!, intentIDs: intentIDs[i])
            })
    }

    /// The rooms of `owner`, the room with the newest message first.
    ///
    /// - Parameters:
    ///   - owner: The public key whose rooms to list (the unlocked signer's).
    ///   - now: The current time in Unix seconds: expired messages (NIP-40) are not shown.
    ///   - limit: At most this many rooms (1 to 1,000).
    /// - Returns: The rooms, each with its newest message still shown and its counts.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails.
    public func rooms(ownerKey owner: String, now: Int64, limit: Int = 100) throws(SoftchatError) -> [PrivateRoom] {
        let limit = Swift.max(1, Swift.min(limit, Self.maxPage))
        return try store.read("rooms") { db in try PrivateMessageStore.rooms(db, owner: owner, now: now, limit: limit) }
    }

    /// A room's messages, newest first, a page at a time.
    ///
    /// - Parameters:
    ///   - owner: The public key whose room it is.
    ///   - members: The room's members (the owner may be included or not; order does not matter).
    ///   - now: The current time in Unix seconds: expired messages are not shown.
    ///   - limit: At most this many messages (1 to 1,000).
    ///   - before: Where the previous page ended (its last message's ``PrivateMessage/cursor``), or
    ///     nil for the newest page.
    /// - Returns: The messages, newest first (ties by id, descending).
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails.
    public func messages(ownerKey owner: String, members: [String], now: Int64, limit: Int = 50, before: PrivateMessageCursor? = nil)
        throws(SoftchatError) -> [PrivateMessage]
    {
        let room = PrivateMessageStore.roomKey(Set(members + [owner]).sorted())
        return try store.read("messages") { db in
            try PrivateMessageStore.page(
                db, owner: owner, room: room, now: now, before: before.map { ($0.createdAt, $0.id) },
                limit: Swift.max(1, Swift.min(limit, Self.maxPage)))
        }
    }

    /// Marks a room read: its unread count goes to 0.
    ///
    /// - Parameters:
    ///   - owner: The public key whose room it is.
    ///   - members: The room's members.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails.
    public func markRead(ownerKey owner: String, members: [String]) throws(SoftchatError) {
        let room = PrivateMessageStore.roomKey(Set(members + [owner]).sorted())
        try store.write("markRead", observed: true) { db in
            try db.statement(
                "UPDATE private_rooms SET read_seq = (SELECT COALESCE(MAX(seq), 0) FROM private_messages WHERE owner = ?1 AND room = ?2) WHERE owner = ?1 AND room = ?2"
            ).bind(.text(owner), .text(room)).run()
            // `private_rooms` has no rowid for the update hook: the room is named outright.
            db.rowLog?.note(.rooms(owner: owner))
        }
    }

    /// The wraps addressed to `owner` that did not unwrap, with their reasons (they are kept and
    /// never decrypted again).
    ///
    /// - Parameter owner: The recipient's public key.
    /// - Returns: The failed wraps, by wrap id.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails.
    public func failedWraps(ownerKey owner: String) throws(SoftchatError) -> [FailedWrap] {
        try store.read("failedWraps") { db in
            let rows = try db.statement("SELECT wrap_id, failure FROM gift_wraps WHERE owner = ? AND failure IS NOT NULL ORDER BY wrap_id")
                .bind(.text(owner))
            var out: [FailedWrap] = []
            while try rows.step() { out.append(FailedWrap(wrapID: rows.text(0), reason: rows.text(1))) }
            rows.reset()
            return out
        }
    }
}

/// The SQL of private messages, shared by ingestion (which unwraps in its transaction), sending
/// and the reads.
enum PrivateMessageStore {
    static func roomKey(_ members: [String]) -> String { members.joined(separator: ",") }
    static func members(_ room: String) -> [String] { room.split(separator: ",").map(String.init) }

    /// Stored wraps `p`-tagged to `owner` that have no outcome yet, oldest arrival first.
    static func pendingWraps(_ db: SQLiteConnection, owner: String, limit: Int) throws -> [VerifiedEvent] {
        let rows = try db.statement(
            """
            SELECT e.json FROM event_tags t JOIN events e ON e.seq = t.event_seq
            WHERE t.name = 'p' AND t.value = ? AND e.kind = \(GiftWrap.wrapKind) AND e.deleted = 0
              AND NOT EXISTS (SELECT 1 FROM gift_wraps g WHERE g.wrap_id = e.id)
            ORDER BY e.seq LIMIT ?
            """
        ).bind(.text(owner), .int(Int64(limit)))
        var out: [VerifiedEvent] = []
        while try rows.step() { out.append(try VerifiedEvent(storedJSON: rows.text(0))) }
        rows.reset()
        return out
    }

    /// The longest failure reason kept for a wrap, in characters.
    static let maxFailureCharacters = 300

    /// What one unwrapping pass recorded.
    struct Unwrapped {
        /// Wraps that became messages.
        var messages = 0
        /// Wraps whose outcome (a message or a failure) was recorded.
        var outcomes = 0
    }

    /// Unwraps `wraps` (stored in this transaction, or pending) through `signer` and records each
    /// outcome; wraps not addressed to the signer or already recorded are skipped.
    ///
    /// - Returns: What was recorded, or nil when the signer refused (nothing recorded).
    @discardableResult
    static func unwrap(_ db: SQLiteConnection, _ wraps: [VerifiedEvent], signer: any SoftchatSigner, store: AccountStore, receivedAt: Int64)
        throws -> Unwrapped?
    {
        let owner = signer.publicKeyHex
        let known = try db.statement("SELECT 1 FROM gift_wraps WHERE wrap_id = ?")
        var mine: [VerifiedEvent] = []
        for wrap in wraps where wrap.kind == GiftWrap.wrapKind && wrap.tags.contains(where: { $0.count >= 2 && $0[0] == "p" && $0[1] == owner }) {
            let seen = try known.bind(.text(wrap.id)).step()
            known.reset()
            if !seen { mine.append(wrap) }
        }
        guard !mine.isEmpty else { return Unwrapped() }
        store.decryptions.add(mine.count, ordering: .relaxed)
        guard case .approved(let results) = GiftWrap.unwrap(mine, with: signer, timeoutMilliseconds: AccountMessages.signerTimeoutMilliseconds) else {
            return nil
        }
        var recorded = Unwrapped(outcomes: mine.count)
        let failure = try db.statement("INSERT INTO gift_wraps (wrap_id, owner, failure) VALUES (?, ?, ?)")
        for (wrap, result) in zip(mine, results) {
            switch result {
            case .success(let message):
                try record(db, message, owner: owner, receivedAt: receivedAt)
                recorded.messages += 1
            case .failure(let error):
                // The reason may quote what the sender wrote (a field's name): kept short.
                let reason = "\(error.code.rawValue): \(error.message)"
                try failure.bind(.text(wrap.id), .text(owner), .text(String(reason.prefix(Self.maxFailureCharacters)))).run()
                failure.reset()
            }
        }
        return recorded
    }

    /// Records an unwrapped message and its wrap's outcome: the message in its room (once per
    /// rumor id), the wrap as read.
    static func record(_ db: SQLiteConnection, _ message: UnwrappedMessage, owner: String, receivedAt: Int64) throws {
        let rumor = message.rumor
        let room = roomKey(rumor.room.contains(owner) ? rumor.room : (rumor.room + [owner]).sorted())
        if rumor.kind == 5 {
            // NIP-17's deletion: a wrapped kind 5 removes its author's own messages it names by
            // `e`, now and when they arrive later.
            for tag in rumor.tags where tag.count >= 2 && tag[0] == "e" {
                try db.statement("INSERT OR IGNORE INTO private_deletions (owner, sender, target) VALUES (?, ?, ?)")
                    .bind(.text(owner), .text(rumor.pubkey), .text(tag[1])).run()
                let target = try db.statement(
                    "SELECT room FROM private_messages WHERE owner = ? AND rumor_id = ? AND sender = ? AND deleted = 0 AND kind IN \(shownKindsSQL)"
                ).bind(.text(owner), .text(tag[1]), .text(rumor.pubkey))
                let targetRoom = try target.step() ? target.text(0) : nil
                target.reset()
                if let targetRoom {
                    try db.statement("UPDATE private_messages SET deleted = 1 WHERE owner = ? AND rumor_id = ?").bind(.text(owner), .text(tag[1]))
                        .run()
                    try db.statement("UPDATE private_rooms SET messages = messages - 1 WHERE owner = ? AND room = ? AND messages > 0")
                        .bind(.text(owner), .text(targetRoom)).run()
                }
            }
        }
        let deleted = try db.statement("SELECT 1 FROM private_deletions WHERE owner = ? AND sender = ? AND target = ?")
            .bind(.text(owner), .text(rumor.pubkey), .text(rumor.id)).step()
        try db.statement(
            "INSERT OR IGNORE INTO private_messages (owner, rumor_id, wrap_id, room, sender, created_at, kind, expires_at, deleted, received_at, rumor) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ).bind(
            .text(owner), .text(rumor.id), .text(message.wrapID), .text(room), .text(rumor.pubkey), .int(rumor.createdAt),
            .int(Int64(rumor.kind)), .optional(message.expiration), .int(deleted ? 1 : 0), .int(receivedAt), .text(rumor.jsonText)
        ).run()
        if db.changes == 1, Rumor.messageKinds.contains(rumor.kind), !deleted {
            // A message places its room no later than its arrival: a created_at far in the
            // future must not pin a room at the top of the list for good.
            try db.statement(
                "INSERT INTO private_rooms (owner, room, latest_at, messages) VALUES (?, ?, ?, 1) ON CONFLICT (owner, room) DO UPDATE SET latest_at = max(latest_at, excluded.latest_at), messages = messages + 1"
            ).bind(.text(owner), .text(room), .int(Swift.min(rumor.createdAt, receivedAt))).run()
        }
        try db.statement("INSERT OR IGNORE INTO gift_wraps (wrap_id, owner, rumor_id) VALUES (?, ?, ?)")
            .bind(.text(message.wrapID), .text(owner), .text(rumor.id)).run()
    }

    /// The kinds a room shows, as SQL.
    static let shownKindsSQL = "(" + Rumor.messageKinds.sorted().map(String.init).joined(separator: ", ") + ")"

    /// Messages from others after the room's read mark: an indexed count over the unread rows only.
    static func unread(_ db: SQLiteConnection, owner: String, room: String, readSeq: Int64) throws -> Int {
        let count = try db.statement(
            "SELECT COUNT(*) FROM private_messages WHERE owner = ? AND room = ? AND seq > ? AND sender != ? AND deleted = 0 AND kind IN \(shownKindsSQL)"
        ).bind(.text(owner), .text(room), .int(readSeq), .text(owner))
        _ = try count.step()
        let n = Int(count.int64(0))
        count.reset()
        return n
    }

    /// The rooms of `owner`, the room with the newest message first, at most `limit`.
    static func rooms(_ db: SQLiteConnection, owner: String, now: Int64, limit: Int) throws -> [PrivateRoom] {
        let list = try db.statement(
            "SELECT room, messages, read_seq FROM private_rooms WHERE owner = ? ORDER BY latest_at DESC, room LIMIT ?"
        ).bind(.text(owner), .int(Int64(limit)))
        var rows: [(String, Int, Int64)] = []
        while try list.step() { rows.append((list.text(0), Int(list.int64(1)), list.int64(2))) }
        list.reset()
        return try rows.map { room, messages, readSeq in
            let latest = try page(db, owner: owner, room: room, now: now, before: nil, limit: 1).first
            let unread = try unread(db, owner: owner, room: room, readSeq: readSeq)
            return PrivateRoom(members: members(room), latest: latest, messages: messages, unread: unread)
        }
    }

    /// When the first of a room's shown messages from its newest through `cursor` expires after
    /// `now` (what a page ending there loses first), or nil when none of them expires.
    static func nextExpiry(_ db: SQLiteConnection, owner: String, room: String, through cursor: PrivateMessageCursor, now: Int64) throws -> Int64? {
        let due = try db.statement(
            "SELECT MIN(expires_at) FROM private_messages WHERE owner = ? AND room = ? AND deleted = 0 AND kind IN \(shownKindsSQL) AND expires_at > ? AND (created_at > ? OR (created_at = ? AND rumor_id >= ?))"
        ).bind(.text(owner), .text(room), .int(now), .int(cursor.createdAt), .int(cursor.createdAt), .text(cursor.id))
        defer { due.reset() }
        return try due.step() && !due.isNull(0) ? due.int64(0) : nil
    }

    /// A page of a room's shown messages, newest first.
    static func page(_ db: SQLiteConnection, owner: String, room: String, now: Int64, before: (Int64, String)?, limit: Int) throws -> [PrivateMessage]
    {
        let rows: Statement
        if let (time, id) = before {
            rows = try db.statement(
                "SELECT wrap_id, rumor FROM private_messages WHERE owner = ? AND room = ? AND deleted = 0 AND kind IN \(shownKindsSQL) AND (expires_at IS NULL OR expires_at > ?) AND (created_at < ? OR (created_at = ? AND rumor_id < ?)) ORDER BY created_at DESC, rumor_id DESC LIMIT ?"
            ).bind(.text(owner), .text(room), .int(now), .int(time), .int(time), .text(id), .int(Int64(limit)))
        } else {
            rows = try db.statement(
                "SELECT wrap_id, rumor FROM private_messages WHERE owner = ? AND room = ? AND deleted = 0 AND kind IN \(shownKindsSQL) AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, rumor_id DESC LIMIT ?"
            ).bind(.text(owner), .text(room), .int(now), .int(Int64(limit)))
        }
        var out: [PrivateMessage] = []
        while try rows.step() {
            let rumor = try Rumor(stored: rows.text(1))
            out.append(PrivateMessage(rumor: rumor, wrapID: rows.text(0), room: members(room)))
        }
        rows.reset()
        return out
    }

    /// The `relay` tags of a key's newest stored kind-10050 list that are usable relay URLs.
    static func inboxRelays(_ db: SQLiteConnection, _ publicKeyHex: String) throws -> [String] {
        let row = try db.statement(
            "SELECT json FROM events WHERE pubkey = ? AND kind = 10050 AND deleted = 0 ORDER BY created_at DESC, id ASC LIMIT 1"
        ).bind(.text(publicKeyHex))
        guard try row.step() else { return [] }
        let event = try VerifiedEvent(storedJSON: row.text(0))
        row.reset()
        var urls: [String] = []
        for tag in event.tags where tag.count >= 2 && tag[0] == "relay" && !urls.contains(tag[1]) {
            if (try? RelayURL(tag[1])) != nil { urls.append(tag[1]) }
            if urls.count == 16 { break }
        }
        return urls
    }
}
