import SoftchatCore
import SoftchatTestSupport
import Testing

@_spi(OldLayouts) @testable import SoftchatStorage

/// The conversation list (newest activity first, with counts) and read markers, kept by the
/// ingest transaction and exact under deletions, expiry, duplicates and replaceable kinds.
@Suite struct AccountConversationTests {
    let bob = StorageKeys.bob.publicKeyHex
    let carol = StorageKeys.carol.publicKeyHex

    @Test func theListIsNewestActivityFirstWithEachConversationsCountAndNewestMessage() throws {
        let t = try TestAccount()
        let toBob = (0..<3).map { signed(kind: 14, tags: [["p", bob]], content: "to bob \($0)", createdAt: t0 + Int64($0)) }
        let toCarol = (0..<2).map { signed(kind: 14, tags: [["p", carol]], content: "to carol \($0)", createdAt: t0 + 10 + Int64($0)) }
        let group = signed(kind: 9, tags: [["h", "room"], ["p", bob]], content: "in a group", createdAt: t0 + 5)
        try t.account.incoming.ingest(toBob + toCarol + [group], receivedAt: t0 + 20)
        // A duplicate is not counted twice.
        try t.account.incoming.ingest([toBob[0]], receivedAt: t0 + 21)

        let list = try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 30)
        #expect(list.map(\.value) == [carol, bob])
        #expect(list.map(\.messages) == [2, 3])
        #expect(list.map(\.unread) == [2, 3])
        #expect(list.map { $0.latest?.id } == [toCarol[1].id, toBob[2].id])
        #expect(try t.account.conversations(kind: 9, tag: "h", limit: 10, now: t0).map(\.value) == ["room"])
        #expect(try t.account.conversations(kind: 9, tag: "p", limit: 10, now: t0).map(\.messages) == [1])
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 1, now: t0 + 30).map(\.value) == [carol])
    }

    @Test func aDeletedMessageLeavesTheCountAndTheNewestIsTheNewestStillServed() throws {
        let t = try TestAccount()
        let older = signed(kind: 14, tags: [["p", bob]], content: "older", createdAt: t0)
        let newer = signed(kind: 14, tags: [["p", bob]], content: "newer", createdAt: t0 + 1)
        try t.account.incoming.ingest([older, newer], receivedAt: t0 + 2)
        try t.account.incoming.ingest([signed(kind: 5, tags: [["e", newer.id]], content: "", createdAt: t0 + 3)], receivedAt: t0 + 3)
        // A second deletion of the same message changes nothing more.
        try t.account.incoming.ingest([signed(kind: 5, tags: [["e", newer.id]], content: "again", createdAt: t0 + 4)], receivedAt: t0 + 4)
        // Another author cannot delete it (NIP-09).
        try t.account.incoming.ingest(
            [signed(StorageKeys.carol, kind: 5, tags: [["e", older.id]], content: "", createdAt: t0 + 5)], receivedAt: t0 + 5)
        let list = try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10)
        #expect(list.map(\.messages) == [1])
        #expect(list.map { $0.latest?.id } == [older.id])
        // A message whose deletion arrived first is never counted.
        let doomed = signed(kind: 14, tags: [["p", carol]], content: "deleted before it arrived", createdAt: t0)
        try t.account.incoming.ingest([signed(kind: 5, tags: [["e", doomed.id]], content: "", createdAt: t0 + 6)], receivedAt: t0 + 6)
        try t.account.incoming.ingest([doomed], receivedAt: t0 + 7)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10).map(\.value) == [bob])
    }

    @Test func anExpiredNewestMessageIsNotShownAndReplaceableKindsAreNoConversation() throws {
        let t = try TestAccount()
        let kept = signed(kind: 14, tags: [["p", bob]], content: "kept", createdAt: t0)
        let expiring = signed(kind: 14, tags: [["p", bob], ["expiration", "\(t0 + 100)"]], content: "expires", createdAt: t0 + 1)
        try t.account.incoming.ingest([kept, expiring, signed(kind: 30_000, tags: [["d", "x"], ["p", bob]], content: "list")], receivedAt: t0 + 2)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 50).first?.latest?.id == expiring.id)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 200).first?.latest?.id == kept.id)
        #expect(try t.account.conversations(kind: 30_000, tag: "p", limit: 10, now: t0).isEmpty)
    }

    /// Issue 44, finding 12: a message dated 2^63 − 1 is stored (nothing is lost) but places its
    /// conversation no later than its arrival and is not served before its date comes near.
    @Test func aMessageDatedFarAheadNeitherPinsItsConversationNorTopsTheHistory() throws {
        let t = try TestAccount()
        let pinned = signed(kind: 14, tags: [["p", carol]], content: "pinned for good", createdAt: Int64.max)
        let soon = signed(kind: 14, tags: [["p", carol]], content: "ten minutes ahead", createdAt: t0 + 600)
        try t.account.incoming.ingest([pinned, soon], receivedAt: t0)
        let honest = signed(kind: 14, tags: [["p", bob]], content: "later", createdAt: t0 + 5)
        try t.account.incoming.ingest([honest], receivedAt: t0 + 10)

        let list = try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10)
        #expect(list.map(\.value) == [bob, carol])
        #expect(list.map(\.messages) == [1, 2])
        // Within the allowance (900 s) a message ahead of the clock is served; 2^63 − 1 is not.
        #expect(list.map { $0.latest?.id } == [honest.id, soon.id])
        let history = ##"{"kinds":[14],"#p":["\##(carol)"],"limit":1}"##
        #expect(try t.account.events(matching: [RelayFilter.fromJSON(history)], now: t0 + 10).map(\.id) == [soon.id])
        #expect(try t.account.events(matching: [RelayFilter.fromJSON(#"{"kinds":[14]}"#)], limit: 1, now: t0).map(\.id) == [soon.id])
        // Stored all along: a read from its date serves it first.
        #expect(try t.account.events(matching: [RelayFilter.fromJSON(history)], now: Int64.max).map(\.id) == [pinned.id])
        #expect(try t.account.events(matching: [RelayFilter.fromJSON(#"{"ids":["\#(pinned.id)"]}"#)], now: t0).isEmpty)
    }

    @Test func anExpiredMessageIsNotUnreadWithOrWithoutAMarker() throws {
        let t = try TestAccount()
        let kept = signed(kind: 14, tags: [["p", bob]], content: "kept", createdAt: t0)
        let expiring = signed(kind: 14, tags: [["p", bob], ["expiration", "\(t0 + 100)"]], content: "expires", createdAt: t0 + 1)
        try t.account.incoming.ingest([kept, expiring], receivedAt: t0 + 2)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 50).first?.unread == 2)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 200).first?.unread == 1, "without a marker")
        try t.account.markRead(kind: 14, tag: "p", value: bob, until: t0 - 1, now: t0 + 10)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 50).first?.unread == 2)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 200).first?.unread == 1, "with a marker")
        try t.account.markRead(kind: 14, tag: "p", value: bob, until: t0, now: t0 + 11)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 200).first?.unread == 0, "the expired one after the marker")
        // The count is still the messages counted; only unread leaves the expired one out.
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 200).first?.messages == 2)
    }

    @Test func theKindClassesSQLFormMatchesTheClassificationOfEveryKind() throws {
        let dir = TemporaryDirectory()
        let db = try SQLiteConnection(path: dir.file("kinds.sqlite"))
        for kindClass in [KindClass.regular, .replaceable, .ephemeral, .addressable] {
            let select = try db.statement(
                "WITH RECURSIVE k(kind) AS (SELECT 0 UNION ALL SELECT kind + 1 FROM k WHERE kind < 65535) SELECT kind FROM k WHERE \(KindClass.sql("kind", is: kindClass))"
            )
            var inSQL: Set<Int> = []
            while try select.step() { inSQL.insert(Int(select.int64(0))) }
            select.reset()
            #expect(inSQL == Set((0...65_535).filter { KindClass($0) == kindClass }), "\(kindClass)")
        }
    }

    @Test func aReadMarkerCountsOnlyNewerMessagesAndNeverMovesBack() throws {
        let t = try TestAccount()
        let messages = (0..<5).map { signed(kind: 14, tags: [["p", bob]], content: "m\($0)", createdAt: t0 + Int64($0)) }
        try t.account.incoming.ingest(messages, receivedAt: t0 + 10)
        try t.account.markRead(kind: 14, tag: "p", value: bob, until: t0 + 2, now: t0 + 10)
        var summary = try #require(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10).first)
        #expect(summary.unread == 2)
        #expect(summary.readUntil == t0 + 2)
        try t.account.markRead(kind: 14, tag: "p", value: bob, until: t0, now: t0 + 11)
        summary = try #require(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10).first)
        #expect(summary.readUntil == t0 + 2, "a marker never moves back")
        try t.account.markRead(kind: 14, tag: "p", value: bob, until: t0 + 4, now: t0 + 12)
        #expect(try t.account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10).first?.unread == 0)
        // The marker survives a reopen.
        let reopened = try SoftchatAccount.open(path: t.path)
        defer { reopened.close() }
        #expect(try reopened.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10).first?.readUntil == t0 + 4)
    }

    @Test func aTagThatKeysNoConversationOrABadLimitIsRefusedWithItsCode() throws {
        let t = try TestAccount()
        expectSoftchatError(.invalidRelayBatch, mentioning: ["tag t", "p, h"]) {
            _ = try t.account.conversations(kind: 14, tag: "t", limit: 10, now: t0)
        }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["limit 0"]) { _ = try t.account.conversations(kind: 14, tag: "p", limit: 0, now: t0) }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["markRead", "tag e"]) {
            try t.account.markRead(kind: 14, tag: "e", value: bob, until: t0, now: t0)
        }
    }

    @Test func anUpgradedAccountListsTheConversationsItAlreadyHeld() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.sqlite")
        let old = try SoftchatAccount.open(path: path, version: 8)
        let a = signed(kind: 14, tags: [["p", bob]], content: "a", createdAt: t0)
        let b = signed(kind: 14, tags: [["p", bob]], content: "b", createdAt: t0 + 1)
        try old.incoming.ingest([a, b, signed(kind: 5, tags: [["e", b.id]], content: "", createdAt: t0 + 2)], receivedAt: t0 + 3)
        old.close()
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        let list = try account.conversations(kind: 14, tag: "p", limit: 10, now: t0 + 10)
        #expect(list.map(\.messages) == [1])
        #expect(list.first?.latest?.id == a.id)
    }
}
