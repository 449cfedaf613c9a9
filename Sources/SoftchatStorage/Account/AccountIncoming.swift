public import SoftchatCore
import SoftchatJSON

/// What one ingestion transaction did with each distinct input: total and disjoint, in input order.
public struct IngestionReceipt: Sendable, Hashable {
    /// Ids of the events this transaction stored, in input order.
    public var insertedEventIDs: [String] = []
    /// Ids of events the account already held, or whose replaceable or addressable slot holds a
    /// newer version, in input order.
    public var duplicateEventIDs: [String] = []
    /// Keys of the inputs quarantined, in input order: the event id, or `line:` and the line's
    /// SHA-256 in hex when no id could be read.
    public var quarantinedEventIDs: [String] = []

    /// Creates an empty receipt.
    public init() {}

    /// The receipt as the session's `IngestionResult` (inserted → accepted, duplicates →
    /// already present, quarantined → rejected).
    public var ingestionResult: IngestionResult {
        IngestionResult(accepted: insertedEventIDs, alreadyPresent: duplicateEventIDs, rejected: quarantinedEventIDs)
    }

    /// The number of distinct inputs the receipt names.
    public var total: Int { insertedEventIDs.count + duplicateEventIDs.count + quarantinedEventIDs.count }
}

/// An event kept aside with the reason it will never be served as a message.
public struct QuarantinedEvent: Sendable, Hashable {
    /// The quarantine key: the event's id, or `line:` and the line's SHA-256 in hex when no id
    /// could be read from it.
    public let eventID: String
    /// Why: the error code and message of an input that did not parse or verify, or its NIP-40
    /// expiry.
    public let reason: String
}

/// What one ingestion did: its receipt, and the inputs it quarantined with their reasons.
public struct IngestionOutcome: Sendable, Hashable {
    /// Which inputs were inserted, duplicates or quarantined.
    public let receipt: IngestionReceipt
    /// The inputs this call quarantined, with their reasons, in input order.
    public let quarantined: [QuarantinedEvent]
}

/// Incoming events: committed in one transaction before anything is confirmed.
public struct AccountIncoming: Sendable {
    let store: AccountStore

    /// Stores verified events in ONE transaction and returns a total, disjoint receipt.
    /// Replaceable (0, 3, 10000–19999) and addressable (30000–39999) kinds keep only the newest
    /// per NIP-01 (an older arrival is a duplicate of history); NIP-09 deletions hide their
    /// author's referenced events; events already expired (NIP-40) are quarantined.
    ///
    /// - Parameters:
    ///   - events: Verified events; an id given twice is stored and named once.
    ///   - receivedAt: The arrival time, in Unix seconds: stored with each event and compared with
    ///     NIP-40 expirations.
    /// - Returns: The receipt, checked total and disjoint, and the events quarantined.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails (nothing is
    ///   stored), or `invalid_persistence_result` once the account is closed or when the receipt
    ///   fails its check.
    public func ingest(_ events: [VerifiedEvent], receivedAt: Int64) throws(SoftchatError) -> IngestionOutcome {
        try ingest(inputs: events.map(IngestInput.verified), receivedAt: receivedAt)
    }

    /// Ingests raw event JSON lines (the CLI's path): lines that do not parse or verify are
    /// quarantined with their reason instead of failing the batch.
    ///
    /// - Parameters:
    ///   - lines: Event JSON texts, one event each; verified on every core before the transaction.
    ///   - receivedAt: The arrival time, in Unix seconds: stored with each event and compared with
    ///     NIP-40 expirations.
    /// - Returns: The receipt, checked total and disjoint, and the lines quarantined.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails (nothing is
    ///   stored), or `invalid_persistence_result` once the account is closed or when the receipt
    ///   fails its check.
    public func ingest(lines: [String], receivedAt: Int64) throws(SoftchatError) -> IngestionOutcome {
        let verified = VerifiedEvent.verify(texts: lines)  // all cores, before the transaction opens
        return try ingest(inputs: lines.indices.map { IngestInput.parse(lines[$0], verified[$0]) }, receivedAt: receivedAt)
    }

