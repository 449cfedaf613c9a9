import Dispatch
import Foundation
import SoftchatCore
import Synchronization
import Testing

@testable import SoftchatFFI

/// The C ABI's queue of updates for the host's callbacks: in order, never blocking the I/O
/// thread, and bounded. Before it, each update was one `DispatchQueue.async` block: a listener
/// that stalled let them pile up without limit.
@Suite struct FFIUpdateQueueTests {
    final class Received: Sendable {
        let updates = Mutex<[FFIUpdateQueue.Update]>([])
        let gate = DispatchSemaphore(value: 0)
    }

    @Test func aStalledListenerHoldsAtMostTheBoundAndGetsEveryRelaysLatestStateAndTheDroppedCount() {
        let received = Received()
        let queue = DispatchQueue(label: "test.delivery")
        let updates = FFIUpdateQueue(bound: 100, queue: queue) { update in
            received.gate.wait()  // the host's listener, stalled until released
            received.updates.withLock { $0.append(update) }
        }
        // 10,000 activities and 3 relays flapping between phases while the listener is stalled.
        for i in 0..<10_000 {
            updates.push(.activity(.notice(relayURL: "wss://a", message: "n\(i)")))
            if i % 100 == 0 {
                let phase: RelayPhase = (i / 100) % 2 == 0 ? .connecting : .ready
                for url in ["wss://a", "wss://b", "wss://c"] { updates.push(.state(.relay(relayURL: url, phase: phase, delayMilliseconds: nil))) }
            }
        }
        updates.push(.state(.overall(phase: .ready, delayMilliseconds: nil, reason: nil)))
        // Queued at most the bound, plus one state per relay and one overall past it.
        #expect(updates.statistics.peak <= 100 + 4)
        for _ in 0..<20_000 { received.gate.signal() }
        queue.sync {}
        queue.sync {}
        let got = received.updates.withLock { $0 }
        let notices = got.compactMap { u -> String? in if case .activity(.notice(_, let m)) = u { m } else { nil } }
        let dropped = notices.last.flatMap { $0.split(separator: " ").first.flatMap { Int($0) } } ?? 0
        #expect(notices.last?.contains("dropped") == true)
        // Every activity either arrived or was counted as dropped.
        #expect(notices.count - 1 + dropped == 10_000)
        // Every relay ends at its latest phase (the last flap, at i = 9,900, was to ready).
        var last: [String: RelayPhase] = [:]
        for case .state(.relay(let url, let phase, _)) in got { last[url] = phase }
        #expect(last == ["wss://a": .ready, "wss://b": .ready, "wss://c": .ready])
        let delivered = notices.dropLast().compactMap { Int($0.dropFirst()) }
        #expect(delivered == delivered.sorted())
        if case .state(.overall(.ready, _, _)) = got.filter({ if case .state = $0 { true } else { false } }).last {
        } else {
            Issue.record("the overall state was not delivered last among states")
        }
    }

    @Test func aListenerThatKeepsUpGetsEverythingInOrderAndNoDropNotice() {
        let received = Mutex<[String]>([])
        let queue = DispatchQueue(label: "test.delivery.fast")
        let updates = FFIUpdateQueue(bound: 100, queue: queue) { update in
            if case .activity(.notice(_, let m)) = update { received.withLock { $0.append(m) } }
        }
        for i in 0..<5_000 {
            updates.push(.activity(.notice(relayURL: "wss://a", message: "n\(i)")))
            if i % 50 == 0 { queue.sync {} }  // the host keeps up
        }
        queue.sync {}
        queue.sync {}
        let got = received.withLock { $0 }
        // The host kept up at every 50th push: nothing past the bound, nothing dropped.
        #expect(got == (0..<5_000).map { "n\($0)" })
        #expect(updates.statistics.peak <= 100)
    }

    /// A relay's flood of notices, each as long as a report carries, against a stalled
    /// listener: the queue holds at most its byte bound, counts what it dropped, and a stop
    /// does not wait for the listener to read the notices still queued.
    @Test func aStalledListenerHoldsAtMostTheByteBoundAndStopDiscardsQueuedNotices() {
        let received = Received()
        let queue = DispatchQueue(label: "test.delivery.bytes")
        let maxBytes = 64 * 1024
        let updates = FFIUpdateQueue(bound: 100_000, maxBytes: maxBytes, queue: queue) { update in
            received.gate.wait()
            received.updates.withLock { $0.append(update) }
        }
        let text = String(repeating: "N", count: RelayText.maxReportBytes)
        for _ in 0..<10_000 { updates.push(.activity(.notice(relayURL: "wss://a", message: text))) }
        updates.push(
            .activity(.synced(relayURL: "wss://a", subscriptionID: "s", events: 1, incompleteSeconds: [], skipped: [], liveFeedRefused: nil)))
        let held = updates.statistics
        #expect(held.bytes <= maxBytes)
        #expect(held.peak < 10_000 * text.utf8.count / maxBytes + 200)
        #expect(held.dropped > 9_000)
        updates.discardNotices()
        #expect(updates.statistics.bytes < 1_024, "only the synced activity (and the one in the listener) stay")
        for _ in 0..<1_000 { received.gate.signal() }
        queue.sync {}
        queue.sync {}
        let got = received.updates.withLock { $0 }
        #expect(got.contains { if case .activity(.synced) = $0 { true } else { false } })
        let notices = got.compactMap { u -> String? in if case .activity(.notice(_, let m)) = u { m } else { nil } }
        // The one already handed to the listener, then the drop count: every notice is accounted for.
        let dropped = notices.last.flatMap { $0.split(separator: " ").first.flatMap { Int($0) } } ?? 0
        #expect(notices.count - 1 + dropped == 10_000)
    }

