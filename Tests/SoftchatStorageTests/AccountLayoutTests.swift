import CSQLite
import Foundation
import SoftchatCore
import SoftchatTestSupport
import Testing

@_spi(OldLayouts) @testable import SoftchatStorage

/// Schema 9's layout (``EventLayout``): events by arrival with a narrow id-key index, tags keyed
/// by row; the in-place rebuild of an older account; and the plan of every statement the account
/// prepares, so no read or write walks a whole table of events.
@Suite struct AccountLayoutTests {
    @Test func theIdKeyIsTheIdsFirstEightBytesInSwiftAndInSQL() throws {
        let t = try TestAccount()
        var rng = StorageRNG(seed: 9)
        var ids = ["0" + String(repeating: "f", count: 63), String(repeating: "f", count: 64), String(repeating: "0", count: 64)]
        ids += (0..<200).map { _ in Hex.encode((0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }) }
        for id in ids {
            let sql = try t.scalar("SELECT \(EventLayout.idKeySQL("'\(id)'"))")
            #expect(sql == EventLayout.idKey(id), "\(id)")
            #expect(UInt64(bitPattern: EventLayout.idKey(id)) == UInt64(id.prefix(16), radix: 16))
        }
    }

    @Test func twoIdsSharingAKeyAreTwoEventsEachFoundByItsOwnId() throws {
        let t = try TestAccount()
        let real = signed(tags: [["t", "x"]], content: "the real one")
        // A row whose id shares the real id's first 8 bytes (as one in 2^32 pairs will at 2^32
        // events), put there behind the account's back.
        let twinID = String(real.id.prefix(16)) + String(repeating: real.id.last == "0" ? "1" : "0", count: 48)
        try t.account.store.write("twin") { db in
            try db.statement(
                "INSERT INTO events (id_key, id, pubkey, created_at, kind, deleted, received_at, json) VALUES (?, ?, ?, ?, 1, 0, ?, ?)"
            ).bind(.int(EventLayout.idKey(real.id)), .text(twinID), .text(real.pubkey), .int(t0), .int(t0), .text(real.jsonText)).run()
        }
        #expect(try t.account.incoming.ingest([real], receivedAt: t0).receipt.insertedEventIDs == [real.id])
        #expect(try t.account.incoming.ingest([real], receivedAt: t0).receipt.duplicateEventIDs == [real.id])
        let byID = try t.account.events(matching: [RelayFilter.fromJSON("{\"ids\":[\"\(real.id)\"]}")], now: t0)
        #expect(byID.count == 1)
        // The twin row's JSON is the real event's: the check names the mismatch.
        #expect(try t.account.check(now: t0).problems.contains { $0.contains("fail id or signature") })
    }

    @Test func eventsAreStoredInArrivalOrderAndTagRowsCarryTheirRow() throws {
        let t = try TestAccount()
        let late = signed(tags: [["p", StorageKeys.bob.publicKeyHex]], content: "dated late, arrives first", createdAt: t0 + 100)
        let early = signed(tags: [["p", StorageKeys.bob.publicKeyHex]], content: "dated early, arrives second", createdAt: t0)
        try t.account.incoming.ingest([late], receivedAt: t0 + 200)
        try t.account.incoming.ingest([early], receivedAt: t0 + 201)
        let order = try t.account.store.write("order") { db in
            let s = try db.statement("SELECT e.id FROM event_tags d JOIN events e ON e.seq = d.event_seq ORDER BY e.seq")
            var out: [String] = []
            while try s.step() { out.append(s.text(0)) }
            return out
        }
        #expect(order == [late.id, early.id])
        #expect(try t.served([##"{"#p":["\##(StorageKeys.bob.publicKeyHex)"],"limit":5}"##]) == [late.id, early.id])
    }

