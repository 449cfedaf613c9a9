public import SoftchatCore

extension SoftchatAccount {
    /// Stored events matching any of `filters` (NIP-01 semantics, each filter's own `limit`
    /// applied to it), newest first with ties by lowest id, at most `limit` overall. Deleted
    /// (NIP-09), replaced and expired (NIP-40, as of `now`) events are never served, nor events
    /// dated more than `futureAllowanceSeconds` (relay.ingestion) after `now` until that date
    /// comes near.
    ///
    /// SQL narrows candidates over the indexes; `RelayFilter.matches` decides, so results equal
    /// the filter semantics exactly.
    ///
    /// - Parameters:
    ///   - filters: The filters; an event matching any of them is served once.
    ///   - limit: The most events overall; nil for no overall bound.
    ///   - now: The current Unix time, in seconds: events expired by then, or dated more than the
    ///     future allowance after it, are not served.
    /// - Returns: The matching events, newest first, ties by lowest id.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed or when a stored event no longer
    ///   reads back.
    public func events(matching filters: [RelayFilter], limit: Int? = nil, now: Int64) throws(SoftchatError) -> [VerifiedEvent] {
        try store.read("events(matching:)") { db in try Self.events(db, matching: filters, limit: limit, now: now) }
    }

    static func events(_ db: SQLiteConnection, matching filters: [RelayFilter], limit: Int?, now: Int64) throws -> [VerifiedEvent] {
        var byID: [String: VerifiedEvent] = [:]
        for filter in filters {
            // The read's limit bounds each filter's work: the newest `limit` of the union are
            // among the newest `limit` of each filter. Without it a filter with no limit of its
            // own read, decoded and sorted every event it matches (36 ms for a person's 6,000
            // mentions at a million, to return 50).
            let bounded = limit.map { filter.withLimit(Swift.min(filter.limit ?? Int64($0), Int64($0))) } ?? filter
            for event in try query(db, bounded, now: now) { byID[event.id] = event }
        }
        return newestFirst(Array(byID.values), limit: limit)
    }

    /// The newest `created_at` a read at `now` serves: `futureAllowanceSeconds` (relay.ingestion)
    /// past it. A later-dated event is stored and served once its date comes near, as an expired
    /// one stops being served once its expiry passes (saturating: no `now` overflows it).
    static func servedUntil(_ now: Int64) -> Int64 {
        let (sum, overflow) = now.addingReportingOverflow(Int64(RelayIngestionContract.futureAllowanceSeconds.value))
        return overflow ? (now < 0 ? Int64.min : Int64.max) : sum
    }

