public import SoftchatCore

extension SoftchatAccount {
    /// The negentropy items (created_at, id) of every stored event `filter` matches, sorted:
    /// one indexed SQL read of two columns, no event decoded (but those whose tags pass the tag
    /// index's bound). Hidden events (deleted by NIP-09,
    /// expired) are included: the account holds them, and fetching them again would change
    /// nothing. A `limit` in the filter is ignored (reconciliation is over the whole set).
    ///
    /// - Parameter filter: The filter whose stored set is reconciled.
    /// - Returns: The items, sorted by `created_at` and then by id.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func reconciliationItems(matching filter: RelayFilter) throws(SoftchatError) -> [NegentropyItem] {
        try reconciliationItems(matching: [filter])[0]
    }

    /// The items of each filter, in order, from one read snapshot (no commit falls between them).
    ///
    /// - Parameter filters: The filters whose stored sets are reconciled.
    /// - Returns: One sorted item list per filter, in the order of `filters`.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    ///
    /// A set of at least ``ReconciliationCache/minimumItems`` items is kept with the high-water
    /// mark it covers (see ``ReconciliationCache``): while no event has been stored since, the
    /// next call for the same filter reads those bytes back instead of the indexes; after a few
    /// stores, it reads back the kept set and adds the matches among the events stored since.
    public func reconciliationItems(matching filters: [RelayFilter]) throws(SoftchatError) -> [[NegentropyItem]] {
        let (mark, lists, moved) = try store.snapshot("reconciliationItems") { db in
            let mark = try ReconciliationCache.highWater(db)
            var moved: [Int] = []
            var lists: [[NegentropyItem]] = []
            for (i, filter) in filters.enumerated() {
                if let (items, current) = try ReconciliationCache.items(db, filter, at: mark) {
                    lists.append(items)
                    if !current { moved.append(i) }
                } else {
                    lists.append(try Self.reconciliationItems(db, filter))
                    moved.append(i)
                }
            }
            return (mark, lists, moved)
        }
        let worth = moved.filter { lists[$0].count >= ReconciliationCache.minimumItems }
        if !worth.isEmpty {
            // The cache only saves work: a failure to keep it (a full disk) is not the caller's
            // failure, and the next call reads the indexes again.
            try? store.write("keep reconciliation items") { db in
                // Only while nothing was stored since the read. A store in between moved the
                // mark, and may have deleted a row whose item the lists hold (a replaced event:
                // the kept sets it forgot would come back wrong).
                guard try ReconciliationCache.highWater(db) == mark else { return }
                for i in worth { try ReconciliationCache.keep(db, filters[i], lists[i], at: mark) }
            }
        }
        return lists
    }

    /// True when a list of the filter is empty (`"kinds":[]`): it matches no event.
    static func matchesNothing(_ filter: RelayFilter) -> Bool {
        filter.ids?.isEmpty == true || filter.authors?.isEmpty == true || filter.kinds?.isEmpty == true
            || filter.tagConditions.contains(where: { $0.values.isEmpty })
    }

    static func reconciliationItems(_ db: SQLiteConnection, _ filter: RelayFilter) throws -> [NegentropyItem] {
        if matchesNothing(filter) { return [] }
        var items: [NegentropyItem]
        if filter.ids == nil, filter.authors == nil, let driving = filter.tagConditions.first {
            items = try taggedItems(db, filter, driving)
        } else {
            var sql = "SELECT e.created_at, e.id FROM events e WHERE 1"
            var args: [SQLValue] = []
            narrow(filter, timeColumn: "e.created_at", sql: &sql, args: &args)
            sql += " ORDER BY e.created_at"
            let statement = try db.statement(sql).bind(args)
            items = []
            while try statement.step() {
                if let item = item(statement) { items.append(item) }
            }
        }
        return sortedOnce(items + (try overflowItems(db, filter)))
    }

    /// The items of the events stored past the tag index's bound (rare) that `filter` matches,
    /// decided by the filter itself; only those stored after `mark` when one is given. None for
    /// a filter without tag conditions: the SQL that reads the other events decides it whole.
    static func overflowItems(_ db: SQLiteConnection, _ filter: RelayFilter, after mark: Int64? = nil) throws -> [NegentropyItem] {
        guard !filter.tagConditions.isEmpty else { return [] }
        var items: [NegentropyItem] = []
        try forEachOverflowEvent(db, filter.withoutLimit(), now: nil, after: mark, newestFirst: false) { event in
            if let item = NegentropyItem(createdAt: event.createdAt, idHex: event.id) { items.append(item) }
            return true
        }
        return items
    }

    /// `items` sorted by time, then id, each once. SQL orders the rows by the time index alone
    /// (ordering by the id too made SQLite sort every second's rows in a temporary B-tree,
    /// half the read's time). So here, in one pass, each run of rows from one second is put in
    /// id order and an event reached through two tag values is kept once; only rows out of time
    /// order (the overflow events, appended after the index's) make the whole list sorted.
    static func sortedOnce(_ items: [NegentropyItem]) -> [NegentropyItem] {
        var sorted = items
        var byTime = true
        var i = 1
        while i < sorted.count {
            if sorted[i].timestamp < sorted[i - 1].timestamp {
                byTime = false
                break
            }
            i += 1
        }
        if byTime {
            var start = 0
            while start < sorted.count {
                var end = start + 1
                while end < sorted.count, sorted[end].timestamp == sorted[start].timestamp { end += 1 }
                if end - start > 1 { sorted[start..<end].sort() }
                start = end
            }
        } else {
            sorted.sort()
        }
        var unique: [NegentropyItem] = []
        unique.reserveCapacity(sorted.count)
        for item in sorted where unique.last != item { unique.append(item) }
        return unique
    }

    /// The item of a row whose columns are `created_at` and the id's text, read in place.
    static func item(_ statement: Statement) -> NegentropyItem? {
        let createdAt = statement.int64(0)
        guard createdAt >= 0, let id = statement.withText(1, { NegentropyID(hexUTF8: $0) }) else { return nil }
        return NegentropyItem(timestamp: UInt64(createdAt), id: id)
    }

    /// A filter of tags (and kinds, times): driven by the tag's time index, which holds each
    /// tagged event's `created_at` and row, and each row's id and kind read from the event. A
    /// chat's filter (`{"kinds":[1059],"#p":[me]}`) is this shape.
    static func taggedItems(_ db: SQLiteConnection, _ filter: RelayFilter, _ driving: (letter: Character, values: [String])) throws
        -> [NegentropyItem]
    {
        var sql =
            "SELECT d.created_at, e.id FROM event_tags d JOIN events e ON e.seq = d.event_seq WHERE d.name = ? AND d.value IN (\(marks(driving.values.count)))"
        var args: [SQLValue] = [.text(String(driving.letter))] + driving.values.map(SQLValue.text)
        if let since = filter.since {
            sql += " AND d.created_at >= ?"
            args.append(.int(since))
        }
        if let until = filter.until {
            sql += " AND d.created_at <= ?"
            args.append(.int(until))
        }
        if let kinds = filter.kinds {
            sql += " AND +e.kind IN (\(marks(kinds.count)))"
            args += kinds.map { .int(Int64($0)) }
        }
        for condition in filter.tagConditions.dropFirst() { narrow(seq: "d.event_seq", by: condition, sql: &sql, args: &args) }
        sql += " ORDER BY d.created_at"
        let statement = try db.statement(sql).bind(args)
        var items: [NegentropyItem] = []
        while try statement.step() {
            // An event carrying the value twice, or two of the values, gives a row each: the
            // caller's sortedOnce keeps one.
            if let item = item(statement) { items.append(item) }
        }
        return items
    }

    /// The recorded NIP-77 support of each of `relayURLs` that has a record.
    ///
    /// - Parameter relayURLs: The relays to look up.
    /// - Returns: Per relay URL, its record; relays never recorded are absent.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func negentropySupport(relayURLs: [String]) throws(SoftchatError) -> [String: NegentropySupportRecord] {
        try store.read("negentropySupport") { db in
            var out: [String: NegentropySupportRecord] = [:]
            let s = try db.statement("SELECT supported, checked_at, reason FROM relay_negentropy WHERE relay_url = ?")
            for url in relayURLs {
                try s.bind(.text(url))
                if try s.step() {
                    out[url] = NegentropySupportRecord(relayURL: url, supported: s.int64(0) != 0, checkedAt: s.int64(1), reason: s.text(2))
                }
                s.reset()
            }
            return out
        }
    }

    /// Records what a relay did with NEG-OPEN, replacing its earlier record.
    ///
    /// - Parameter record: The relay, whether it speaks NIP-77, when that was checked and why.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func recordNegentropySupport(_ record: NegentropySupportRecord) throws(SoftchatError) {
        try store.write("recordNegentropySupport") { db in
            try db.statement(
                "INSERT INTO relay_negentropy (relay_url, supported, checked_at, reason) VALUES (?, ?, ?, ?) ON CONFLICT (relay_url) DO UPDATE SET supported = excluded.supported, checked_at = excluded.checked_at, reason = excluded.reason"
            )
            .bind(.text(record.relayURL), .int(record.supported ? 1 : 0), .int(record.checkedAt), .text(record.reason)).run()
        }
    }
}

