import Foundation
import SoftchatCore
import Testing

@testable import SoftchatStorage

/// A relay cannot multiply the account's size through tags: an event is indexed by at most
/// `TagIndex.maxIndexedTagsPerEvent` tags of at most `maxIndexedTagValueBytes` each, and an
/// event past that is stored whole and still found by every tag filter.
@Suite struct AccountTagIndexTests {
    /// The account's bytes on disk: the database file and its WAL.
    static func bytes(_ t: TestAccount) throws -> Int64 {
        try [t.path, t.path + "-wal"].reduce(0) { sum, path in
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? nil
            return sum + (size ?? 0)
        }
    }

    /// Tag values are bytes to SQL and to filters: two values Swift calls equal ("é" composed and
    /// decomposed) are two values, each indexed and each found.
    @Test func twoTagValuesThatDifferOnlyInTheirUnicodeFormAreEachIndexed() throws {
        let t = try TestAccount()
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        let event = signed(tags: [["t", composed], ["t", decomposed]], content: "both")
        try t.account.incoming.ingest([event], receivedAt: t0)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags") == 2)
        for value in [composed, decomposed] {
            let filter = try RelayFilter.fromJSON("{\"#t\":[\"\(value)\"]}")
            #expect(filter.tagConditions.first.map { Array($0.values[0].utf8) } == Array(value.utf8))
            #expect(filter.matches(event))
            #expect(try t.account.events(matching: [filter], now: t0).map(\.id) == [event.id], "\(Array(value.utf8))")
            #expect(try t.account.reconciliationItems(matching: filter).count == 1)
        }
    }

    @Test func anEventOfManySmallTagsAddsOneIndexRowNotOnePerTag() throws {
        let t = try TestAccount()
        let before = try Self.bytes(t)
        // About 800 KB of ["t", "…"] tags: 40,000 tags.
        let tags = (0..<40_000).map { ["t", "topic\($0)"] }
        let big = signed(tags: tags, content: "many tags")
        let json = big.jsonText.utf8.count
        #expect(json > 700_000)
        let receipt = try t.account.incoming.ingest([big], receivedAt: t0)
        #expect(receipt.receipt.insertedEventIDs == [big.id])
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags") == 1)
        // The account grows by about the event's own size, not 26 times it.
        let growth = try Self.bytes(t) - before
        #expect(growth < Int64(json) * 3 / 2, "grew \(growth) bytes for a \(json)-byte event")
    }

