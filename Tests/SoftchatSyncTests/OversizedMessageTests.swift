import SoftchatCore
import Testing

@testable import SoftchatSync

/// A relay message over our frame bound, skipped by the transport (`IOEvent.oversized`): the
/// engine reads what its head says and gives it its place. Before, such a message ended the
/// connection — on every reconnect, since the relay sends it again — so nothing behind it in a
/// page ever arrived and that relay's sync never finished.
@Suite struct OversizedMessageTests {
    @Test func theHeadOfAnEventFrameNamesItsSubscriptionIdAndCreatedAt() {
        let id = String(repeating: "ab", count: 32)
        let m = OversizedMessage(
            head: #" [ "EVENT" , "page\"7" , { "id" : ""# + id
                + #"", "pubkey":"00", "created_at": 1700000000, "kind":1, "tags":[["p","x"]], "content":"aaaa"#,
            bytes: 600_000)
        #expect(m.verb == "EVENT" && m.subscriptionID == "page\"7" && m.eventID == id && m.createdAt == 1_700_000_000)
        #expect(m.summary.contains("EVENT on page\"7 event \(id) created_at 1700000000"))
    }

    @Test func aHeadCutOrOutOfOrderYieldsWhatWasReadBeforeTheCut() {
        // `content` first and longer than the head: no id, no created_at.
        let cut = OversizedMessage(head: #"["EVENT","s",{"content":"aaaaaaaaaaaaaaaaaaaaa"#, bytes: 600_000)
        #expect(cut.verb == "EVENT" && cut.subscriptionID == "s" && cut.eventID == nil && cut.createdAt == nil)
        // A number cut by the head's end is not taken (1700 of 1700000000).
        let number = OversizedMessage(head: #"["EVENT","s",{"created_at":1700"#, bytes: 600_000)
        #expect(number.createdAt == nil)
        #expect(OversizedMessage(head: "not json", bytes: 9).verb == nil)
        #expect(OversizedMessage(head: #"["NEG-MSG","neg-1","6100"#, bytes: 9).subscriptionID == "neg-1")
    }

    @Test func anOversizedEventInAPageTakesItsPlaceSoPagingGoesOnBelowIt() {
        let w = EngineWorld()
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        var events: [VerifiedEvent] = []
        for i in 0..<60 { events.append(Fixtures.event(w.unix - 3_000 + Int64(i) * 40, content: "n\(i)")) }
        w.relays[0].stored = events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        // A cap of 10 the relay does not state; every tenth event too big for our frames,
        // among them the oldest of a page.
        w.relays[0].cap = 10
        w.relays[0].negentropy = .notice
        let big = Set(events.enumerated().filter { $0.offset % 10 == 0 }.map(\.element.id))
        w.relays[0].overOurBound = big
        w.start()
        w.run(for: 20_000)
        let missing = events.filter { !big.contains($0.id) && w.account.events[$0.id] == nil }
        #expect(missing.count == 0, "of the 54 that fit, missing")
        #expect(w.synced(0, "notes"))
        #expect(w.connected[0], "the connection stays up")
        let notices = w.reports.filter { if case .notice(_, let t) = $0 { t.contains("over our frame bound: skipped (EVENT") } else { false } }
        #expect(notices.count >= big.count, "each skipped event is named")
    }

    @Test func anOversizedNegMsgSplitsTheReconciliationLikeTooBig() {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        var events: [VerifiedEvent] = []
        for i in 0..<1_200 { events.append(Fixtures.event(w.unix - 90 * 86_400 + Int64(i) * 6_000, content: "n\(i)")) }
        w.relays[0].stored = events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        for (i, e) in events.enumerated() where i % 3 != 0 { w.account.events[e.id] = e }
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        w.relays[0].negentropyMessagesOverOurBound = 3_000
        w.start()
        w.run(for: 20_000)
        #expect(w.relays[0].seen[.negentropyMessageOverOurBound, default: 0] > 0, "an answer was over the bound")
        let missing = events.filter { w.account.events[$0.id] == nil }
        #expect(missing.count == 0)
        #expect(w.synced(0, "notes"))
        let methods = w.reports.compactMap { if case .synced(_, _, _, let o) = $0 { o.method } else { nil } }
        #expect(methods == [.negentropy], "reconciled in smaller parts, every age")
    }
}