    /// `events` newest first, ties by lowest id (NIP-01's order), at most `limit` of them.
    static func newestFirst(_ events: [VerifiedEvent], limit: Int?) -> [VerifiedEvent] {
        var all = events
        all.sort { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        if let limit, all.count > limit { all.removeLast(all.count - limit) }
        return all
    }

    static func query(_ db: SQLiteConnection, _ filter: RelayFilter, now: Int64) throws -> [VerifiedEvent] {
        // An empty list matches nothing; so does a limit of 0.
        if filter.ids?.isEmpty == true || filter.authors?.isEmpty == true || filter.kinds?.isEmpty == true
            || filter.tagConditions.contains(where: { $0.values.isEmpty }) || filter.limit == 0
        {
            return []
        }
        // A chat's history (a tag with one value, and a limit): walk that tag's time index newest
        // first and stop at `limit` matches, instead of collecting and sorting every event that
        // carries the tag (cost flat in the account's size).
        let driving = filter.limit != nil ? filter.tagConditions.first { $0.values.count == 1 } : nil
        let time = driving == nil ? "e.created_at" : "d.created_at"
        var sql =
            (driving == nil
                ? "SELECT e.json FROM events e WHERE e.deleted = 0 AND (e.expires_at IS NULL OR e.expires_at > ?)"
                : "SELECT e.json, d.event_seq, d.created_at FROM event_tags d JOIN events e ON e.seq = d.event_seq WHERE d.name = ? AND d.value = ? AND e.deleted = 0 AND (e.expires_at IS NULL OR e.expires_at > ?)")
            + " AND \(time) <= ?"
        var args: [SQLValue] = []
        if let driving { args += [.text(String(driving.letter)), .text(driving.values[0])] }
        args += [.int(now), .int(servedUntil(now))]
        narrow(filter, timeColumn: time, except: driving, sql: &sql, args: &args)
        if driving != nil, let limit = filter.limit {
            // The index's order: newest first, ties by arrival. NIP-01 breaks ties by lowest id,
            // so the second of the `limit`-th match is read to its end before the cut.
            sql += " ORDER BY d.created_at DESC, d.event_seq"
            let statement = try db.statement(sql).bind(args)
            var out: [VerifiedEvent] = []
            var seen: Set<Int64> = []
            var boundary: Int64?
            // No SQL LIMIT: an event carrying the tag value twice gives two rows, and the
            // filter's own semantics decide.
            while try statement.step() {
                if let boundary, statement.int64(2) < boundary { break }
                guard seen.insert(statement.int64(1)).inserted else { continue }
                let event = try VerifiedEvent(storedJSON: statement.text(0))
                guard filter.matches(event) else { continue }
                out.append(event)
                if out.count == limit { boundary = event.createdAt }
            }
            statement.reset()
            return try withOverflow(db, filter, newestFirst(out, limit: Int(clamping: limit)), limit: limit, now: now)
        }
        sql += " ORDER BY e.created_at DESC, e.id ASC"
        if let limit = filter.limit {
            sql += " LIMIT ?"
            args.append(.int(limit))
        }
        let statement = try db.statement(sql).bind(args)
        var out: [VerifiedEvent] = []
        while try statement.step() {
            let event = try VerifiedEvent(storedJSON: statement.text(0))
            // The filter's own semantics decide; SQL only narrowed the candidates.
            if filter.matches(event) { out.append(event) }
        }
        return try withOverflow(db, filter, out, limit: filter.limit, now: now)
    }

    /// `indexed` (the answer from the tag index, newest first) with the served events stored past
    /// the tag index's bound (``TagIndex``) that `filter` matches, merged newest first and cut to
    /// `limit`. A filter without tag conditions never used the tag index: `indexed` is whole.
    static func withOverflow(_ db: SQLiteConnection, _ filter: RelayFilter, _ indexed: [VerifiedEvent], limit: Int64?, now: Int64)
        throws -> [VerifiedEvent]
    {
        guard !filter.tagConditions.isEmpty else { return indexed }
        let overflow = try overflowEvents(db, filter, now: now, limit: limit.map { Int(clamping: $0) })
        guard !overflow.isEmpty else { return indexed }
        return newestFirst(indexed + overflow, limit: limit.map { Int(clamping: $0) })
    }

    /// The events stored with the tag index's overflow marker that `filter` matches, decided by
    /// `RelayFilter.matches` (SQL narrows by everything but tags); served ones only (not deleted,
    /// not expired as of `now`) unless `now` is nil. With a `limit`, read newest first and only
    /// as far as the `limit`-th match and its second's other matches (the caller cuts by NIP-01's
    /// order): a relay's spam of marked events no longer makes a read that wants one event
    /// decode and hold all of them.
    static func overflowEvents(
        _ db: SQLiteConnection, _ filter: RelayFilter, now: Int64?, after mark: Int64? = nil, limit: Int? = nil
    ) throws -> [VerifiedEvent] {
        var out: [VerifiedEvent] = []
        var boundary: Int64?
        try forEachOverflowEvent(db, filter, now: now, after: mark, newestFirst: limit != nil) { event in
            if let boundary, event.createdAt < boundary { return false }
            out.append(event)
            if out.count == limit { boundary = event.createdAt }
            return true
        }
        return out
    }

    /// Calls `body` with each marked event `filter` matches (newest first when asked) until it
    /// returns false; one event decoded at a time, none kept.
    static func forEachOverflowEvent(
        _ db: SQLiteConnection, _ filter: RelayFilter, now: Int64?, after mark: Int64?, newestFirst: Bool,
        _ body: (VerifiedEvent) throws -> Bool
    ) throws {
        var sql = "SELECT e.json FROM event_tags o JOIN events e ON e.seq = o.event_seq WHERE o.name = ? AND o.value = ''"
        var args: [SQLValue] = [.text(TagIndex.overflowName)]
        if let mark {
            sql += " AND o.event_seq > ?"
            args.append(.int(mark))
        }
        if let now {
            sql += " AND e.deleted = 0 AND (e.expires_at IS NULL OR e.expires_at > ?) AND e.created_at <= ?"
            args += [.int(now), .int(servedUntil(now))]
        }
        narrow(filter, timeColumn: "e.created_at", tags: false, sql: &sql, args: &args)
        if newestFirst { sql += " ORDER BY e.created_at DESC" }
        let statement = try db.statement(sql).bind(args)
        defer { statement.reset() }
        while try statement.step() {
            let event = try VerifiedEvent(storedJSON: statement.text(0))
            guard filter.matches(event) else { continue }
            guard try body(event) else { break }
        }
    }

    /// Appends the SQL conditions that select exactly the events `filter` matches (ids and
    /// authors exactly or by prefix, kinds, since/until on `timeColumn`, and unless `tags` is
    /// false each tag condition but `except` over the tag index, which holds the events inside
    /// its bound: ``overflowEvents(_:_:now:)`` are the rest).
    static func narrow(
        _ filter: RelayFilter, timeColumn time: String, except driving: (letter: Character, values: [String])? = nil,
        tags: Bool = true, sql: inout String, args: inout [SQLValue]
    ) {
        func hexCondition(_ column: String, key: String? = nil, _ values: [String]) {
            var parts: [String] = []
            let exact = values.filter { $0.utf8.count == 64 }
            if !exact.isEmpty {
                // Ids go through the narrow id-key index; the full id decides.
                if let key {
                    parts.append("(\(key) IN (\(marks(exact.count))) AND \(column) IN (\(marks(exact.count))))")
                    args += exact.map { .int(EventLayout.idKey($0)) }
                } else {
                    parts.append("\(column) IN (\(marks(exact.count)))")
                }
                args += exact.map(SQLValue.text)
            }
            for prefix in values where prefix.utf8.count < 64 {
                parts.append("substr(\(column), 1, \(prefix.utf8.count)) = ?")
                args.append(.text(prefix))
            }
            sql += " AND (" + parts.joined(separator: " OR ") + ")"
        }
        if let ids = filter.ids { hexCondition("e.id", key: "e.id_key", ids) }
        if let authors = filter.authors { hexCondition("e.pubkey", authors) }
        if let kinds = filter.kinds {
            // With a tag condition, the tag index is the selective one: `+` keeps SQLite from
            // scanning every event of the kind instead (it has no statistics to know better).
            let column = filter.tagConditions.isEmpty ? "e.kind" : "+e.kind"
            sql += " AND \(column) IN (\(marks(kinds.count)))"
            args += kinds.map { .int(Int64($0)) }
        }
        if let since = filter.since {
            sql += " AND \(time) >= ?"
            args.append(.int(since))
        }
        if let until = filter.until {
            sql += " AND \(time) <= ?"
            args.append(.int(until))
        }
        for condition in filter.tagConditions where tags && (driving.map { $0 != condition } ?? true) {
            narrow(seq: "e.seq", by: condition, sql: &sql, args: &args)
        }
    }

    /// `AND <seq> IN` the events carrying one of the condition's values. An IN over the tag index
    /// yields the candidate rows first (few for a chat filter), instead of testing every event of
    /// the kind in time order.
    static func narrow(seq column: String, by condition: (letter: Character, values: [String]), sql: inout String, args: inout [SQLValue]) {
        sql += " AND \(column) IN (SELECT t.event_seq FROM event_tags t WHERE t.name = ? AND t.value IN (\(marks(condition.values.count))))"
        args.append(.text(String(condition.letter)))
        args += condition.values.map(SQLValue.text)
    }

    /// `n` SQL parameter marks, comma-separated: the inside of an `IN (…)`.
    static func marks(_ n: Int) -> String { Array(repeating: "?", count: n).joined(separator: ",") }
}