    /// Stores verified events and the sync states that account for them in ONE transaction:
    /// a state (and the cursor it may move) is never durable without the events it counted,
    /// and events are never durable under a state that did not count them. A state whose
    /// `cursor` is set moves the account's sync cursor there (never back).
    ///
    /// - Parameters:
    ///   - events: Verified events, ingested as `ingest(_:receivedAt:)` does.
    ///   - syncStates: The sync states to store with them, each replacing the state of its
    ///     (relay, subscription).
    ///   - receivedAt: The arrival time, in Unix seconds; also the states' update time.
    /// - Returns: The receipt for the events, checked total and disjoint, and those quarantined.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails (neither
    ///   events nor states are stored), or `invalid_persistence_result` once the account is closed
    ///   or when the receipt fails its check.
    public func commit(_ events: [VerifiedEvent], syncStates: [SyncStateRecord], receivedAt: Int64) throws(SoftchatError) -> IngestionOutcome {
        try ingest(inputs: events.map(IngestInput.verified), receivedAt: receivedAt) { db in
            for record in syncStates { try SyncStateStore.write(db, record, now: receivedAt) }
        }
    }

    func ingest(inputs: [IngestInput], receivedAt: Int64, also: (SQLiteConnection) throws -> Void = { _ in }) throws(SoftchatError)
        -> IngestionOutcome
    {
        // A forged copy carrying a genuine event's id must not take the id's one receipt slot
        // ahead of the genuine event in the same batch (it would never be stored).
        let verifiedIDs = Set(inputs.compactMap { if case .verified(let e) = $0 { e.id } else { nil } })
        let inputs = inputs.filter { if case .unverifiable(let key, _, _, _) = $0 { !verifiedIDs.contains(key) } else { true } }
        let outcome = try store.write("ingest") { db in
            var writer = EventWriter(db: db, receivedAt: receivedAt, layout: store.layout)
            for input in inputs { try writer.add(input) }
            // Gift wraps to the unlocked signer are unwrapped here, in the transaction that
            // stores them: both durable, or neither.
            if !writer.insertedWraps.isEmpty, let signer = store.signer.withLock({ $0 }) {
                try PrivateMessageStore.unwrap(db, writer.insertedWraps, signer: signer, store: store, receivedAt: receivedAt)
            }
            try writer.recordReceipt()
            try also(db)
            return IngestionOutcome(receipt: writer.receipt, quarantined: writer.quarantined)
        }
        // The receipt is checked like any host's result before it is returned.
        try validateReceipt(outcome.receipt, inputs: inputs)
        return outcome
    }

    /// Total (every distinct input named) and disjoint (named once).
    private func validateReceipt(_ receipt: IngestionReceipt, inputs: [IngestInput]) throws(SoftchatError) {
        let keys = Set(inputs.map(\.key))
        let named = receipt.insertedEventIDs + receipt.duplicateEventIDs + receipt.quarantinedEventIDs
        guard named.count == keys.count, Set(named) == keys else {
            throw .invalidPersistenceResult(
                "ingest receipt names \(named.count) events for \(keys.count) distinct inputs",
                operation: .relayIngestion)
        }
    }
}

/// One input line of an ingestion: a verified event, or raw text that failed on the way in.
enum IngestInput {
    case verified(VerifiedEvent)
    case unverifiable(key: String, eventID: String?, raw: String, reason: String)

    static func parse(_ line: String, _ verified: Result<VerifiedEvent, SoftchatError>) -> IngestInput {
        switch verified {
        case .success(let event):
            return .verified(event)
        case .failure(let error):
            let id = (try? UnverifiedEvent(text: line))?.id
            let key = id ?? "line:" + Hex.encode(SHA256.hash(Array(line.utf8)))
            return .unverifiable(key: key, eventID: id, raw: line, reason: "\(error.code.rawValue): \(error.message)")
        }
    }

    /// The id the receipt names this input by (a line hash when no id could be read).
    var key: String {
        switch self {
        case .verified(let e): e.id
        case .unverifiable(let key, _, _, _): key
        }
    }
}

/// NIP-01 kind classes.
enum KindClass {
    case regular, replaceable, ephemeral, addressable

    /// The kinds of each class but `regular` (every other kind): NIP-01's table, the one
    /// definition both the classification and its SQL form (``sql(_:is:)``) read.
    static let kinds: [(KindClass, [ClosedRange<Int>])] = [
        (.replaceable, [0...0, 3...3, 10_000...19_999]),
        (.ephemeral, [20_000...29_999]),
        (.addressable, [30_000...39_999]),
    ]