    @Test func aChatHistoryBreaksTiesWithinItsLastSecondByLowestIdNotByArrival() throws {
        let t = try TestAccount()
        let p = StorageKeys.bob.publicKeyHex
        // Ten messages in one second, arriving in descending id order, and one older.
        let same = (0..<10).map { signed(kind: 14, tags: [["p", p]], content: "same second \($0)", createdAt: t0 + 5) }
        let older = signed(kind: 14, tags: [["p", p]], content: "older", createdAt: t0)
        for e in same.sorted(by: { $0.id > $1.id }) + [older] { try t.account.incoming.ingest([e], receivedAt: t0 + 10) }
        let lowest = same.map(\.id).sorted()
        for limit in [1, 3, 10, 11] {
            let want = Array((lowest + [older.id]).prefix(limit))
            #expect(try t.served([##"{"kinds":[14],"#p":["\##(p)"],"limit":\##(limit)}"##]) == want, "limit \(limit)")
        }
    }

    @Test func anOlderAccountIsRebuiltInPlaceAndAnswersAsAFreshOne() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let events = LayoutWorkload.events()
        let old = try SoftchatAccount.open(path: path, version: 8)
        for (i, batch) in events.chunked(17).enumerated() { try old.incoming.ingest(batch, receivedAt: t0 + Int64(i)) }
        let own = signed(StorageKeys.carol, kind: 1, tags: [["p", StorageKeys.alice.publicKeyHex]], content: "queued before the upgrade")
        let intents = try old.outgoing.enqueueSigned(operationID: "before", events: [own], relayURLs: [StorageKeys.relayA], now: t0)
        old.close()

        let fresh = try TestAccount()
        for (i, batch) in events.chunked(17).enumerated() { try fresh.account.incoming.ingest(batch, receivedAt: t0 + Int64(i)) }
        _ = try fresh.account.outgoing.enqueueSigned(operationID: "before", events: [own], relayURLs: [StorageKeys.relayA], now: t0)

