public import SoftchatCore

/// What the account keeps so a chat app's conversation list is one indexed read, however many
/// events the account holds.
///
/// A conversation is the messages of one kind that carry one tag value: `p` names a direct
/// conversation's other party, `h` a NIP-29 group. For every served message of a regular kind
/// (not replaceable, addressable or ephemeral) the ingest transaction counts it under each of its
/// `p` and `h` values, with the newest `created_at` seen; a NIP-09 deletion of a counted message
/// takes it off the count in the same transaction. A message stored past the tag index's bound
/// (``TagIndex``) has no tag rows and is not counted. A message that expires (NIP-40) after it
/// arrived stays counted: the list's newest message is looked up when it is read, so an expired
/// or deleted newest message is never shown.
public enum ConversationIndex {
    /// The tag names a conversation is keyed by: `p` (the other party) and `h` (a group).
    public static let tags: [String] = ["p", "h"]

    static var tagsSQL: String { "(" + tags.map { "'\($0)'" }.joined(separator: ", ") + ")" }

    /// Whether a message of `kind` is counted: regular kinds only.
    static func counts(kind: Int) -> Bool { KindClass(kind) == .regular }

    /// ``counts(kind:)`` as SQL over `column`.
    static func kindsSQL(_ column: String) -> String { KindClass.sql(column, is: .regular) }

    /// Counts one stored, served message under each of its conversation tags.
    static func count(_ db: SQLiteConnection, kind: Int, createdAt: Int64, receivedAt: Int64, tags: [(String, String)]) throws {
        guard counts(kind: kind) else { return }
        // A message places its conversation no later than its arrival: a created_at of 2^63 − 1
        // must not pin a conversation at the top of the list for good.
        let placed = Swift.min(createdAt, receivedAt)
        let upsert = try db.statement(
            "INSERT INTO conversations (kind, tag, value, messages, latest_created_at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (kind, tag, value) DO UPDATE SET messages = messages + 1, latest_created_at = max(latest_created_at, excluded.latest_created_at)"
        )
        for (name, value) in tags where Self.tags.contains(name) {
            try upsert.bind(.int(Int64(kind)), .text(name), .text(value), .int(placed)).run()
            upsert.reset()
        }
    }

    /// Takes the served message in row `seq` off its conversations' counts (it is being deleted).
    static func forget(_ db: SQLiteConnection, seq: Int64, kind: Int) throws {
        guard counts(kind: kind) else { return }
        let rows = try db.statement("SELECT name, value FROM event_tags WHERE event_seq = ? AND name IN \(tagsSQL)").bind(.int(seq))
        var tags: [(String, String)] = []
        while try rows.step() { tags.append((rows.text(0), rows.text(1))) }
        rows.reset()
        let update = try db.statement("UPDATE conversations SET messages = messages - 1 WHERE kind = ? AND tag = ? AND value = ? AND messages > 0")
        for (name, value) in tags {
            try update.bind(.int(Int64(kind)), .text(name), .text(value)).run()
            update.reset()
        }
    }
}

/// One conversation in the list: its key, its newest message, its counts.
public struct ConversationSummary: Sendable, Hashable {
    /// The messages' kind.
    public let kind: Int
    /// The tag the conversation is keyed by (`p` or `h`).
    public let tag: String
    /// The tag's value: the other party's public key, or the group's id.
    public let value: String
    /// The newest served message (nil when every counted message has expired since).
    public let latest: VerifiedEvent?
    /// The messages counted (see ``ConversationIndex``).
    public let messages: Int
    /// The served messages newer than the read marker (all of them without a marker): deleted
    /// and expired (NIP-40, as of the read's `now`) messages are not unread.
    public let unread: Int
    /// The read marker: messages at or before this `created_at` are read; nil when never marked.
    public let readUntil: Int64?
}