    init(_ kind: Int) {
        self = Self.kinds.first { _, ranges in ranges.contains { $0.contains(kind) } }?.0 ?? .regular
    }

    /// SQL that is true when `column` holds a kind of class `kind`.
    static func sql(_ column: String, is kind: KindClass) -> String {
        func any(_ ranges: [ClosedRange<Int>]) -> String {
            "("
                + ranges.map { r in r.count == 1 ? "\(column) = \(r.lowerBound)" : "\(column) BETWEEN \(r.lowerBound) AND \(r.upperBound)" }
                .joined(separator: " OR ") + ")"
        }
        if kind == .regular { return "NOT " + any(kinds.flatMap(\.1)) }
        return any(kinds.first { $0.0 == kind }?.1 ?? [])
    }
}

/// The per-transaction work of an ingestion: classification, storage, receipt.
struct EventWriter {
    let db: SQLiteConnection
    let receivedAt: Int64
    /// The account's layout (older ones only in upgrade tests and fixtures of old accounts).
    let layout: EventLayout
    var receipt = IngestionReceipt()
    var quarantined: [QuarantinedEvent] = []
    /// The gift wraps (kind 1059) this writer inserted, for unwrapping in the same transaction.
    var insertedWraps: [VerifiedEvent] = []
    private var seen: Set<String> = []

    init(db: SQLiteConnection, receivedAt: Int64, layout: EventLayout = .byArrival) {
        self.db = db
        self.receivedAt = receivedAt
        self.layout = layout
    }

    mutating func add(_ input: IngestInput) throws {
        // A repeat inside the same batch is the same event: the receipt names each id once.
        guard seen.insert(input.key).inserted else { return }
        switch input {
        case .unverifiable(let key, let eventID, let raw, let reason):
            try quarantine(key: key, eventID: eventID, raw: raw, reason: reason)
        case .verified(let event):
            try add(event)
        }
    }

    private mutating func quarantine(key: String, eventID: String?, raw: String, reason: String) throws {
        let exists = try db.statement("SELECT 1 FROM quarantine WHERE key = ?").bind(.text(key)).step()
        if !exists {
            try db.statement("INSERT INTO quarantine (key, event_id, reason, raw, received_at) VALUES (?, ?, ?, ?, ?)")
                .bind(.text(key), .optional(eventID), .text(reason), .text(raw), .int(receivedAt)).run()
        }
        receipt.quarantinedEventIDs.append(key)
        quarantined.append(QuarantinedEvent(eventID: key, reason: reason))
    }

    /// Whether the account holds a row for the event `id` (served or hidden).
    func contains(_ id: String) throws -> Bool {
        try db.statement("SELECT 1 FROM events WHERE \(layout.idCondition)").bind(.int(EventLayout.idKey(id)), .text(id)).step()
    }

    /// Stores one verified event; returns false when it was a duplicate (of a row or of history).
    @discardableResult
    mutating func add(_ event: VerifiedEvent) throws -> Bool {
        if try contains(event.id) {
            receipt.duplicateEventIDs.append(event.id)
            return false
        }
        let expiration = event.firstTagValue("expiration").flatMap { Int64($0) }
        if let expiration, expiration <= receivedAt {
            try quarantine(
                key: event.id, eventID: event.id, raw: event.jsonText,
                reason: "expired at \(expiration) (NIP-40) before it arrived at \(receivedAt)")
            return false
        }
        let kindClass = KindClass(event.kind)
        let dTag = kindClass == .addressable ? (event.firstTagValue("d") ?? "") : nil
        if kindClass == .replaceable || kindClass == .addressable {
            // Keep only the newest per (pubkey, kind[, d]); ties keep the lowest id (NIP-01).
            let current = try db.statement(
                "SELECT id, created_at FROM events WHERE pubkey = ? AND kind = ? AND d_tag IS ? ORDER BY created_at DESC, id ASC LIMIT 1"
            )
            .bind(.text(event.pubkey), .int(Int64(event.kind)), .optional(dTag))
            if try current.step() {
                let currentID = current.text(0)
                let currentTime = current.int64(1)
                if currentTime > event.createdAt || (currentTime == event.createdAt && currentID < event.id) {
                    receipt.duplicateEventIDs.append(event.id)
                    return false
                }
                // A kept reconciliation set may hold the item of a row going now.
                if layout == .byArrival { try ReconciliationCache.forgetAll(db) }
                try db.statement(
                    "DELETE FROM events WHERE pubkey = ? AND kind = ? AND d_tag IS ? AND id NOT IN (SELECT event_id FROM publish_intents)"
                )
                .bind(.text(event.pubkey), .int(Int64(event.kind)), .optional(dTag)).run()
                try db.statement("UPDATE events SET deleted = 1 WHERE pubkey = ? AND kind = ? AND d_tag IS ?")
                    .bind(.text(event.pubkey), .int(Int64(event.kind)), .optional(dTag)).run()
            }
        }
        try store(event, dTag: dTag, expiration: expiration, hidden: try isDeleted(event, dTag: dTag))
        if event.kind == 5 { try applyDeletion(event) }
        if event.kind == GiftWrap.wrapKind { insertedWraps.append(event) }
        receipt.insertedEventIDs.append(event.id)
        return true
    }

