public import SoftchatCore
import Synchronization

/// One publish operation: the caller's idempotency key, the signed events, the relays.
public struct OutgoingOperation: Sendable, Hashable {
    /// The caller's idempotency key for this publish; not empty.
    public var operationID: String
    /// 1 to 256 verified events with unique ids.
    public var events: [VerifiedEvent]
    /// The relays to deliver every event to: at least one, no repeats.
    public var relayURLs: [String]

    /// Creates an operation.
    ///
    /// - Parameters:
    ///   - operationID: The caller's idempotency key; not empty.
    ///   - events: 1 to 256 verified events with unique ids.
    ///   - relayURLs: The relays to deliver every event to: at least one, no repeats.
    public init(operationID: String, events: [VerifiedEvent], relayURLs: [String]) {
        self.operationID = operationID
        self.events = events
        self.relayURLs = relayURLs
    }
}

/// Durable publish intent: events and one intent per (event, relay), committed before any
/// socket sees them.
public struct AccountOutgoing: Sendable {
    let store: AccountStore

    /// Stores `events` and one `pending` intent per (event, relay) in one transaction.
    /// Idempotent by `operationID`: the same id with the same events and relays, in the same
    /// order, returns the same intent ids and changes nothing; the same id with different
    /// content fails with `invalid_delivery_state`.
    ///
    /// - Parameters:
    ///   - operationID: The caller's idempotency key for this publish; not empty.
    ///   - events: 1 to 256 verified events with unique ids; those not held yet are stored.
    ///   - relayURLs: The relays to deliver every event to: at least one, no repeats.
    ///   - now: The current Unix time, in seconds.
    /// - Returns: One intent id per (event, relay), relays varying fastest, in the order given; a
    ///   pair that already had an intent, from whichever operation, keeps that intent's id.
    /// - Throws: `SoftchatError` with code `invalid_relay_batch` for an empty `operationID`, no
    ///   events or more than 256, no relays, or a repeated event id or relay;
    ///   `invalid_delivery_state` when `operationID` was enqueued with other events or relays;
    ///   `account_storage_failed` when SQLite fails (nothing is stored);
    ///   `invalid_persistence_result` once the account is closed.
    public func enqueueSigned(operationID: String, events: [VerifiedEvent], relayURLs: [String], now: Int64)
        throws(SoftchatError) -> [String]
    {
        try enqueueSigned([OutgoingOperation(operationID: operationID, events: events, relayURLs: relayURLs)], now: now)[0]
    }

    /// Enqueues many operations in ONE transaction — one commit, one fsync — each exactly as
    /// ``enqueueSigned(operationID:events:relayURLs:now:)`` enqueues it alone: an app that queues
    /// several messages at once (a send queue restored at launch, a message to many chats) pays
    /// one commit instead of one each. All are stored or none: a refused operation fails the call
    /// and nothing of the others is kept.
    ///
    /// - Parameters:
    ///   - operations: 1 to ``maxOperationsPerCommit`` operations with distinct ids, each checked
    ///     as the single form checks it.
    ///   - now: The current Unix time, in seconds.
    /// - Returns: Per operation, in order, its intent ids (relays varying fastest).
    /// - Throws: `SoftchatError` with code `invalid_relay_batch` for no operations or more than
    ///   ``maxOperationsPerCommit``, a repeated operation id, or an operation the single form
    ///   refuses; `invalid_delivery_state` when an operation id was enqueued with other events or
    ///   relays; `account_storage_failed` when SQLite fails (nothing is stored);
    ///   `invalid_persistence_result` once the account is closed.
    public func enqueueSigned(_ operations: [OutgoingOperation], now: Int64) throws(SoftchatError) -> [[String]] {
        guard !operations.isEmpty, operations.count <= Self.maxOperationsPerCommit else {
            throw .invalidRelayBatch(
                "enqueueSigned: \(operations.count) operations; one commit takes 1 to \(Self.maxOperationsPerCommit)", operation: .relayPublish)
        }
        guard Set(operations.map(\.operationID)).count == operations.count else {
            throw .invalidRelayBatch("enqueueSigned: operation ids must be unique within one commit", operation: .relayPublish)
        }
        var fingerprints: [String] = []
        for op in operations { fingerprints.append(try Self.check(op)) }
        let ids = try store.senderWrite("enqueueSigned") { db in
            var sequence: Int64?  // read once, when the first intent is inserted
            var writer = EventWriter(db: db, receivedAt: now, layout: store.layout)
            return try operations.indices.map { i in
                try Self.enqueue(operations[i], fingerprint: fingerprints[i], db: db, writer: &writer, sequence: &sequence, now: now)
            }
        }
        store.notifyOutgoing()
        return ids
    }

    /// The most operations one ``enqueueSigned(_:now:)`` commits (1,024).
    public static let maxOperationsPerCommit = 1_024

