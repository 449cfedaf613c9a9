public import SoftchatCore

/// The result of `SoftchatAccount.check()`: SQLite's integrity check plus the account's own
/// invariants. `problems` is empty when everything holds.
public struct AccountCheckReport: Sendable, Hashable {
    /// Every integrity finding and broken invariant, one line each; empty when every check passes.
    public var problems: [String] = []
    /// Rows in the events table, hidden ones (deleted, replaced, expired) included.
    public var events = 0
    /// Inputs kept aside in quarantine.
    public var quarantined = 0
    /// Ingestion receipts recorded, one per ingestion transaction.
    public var receipts = 0
    /// Publish intents per state (a spelling that is no state is counted among the problems).
    public var intentsByState: [DeliveryState: Int] = [:]
    /// Delivery leases neither released nor expired at the `now` of the check.
    public var liveLeases = 0
    /// True when `problems` is empty.
    public var ok: Bool { problems.isEmpty }
}

extension SoftchatAccount {
    /// `PRAGMA integrity_check`, `PRAGMA foreign_key_check` and the invariants: every receipt
    /// total, every intent in exactly one known state, no lease without an expiry, every leased
    /// intent's lease known, no terminal intent still leased, every intent's event stored, each
    /// event's id key its id's, each id stored once, each tag row carrying its event's time, each
    /// kept set of reconciliation items equal to what the indexes give, each conversation's count
    /// its served messages', each event's tag rows the index rows of its tags (``TagIndex``); and
    /// every stored event's id and BIP-340 signature verified again, so a tampered or imported
    /// file cannot pass for an account of verified events (reads recompute each event's id, not
    /// its signature; this is the full check, about 40 µs an event).
    ///
    /// - Parameter now: The current Unix time, in seconds, for counting live leases.
    /// - Returns: The counts, and every problem found: a broken invariant is reported, not thrown.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func check(now: Int64) throws(SoftchatError) -> AccountCheckReport {
        // One snapshot: the mark, the kept sets and the indexes they are compared with must be
        // read at the same commit.
        try store.snapshot("check") { db in
            var report = AccountCheckReport()
            let integrity = try db.statement("PRAGMA integrity_check")
            while try integrity.step() {
                if integrity.text(0) != "ok" { report.problems.append("integrity: \(integrity.text(0))") }
            }
            let fk = try db.statement("PRAGMA foreign_key_check")
            while try fk.step() { report.problems.append("foreign key: \(fk.text(0)) row \(fk.int64(1))") }
            report.events = Int(try db.scalarInt("SELECT COUNT(*) FROM events"))
            report.quarantined = Int(try db.scalarInt("SELECT COUNT(*) FROM quarantine"))
            report.receipts = Int(try db.scalarInt("SELECT COUNT(*) FROM ingest_receipts"))
            let badReceipts = try db.scalarInt("SELECT COUNT(*) FROM ingest_receipts WHERE inserted + duplicates + quarantined != total")
            if badReceipts > 0 { report.problems.append("\(badReceipts) ingestion receipts are not total") }
            let states = try db.statement("SELECT state, COUNT(*) FROM publish_intents GROUP BY state")
            var unknown: [String] = []
            while try states.step() {
                if let state = DeliveryState(rawValue: states.text(0)) {
                    report.intentsByState[state] = Int(states.int64(1))
                } else {
                    unknown.append(states.text(0))
                }
            }
            if !unknown.isEmpty { report.problems.append("intents in unknown states: \(unknown.sorted())") }
            let noExpiry = try db.scalarInt("SELECT COUNT(*) FROM delivery_leases WHERE expires_at IS NULL")
            if noExpiry > 0 { report.problems.append("\(noExpiry) leases have no expiry") }
            let orphanLease = try db.scalarInt(
                "SELECT COUNT(*) FROM publish_intents WHERE lease_id IS NOT NULL AND lease_id NOT IN (SELECT lease_id FROM delivery_leases)")
            if orphanLease > 0 { report.problems.append("\(orphanLease) intents name a lease that does not exist") }
            let terminalLeased = try db.scalarInt(
                "SELECT COUNT(*) FROM publish_intents WHERE state IN \(DeliveryState.sql(.accepted, .rejected)) AND lease_id IS NOT NULL")
            if terminalLeased > 0 { report.problems.append("\(terminalLeased) terminal intents still hold a lease") }
            let missingEvent = try db.scalarInt("SELECT COUNT(*) FROM publish_intents WHERE event_id NOT IN (SELECT id FROM events)")
            if missingEvent > 0 { report.problems.append("\(missingEvent) intents have no stored event") }
            // The layout's own invariants (schema 9): each row's id key is its id's, an id is
            // stored once, and each tag row carries its event's time.
            let wrongKeys = try db.scalarInt("SELECT COUNT(*) FROM events WHERE id_key != (\(EventLayout.idKeySQL("id")))")
            if wrongKeys > 0 { report.problems.append("\(wrongKeys) events have an id key that is not their id's") }
            let repeated = try db.scalarInt("SELECT COUNT(*) FROM (SELECT id FROM events GROUP BY id_key, id HAVING COUNT(*) > 1)")
            if repeated > 0 { report.problems.append("\(repeated) event ids are stored more than once") }
            let tagTimes = try db.scalarInt(
                "SELECT COUNT(*) FROM event_tags t JOIN events e ON e.seq = t.event_seq WHERE t.created_at != e.created_at")
            if tagTimes > 0 { report.problems.append("\(tagTimes) tag rows carry a time that is not their event's") }
            // Kept reconciliation items must give the set the indexes give, at the current mark
            // directly or with the events stored since added: a wrong copy would hide events
            // from every later sync.
            let mark = try ReconciliationCache.highWater(db)
            let kept = try db.statement("SELECT filter_json, high_water, length(items) % 40 FROM negentropy_items")
            var keys: [(key: String, mark: Int64, whole: Bool)] = []
            while try kept.step() { keys.append((kept.text(0), kept.int64(1), kept.int64(2) == 0)) }
            kept.reset()
            for entry in keys {
                guard let filter = try? RelayFilter.fromJSON(entry.key), entry.whole, entry.mark <= mark else {
                    report.problems.append("kept reconciliation items for \(entry.key.prefix(200)) are damaged")
                    continue
                }
                // Nil: too much stored since to add to it; the indexes answer, nothing is served from it.
                guard let (items, _) = try ReconciliationCache.items(db, filter, at: mark) else { continue }
                if items != (try Self.reconciliationItems(db, filter)) {
                    report.problems.append("kept reconciliation items for \(entry.key.prefix(200)) differ from the stored events")
                }
            }
            report.liveLeases = Int(try db.scalarInt("SELECT COUNT(*) FROM delivery_leases WHERE released = 0 AND expires_at > \(now)"))
            // Each conversation's count is its served messages' rows (``ConversationIndex``), both
            // ways: a count without rows, and rows without their count.
            let counted = """
                SELECT e.kind, t.name, t.value, COUNT(*) FROM event_tags t JOIN events e ON e.seq = t.event_seq
                WHERE t.name IN \(ConversationIndex.tagsSQL) AND e.deleted = 0 AND \(ConversationIndex.kindsSQL("e.kind"))
                GROUP BY e.kind, t.name, t.value
                """
            let listed = "SELECT kind, tag, value, messages FROM conversations WHERE messages > 0"
            let miscounted = try db.scalarInt(
                """
                SELECT COUNT(*) FROM (SELECT kind, name, value FROM (\(counted) EXCEPT \(listed))
                UNION SELECT kind, tag, value FROM (\(listed) EXCEPT \(counted)))
                """)
            if miscounted > 0 { report.problems.append("\(miscounted) conversation counts are not their served messages") }
            // Private messages: every unwrapped wrap has its message, every message its wrap's
            // outcome, and each room's count is its shown messages (deleted ones not counted).
            // (Accounts in a layout before schema 12, in upgrade tests, have no private messages.)
            if store.version >= Migrations.privateMessagesVersion {
                let lostMessages = try db.scalarInt(
                    "SELECT COUNT(*) FROM gift_wraps g WHERE g.rumor_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM private_messages m WHERE m.owner = g.owner AND m.rumor_id = g.rumor_id)"
                )
                if lostMessages > 0 { report.problems.append("\(lostMessages) unwrapped gift wraps have no message") }
                let unexplained = try db.scalarInt(
                    "SELECT COUNT(*) FROM private_messages m WHERE NOT EXISTS (SELECT 1 FROM gift_wraps g WHERE g.wrap_id = m.wrap_id AND g.rumor_id = m.rumor_id)"
                )
                if unexplained > 0 { report.problems.append("\(unexplained) private messages have no unwrapped gift wrap") }
                let roomsMiscounted = try db.scalarInt(
                    """
                    SELECT COUNT(*) FROM private_rooms r WHERE r.messages != (SELECT COUNT(*) FROM private_messages m
                    WHERE m.owner = r.owner AND m.room = r.room AND m.deleted = 0 AND m.kind IN \(PrivateMessageStore.shownKindsSQL))
                    """)
                if roomsMiscounted > 0 { report.problems.append("\(roomsMiscounted) private rooms' counts are not their messages") }
            }
            // Every stored event verified again, and its tag rows compared with its tags.
            let stored = try db.statement("SELECT seq, id, json FROM events")
            var forged = Sample()
            var misindexed = Sample()
            while try stored.step() {
                let id = stored.text(1)
                guard let event = try? VerifiedEvent(text: stored.text(2)), event.id == id else {
                    forged.add(id)
                    continue
                }
                if !TagIndex.same(try TagIndex.storedKeys(db, seq: stored.int64(0)), TagIndex.rows(of: event)) { misindexed.add(id) }
            }
            if forged.count > 0 {
                report.problems.append("\(forged.count) stored events fail id or signature verification (first: \(forged.first))")
            }
            if misindexed.count > 0 {
                report.problems.append("\(misindexed.count) events have tag rows that are not their tags (first: \(misindexed.first))")
            }
            return report
        }
    }
}

/// How many of something a check found, and the first three of them, for its one line.
private struct Sample {
    var count = 0
    private var names: [String] = []
    mutating func add(_ name: String) {
        count += 1
        if names.count < 3 { names.append(String(name.prefix(64))) }
    }
    var first: String { names.joined(separator: ", ") }
}