    @Test func anEventWithinTheBoundIsIndexedByEachDistinctTagOnce() throws {
        let t = try TestAccount()
        var tags = (0..<TagIndex.maxIndexedTagsPerEvent - 1).map { ["p", "v\($0)"] }
        tags += [["p", "v0"], ["p", "v1", "wss://r.example"], ["title", "not indexed"], ["d", "x"]]
        let event = signed(tags: tags)
        _ = try t.account.incoming.ingest([event], receivedAt: t0)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags") == Int64(TagIndex.maxIndexedTagsPerEvent))
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = ''") == 0)
        // One more distinct pair (the "d") would pass the bound: the marker instead.
        let one = signed(tags: tags + [["d", "y"]], content: "one more")
        _ = try t.account.incoming.ingest([one], receivedAt: t0)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE event_seq = (SELECT seq FROM events WHERE id = '\(one.id)')") == 1)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = '' AND event_seq = (SELECT seq FROM events WHERE id = '\(one.id)')") == 1)
    }

    /// 400 spam events past the bound, each with a `p` tag for the user: a `limit: 1` read
    /// decoded and held every one of them (233 MB and 0.68 s at 65 tags each). Now the marked
    /// events are read newest first, only as far as the limit and its second's ties.
    @Test func aLimitedTagReadReadsOnlyAsManyMarkedEventsAsItsLimitNeeds() throws {
        let t = try TestAccount()
        let me = StorageKeys.bob.publicKeyHex
        let spam = (0..<400).map { i in
            signed(kind: 1, tags: (0..<65).map { ["t", "s\(i)-\($0)"] } + [["p", me]], content: "spam \(i)", createdAt: t0 + Int64(i))
        }
        let ties = (0..<3).map { i in
            signed(kind: 1, tags: (0..<65).map { ["t", "tie\(i)-\($0)"] } + [["p", me]], content: "tie \(i)", createdAt: t0 + 1_000)
        }
        _ = try t.account.incoming.ingest(spam + ties, receivedAt: t0)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = ''") == 403)
        let filter = try RelayFilter.fromJSON(##"{"#p":["\##(me)"]}"##)
        // Read when the ties' date has come (a read serves nothing dated past the future allowance).
        let now = t0 + 1_000
        let read = try t.account.store.write("read") { db in try SoftchatAccount.overflowEvents(db, filter, now: now, limit: 1) }
        #expect(Set(read.map(\.id)) == Set(ties.map(\.id)), "the limit's second, read to its end; nothing older")
        let lowest = ties.map(\.id).min()!
        #expect(try t.served([##"{"#p":["\##(me)"]}"##], limit: 1, now: now) == [lowest])
        #expect(try t.served([##"{"#p":["\##(me)"],"limit":5}"##], now: now) == ties.map(\.id).sorted() + [spam[399].id, spam[398].id])
        // Without a limit every match is read, as before.
        let all = try t.account.store.write("read") { db in try SoftchatAccount.overflowEvents(db, filter, now: now) }
        #expect(all.count == 403)
    }

    @Test func anEventPastTheBoundIsFoundByEveryTagFilterAndOnlyByMatchingOnes() throws {
        let t = try TestAccount()
        let many = signed(
            kind: 1, tags: (0..<500).map { ["t", "topic\($0)"] } + [["p", StorageKeys.bob.publicKeyHex]], content: "many", createdAt: t0 + 5)
        let long = signed(
            kind: 1, tags: [["t", "topic499"], ["r", String(repeating: "a", count: TagIndex.maxIndexedTagValueBytes + 1)]], content: "long",
            createdAt: t0 + 4)
        let plain = signed(kind: 1, tags: [["t", "topic499"]], content: "plain", createdAt: t0 + 3)
        let other = signed(kind: 7, tags: (0..<100).map { ["t", "topic\($0)"] }, content: "other kind", createdAt: t0 + 6)
        _ = try t.account.incoming.ingest([many, long, plain, other], receivedAt: t0)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = ''") == 3)

        // The general path, the tag-history path (one value and a limit), and the union.
        #expect(try t.served(["{\"#t\":[\"topic499\"]}"]) == [many.id, long.id, plain.id])
        #expect(try t.served(["{\"#t\":[\"topic499\"],\"limit\":2}"]) == [many.id, long.id])
        #expect(try t.served(["{\"kinds\":[1],\"#t\":[\"topic7\"],\"limit\":10}"]) == [many.id])
        #expect(try t.served(["{\"#t\":[\"topic7\"]}"]) == [other.id, many.id])
        #expect(try t.served(["{\"#t\":[\"topic7\"],\"#p\":[\"\(StorageKeys.bob.publicKeyHex)\"]}"]) == [many.id])
        #expect(try t.served(["{\"#t\":[\"nothing\"]}"]).isEmpty)
        #expect(try t.served(["{\"#t\":[\"topic499\"],\"until\":\(t0 + 4)}"]) == [long.id, plain.id])
        #expect(try t.served(["{\"#t\":[\"topic499\"]}"], limit: 1) == [many.id])
        // NIP-77's items, from the tag index and the marker alike.
        let items = try t.account.reconciliationItems(matching: RelayFilter.fromJSON("{\"#t\":[\"topic499\"],\"kinds\":[1]}"))
        #expect(items == [plain, long, many].compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) })
        let byID = try t.account.reconciliationItems(matching: RelayFilter.fromJSON("{\"ids\":[\"\(many.id)\"],\"#t\":[\"topic1\"]}"))
        #expect(byID == [NegentropyItem(createdAt: many.createdAt, idHex: many.id)!])
        // Hidden by a deletion: not served, still an item (the account holds it).
        _ = try t.account.incoming.ingest([signed(kind: 5, tags: [["e", many.id]], content: "", createdAt: t0 + 9)], receivedAt: t0)
        #expect(try t.served(["{\"#t\":[\"topic499\"]}"]) == [long.id, plain.id])
        #expect(try t.account.reconciliationItems(matching: RelayFilter.fromJSON("{\"#t\":[\"topic499\"]}")).count == 3)
        #expect(try t.account.check(now: t0).ok)
    }
}