/// The reconciliation items of a filter kept between syncs, with the high-water mark they cover.
///
/// Events get their `seq` from `AUTOINCREMENT`, so it is never reused: every store of an event
/// moves `MAX(seq)` past every earlier value. A set read at mark M is therefore the set while the
/// mark is still M, and a call for the same filter reads 40 bytes an item from one row instead of
/// walking the indexes (a chat's 50,000 items: one blob of 2 MB). The items are kept sorted, so
/// building the negentropy storage from them sorts nothing.
///
/// Once the mark has moved, the set at the new mark is the kept set and the matches among the
/// events stored since (rows past M, read by `seq` under the cold read's own conditions), as
/// long as no row has gone. The one place the account deletes event rows (a replaceable or
/// addressable event replacing another) forgets every kept set in the same transaction, and a
/// set is kept only by a write that finds the mark where its read found it, so a kept set never
/// holds an item whose event is gone. When more than a quarter of the set's size (and more than
/// ``minimumItems``) was stored since, the indexes answer instead.
public enum ReconciliationCache {
    /// Sets smaller than this are read from the indexes every time (cheap already), not kept.
    public static let minimumItems = 1_000

    static func highWater(_ db: SQLiteConnection) throws -> Int64 {
        try db.scalarInt("SELECT COALESCE(MAX(seq), 0) FROM events")
    }

