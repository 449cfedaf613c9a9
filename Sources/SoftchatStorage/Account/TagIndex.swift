public import SoftchatCore

/// The account's tag index (`event_tags`) and its bound per event.
///
/// NIP-01 filters select by single-letter tags (`#p`, `#e`, `#t`…), so the account indexes each
/// stored event's single-letter tags by (name, value). Each index row repeats the event id in
/// three indexes: unbounded, one event of many small tags (a 750 KB event of `["t", "…"]` tags
/// made 31 MB of account) would let any relay multiply the account's size. An event is
/// therefore indexed only while it stays inside the bound: at most ``maxIndexedTagsPerEvent``
/// distinct (name, value) pairs, none longer than ``maxIndexedTagValueBytes``. An event past the
/// bound is stored whole (nothing is lost) with one marker row instead of its tags, and every
/// read that selects by tag — `SoftchatAccount.events(matching:limit:now:)`, its paged and
/// history forms, and the NIP-77 items — also reads the marked events and lets
/// `RelayFilter.matches` decide on them. Such events are rare (a contact list of many follows, a
/// large group's message), so that second read is small; answers are the filter's exact
/// semantics either way.
public enum TagIndex {
    /// The most distinct single-letter (name, value) pairs indexed for one event: an event with
    /// more is stored with the overflow marker instead (64).
    public static let maxIndexedTagsPerEvent = 64
    /// The longest tag value indexed, in UTF-8 bytes: an event with a longer single-letter tag
    /// value is stored with the overflow marker instead (512, room for an `a` address with a
    /// long identifier).
    public static let maxIndexedTagValueBytes = 512

    /// The marker row's name: empty, which no single-letter tag has.
    static let overflowName = ""

    /// The (name, value) rows to index for `event`: its distinct single-letter tags in order, or
    /// just the overflow marker when they pass the bound.
    static func rows(of event: VerifiedEvent) -> [(String, String)] {
        var rows: [(String, String)] = []
        var seen: Set<[UInt8]> = []
        for tag in event.tags where tag.count >= 2 && tag[0].unicodeScalars.count == 1 {
            let (name, value) = (tag[0], tag[1])
            // Compared as bytes (``key(_:_:)``), as SQL and filters compare them: Swift's string
            // equality calls "é" and "e\u{301}" equal, and the second of such a pair went
            // unindexed (``reindex(_:)`` mends accounts written then).
            guard seen.insert(key(name, value)).inserted else { continue }
            if rows.count == maxIndexedTagsPerEvent || value.utf8.count > maxIndexedTagValueBytes {
                return [(overflowName, "")]
            }
            rows.append((name, value))
        }
        return rows
    }
}

extension TagIndex {
    /// Reads the tags of every stored event that may have been indexed short and writes its rows
    /// again where they are not ``rows(of:)``; returns how many events changed.
    ///
    /// Earlier builds left three kinds of short or long rows:
    /// - Builds before schema 11 deduplicated an event's tag values by Swift string equality, so
    ///   of two values that differ only in Unicode form the second had no row: a filter for it
    ///   missed the event, and its conversation did not count it. Only an event whose text holds
    ///   a byte past ASCII or a `\u` escape can hold such a pair.
    /// - They stored our own version of a replaceable event that lost its slot (kept hidden for
    ///   its intent) with no tag rows, so the reconciliation sets that match it lacked it.
    /// - Builds before the index had its bound wrote a row for every single-letter tag: past
    ///   the bound, and a repeated pair twice (its conversation counted the message twice).
    ///
    /// SQL picks those events, and each one's own tags decide. A served message's conversation
    /// counts move with its rows (``ConversationIndex``), and kept reconciliation sets, read
    /// from the wrong rows, are forgotten. A row that no longer decodes is left for
    /// `account check` to name.
    @discardableResult
    static func reindex(_ db: SQLiteConnection) throws -> Int {
        let candidates = try db.statement(
            """
            SELECT seq, kind, deleted, json, received_at FROM events WHERE length(json) != length(CAST(json AS BLOB)) OR instr(json, '\\u') > 0
            OR (deleted = 1 AND NOT EXISTS (SELECT 1 FROM event_tags t WHERE t.event_seq = events.seq))
            OR seq IN (
                SELECT event_seq FROM event_tags GROUP BY event_seq
                HAVING COUNT(*) > \(maxIndexedTagsPerEvent) OR MAX(length(CAST(value AS BLOB))) > \(maxIndexedTagValueBytes)
                    OR COUNT(*) > COUNT(DISTINCT name || ':' || value))
            """)
        let insert = try db.statement("INSERT INTO event_tags (event_seq, name, value, created_at) VALUES (?, ?, ?, ?)")
        var changed = 0
        while try candidates.step() {
            let (seq, kind, served) = (candidates.int64(0), Int(candidates.int64(1)), candidates.int64(2) == 0)
            guard let event = try? VerifiedEvent(storedJSON: candidates.text(3)) else { continue }
            let rows = rows(of: event)
            guard !same(try storedKeys(db, seq: seq), rows) else { continue }
            if served { try ConversationIndex.forget(db, seq: seq, kind: kind) }
            try db.statement("DELETE FROM event_tags WHERE event_seq = ?").bind(.int(seq)).run()
            for (name, value) in rows {
                try insert.bind(.int(seq), .text(name), .text(value), .int(event.createdAt)).run()
                insert.reset()
            }
            if served {
                try ConversationIndex.count(db, kind: kind, createdAt: event.createdAt, receivedAt: candidates.int64(4), tags: rows)
            }
            changed += 1
        }
        if changed > 0 { try ReconciliationCache.forgetAll(db) }
        return changed
    }

    /// The tag rows stored for the event in row `seq`, as ``key(_:_:)``, in no set order.
    static func storedKeys(_ db: SQLiteConnection, seq: Int64) throws -> [[UInt8]] {
        let stored = try db.statement("SELECT name, value FROM event_tags WHERE event_seq = ?").bind(.int(seq))
        var keys: [[UInt8]] = []
        while try stored.step() { keys.append(key(stored.text(0), stored.text(1))) }
        stored.reset()
        return keys
    }

    /// Whether stored rows (as ``key(_:_:)``, any order, repeats counted) are exactly `rows`.
    static func same(_ stored: [[UInt8]], _ rows: [(String, String)]) -> Bool {
        stored.count == rows.count && stored.sorted(by: bytesBefore) == rows.map(key).sorted(by: bytesBefore)
    }

    private static func bytesBefore(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    /// A (name, value) pair as the bytes SQL and filters compare: the name is one scalar, so name,
    /// NUL, value names the pair unambiguously.
    static func key(_ name: String, _ value: String) -> [UInt8] {
        Array((name + "\u{0}" + value).utf8)
    }
}