    /// Checks one operation's shape and relays; returns its fingerprint (what makes a repeat of
    /// its id the same operation).
    static func check(_ op: OutgoingOperation) throws(SoftchatError) -> String {
        guard !op.operationID.isEmpty else { throw .invalidRelayBatch("enqueueSigned: operationId must not be empty", operation: .relayPublish) }
        try RelayPublishContract.maxPublishBatchEvents.check(op.events.count, "enqueueSigned events")
        guard !op.relayURLs.isEmpty else { throw .invalidRelayBatch("enqueueSigned: relayUrls must not be empty", operation: .relayPublish) }
        guard op.events.count == 1 || Set(op.events.map(\.id)).count == op.events.count else {
            throw .invalidRelayBatch("enqueueSigned: events must have unique ids", operation: .relayPublish)
        }
        guard op.relayURLs.count == 1 || Set(op.relayURLs).count == op.relayURLs.count else {
            throw .invalidRelayBatch("enqueueSigned: relayUrls must be unique", operation: .relayPublish)
        }
        for url in op.relayURLs { try checkRelayURL(url, "enqueueSigned") }
        return Hex.encode(SHA256.hash(Array((op.events.map(\.id).joined(separator: ",") + "|" + op.relayURLs.joined(separator: ",")).utf8)))
    }

    /// One operation's rows, inside the caller's transaction: its events (those not held yet)
    /// and one `pending` intent per (event, relay); an id already enqueued with the same content
    /// returns its intents and changes nothing.
    static func enqueue(
        _ op: OutgoingOperation, fingerprint: String, db: SQLiteConnection, writer: inout EventWriter, sequence: inout Int64?, now: Int64
    ) throws -> [String] {
        let (events, relayURLs, operationID) = (op.events, op.relayURLs, op.operationID)
        // An (event, relay) pair has one intent, whichever operation created it first.
        func intentIDs() throws -> [String] {
            let lookup = try db.statement("SELECT intent_id FROM publish_intents WHERE event_id = ? AND relay_url = ?")
            var ids: [String] = []
            for e in events {
                for relay in relayURLs {
                    try lookup.bind(.text(e.id), .text(relay))
                    guard try lookup.step() else {
                        throw SQLiteError(code: 0, extendedCode: 0, message: "intent missing", operation: "enqueueSigned")
                    }
                    ids.append(lookup.text(0))
                    lookup.reset()
                }
            }
            return ids
        }
        let existing = try db.statement("SELECT fingerprint FROM publish_operations WHERE operation_id = ?").bind(.text(operationID))
        if try existing.step() {
            guard existing.text(0) == fingerprint else {
                throw SoftchatError.invalidDeliveryState(
                    "enqueueSigned: operation \(operationID) was already enqueued with different events or relays", operation: .relayPublish)
            }
            existing.reset()
            return try intentIDs()
        }
        try db.statement("INSERT INTO publish_operations (operation_id, fingerprint, created_at) VALUES (?, ?, ?)")
            .bind(.text(operationID), .text(fingerprint), .int(now)).run()
        for e in events where !(try writer.contains(e.id)) { try writer.add(e) }
        // Our own replaceable event may lose to a newer stored one — or to a newer version
        // later in this same batch, which removes its row; the intent still needs its row.
        for e in events where !(try writer.contains(e.id)) { try writer.storeHidden(e) }
        let insert = try db.statement(
            "INSERT OR IGNORE INTO publish_intents (intent_id, operation_id, event_id, relay_url, state, attempts, sequence, updated_at) VALUES (?, ?, ?, ?, \(DeliveryState.pending.sql), 0, ?, ?)"
        )
        // The newest row's sequence is the largest: rows are never deleted, and each insert takes
        // both the next rowid and the next sequence (the one rebuild, schema 9, copied rows in
        // rowid order). Read through the rowid, O(log n); MAX(sequence) walked the whole index.
        var next = try sequence ?? db.scalarInt("SELECT COALESCE((SELECT sequence FROM publish_intents ORDER BY rowid DESC LIMIT 1), 0)")
        defer { sequence = next }
        for e in events {
            for relay in relayURLs {
                next += 1
                try insert.bind(
                    .text(intentID(operationID, e.id, relay)), .text(operationID), .text(e.id), .text(relay), .int(next), .int(now)
                ).run()
                insert.reset()
            }
        }
        return try intentIDs()
    }

    static func intentID(_ operation: String, _ eventID: String, _ relay: String) -> String {
        String(Hex.encode(SHA256.hash(Array("\(operation)\u{1F}\(eventID)\u{1F}\(relay)".utf8))).prefix(32))
    }

    /// `url` as ``RelayURL`` checks it, or `invalid_relay_url` naming the call: a relay URL is
    /// never stored that could not be dialled safely.
    static func checkRelayURL(_ url: String, _ call: String) throws(SoftchatError) {
        // An app sends to the same few relays: the texts already found valid are remembered
        // (parsing one was an eighth of an enqueue's own time), at most `maxRememberedRelayURLs`.
        if validRelayURLs.withLock({ $0.contains(url) }) { return }
        do throws(SoftchatError) {
            _ = try RelayURL(url)
        } catch {
            throw .invalidRelayUrl("\(call): \(error.message)", operation: .relayPublish)
        }
        validRelayURLs.withLock { known in
            if known.count < maxRememberedRelayURLs { known.insert(url) }
        }
    }

    /// Relay URL texts ``checkRelayURL(_:_:)`` found valid (validity depends on the text
    /// alone, so one process-wide memo serves every account).
    static let validRelayURLs = Mutex<Set<String>>([])
    static let maxRememberedRelayURLs = 256
}
