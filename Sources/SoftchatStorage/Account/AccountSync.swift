public import SoftchatCore
import SoftchatJSON

/// A subscription the account keeps across restarts: its filters, and the relays it applies to.
public struct SubscriptionPolicyEntry: Sendable, Hashable {
    /// The subscription's id, unique in the policy.
    public let subscriptionID: String
    /// The subscription's NIP-01 filters, as JSON text.
    public let filtersJSON: [String]
    /// nil: every relay.
    public let relayURL: String?
}

/// The one writer of the account's subscription policy rows, used by ``SoftchatAccount/setSubscription(id:filtersJSON:relayURL:)``
/// and by the private-message subscriptions ``AccountMessages`` keeps.
enum SubscriptionPolicyStore {
    /// Records (or replaces) subscription `id`.
    ///
    /// - Parameters:
    ///   - db: The connection, inside a write transaction.
    ///   - id: The subscription's id; an entry with this id is replaced.
    ///   - filtersJSON: A JSON array of filter texts, already validated by the caller.
    ///   - relayURL: The one relay the subscription applies to; nil for every relay.
    static func write(_ db: SQLiteConnection, id: String, filtersJSON: String, relayURL: String?) throws(SQLiteError) {
        try db.statement(
            "INSERT INTO subscription_policy (subscription_id, filters_json, relay_url) VALUES (?, ?, ?) ON CONFLICT (subscription_id) DO UPDATE SET filters_json = excluded.filters_json, relay_url = excluded.relay_url"
        )
        .bind(.text(id), .text(filtersJSON), .optional(relayURL)).run()
    }
}

extension SoftchatAccount {
    /// Records (or replaces) a subscription in the account's policy, so a restarted process
    /// resubscribes without the host remembering it. The filters are validated first.
    ///
    /// - Parameters:
    ///   - id: The subscription's id; an entry with this id is replaced.
    ///   - filtersJSON: 1 to 64 NIP-01 filters as JSON text.
    ///   - relayURL: The one relay the subscription applies to; nil for every relay.
    /// - Throws: `SoftchatError` with code `invalid_relay_filter` when a filter is invalid or there
    ///   are none or more than 64, `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func setSubscription(id: String, filtersJSON: [String], relayURL: String? = nil) throws(SoftchatError) {
        _ = try SessionFilters.parse(filtersJSON)
        if let relayURL { try AccountOutgoing.checkRelayURL(relayURL, "setSubscription") }
        let encoded = JSONValue.array(filtersJSON.map(JSONValue.string)).jsonText
        try store.write("setSubscription") { db in
            try SubscriptionPolicyStore.write(db, id: id, filtersJSON: encoded, relayURL: relayURL)
        }
    }

    /// Removes a subscription from the account's policy; its sync cursors and states are kept.
    /// An unknown id changes nothing.
    ///
    /// - Parameter id: The subscription's id.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func removeSubscription(id: String) throws(SoftchatError) {
        try store.write("removeSubscription") { db in
            try db.statement("DELETE FROM subscription_policy WHERE subscription_id = ?").bind(.text(id)).run()
        }
    }

    /// The policy's subscriptions that apply to `relayURL` (all of them when nil), by id.
    ///
    /// - Parameter relayURL: A relay URL, or nil for every subscription.
    /// - Returns: The entries for `relayURL` and those for every relay, sorted by id.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func subscriptions(for relayURL: String? = nil) throws(SoftchatError) -> [SubscriptionPolicyEntry] {
        try store.read("subscriptions") { db in
            let s = try db.statement(
                "SELECT subscription_id, filters_json, relay_url FROM subscription_policy WHERE ? IS NULL OR relay_url IS NULL OR relay_url = ? ORDER BY subscription_id"
            )
            .bind(.optional(relayURL), .optional(relayURL))
            var out: [SubscriptionPolicyEntry] = []
            while try s.step() {
                let filters = (try? JSONReader().parse(s.text(1)))?.arrayValue?.compactMap(\.stringValue) ?? []
                out.append(SubscriptionPolicyEntry(subscriptionID: s.text(0), filtersJSON: filters, relayURL: s.optionalText(2)))
            }
            return out
        }
    }

    /// The newest created_at synced for (relay, subscription), or nil.
    ///
    /// - Parameters:
    ///   - relayURL: The relay.
    ///   - subscriptionID: The subscription's id.
    /// - Returns: The cursor, in Unix seconds; nil when that pair was never synced.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func syncCursor(relayURL: String, subscriptionID: String) throws(SoftchatError) -> Int64? {
        try store.read("syncCursor") { db in
            let s = try db.statement("SELECT newest_created_at FROM sync_cursors WHERE relay_url = ? AND subscription_id = ?")
                .bind(.text(relayURL), .text(subscriptionID))
            return try s.step() ? s.int64(0) : nil
        }
    }

    /// Moves the cursor forward (never back) after events up to `createdAt` were committed.
    ///
    /// - Parameters:
    ///   - relayURL: The relay.
    ///   - subscriptionID: The subscription's id.
    ///   - createdAt: The newest `created_at` now synced; an older value leaves the cursor as it is.
    ///   - now: The current Unix time, in seconds, recorded as the cursor's update time.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func advanceSyncCursor(relayURL: String, subscriptionID: String, createdAt: Int64, now: Int64) throws(SoftchatError) {
        try store.write("advanceSyncCursor") { db in
            try db.statement(
                "INSERT INTO sync_cursors (relay_url, subscription_id, newest_created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (relay_url, subscription_id) DO UPDATE SET newest_created_at = MAX(newest_created_at, excluded.newest_created_at), updated_at = excluded.updated_at"
            )
            .bind(.text(relayURL), .text(subscriptionID), .int(createdAt), .int(now)).run()
        }
    }
}

