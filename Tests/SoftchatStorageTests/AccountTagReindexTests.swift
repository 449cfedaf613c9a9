import Foundation
import SoftchatCore
import Testing

@_spi(OldLayouts) @testable import SoftchatStorage

/// Builds before schema 11 deduplicated an event's tag values by Swift string equality, so of two
/// values that differ only in Unicode form ("é" composed and decomposed) the second was never
/// indexed and never counted in its conversation. Schema 11 reads those events' tags again, and
/// `account check` compares every event's tag rows with its tags.
@Suite struct AccountTagReindexTests {
    static let composed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    /// What a build before schema 11 left for `event`: no tag row and no conversation count for
    /// the decomposed value.
    static func indexShort(_ account: SoftchatAccount) throws {
        try account.store.write("index short") { db in
            try db.statement("DELETE FROM event_tags WHERE value = ?").bind(.text(decomposed)).run()
            try db.statement("DELETE FROM conversations WHERE value = ?").bind(.text(decomposed)).run()
        }
    }

    static func filter(_ letter: String, _ value: String) throws -> RelayFilter {
        try RelayFilter.fromJSON("{\"#\(letter)\":[\"\(value)\"]}")
    }

    @Test func anAccountIndexedShortByAnEarlierBuildFindsEveryTagValueOnceUpgraded() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let both = signed(
            kind: 14, tags: [["h", Self.composed], ["h", Self.decomposed], ["t", Self.composed], ["t", Self.decomposed]],
            content: "both forms", createdAt: t0)
        let plain = signed(kind: 14, tags: [["h", "ascii"], ["t", "ascii"]], content: "caf\u{E9} in the content only", createdAt: t0 + 1)
        let one = signed(kind: 14, tags: [["h", Self.composed]], content: "one form", createdAt: t0 + 2)
        // A set large enough to be kept (``ReconciliationCache``), that reaches `both` only through
        // its decomposed value.
        let bulk = (0..<ReconciliationCache.minimumItems).map { signed(kind: 14, tags: [["t", "bulk"]], content: "\($0)", createdAt: t0 - 10) }
        let kept = try RelayFilter.fromJSON("{\"#t\":[\"bulk\",\"\(Self.decomposed)\"]}")
        let old = try SoftchatAccount.open(path: path, version: 10)
        try old.incoming.ingest([both, plain, one] + bulk, receivedAt: t0 + 3)
        try Self.indexShort(old)
        // What the earlier build answered: the decomposed value finds nothing, and a kept
        // reconciliation set is made without the event.
        #expect(try old.events(matching: [Self.filter("t", Self.decomposed)], now: t0 + 3).isEmpty)
        #expect(try old.reconciliationItems(matching: kept).count == bulk.count)
        // The check names it (its conversation counts agree with its short rows).
        let damaged = try old.check(now: t0 + 3).problems
        #expect(damaged.contains { $0.contains("tag rows") }, "\(damaged)")
        let before = try old.store.write("count") { db in try db.scalarInt("SELECT COUNT(*) FROM event_tags") }
        old.close()

        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(try account.schemaVersion() == SoftchatAccount.latestSchemaVersion)
        for value in [Self.composed, Self.decomposed] {
            #expect(try account.events(matching: [Self.filter("t", value)], now: t0 + 3).map(\.id) == [both.id])
            #expect(try account.reconciliationItems(matching: Self.filter("t", value)).map(\.id.hex) == [both.id])
        }
        #expect(try account.reconciliationItems(matching: kept).count == bulk.count + 1)
        // Only the short event gained rows: its decomposed `h` and `t`.
        #expect(try account.store.write("count") { db in try db.scalarInt("SELECT COUNT(*) FROM event_tags") } == before + 2)
        let list = try account.conversations(kind: 14, tag: "h", limit: 10, now: t0 + 3)
        let counts = Dictionary(uniqueKeysWithValues: list.map { (Array($0.value.utf8), $0.messages) })
        #expect(counts == [Array(Self.composed.utf8): 2, Array(Self.decomposed.utf8): 1, Array("ascii".utf8): 1])
        let report = try account.check(now: t0 + 3)
        #expect(report.ok, "\(report.problems)")
    }

    @Test func theReindexLeavesAnAccountIndexedRightAsItWas() throws {
        let t = try TestAccount()
        let both = signed(kind: 14, tags: [["h", Self.composed], ["h", Self.decomposed]], content: "both", createdAt: t0)
        let deleted = signed(kind: 14, tags: [["h", "\u{1F600}"]], content: "gone", createdAt: t0 + 1)
        try t.account.incoming.ingest(
            [both, deleted, signed(kind: 5, tags: [["e", deleted.id]], content: "", createdAt: t0 + 2)], receivedAt: t0 + 3)
        let counts = try t.tableCounts()
        let conversations = try t.scalar("SELECT total(messages) FROM conversations")
        #expect(try t.account.store.write("reindex") { db in try TagIndex.reindex(db) } == 0)
        #expect(try t.tableCounts() == counts)
        #expect(try t.scalar("SELECT total(messages) FROM conversations") == conversations)
        #expect(try t.account.check(now: t0 + 3).ok)
    }

    @Test func theReindexCountsOnlyServedMessagesAgain() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let hidden = signed(kind: 14, tags: [["h", Self.composed], ["h", Self.decomposed]], content: "deleted", createdAt: t0)
        let old = try SoftchatAccount.open(path: path, version: 10)
        try old.incoming.ingest([hidden, signed(kind: 5, tags: [["e", hidden.id]], content: "", createdAt: t0 + 1)], receivedAt: t0 + 2)
        try Self.indexShort(old)
        old.close()
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        // Its rows are back (a filter decides on deleted events too, then hides them), its counts are not.
        #expect(try account.store.write("rows") { db in try db.scalarInt("SELECT COUNT(*) FROM event_tags WHERE value = '\(Self.decomposed)'") } == 1)
        #expect(try account.conversations(kind: 14, tag: "h", limit: 10, now: t0 + 2).allSatisfy { $0.messages == 0 })
        #expect(try account.check(now: t0 + 2).ok)
    }

    @Test func theCheckNamesTagRowsThatAreNotTheEventsTags() throws {
        let t = try TestAccount()
        let event = signed(kind: 14, tags: [["h", "room"], ["t", "topic"]], content: "x", createdAt: t0)
        try t.account.incoming.ingest([event], receivedAt: t0)
        #expect(try t.account.check(now: t0).ok)
        try t.account.store.write("extra row") { db in
            try db.statement("INSERT INTO event_tags (event_seq, name, value, created_at) SELECT seq, 't', 'planted', created_at FROM events").run()
        }
        let extra = try t.account.check(now: t0).problems
        #expect(extra.contains { $0.contains("1 events have tag rows that are not their tags") && $0.contains(event.id) }, "\(extra)")
        try t.account.store.write("short") { db in try db.execute("DELETE FROM event_tags WHERE value IN ('planted', 'topic')") }
        #expect(try t.account.check(now: t0).problems.contains { $0.contains("tag rows that are not their tags") })
    }

    @Test func theCheckNamesAConversationCountThatIsNotItsMessages() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(kind: 14, tags: [["h", "room"]], content: "x", createdAt: t0)], receivedAt: t0)
        #expect(try t.account.check(now: t0).ok)
        try t.account.store.write("miscount") { db in try db.execute("UPDATE conversations SET messages = 2") }
        #expect(try t.account.check(now: t0).problems.contains { $0.contains("1 conversation counts") }, "miscount")
        try t.account.store.write("lost") { db in try db.execute("DELETE FROM conversations") }
        #expect(try t.account.check(now: t0).problems.contains { $0.contains("1 conversation counts") }, "lost")
    }

    /// Our own version of an addressable event that lost its slot to a newer one in the same
    /// operation is stored hidden for its intent, and indexed like any stored event: the
    /// reconciliation set of its `d` holds it, so a sync does not fetch it again each time.
    @Test func ourOwnVersionThatLostItsSlotIsIndexedLikeAnyStoredEvent() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let v1 = signed(kind: 30_023, tags: [["d", "post"]], content: "v1", createdAt: t0)
        let v2 = signed(kind: 30_023, tags: [["d", "post"]], content: "v2", createdAt: t0 + 1)
        let post = try RelayFilter.fromJSON(##"{"#d":["post"]}"##)
        let old = try SoftchatAccount.open(path: path, version: 10)
        _ = try old.outgoing.enqueueSigned(operationID: "post", events: [v2, v1], relayURLs: ["wss://relay.example"], now: t0 + 2)
        #expect(try old.reconciliationItems(matching: post).map(\.id.hex).sorted() == [v1.id, v2.id].sorted())
        #expect(try old.events(matching: [post], now: t0 + 2).map(\.id) == [v2.id])
        // What a build before schema 11 stored for the lost version: its row and no tag rows.
        try old.store.write("unindex") { db in
            try db.statement("DELETE FROM event_tags WHERE event_seq = (SELECT seq FROM events WHERE id = ?)").bind(.text(v1.id)).run()
        }
        #expect(try old.check(now: t0 + 2).problems.contains { $0.contains("tag rows that are not their tags") })
        old.close()
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(try account.reconciliationItems(matching: post).map(\.id.hex).sorted() == [v1.id, v2.id].sorted())
        #expect(try account.events(matching: [post], now: t0 + 2).map(\.id) == [v2.id])
        #expect(try account.check(now: t0 + 2).ok)
    }

    /// Builds before the tag index had its bound wrote a row for every single-letter tag: an
    /// ASCII contact list of 100 follows had 100 rows, and a pair given twice had two rows and
    /// counted its message twice in the conversation.
    @Test func rowsWrittenBeforeTheIndexHadItsBoundAreBoundedOnceUpgraded() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let follows = (0..<100).map { i -> [String] in
            let hex = String(i, radix: 16)
            return ["p", String(repeating: "0", count: 64 - hex.count) + hex]
        }
        let contacts = signed(kind: 3, tags: follows, content: "", createdAt: t0)
        let twice = signed(kind: 14, tags: [["h", "room"], ["h", "room"]], content: "once", createdAt: t0 + 1)
        let old = try SoftchatAccount.open(path: path, version: 10)
        try old.incoming.ingest([contacts, twice], receivedAt: t0 + 2)
        try old.store.write("unbounded") { db in
            try db.statement("DELETE FROM event_tags WHERE event_seq = (SELECT seq FROM events WHERE id = ?)").bind(.text(contacts.id)).run()
            let insert = try db.statement(
                "INSERT INTO event_tags (event_seq, name, value, created_at) SELECT seq, ?, ?, created_at FROM events WHERE id = ?")
            for tag in follows {
                try insert.bind(.text("p"), .text(tag[1]), .text(contacts.id)).run()
                insert.reset()
            }
            try insert.bind(.text("h"), .text("room"), .text(twice.id)).run()
            try db.execute("UPDATE conversations SET messages = 2 WHERE value = 'room'")
        }
        let damaged = try old.check(now: t0 + 2).problems
        #expect(damaged.contains { $0.contains("2 events have tag rows that are not their tags") }, "\(damaged)")
        old.close()

        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        // The contact list's overflow marker and one `room` row.
        #expect(try account.store.write("rows") { db in try db.scalarInt("SELECT COUNT(*) FROM event_tags") } == 2)
        #expect(try account.conversations(kind: 14, tag: "h", limit: 10, now: t0 + 2).map(\.messages) == [1])
        let lastFollow = try RelayFilter.fromJSON("{\"#p\":[\"\(follows[99][1])\"]}")
        #expect(try account.events(matching: [lastFollow], now: t0 + 2).map(\.id) == [contacts.id])
        let report = try account.check(now: t0 + 2)
        #expect(report.ok, "\(report.problems)")
    }
}