    /// Stores our own event hidden: a version that lost its slot (or expired) but that an intent
    /// still needs. Its tags are indexed like any stored event's, so the reconciliation sets that
    /// match it hold it. Its row has no `d_tag` and no expiry, as it always had: an addressable
    /// version of ours that expired stays out of its slot, where it would stand as the newest.
    func storeHidden(_ event: VerifiedEvent) throws {
        try store(event, dTag: nil, expiration: nil, hidden: true)
    }

    /// Inserts the event's row and its tag rows (``TagIndex``); a served message is counted in
    /// its conversations (``ConversationIndex``).
    private func store(_ event: VerifiedEvent, dTag: String?, expiration: Int64?, hidden: Bool) throws {
        let row = try insertRow(event, dTag: dTag, expiration: expiration, hidden: hidden)
        let tagInsert: Statement
        switch layout {
        case .byArrival: tagInsert = try db.statement("INSERT INTO event_tags (event_seq, name, value, created_at) VALUES (?, ?, ?, ?)")
        case .byID(true): tagInsert = try db.statement("INSERT INTO event_tags (event_id, name, value, created_at) VALUES (?, ?, ?, ?)")
        case .byID(false): tagInsert = try db.statement("INSERT INTO event_tags (event_id, name, value) VALUES (?, ?, ?)")
        }
        let tags = TagIndex.rows(of: event)
        for (name, value) in tags {
            switch layout {
            case .byArrival: try tagInsert.bind(.int(row), .text(name), .text(value), .int(event.createdAt)).run()
            case .byID(true): try tagInsert.bind(.text(event.id), .text(name), .text(value), .int(event.createdAt)).run()
            case .byID(false): try tagInsert.bind(.text(event.id), .text(name), .text(value)).run()
            }
            tagInsert.reset()
        }
        if layout == .byArrival, !hidden {
            try ConversationIndex.count(db, kind: event.kind, createdAt: event.createdAt, receivedAt: receivedAt, tags: tags)
        }
    }