        let migrated = try SoftchatAccount.open(path: path)
        defer { migrated.close() }
        #expect(try migrated.schemaVersion() == SoftchatAccount.latestSchemaVersion)
        let report = try migrated.check(now: t0)
        #expect(report.ok, "\(report.problems)")
        #expect(report.events == (try fresh.account.check(now: t0)).events)
        for json in LayoutWorkload.filters {
            let filter = try RelayFilter.fromJSON(json)
            #expect(try migrated.events(matching: [filter], now: t0 + 50) == fresh.account.events(matching: [filter], now: t0 + 50), "\(json)")
            #expect(try migrated.reconciliationItems(matching: filter) == fresh.account.reconciliationItems(matching: filter), "\(json)")
        }
        // Arrival order is kept: the rows are numbered by the batch each arrived in.
        let arrivals = try migrated.store.write("arrivals") { db in
            let s = try db.statement("SELECT received_at FROM events ORDER BY seq")
            var out: [Int64] = []
            while try s.step() { out.append(s.int64(0)) }
            return out
        }
        #expect(arrivals == arrivals.sorted())
        // Work queued before the upgrade is delivered after it.
        let claim = try #require(try migrated.delivery.claim(leaseID: "after", relayURL: StorageKeys.relayA, now: t0))
        #expect(claim.payloads.map(\.intentID) == intents)
        #expect(claim.payloads.first?.eventJSON == own.jsonText)
    }

    @Test func aRebuildThatWouldBreakAReferenceIsRefusedAndChangesNothing() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let old = try SoftchatAccount.open(path: path, version: 8)
        _ = try old.outgoing.enqueueSigned(operationID: "op", events: [signed(content: "queued")], relayURLs: [StorageKeys.relayA], now: t0)
        old.close()
        // An intent naming an operation that is not there (another program's edit).
        let raw = try SQLiteConnection(path: path)
        try raw.execute("PRAGMA foreign_keys = OFF; UPDATE publish_intents SET operation_id = 'gone'")
        let error = expectSoftchatError(.invalidPersistenceResult, mentioning: ["version 9", "publish_intents", "missing row"]) {
            _ = try SoftchatAccount.open(path: path)
        }
        #expect(error != nil)
        #expect(try raw.scalarInt("PRAGMA user_version") == 8)
        #expect(try raw.scalarInt("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'events_by_arrival'") == 0)
    }

    @Test func theWALIsCheckpointedAtThePolicysSizeAndCutBackAfter() throws {
        let t = try TestAccount(policy: AccountPolicy(checkpointMebibytes: 8))
        let settings = try t.account.store.write("pragmas") { db in
            (try db.scalarInt("PRAGMA page_size"), try db.scalarInt("PRAGMA wal_autocheckpoint"), try db.scalarInt("PRAGMA journal_size_limit"))
        }
        #expect(settings.1 == 8 * 1_048_576 / settings.0, "8 MiB of pages")
        #expect(settings.2 == 16 * 1_048_576)
        let fallback = try TestAccount(policy: AccountPolicy(checkpointMebibytes: 0))
        #expect(try fallback.scalar("PRAGMA wal_autocheckpoint") == 1_048_576 / settings.0, "at least 1 MiB")
    }

    @Test func noStatementTheAccountPreparesWalksAllEventsOrAllTags() throws {
        let t = try TestAccount()
        try LayoutWorkload.run(t.account)
        let (writer, reader) = t.account.store.preparedSQL()
        #expect(writer.count + reader.count > 30, "the workload prepares the account's statements")
        var offenders: [String] = []
        for sql in Set(writer + reader) where sql.contains("events") || sql.contains("event_tags") {
            let plan = try t.plan(sql)
            // A full scan of the events or their tags, or a sort of a chat's history.
            let walks = plan.filter { $0.range(of: #"^SCAN (events|event_tags|e|d|t|o|k)\b"#, options: .regularExpression) != nil }
            let sorts = sql.contains("ORDER BY d.created_at DESC") && plan.contains { $0.contains("TEMP B-TREE") }
            if !walks.isEmpty || sorts { offenders.append("\(sql)\n    \(plan.joined(separator: "\n    "))") }
        }
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
    }

    /// The class of the enqueue's `MAX(sequence)`, which walked the whole outbox index once per
    /// message (9.5 ms at 200,000 intents), and of the claim, which walked every intent the relay
    /// ever had and every lease: the work of each statement of a message's delivery (SQLite's
    /// virtual-machine steps, counted exactly) is the same with 1,000 messages delivered before
    /// it as with 20; so is each statement of an incoming message's ingest and of the chat
    /// screen's reads (one of them a filter with no limit of its own, bounded by the read's
    /// limit: it read every match, 36 ms for 6,000 mentions at a million).
    @Test func noStatementOfAMessagesDeliveryDoesMoreWorkAsTheOutboxGrows() throws {
        let t = try TestAccount()
        func deliver(_ i: Int) throws {
            let own = signed(tags: [["p", LayoutWorkload.bob]], content: "m\(i)", createdAt: t0 + Int64(i))
            let ids = try t.account.outgoing.enqueueSigned(operationID: "op\(i)", events: [own], relayURLs: [StorageKeys.relayA], now: t0)
            let claim = try #require(try t.account.delivery.claim(leaseID: "l\(i)", relayURL: StorageKeys.relayA, now: t0))
            try t.account.delivery.markSocketWritten(claim.claim, intentIDs: ids)
            try t.account.delivery.applyResults(claim.claim, results: [DeliveryResult(intentID: ids[0], decision: decision(.accepted))])
            try t.account.delivery.release(claim.claim)
            // And what arrives meanwhile, and the chat screen's reads.
            let incoming = signed(StorageKeys.carol, tags: [["p", LayoutWorkload.bob]], content: "in\(i)", createdAt: t0 + Int64(i))
            try t.account.incoming.ingest([incoming], receivedAt: t0)
            _ = try t.account.queryEvents(filtersJSON: [LayoutWorkload.filters[0]], limit: 20, now: t0)
            // A filter with no limit of its own, read with the read's limit (a person's mentions).
            _ = try t.account.events(matching: [try RelayFilter.fromJSON(LayoutWorkload.filters[1])], limit: 20, now: t0)
            _ = try t.account.conversations(kind: 1, tag: "p", limit: 20, now: t0)
        }
        func stepsOfOneDelivery(_ i: Int) throws -> [String: Int] {
            _ = t.account.store.vmSteps(reset: true)
            try deliver(i)
            return t.account.store.vmSteps(reset: true).filter { $0.value > 0 }
        }
        for i in 0..<20 { try deliver(i) }
        let small = try stepsOfOneDelivery(20)
        for i in 21..<1_021 { try deliver(i) }
        let large = try stepsOfOneDelivery(1_021)
        #expect(small.count > 10, "the delivery runs its statements")
        let grown = large.filter { sql, steps in steps > 2 * (small[sql] ?? 0) + 50 }
            .map { "\($0.value) steps (\(small[$0.key] ?? 0) with 20 delivered): \($0.key)" }
        #expect(grown.isEmpty, "\(grown.joined(separator: "\n"))")
    }
}

/// Events and filters covering every kind class and index the account uses.
enum LayoutWorkload {
    static let bob = StorageKeys.bob.publicKeyHex

    static func events() -> [VerifiedEvent] {
        var out: [VerifiedEvent] = []
        for i in 0..<120 {
            var tags: [[String]] = [["t", "topic\(i % 3)"]]
            if i % 2 == 0 { tags.append(["p", bob]) }
            if let last = out.last, i % 5 == 0 { tags.append(["e", last.id]) }
            out.append(
                signed(
                    i % 4 == 0 ? StorageKeys.carol : StorageKeys.alice, kind: i % 7 == 0 ? 14 : 1, tags: tags, content: "m\(i)",
                    createdAt: t0 + Int64(i / 3)))
        }
        out.append(signed(kind: 0, content: "profile v1", createdAt: t0))
        out.append(signed(kind: 0, content: "profile v2", createdAt: t0 + 1))
        out.append(signed(kind: 30_000, tags: [["d", "list"], ["p", bob]], content: "list v1", createdAt: t0))
        out.append(signed(kind: 30_000, tags: [["d", "list"], ["p", bob]], content: "list v2", createdAt: t0 + 2))
        out.append(
            signed(kind: 5, tags: [["e", out[3].id], ["a", "30000:\(StorageKeys.alice.publicKeyHex):list"]], content: "", createdAt: t0 + 3))
        out.append(signed(tags: [["expiration", "\(t0 + 20)"], ["p", bob]], content: "expires", createdAt: t0))
        return out
    }

    static let filters: [String] = [
        ##"{"kinds":[1],"#p":["\##(bob)"],"limit":10}"##,
        ##"{"kinds":[1,14],"#p":["\##(bob)"]}"##,
        ##"{"#t":["topic0","topic2"]}"##,
        ##"{"#t":["topic1"],"#p":["\##(bob)"],"limit":7}"##,
        ##"{"authors":["\##(StorageKeys.carol.publicKeyHex)"],"kinds":[1]}"##,
        ##"{"kinds":[0,30000]}"##,
        ##"{"kinds":[1],"since":\##(t0 + 10),"until":\##(t0 + 30)}"##,
        "{}",
    ]

    /// Ingests, publishes, delivers and reads as an app does, so every statement is prepared.
    static func run(_ account: SoftchatAccount) throws {
        let events = events()
        for (i, batch) in events.chunked(17).enumerated() { try account.incoming.ingest(batch, receivedAt: t0 + Int64(i)) }
        let own = signed(StorageKeys.carol, tags: [["p", bob]], content: "own")
        let ids = try account.outgoing.enqueueSigned(operationID: "op", events: [own], relayURLs: [StorageKeys.relayA], now: t0)
        let claim = try #require(try account.delivery.claim(leaseID: "l", relayURL: StorageKeys.relayA, now: t0))
        try account.delivery.markSocketWritten(claim.claim, intentIDs: ids)
        try account.delivery.applyResults(claim.claim, results: [DeliveryResult(intentID: ids[0], decision: decision(.accepted))])
        // Every read shape but "everything" ({}), which reads everything by definition.
        let ids2 = [events[5].id, events[9].id]
        for json in filters.dropLast() + [#"{"ids":["\#(ids2[0])","\#(ids2[1])"]}"#] {
            let filter = try RelayFilter.fromJSON(json)
            _ = try account.events(matching: [filter], now: t0)
            _ = try account.reconciliationItems(matching: filter)
        }
        let page = try account.queryEvents(filtersJSON: [filters[0]], limit: 3, now: t0)
        _ = try account.queryEvents(filtersJSON: [filters[0]], limit: 3, now: t0, before: page.next)
    }
}

extension Array {
    fileprivate func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}

/// Reconciliation items kept between syncs: read back while no event has been stored since,
/// read again from the indexes after any store, checked by `check`, never trusted when damaged.
@Suite struct ReconciliationCacheTests {
    static let topic = ##"{"kinds":[1],"#t":["chat"]}"##

    static func fill(_ account: SoftchatAccount, count: Int) throws -> [VerifiedEvent] {
        let events = (0..<count).map { signed(tags: [["t", "chat"]], content: "m\($0)", createdAt: t0 + Int64($0 % 97)) }
        for start in stride(from: 0, to: events.count, by: 256) {
            try account.incoming.ingest(Array(events[start..<min(start + 256, events.count)]), receivedAt: t0)
        }
        return events
    }

    @Test func anUnchangedSetIsReadBackAndEventsStoredSinceAreAddedToIt() throws {
        let t = try TestAccount()
        let events = try Self.fill(t.account, count: ReconciliationCache.minimumItems)
        let filter = try RelayFilter.fromJSON(Self.topic)
        let first = try t.account.reconciliationItems(matching: filter)
        #expect(first.count == events.count)
        #expect(try t.scalar("SELECT COUNT(*) FROM negentropy_items") == 1)
        // Behind the account's back the tag rows go: the kept copy answers while the mark holds.
        try t.account.store.write("drop tags") { db in try db.execute("DELETE FROM event_tags") }
        #expect(try t.account.reconciliationItems(matching: filter) == first)
        // Stores move the mark: the kept copy answers with the matches stored since added (one
        // of the two, older than every kept item, so it sorts first), and is kept at the new mark.
        let match = signed(tags: [["t", "chat"]], content: "new", createdAt: t0 - 5)
        try t.account.incoming.ingest([signed(content: "unrelated"), match], receivedAt: t0)
        let added = try t.account.reconciliationItems(matching: filter)
        #expect(added == [try #require(NegentropyItem(createdAt: match.createdAt, idHex: match.id))] + first)
        #expect(try t.scalar("SELECT high_water FROM negentropy_items") == t.scalar("SELECT MAX(seq) FROM events"))
        #expect(try t.account.reconciliationItems(matching: filter) == added)
        // More stored since than a quarter of the set (at least minimumItems): the indexes
        // answer, which lost the dropped tag rows, so only the events stored after the drop.
        let many = (0...ReconciliationCache.minimumItems).map { signed(content: "other \($0)", createdAt: t0 + 1_000 + Int64($0)) }
        try t.account.incoming.ingest(many, receivedAt: t0)
        #expect(try t.account.reconciliationItems(matching: filter) == [try #require(NegentropyItem(createdAt: match.createdAt, idHex: match.id))])
    }

    /// Stores (new matches, others, replacements that delete rows) between reads: every read,
    /// served from a kept set or not, is the set the indexes give at that moment.
    @Test func everyReadBetweenStoresIsTheSetTheIndexesGive() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: ReconciliationCache.minimumItems + 200)
        let filters = try [Self.topic, #"{"kinds":[0,1]}"#, "{\"kinds\":[1],\"#t\":[\"chat\"],\"since\":\(t0 + 10)}"].map(RelayFilter.fromJSON)
        var rng = StorageRNG(seed: 34)
        var served = 0
        for round in 0..<40 {
            var batch: [VerifiedEvent] = []
            for i in 0..<rng.below(30) {
                let at = t0 + Int64(rng.below(200))
                switch rng.below(12) {
                case 0: batch.append(signed(rng.pick([StorageKeys.alice, StorageKeys.bob]), kind: 0, content: "p\(round).\(i)", createdAt: at))
                case 1...5: batch.append(signed(tags: [["t", "chat"]], content: "m\(round).\(i)", createdAt: at))
                case 6:
                    // Past the tag index's bound: stored whole, found through the overflow marker.
                    let many = (0...TagIndex.maxIndexedTagsPerEvent).map { ["x", "\($0)"] } + [["t", "chat"]]
                    batch.append(signed(tags: many, content: "big\(round).\(i)", createdAt: at))
                default: batch.append(signed(content: "o\(round).\(i)", createdAt: at))
                }
            }
            try t.account.incoming.ingest(batch, receivedAt: t0)
            let kept = try t.scalar("SELECT COUNT(*) FROM negentropy_items WHERE high_water < (SELECT MAX(seq) FROM events)")
            let got = try t.account.reconciliationItems(matching: filters)
            let want = try t.account.store.read("fresh") { db in try filters.map { try SoftchatAccount.reconciliationItems(db, $0) } }
            #expect(got == want, "round \(round)")
            if kept > 0 { served += 1 }
        }
        #expect(served > 20, "kept sets were added to in \(served) of 40 rounds")
    }

    /// A set read before a store and kept after it would be wrong at its old mark (the store may
    /// have deleted one of its events): it is not kept. Inside a write group the read sees the
    /// last commit while the keep would join the group, after its replacement.
    @Test func aSetReadBeforeAStoreIsNotKeptAtItsOldMark() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: ReconciliationCache.minimumItems)
        let profile = signed(kind: 0, content: "v1", createdAt: t0)
        try t.account.incoming.ingest([profile], receivedAt: t0)
        let all = try RelayFilter.fromJSON(#"{"kinds":[0,1]}"#)
        let newer = signed(kind: 0, content: "v2", createdAt: t0 + 1)
        let inside = try t.account.writeGroup("replace, then read") { () -> [NegentropyItem] in
            _ = try? t.account.incoming.ingest([newer], receivedAt: t0 + 1)
            return (try? t.account.reconciliationItems(matching: all)) ?? []
        }
        #expect(inside.contains { $0 == NegentropyItem(createdAt: profile.createdAt, idHex: profile.id) }, "read at the last commit")
        #expect(try t.scalar("SELECT COUNT(*) FROM negentropy_items") == 0)
        let after = try t.account.reconciliationItems(matching: all)
        #expect(!after.contains { $0 == NegentropyItem(createdAt: profile.createdAt, idHex: profile.id) })
        #expect(after.contains { $0 == NegentropyItem(createdAt: newer.createdAt, idHex: newer.id) })
        #expect(try t.account.check(now: t0).ok)
    }

    /// The events stored since a kept mark are read by `seq`, and each one's tags through the
    /// tag rows' `event_seq` index, never by walking a tag value's whole range (SQLite's own
    /// choice, which cost seconds at a chat's size).
    @Test func theEventsStoredSinceAKeptMarkAreReadByRowAndTheirTagsByTheirRow() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: ReconciliationCache.minimumItems)
        let topic = try RelayFilter.fromJSON(Self.topic)
        _ = try t.account.reconciliationItems(matching: topic)
        try t.account.incoming.ingest([signed(tags: [["t", "chat"]], content: "late")], receivedAt: t0)
        #expect(try t.account.reconciliationItems(matching: topic).count == ReconciliationCache.minimumItems + 1)
        let incremental = t.account.store.preparedSQL().reader.filter { $0.contains("NOT INDEXED WHERE e.seq > ?") }
        #expect(!incremental.isEmpty, "the read added to the kept set")
        for sql in incremental {
            let plan = try t.plan(sql)
            #expect(plan.contains { $0.contains("INTEGER PRIMARY KEY") }, "\(plan)")
            #expect(plan.allSatisfy { !$0.contains("event_tags_time") }, "\(plan)")
            #expect(plan.contains { $0.contains("event_tags_event") }, "\(plan)")
        }
    }

    @Test func aRowThatGoesForgetsEveryKeptSet() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: ReconciliationCache.minimumItems)
        let profile = signed(kind: 0, content: "v1", createdAt: t0)
        try t.account.incoming.ingest([profile], receivedAt: t0)
        let all = try RelayFilter.fromJSON(#"{"kinds":[0,1]}"#)
        let topic = try RelayFilter.fromJSON(Self.topic)
        _ = try t.account.reconciliationItems(matching: [all, topic])
        #expect(try t.scalar("SELECT COUNT(*) FROM negentropy_items") == 2)
        // Kept sets added to (a new match, stored after the sets were kept) are what the
        // indexes give, and check says so.
        try t.account.incoming.ingest([signed(tags: [["t", "chat"]], content: "late", createdAt: t0 + 50)], receivedAt: t0)
        #expect(try t.account.check(now: t0).ok)
        let grown = try t.account.reconciliationItems(matching: [all, topic])
        #expect(grown[1].count == ReconciliationCache.minimumItems + 1)
        #expect(try t.account.check(now: t0).ok)
        // The profile's row goes: both kept sets are forgotten with it, the one that held it and
        // the one that did not, in the same transaction.
        try t.account.incoming.ingest([signed(kind: 0, content: "v2", createdAt: t0 + 1)], receivedAt: t0 + 1)
        #expect(try t.scalar("SELECT COUNT(*) FROM negentropy_items") == 0)
        #expect(try !t.account.reconciliationItems(matching: all).contains { $0 == NegentropyItem(createdAt: profile.createdAt, idHex: profile.id) })
    }

    @Test func aReplacedNewestEventMovesTheMarkThoughItsRowIsGone() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: ReconciliationCache.minimumItems)
        let profile = signed(kind: 0, content: "v1", createdAt: t0)
        try t.account.incoming.ingest([profile], receivedAt: t0)
        let all = try RelayFilter.fromJSON(#"{"kinds":[0,1]}"#)
        let before = try t.account.reconciliationItems(matching: all)
        #expect(before.contains { $0 == NegentropyItem(createdAt: profile.createdAt, idHex: profile.id) })
        // The newest row is deleted and one inserted: a reused seq would look like no change.
        let newer = signed(kind: 0, content: "v2", createdAt: t0 + 1)
        try t.account.incoming.ingest([newer], receivedAt: t0 + 1)
        let after = try t.account.reconciliationItems(matching: all)
        #expect(after.count == before.count)
        #expect(after.contains { $0 == NegentropyItem(createdAt: newer.createdAt, idHex: newer.id) })
        #expect(!after.contains { $0 == NegentropyItem(createdAt: profile.createdAt, idHex: profile.id) })
    }

    @Test func aSmallSetIsNotKeptAndADamagedCopyIsNeverServedAndCheckNamesIt() throws {
        let t = try TestAccount()
        _ = try Self.fill(t.account, count: 10)
        let filter = try RelayFilter.fromJSON(Self.topic)
        _ = try t.account.reconciliationItems(matching: filter)
        #expect(try t.scalar("SELECT COUNT(*) FROM negentropy_items") == 0)

        let big = try TestAccount()
        let events = try Self.fill(big.account, count: ReconciliationCache.minimumItems)
        let right = try big.account.reconciliationItems(matching: filter)
        #expect(right.count == events.count)
        // A copy cut short (not whole items) is a miss: the indexes answer.
        try big.account.store.write("cut") { db in try db.execute("UPDATE negentropy_items SET items = substr(items, 1, 41)") }
        #expect(try big.account.reconciliationItems(matching: filter) == right)
        // A whole-item copy that is wrong is what check finds.
        try big.account.store.write("forge") { db in try db.execute("UPDATE negentropy_items SET items = substr(items, 41)") }
        #expect(try big.account.check(now: t0).problems.contains { $0.contains("kept reconciliation items") })
    }
}
