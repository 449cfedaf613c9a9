import Foundation
import SoftchatCore
import SoftchatStorage
import SoftchatClient
import SoftchatSync
import SoftchatTestRelay
import SoftchatTransport
import Testing

/// Nothing acknowledged is lost and nothing is accepted twice while a proxy between the
/// managed transport and the relay drops, duplicates, reorders, delays and truncates frames and
/// cuts connections at random points.
@Suite(.serialized) struct FaultInjectionTests {
    @Test func tenThousandEventsSurviveAFaultyNetwork() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        var plan = FaultPlan()
        plan.drop = 0.0004
        plan.duplicate = 0.01
        plan.reorder = 0.01
        plan.delay = 0.005
        plan.maxDelayMilliseconds = 20
        plan.cut = 0.002
        plan.seed = 20261129
        let proxy = try FaultProxy(upstream: relay.url, plan: plan)
        defer { proxy.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate(), bob = SoftchatIdentity.generate()
        let sender = try scratch.account("alice"), receiver = try scratch.account("bob")
        defer { sender.close(); receiver.close() }
        let total = 10_000
        let events = try chatEvents(alice, to: bob.publicKeyHex, count: total)
        for start in stride(from: 0, to: total, by: 250) {
            _ = try sender.outgoing.enqueueSigned(operationID: "op-\(start)", events: Array(events[start..<start + 250]),
                relayURLs: [proxy.url], now: 1)
        }
        var policy = quickPolicy()
        policy.acknowledgementTimeoutSeconds = 2
        policy.retryDelaySeconds = 1
        // Cuts come every few seconds here; with the production reset (60 s ready) the backoff
        // would climb to minutes. A short cap keeps the run CI-sized; the schedule is tested elsewhere.
        policy.session.reconnectMaxDelaySeconds = 2
        policy.session.reconnectResetAfterSeconds = 2
        try receiver.setSubscription(id: "chat", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"]}"])
        let publishing = try sender.startManagedTransport(relayURL: proxy.url, identity: alice, policy: policy)
        let syncing = try receiver.startManagedTransport(relayURL: proxy.url, identity: bob, policy: policy)
        let published = try eventually(240) { try sender.delivery.stateCounts()[.accepted] == total }
        publishing.stop()
        syncing.stop()
        let faults = proxy.faults
        print("fault injection: \(faults); relay stored \(relay.storedEventCount)")
        #expect(published)
        #expect(relay.storedEventCount == total, "accepted exactly once")
        #expect(faults.cuts > 0 && faults.dropped > 0 && faults.duplicated > 0 && faults.reordered > 0)
        // Every intent terminal and accepted; nothing half-applied.
        let counts = try sender.delivery.stateCounts()
        #expect(counts[.accepted] == total && counts[.rejected] == nil && counts[.pending] == nil && counts[.inFlight] == nil)
        #expect(try sender.check(now: 10).ok)

        // A live stream through the same faults can miss a dropped EVENT (that is what dropping
        // means); a fresh sync straight from the relay must find every one accepted.
        let liveReceived = try receiver.events(matching: [try RelayFilter.fromJSON("{\"kinds\":[14]}")], now: 2_000_000_000).count
        print("fault injection: live subscription received \(liveReceived) of \(total) through the faults")
        try receiver.setSubscription(id: "final", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"]}"])
        try receiver.removeSubscription(id: "chat")
        let synced = SyncedFlag()
        var finalPolicy = policy
        finalPolicy.observer = { if case .synced(_, let sub, _) = $0, sub == "final" { synced.set() } }
        let catchUp = try receiver.startManagedTransport(relayURL: relay.url, identity: bob, policy: finalPolicy)
        let all = try RelayFilter.fromJSON("{\"kinds\":[14]}")
        #expect(try eventually(120) { try synced.value && receiver.events(matching: [all], now: 2_000_000_000).count == total })
        catchUp.stop()
        #expect(Set(try receiver.events(matching: [all], now: 2_000_000_000).map(\.id)) == Set(events.map(\.id)))
        #expect(try receiver.check(now: 10).ok)
    }
}
