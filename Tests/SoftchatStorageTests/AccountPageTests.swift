import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// `queryEvents(filtersJSON:limit:now:before:)`: following `next` walks a history exactly once,
/// newest first, however the page size falls across runs of equal `created_at`, and an event
/// stored between two pages never shifts the next one; bad pages are refused.
@Suite struct AccountPageTests {
    /// 90 chat messages to bob, 30 seconds with three each (a run of equal times at every step),
    /// plus noise the filter must not serve.
    static func history(_ t: TestAccount) throws -> [VerifiedEvent] {
        let bob = StorageKeys.bob.publicKeyHex
        var chat: [VerifiedEvent] = []
        var all: [VerifiedEvent] = []
        for i in 0..<90 {
            let e = signed(kind: 14, tags: [["p", bob]], content: "message \(i)", createdAt: t0 + Int64(i / 3))
            chat.append(e)
            all.append(e)
            all.append(signed(StorageKeys.carol, kind: 1, tags: [["p", bob]], content: "noise \(i)", createdAt: t0 + Int64(i / 3)))
        }
        _ = try t.account.incoming.ingest(all.reversed(), receivedAt: t0)
        return chat.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
    }

    static func walk(_ t: TestAccount, _ filters: [String], limit: Int) throws -> (ids: [String], pages: Int) {
        var ids: [String] = []
        var cursor: EventCursor?
        var pages = 0
        repeat {
            let page = try t.account.queryEvents(filtersJSON: filters, limit: limit, now: t0 + 1_000, before: cursor)
            #expect(page.events.count <= limit)
            ids += page.events.map(\.id)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 200
        return (ids, pages)
    }

    @Test(arguments: [1, 2, 3, 4, 7, 30, 89, 90, 91, 1_000])
    func pagesWalkTheHistoryOnceNewestFirstAtAnyPageSize(limit: Int) throws {
        let t = try TestAccount()
        let expected = try Self.history(t).map(\.id)
        let filter = "{\"kinds\":[14],\"#p\":[\"\(StorageKeys.bob.publicKeyHex)\"],\"limit\":5}"
        let (ids, pages) = try Self.walk(t, [filter], limit: limit)
        #expect(ids == expected)
        #expect(pages == (expected.count + limit - 1) / limit)
    }

    @Test func aPageHonoursTheFiltersTimeRangeAndSeveralFilters() throws {
        let t = try TestAccount()
        let chat = try Self.history(t)
        let bob = StorageKeys.bob.publicKeyHex
        let ranged = "{\"kinds\":[14],\"#p\":[\"\(bob)\"],\"since\":\(t0 + 5),\"until\":\(t0 + 20)}"
        let (ids, _) = try Self.walk(t, [ranged, "{\"ids\":[\"\(chat.last!.id)\"]}"], limit: 4)
        let expected = chat.filter { ($0.createdAt >= t0 + 5 && $0.createdAt <= t0 + 20) || $0.id == chat.last!.id }.map(\.id)
        #expect(ids == expected)
    }

    @Test func anEventStoredBetweenPagesDoesNotShiftTheNextPage() throws {
        let t = try TestAccount()
        let chat = try Self.history(t)
        let filter = "{\"kinds\":[14]}"
        let first = try t.account.queryEvents(filtersJSON: [filter], limit: 10, now: t0 + 1_000)
        #expect(first.events.map(\.id) == Array(chat.map(\.id)[0..<10]))
        let cursor = try #require(first.next)
        // A newer message arrives meanwhile: it belongs before the cursor, so the next page is
        // still the ten that follow it.
        _ = try t.account.incoming.ingest([signed(kind: 14, content: "late newest", createdAt: t0 + 500)], receivedAt: t0)
        let second = try t.account.queryEvents(filtersJSON: [filter], limit: 10, now: t0 + 1_000, before: cursor)
        #expect(second.events.map(\.id) == Array(chat.map(\.id)[10..<20]))
    }

    @Test func badPagesAreRefusedWithStableCodes() throws {
        let t = try TestAccount()
        _ = try Self.history(t)
        expectSoftchatError(.invalidRelayFilter, mentioning: ["limit"]) { _ = try t.account.queryEvents(filtersJSON: ["{}"], limit: 0, now: t0) }
        expectSoftchatError(.invalidRelayFilter, mentioning: ["limit"]) { _ = try t.account.queryEvents(filtersJSON: ["{}"], limit: 1_001, now: t0) }
        expectSoftchatError(.invalidRelayFilter) { _ = try t.account.queryEvents(filtersJSON: [], limit: 5, now: t0) }
        expectSoftchatError(.invalidRelayFilter) { _ = try t.account.queryEvents(filtersJSON: ["{\"kinds\":\"x\"}"], limit: 5, now: t0) }
        expectSoftchatError(.invalidRelayFilter, mentioning: ["cursor"]) {
            _ = try t.account.queryEvents(filtersJSON: ["{}"], limit: 5, now: t0, before: EventCursor(createdAt: t0, id: "ABC"))
        }
    }

    @Test func intentsReportEachRelaysStateAsTheRelaySaidIt() throws {
        let t = try TestAccount()
        let a = signed(content: "first")
        let b = signed(content: "second", createdAt: t0 + 1)
        _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: [a, b], relayURLs: [StorageKeys.relayA, StorageKeys.relayB], now: t0)
        #expect(try t.account.delivery.intents(operationID: "op").map(\.state) == [.pending, .pending, .pending, .pending])
        let claim = try #require(try t.account.delivery.claim(leaseID: "l1", relayURL: StorageKeys.relayA, now: t0))
        try t.account.delivery.markSocketWritten(claim.claim, intentIDs: claim.payloads.map(\.intentID))
        let rejectB = claim.payloads.first { $0.eventID == b.id }!
        try t.account.delivery.applyResults(
            claim.claim,
            results: [
                DeliveryResult(
                    intentID: claim.payloads.first { $0.eventID == a.id }!.intentID,
                    decision: DeliveryDecision(eventID: a.id, state: .accepted, category: .accepted, message: "")),
                DeliveryResult(
                    intentID: rejectB.intentID,
                    decision: DeliveryDecision(eventID: b.id, state: .rejected, category: .blocked, message: "blocked: no")),
            ])
        let intents = try t.account.delivery.intents(operationID: "op")
        #expect(intents.map(\.eventID) == [a.id, a.id, b.id, b.id])
        #expect(intents.map(\.relayURL) == [StorageKeys.relayA, StorageKeys.relayB, StorageKeys.relayA, StorageKeys.relayB])
        #expect(intents.map(\.state) == [.accepted, .pending, .rejected, .pending])
        #expect(intents[2].category == .blocked && intents[2].message == "blocked: no" && intents[2].attempts == 1)
        #expect(intents[1].category == nil && intents[1].attempts == 0)
        #expect(try t.account.delivery.intents(operationID: "unknown").isEmpty)
    }
}