    /// Inserts the event's row (no tags) and returns its rowid (its `seq` from schema 9).
    private func insertRow(_ event: VerifiedEvent, dTag: String?, expiration: Int64?, hidden: Bool) throws -> Int64 {
        let values: [SQLValue] = [
            .text(event.id), .text(event.pubkey), .int(event.createdAt), .int(Int64(event.kind)), .optional(dTag),
            .optional(expiration), .int(hidden ? 1 : 0), .int(receivedAt), .text(event.jsonText),
        ]
        switch layout {
        case .byArrival:
            try db.statement(
                "INSERT INTO events (id_key, id, pubkey, created_at, kind, d_tag, expires_at, deleted, received_at, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ).bind([.int(EventLayout.idKey(event.id))] + values).run()
        case .byID:
            try db.statement(
                "INSERT INTO events (id, pubkey, created_at, kind, d_tag, expires_at, deleted, received_at, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ).bind(values).run()
        }
        let seq = db.lastInsertRowID
        // The live queries take the event as written, not decoded again from its row.
        db.rowLog?.noteInserted(seq, event)
        return seq
    }

    /// NIP-09: a kind-5 request hides the referenced events (by `e` id or `a` address) of the
    /// same author only; requests are remembered so a target arriving later is hidden too.
    private func applyDeletion(_ deletion: VerifiedEvent) throws {
        let record = try db.statement("INSERT OR IGNORE INTO deletions (pubkey, target, created_at, deletion_id) VALUES (?, ?, ?, ?)")
        for tag in deletion.tags where tag.count >= 2 && (tag[0] == "e" || tag[0] == "a") {
            try record.bind(.text(deletion.pubkey), .text(tag[1]), .int(deletion.createdAt), .text(deletion.id)).run()
            record.reset()
            if tag[0] == "e" {
                if layout == .byArrival {
                    let served = try db.statement(
                        "SELECT seq, kind FROM events WHERE \(layout.idCondition) AND pubkey = ? AND kind != 5 AND deleted = 0"
                    )
                    .bind(.int(EventLayout.idKey(tag[1])), .text(tag[1]), .text(deletion.pubkey))
                    if try served.step() {
                        let (seq, kind) = (served.int64(0), Int(served.int64(1)))
                        served.reset()
                        try ConversationIndex.forget(db, seq: seq, kind: kind)
                    }
                }
                try db.statement("UPDATE events SET deleted = 1 WHERE \(layout.idCondition) AND pubkey = ? AND kind != 5")
                    .bind(.int(EventLayout.idKey(tag[1])), .text(tag[1]), .text(deletion.pubkey)).run()
            } else if let address = Address(tag[1]), address.pubkey == deletion.pubkey, let dTag = address.storedDTag {
                try db.statement("UPDATE events SET deleted = 1 WHERE pubkey = ? AND kind = ? AND d_tag IS ? AND created_at <= ?")
                    .bind(.text(address.pubkey), .int(Int64(address.kind)), .optional(dTag), .int(deletion.createdAt)).run()
            }
        }
    }

    private func isDeleted(_ event: VerifiedEvent, dTag: String?) throws -> Bool {
        if event.kind == 5 { return false }
        if try db.statement("SELECT 1 FROM deletions WHERE pubkey = ? AND target = ?").bind(.text(event.pubkey), .text(event.id)).step() {
            return true
        }
        if let address = Address.text(kind: event.kind, pubkey: event.pubkey, storedDTag: dTag) {
            return try db.statement("SELECT 1 FROM deletions WHERE pubkey = ? AND target = ? AND created_at >= ?")
                .bind(.text(event.pubkey), .text(address), .int(event.createdAt)).step()
        }
        return false
    }

    func recordReceipt() throws {
        try db.statement("INSERT INTO ingest_receipts (received_at, total, inserted, duplicates, quarantined) VALUES (?, ?, ?, ?, ?)")
            .bind(
                .int(receivedAt), .int(Int64(receipt.total)), .int(Int64(receipt.insertedEventIDs.count)),
                .int(Int64(receipt.duplicateEventIDs.count)), .int(Int64(receipt.quarantinedEventIDs.count))
            ).run()
    }
}

/// A NIP-01 address `kind:pubkey:d-identifier`.
struct Address {
    let kind: Int
    let pubkey: String
    let identifier: String

    /// The `d_tag` the events at this address are stored with, wrapped in an outer optional that
    /// is nil when the address names no stored slot: addressable kinds keep their identifier,
    /// replaceable kinds (0, 3, 10000–19999) are stored without one and are addressed with an
    /// empty identifier (`kind:pubkey:`), other kinds have no address.
    var storedDTag: String?? {
        switch KindClass(kind) {
        case .addressable: .some(identifier)
        case .replaceable: identifier.isEmpty ? .some(nil) : nil
        case .regular, .ephemeral: nil
        }
    }

    /// The address of an event of `kind` by `pubkey` stored with `storedDTag` (the inverse of
    /// ``storedDTag``), or nil when its kind has no address.
    static func text(kind: Int, pubkey: String, storedDTag: String?) -> String? {
        switch KindClass(kind) {
        case .addressable: "\(kind):\(pubkey):\(storedDTag ?? "")"
        case .replaceable: "\(kind):\(pubkey):"
        case .regular, .ephemeral: nil
        }
    }

    init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let kind = Int(parts[0]) else { return nil }
        self.kind = kind
        pubkey = String(parts[1])
        identifier = String(parts[2])
    }
}
