public import SoftchatCore

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
        guard !operationID.isEmpty else { throw .invalidRelayBatch("enqueueSigned: operationId must not be empty", operation: .relayPublish) }
        try RelayPublishContract.maxPublishBatchEvents.check(events.count, "enqueueSigned events")
        guard !relayURLs.isEmpty else { throw .invalidRelayBatch("enqueueSigned: relayUrls must not be empty", operation: .relayPublish) }
        guard Set(events.map(\.id)).count == events.count else {
            throw .invalidRelayBatch("enqueueSigned: events must have unique ids", operation: .relayPublish)
        }
        guard Set(relayURLs).count == relayURLs.count else {
            throw .invalidRelayBatch("enqueueSigned: relayUrls must be unique", operation: .relayPublish)
        }
        for url in relayURLs { try Self.checkRelayURL(url, "enqueueSigned") }
        let fingerprint = Hex.encode(SHA256.hash(Array((events.map(\.id).joined(separator: ",") + "|" + relayURLs.joined(separator: ",")).utf8)))
        let ids = try store.write("enqueueSigned") { db in
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
                return try intentIDs()
            }
            try db.statement("INSERT INTO publish_operations (operation_id, fingerprint, created_at) VALUES (?, ?, ?)")
                .bind(.text(operationID), .text(fingerprint), .int(now)).run()
            var writer = EventWriter(db: db, receivedAt: now, tagTimes: store.version >= 5)
            for e in events {
                if !(try db.statement("SELECT 1 FROM events WHERE id = ?").bind(.text(e.id)).step()) {
                    try writer.add(e)
                }
            }
            // Our own replaceable event may lose to a newer stored one — or to a newer version
            // later in this same batch, which removes its row; the intent still needs its row.
            for e in events {
                if !(try db.statement("SELECT 1 FROM events WHERE id = ?").bind(.text(e.id)).step()) {
                    try db.statement(
                        "INSERT INTO events (id, pubkey, created_at, kind, d_tag, expires_at, deleted, received_at, json) VALUES (?, ?, ?, ?, NULL, NULL, 1, ?, ?)"
                    )
                    .bind(.text(e.id), .text(e.pubkey), .int(e.createdAt), .int(Int64(e.kind)), .int(now), .text(e.jsonText)).run()
                }
            }
            var sequence = try db.scalarInt("SELECT COALESCE(MAX(sequence), 0) FROM publish_intents")
            let insert = try db.statement(
                "INSERT OR IGNORE INTO publish_intents (intent_id, operation_id, event_id, relay_url, state, attempts, sequence, updated_at) VALUES (?, ?, ?, ?, \(DeliveryState.pending.sql), 0, ?, ?)"
            )
            for e in events {
                for relay in relayURLs {
                    sequence += 1
                    try insert.bind(
                        .text(Self.intentID(operationID, e.id, relay)), .text(operationID), .text(e.id), .text(relay),
                        .int(sequence), .int(now)
                    ).run()
                    insert.reset()
                }
            }
            return try intentIDs()
        }
        store.notifyOutgoing()
        return ids
    }

    static func intentID(_ operation: String, _ eventID: String, _ relay: String) -> String {
        String(Hex.encode(SHA256.hash(Array("\(operation)\u{1F}\(eventID)\u{1F}\(relay)".utf8))).prefix(32))
    }

    /// `url` as ``RelayURL`` checks it, or `invalid_relay_url` naming the call: a relay URL is
    /// never stored that could not be dialled safely.
    static func checkRelayURL(_ url: String, _ call: String) throws(SoftchatError) {
        do throws(SoftchatError) {
            _ = try RelayURL(url)
        } catch {
            throw .invalidRelayUrl("\(call): \(error.message)", operation: .relayPublish)
        }
    }
}