extension SoftchatAccount {
    /// The conversations of `kind` keyed by `tag`, most recent first: for each, its newest
    /// served message, its message count and its unread count. One indexed read of the
    /// conversation table, and one seek per conversation listed.
    ///
    /// - Parameters:
    ///   - kind: The messages' kind.
    ///   - tag: `p` (direct conversations) or `h` (groups).
    ///   - limit: The most conversations listed, 1 to 1,000.
    ///   - now: The current Unix time, in seconds: messages expired by then are not shown.
    /// - Returns: The conversations, newest activity first.
    /// - Throws: `SoftchatError` with code `invalid_relay_batch` for a tag that keys no
    ///   conversations or a limit out of range; `account_storage_failed` when SQLite fails;
    ///   `invalid_persistence_result` once the account is closed or when a stored event no
    ///   longer reads back.
    public func conversations(kind: Int, tag: String, limit: Int, now: Int64) throws(SoftchatError) -> [ConversationSummary] {
        try Self.checkConversation(tag: tag, call: "conversations")
        guard (1...1_000).contains(limit) else {
            throw .invalidRelayBatch("conversations: limit \(limit) is outside 1…1000", operation: .relayIngestion)
        }
        return try store.snapshot("conversations") { db in
            let list = try db.statement(
                "SELECT c.value, c.messages, m.read_until FROM conversations c LEFT JOIN read_markers m ON m.kind = c.kind AND m.tag = c.tag AND m.value = c.value WHERE c.kind = ? AND c.tag = ? AND c.messages > 0 ORDER BY c.latest_created_at DESC LIMIT ?"
            ).bind(.int(Int64(kind)), .text(tag), .int(Int64(limit)))
            var rows: [(String, Int, Int64?)] = []
            while try list.step() { rows.append((list.text(0), Int(list.int64(1)), list.optionalInt64(2))) }
            list.reset()
            let newest = try db.statement(
                "SELECT e.json FROM event_tags d JOIN events e ON e.seq = d.event_seq WHERE d.name = ? AND d.value = ? AND +e.kind = ? AND e.deleted = 0 AND (e.expires_at IS NULL OR e.expires_at > ?) AND d.created_at <= ? ORDER BY d.created_at DESC, d.event_seq LIMIT 1"
            )
            let after = try db.statement(
                "SELECT COUNT(*) FROM event_tags d JOIN events e ON e.seq = d.event_seq WHERE d.name = ? AND d.value = ? AND d.created_at > ? AND +e.kind = ? AND e.deleted = 0"
            )
            // The counted messages newer than the marker that have expired by `now`: a seek over
            // the account's expired events (few), each joined to its tag rows. CROSS JOIN and
            // INDEXED BY fix that order: from the conversation's side it would read every
            // message of the conversation (124 ms for a list at 200,000 events, measured).
            let expired = try db.statement(
                "SELECT COUNT(*) FROM events e INDEXED BY events_expiry CROSS JOIN event_tags d ON d.event_seq = e.seq WHERE e.expires_at IS NOT NULL AND e.expires_at <= ? AND e.kind = ? AND e.deleted = 0 AND d.name = ? AND d.value = ? AND d.created_at > ?"
            )
            return try rows.map { value, messages, readUntil in
                try newest.bind(.text(tag), .text(value), .int(Int64(kind)), .int(now), .int(SoftchatAccount.servedUntil(now)))
                let latest = try newest.step() ? try VerifiedEvent(storedJSON: newest.text(0)) : nil
                newest.reset()
                var counted = messages
                if let readUntil {
                    try after.bind(.text(tag), .text(value), .int(readUntil), .int(Int64(kind)))
                    counted = try after.step() ? Int(after.int64(0)) : 0
                    after.reset()
                }
                try expired.bind(.int(now), .int(Int64(kind)), .text(tag), .text(value), .int(readUntil ?? Int64.min))
                let gone = try expired.step() ? Int(expired.int64(0)) : 0
                expired.reset()
                return ConversationSummary(
                    kind: kind, tag: tag, value: value, latest: latest, messages: messages, unread: max(0, counted - gone),
                    readUntil: readUntil)
            }
        }
    }

    /// Marks a conversation read up to `createdAt` (its messages at or before it are read). A
    /// marker never moves back: an older `createdAt` than the stored one changes nothing.
    ///
    /// - Parameters:
    ///   - kind: The messages' kind.
    ///   - tag: `p` or `h`.
    ///   - value: The conversation's tag value.
    ///   - createdAt: The `created_at` of the newest message read.
    ///   - now: The current Unix time, in seconds.
    /// - Throws: `SoftchatError` with code `invalid_relay_batch` for a tag that keys no
    ///   conversations; `account_storage_failed` when SQLite fails;
    ///   `invalid_persistence_result` once the account is closed.
    public func markRead(kind: Int, tag: String, value: String, until createdAt: Int64, now: Int64) throws(SoftchatError) {
        try Self.checkConversation(tag: tag, call: "markRead")
        try store.write("markRead") { db in
            try db.statement(
                "INSERT INTO read_markers (kind, tag, value, read_until, updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, tag, value) DO UPDATE SET read_until = max(read_until, excluded.read_until), updated_at = excluded.updated_at"
            ).bind(.int(Int64(kind)), .text(tag), .text(value), .int(createdAt), .int(now)).run()
        }
    }

    static func checkConversation(tag: String, call: String) throws(SoftchatError) {
        guard ConversationIndex.tags.contains(tag) else {
            throw .invalidRelayBatch(
                "\(call): tag \(tag) keys no conversations (\(ConversationIndex.tags.joined(separator: ", ")) do)", operation: .relayIngestion)
        }
    }
}