    static func key(_ filter: RelayFilter) -> String { filter.withoutLimit().toJSON() }

    /// The items of `filter` at `mark` from its kept set: `current` when the set covers `mark`
    /// itself, false when the events stored since were added to it. Nil when there is no kept
    /// set, a damaged one, or more stored since than is worth reading event by event.
    static func items(_ db: SQLiteConnection, _ filter: RelayFilter, at mark: Int64) throws -> (items: [NegentropyItem], current: Bool)? {
        let row = try db.statement("SELECT high_water, items FROM negentropy_items WHERE filter_json = ?").bind(.text(key(filter)))
        guard try row.step() else { return nil }
        let keptMark = row.int64(0)
        let kept = row.withBlob(1) { decode($0) }
        row.reset()
        guard let kept, keptMark <= mark else { return nil }
        if keptMark == mark { return (kept, true) }
        guard mark - keptMark <= Int64(max(minimumItems, kept.count / 4)) else { return nil }
        return (merged(kept, try added(db, filter, after: keptMark)), false)
    }

    /// The items of the events stored after `mark` that `filter` matches (its limit aside), by
    /// the cold read's own conditions: over the rows past the mark, read by `seq` (`NOT INDEXED`
    /// keeps SQLite on the rowid range rather than a kind or time index), each tag condition a
    /// probe of the row's own tag rows (through their `event_seq` index: left to itself, SQLite
    /// walks the tag value's whole range in the time index for every row, seconds for a chat);
    /// and the tag-overflow events among them decided by the filter, as the cold read decides
    /// them. No event is decoded but those.
    static func added(_ db: SQLiteConnection, _ filter: RelayFilter, after mark: Int64) throws -> [NegentropyItem] {
        if SoftchatAccount.matchesNothing(filter) { return [] }
        var sql = "SELECT e.created_at, e.id FROM events e NOT INDEXED WHERE e.seq > ?"
        var args: [SQLValue] = [.int(mark)]
        SoftchatAccount.narrow(filter, timeColumn: "e.created_at", tags: false, sql: &sql, args: &args)
        for condition in filter.tagConditions {
            sql +=
                " AND EXISTS (SELECT 1 FROM event_tags t INDEXED BY event_tags_event WHERE t.event_seq = e.seq AND t.name = ? AND t.value IN (\(SoftchatAccount.marks(condition.values.count))))"
            args.append(.text(String(condition.letter)))
            args += condition.values.map(SQLValue.text)
        }
        let statement = try db.statement(sql).bind(args)
        var items: [NegentropyItem] = []
        while try statement.step() {
            if let item = SoftchatAccount.item(statement) { items.append(item) }
        }
        return SoftchatAccount.sortedOnce(items + (try SoftchatAccount.overflowItems(db, filter, after: mark)))
    }