    /// Issue 45, path 10: a stalled listener behind a relay's flood of notices. Delivery
    /// decisions and `synced` reports were dropped like the notices (every activity past the
    /// bound was), so a host that reads its reports never learnt that 300 intents were decided,
    /// nor what a window skipped: 0 of the 300 decisions and 0 of the 3 reports arrived. Now
    /// they are never dropped: each takes the place of the oldest queued notice, or is queued past
    /// the bound; a later decision for the same intent replaces the one queued, and two reports
    /// of one subscription become one (events added, skipped events merged).
    @Test func decisionsAndSyncedReportsAreNeverDroppedOnlyCoalesced() {
        let received = Received()
        let queue = DispatchQueue(label: "test.delivery.decisions")
        let updates = FFIUpdateQueue(bound: 100, queue: queue) { update in
            received.gate.wait()
            received.updates.withLock { $0.append(update) }
        }
        for i in 0..<10_000 { updates.push(.activity(.notice(relayURL: "wss://a", message: "n\(i)"))) }
        func decision(_ i: Int, _ state: DeliveryState) -> ManagedTransportActivity {
            .delivery(
                relayURL: "wss://a", intentID: "intent\(i)",
                decision: DeliveryDecision(eventID: "event\(i)", state: state, category: state == .accepted ? .accepted : .rateLimited, message: ""))
        }
        for i in 0..<300 { updates.push(.activity(decision(i, .retryable))) }
        // A later decision for 50 of them while the first is still queued.
        for i in 0..<50 { updates.push(.activity(decision(i, .accepted))) }
        let a = String(repeating: "a", count: 64)
        let b = String(repeating: "b", count: 64)
        let c = String(repeating: "c", count: 64)
        updates.push(
            .activity(
                .synced(
                    relayURL: "wss://a", subscriptionID: "notes", events: 2, incompleteSeconds: [10],
                    skipped: [SkippedEvents(reason: .oversized, count: 1, eventIDs: [a])], liveFeedRefused: nil)))
        updates.push(
            .activity(.synced(relayURL: "wss://a", subscriptionID: "dms", events: 1, incompleteSeconds: [], skipped: [], liveFeedRefused: nil)))
        updates.push(
            .activity(
                .synced(
                    relayURL: "wss://a", subscriptionID: "notes", events: 3, incompleteSeconds: [10, 20],
                    skipped: [
                        SkippedEvents(reason: .oversized, count: 2, eventIDs: [a, b]),
                        SkippedEvents(reason: .notServed, count: 1, eventIDs: [c]),
                    ], liveFeedRefused: nil)))
        // The notices made room until none was left; past the bound only what may not be
        // dropped: one decision per intent, one report per subscription.
        #expect(updates.statistics.peak <= 300 + 2)
        for _ in 0..<1_000 { received.gate.signal() }
        queue.sync {}
        queue.sync {}
        let got = received.updates.withLock { $0 }
        var decisions: [String: [DeliveryState]] = [:]
        for case .activity(.delivery(_, let intent, let d)) in got { decisions[intent, default: []].append(d.state) }
        #expect(decisions.count == 300, "\(decisions.count) of 300 intents' decisions arrived")
        #expect((0..<50).allSatisfy { decisions["intent\($0)"] == [.accepted] }, "the later decision replaced the queued one")
        #expect((50..<300).allSatisfy { decisions["intent\($0)"] == [.retryable] })
        let reports = got.compactMap { u -> (String, Int, [Int64], [SkippedEvents])? in
            if case .activity(.synced(_, let id, let events, let seconds, let skipped, _)) = u { (id, events, seconds, skipped) } else { nil }
        }
        #expect(reports.map { $0.0 } == ["notes", "dms"])
        #expect(reports.first?.1 == 5 && reports.first?.2 == [10, 20])
        #expect(
            reports.first?.3 == [
                SkippedEvents(reason: .oversized, count: 2, eventIDs: [a, b]), SkippedEvents(reason: .notServed, count: 1, eventIDs: [c]),
            ])
        // Every notice arrived or was counted dropped.
        let notices = got.compactMap { u -> String? in if case .activity(.notice(_, let m)) = u { m } else { nil } }
        let dropped = notices.last.flatMap { $0.split(separator: " ").first.flatMap { Int($0) } } ?? 0
        #expect(notices.last?.contains("dropped") == true)
        #expect(notices.count - 1 + dropped == 10_000)
    }
}