/// A stored sync state and the filters it was written for.
public struct StoredSyncState: Sendable, Hashable {
    /// The filters the state was written for, as JSON text.
    public let filtersJSON: [String]
    /// The state itself: a `SubscriptionSync` state's JSON text.
    public let stateJSON: String
}

extension SoftchatAccount {
    /// The durable sync state of (relay, subscription), or nil.
    ///
    /// - Parameters:
    ///   - relayURL: The relay.
    ///   - subscriptionID: The subscription's id.
    /// - Returns: The state and the filters it was written for; nil when none was stored.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func syncState(relayURL: String, subscriptionID: String) throws(SoftchatError) -> StoredSyncState? {
        try store.read("syncState") { db in
            let s = try db.statement("SELECT filters_json, state_json FROM sync_states WHERE relay_url = ? AND subscription_id = ?")
                .bind(.text(relayURL), .text(subscriptionID))
            guard try s.step() else { return nil }
            let filters = (try? JSONReader().parse(s.text(0)))?.arrayValue?.compactMap(\.stringValue) ?? []
            return StoredSyncState(filtersJSON: filters, stateJSON: s.text(1))
        }
    }

    /// Writes sync states alone (a page that ended with nothing to store), in one transaction.
    ///
    /// - Parameters:
    ///   - records: The states, each replacing the state of its (relay, subscription); one whose
    ///     `cursor` is set also moves that cursor forward (never back).
    ///   - now: The current Unix time, in seconds, recorded as the update time.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails (no state is
    ///   written), or `invalid_persistence_result` once the account is closed.
    public func saveSyncStates(_ records: [SyncStateRecord], now: Int64) throws(SoftchatError) {
        try store.write("saveSyncStates") { db in
            for record in records { try SyncStateStore.write(db, record, now: now) }
        }
    }
}

enum SyncStateStore {
    static func write(_ db: SQLiteConnection, _ record: SyncStateRecord, now: Int64) throws {
        let filters = JSONValue.array(record.filtersJSON.map(JSONValue.string)).jsonText
        try db.statement(
            "INSERT INTO sync_states (relay_url, subscription_id, filters_json, state_json, updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (relay_url, subscription_id) DO UPDATE SET filters_json = excluded.filters_json, state_json = excluded.state_json, updated_at = excluded.updated_at"
        )
        .bind(.text(record.relayURL), .text(record.subscriptionID), .text(filters), .text(record.stateJSON), .int(now)).run()
        if let cursor = record.cursor {
            try db.statement(
                "INSERT INTO sync_cursors (relay_url, subscription_id, newest_created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (relay_url, subscription_id) DO UPDATE SET newest_created_at = MAX(newest_created_at, excluded.newest_created_at), updated_at = excluded.updated_at"
            )
            .bind(.text(record.relayURL), .text(record.subscriptionID), .int(cursor), .int(now)).run()
        }
    }
}

/// Filter validation shared with the session's rules (1–64 filters, each a valid NIP-01 filter).
enum SessionFilters {
    static func parse(_ filtersJSON: [String]) throws(SoftchatError) -> [RelayFilter] {
        guard !filtersJSON.isEmpty else { throw .invalidRelayFilter("at least one filter is needed") }
        try RelayWireContract.maxFilters.check(filtersJSON.count, "subscription")
        var out: [RelayFilter] = []
        for (i, text) in filtersJSON.enumerated() {
            let value: JSONValue
            do {
                value = try JSONReader().parse(text)
            } catch {
                throw .invalidRelayFilter("filter \(i) is not valid JSON: \(error)")
            }
            out.append(try RelayFilter(json: value, index: i))
        }
        return out
    }
}