    /// Two sorted item lists as one, sorted, each item once.
    static func merged(_ a: [NegentropyItem], _ b: [NegentropyItem]) -> [NegentropyItem] {
        guard !b.isEmpty else { return a }
        var out: [NegentropyItem] = []
        out.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            let next: NegentropyItem
            if j == b.count || (i < a.count && a[i] < b[j]) {
                next = a[i]
                i += 1
            } else {
                next = b[j]
                j += 1
            }
            if out.last != next { out.append(next) }
        }
        return out
    }

    /// Forgets every kept set: an event row is about to go, and a kept set may hold its item.
    static func forgetAll(_ db: SQLiteConnection) throws {
        try db.execute("DELETE FROM negentropy_items")
    }

    static func keep(_ db: SQLiteConnection, _ filter: RelayFilter, _ items: [NegentropyItem], at mark: Int64) throws {
        try db.statement(
            "INSERT INTO negentropy_items (filter_json, high_water, items) VALUES (?, ?, ?) ON CONFLICT (filter_json) DO UPDATE SET high_water = excluded.high_water, items = excluded.items"
        ).bind(.text(key(filter)), .int(mark), .blob(encode(items))).run()
    }

    /// 40 bytes an item: the timestamp, then the id's four words, each big-endian.
    static func encode(_ items: [NegentropyItem]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(items.count * 40)
        for item in items {
            for word in [item.timestamp, item.id.w0, item.id.w1, item.id.w2, item.id.w3] {
                withUnsafeBytes(of: word.bigEndian) { out.append(contentsOf: $0) }
            }
        }
        return out
    }

    /// The items of ``encode(_:)``'s bytes; nil when the length is not a whole number of items.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> [NegentropyItem]? {
        guard bytes.count % 40 == 0 else { return nil }
        func word(_ at: Int) -> UInt64 { UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        return (0..<bytes.count / 40).map { i in
            let b = i * 40
            return NegentropyItem(timestamp: word(b), id: NegentropyID(w0: word(b + 8), w1: word(b + 16), w2: word(b + 24), w3: word(b + 32)))
        }
    }
}
