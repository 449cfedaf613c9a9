import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// The storage property tests' seeded generator (the same cases on every run).
typealias StorageRNG = SplitMix64

/// Deterministic identities: the secret key is the SHA-256 of a label.
enum StorageKeys {
    static func identity(_ label: String) -> SoftchatIdentity {
        try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat storage test \(label)".utf8))))
    }
    static let alice = identity("alice")
    static let bob = identity("bob")
    static let carol = identity("carol")
    static let relayA = "wss://a.relay.example"
    static let relayB = "wss://b.relay.example"
}

/// The base time every storage test counts from.
let t0: Int64 = 1_700_000_000

/// A signed event (fresh signature; the id depends only on the fields).
func signed(
    _ identity: SoftchatIdentity = StorageKeys.alice, kind: Int = 1, tags: [[String]] = [],
    content: String = "hello", createdAt: Int64 = t0
) -> VerifiedEvent {
    try! identity.sign(UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content))
}

/// A fresh account in its own temporary directory, kept alive as long as the value is.
final class TestAccount {
    let directory = TemporaryDirectory()
    let account: SoftchatAccount
    var path: String { account.path }

    init(policy: AccountPolicy = AccountPolicy()) throws {
        account = try SoftchatAccount.open(path: directory.file("account.sqlite"), policy: policy)
    }

    deinit { account.close() }

    /// Ids of everything served by a filter list, newest first.
    func served(_ filtersJSON: [String] = ["{}"], limit: Int? = nil, now: Int64 = t0) throws -> [String] {
        try account.events(matching: filtersJSON.map { try RelayFilter.fromJSON($0) }, limit: limit, now: now).map(\.id)
    }

    /// One integer from the database through the writer connection (sees the latest commit).
    func scalar(_ sql: String) throws -> Int64 {
        try account.store.write("test scalar") { db in try db.scalarInt(sql) }
    }

    /// The detail lines of SQLite's `EXPLAIN QUERY PLAN` for `sql` (parameters unbound).
    func plan(_ sql: String) throws -> [String] {
        try account.store.write("plan") { db in
            let s = try db.statement("EXPLAIN QUERY PLAN " + sql)
            var out: [String] = []
            while try s.step() { out.append(s.text(3)) }
            return out
        }
    }

    /// Row counts of every account table, for "nothing changed" checks.
    func tableCounts() throws -> [String: Int64] {
        var out: [String: Int64] = [:]
        for table in [
            "events", "event_tags", "quarantine", "deletions", "ingest_receipts", "publish_operations",
            "publish_intents", "delivery_leases", "sync_cursors", "subscription_policy",
        ] {
            out[table] = try scalar("SELECT COUNT(*) FROM \(table)")
        }
        return out
    }

    /// A fingerprint of every intent and lease row, so a refused call can be shown to change nothing.
    func deliverySnapshot() throws -> [String] {
        try account.store.write("test snapshot") { db in
            var rows: [String] = []
            let intents = try db.statement(
                "SELECT intent_id, state, IFNULL(category, ''), attempts, IFNULL(lease_id, ''), updated_at FROM publish_intents ORDER BY intent_id")
            while try intents.step() {
                rows.append("\(intents.text(0)) \(intents.text(1)) \(intents.text(2)) \(intents.int64(3)) \(intents.text(4)) \(intents.int64(5))")
            }
            let leases = try db.statement("SELECT lease_id, relay_url, expires_at, released FROM delivery_leases ORDER BY lease_id")
            while try leases.step() {
                rows.append("lease \(leases.text(0)) \(leases.text(1)) \(leases.int64(2)) \(leases.int64(3))")
            }
            return rows
        }
    }

    /// (state, category, attempts) of one intent.
    func intent(_ id: String) throws -> (state: String, category: String?, attempts: Int64)? {
        try account.store.write("test intent") { db in
            let s = try db.statement("SELECT state, category, attempts FROM publish_intents WHERE intent_id = ?").bind(.text(id))
            guard try s.step() else { return nil }
            return (s.text(0), s.optionalText(1), s.int64(2))
        }
    }
}

/// A relay decision for a claimed intent.
func decision(_ state: DeliveryState, for eventID: String = "") -> DeliveryDecision {
    switch state {
    case .accepted: DeliveryDecision(eventID: eventID, state: .accepted, category: .accepted, message: "")
    case .rejected: DeliveryDecision(eventID: eventID, state: .rejected, category: .invalid, message: "invalid: test")
    case .retryable: DeliveryDecision(eventID: eventID, state: .retryable, category: .rateLimited, message: "rate-limited: test")
    case .pending, .inFlight: DeliveryDecision(eventID: eventID, state: state, category: .unknown, message: "")
    }
}
