import SoftchatCore
import Testing

@testable import SoftchatSync

/// Issue 45's paths where the engine spun, wedged or lost while it said all was well, each
/// reproduced against the engine's simulator (`EngineWorld`) and pinned to the guarantee its
/// fix gives.
@Suite struct EnginePathTests {
    /// Path 1, a stale renewal: the process was frozen past its lease (Android's cached-app
    /// freezer), another claimer took the work, and the account refuses the renewal as stale.
    /// It was asked again inside the same `handle`, for ever (the pump gave up at 200,000
    /// actions). Now the claim is dropped: one notice, no second renewal of it, and the
    /// other claimer's work is left to it.
    @Test func aStaleLeaseRenewalDropsTheClaimAndIsNeverAskedAgain() {
        let w = EngineWorld()
        let ids = w.account.enqueue(Fixtures.event(w.unix, content: "held"), relays: [w.urls[0]])
        w.relays[0].okRule = { _, _ in .late }
        w.start { $0.acknowledgementTimeoutSeconds = 3_600 }
        w.run(for: 1_000)
        #expect(w.account.intents[ids[0]]!.state == .inFlight)
        let ours = w.account.intents[ids[0]]!.lease!
        // Frozen past the lease: the wall clock jumps, and another process claims the work.
        w.unix += 2 * w.account.leaseSeconds
        #expect(
            {
                if case .claimed(let result?) = w.account.answer(.claim(relayURL: w.urls[0], leaseID: "other-1", max: 8), now: w.unix) {
                    return result.payloads.count == 1
                }
                return false
            }())
        w.run(for: 40_000)
        #expect(!w.runaway, "the renewal was asked again inside the handle that refused it")
        #expect(w.mostActionsPerPump < 100)
        let stale = w.reports.filter {
            if case .notice(_, let text) = $0 { return text.hasPrefix("lease renewal refused as stale") }
            return false
        }
        #expect(stale.count == 1)
        #expect(w.account.intents[ids[0]]!.lease == "other-1", "the other claimer's work stays its own")
        #expect(w.account.leases[ours]!.released)
    }

    /// Path 1, any other renewal failure (the disk, a busy database): retried after the retry
    /// delay, never in the same `handle`, and the claim is kept.
    @Test func aFailedLeaseRenewalIsRetriedAfterTheDelayNotInTheSameHandle() {
        let w = EngineWorld()
        let ids = w.account.enqueue(Fixtures.event(w.unix, content: "held"), relays: [w.urls[0]])
        w.relays[0].okRule = { _, _ in .late }
        w.start { $0.acknowledgementTimeoutSeconds = 3_600 }
        w.run(for: 1_000)
        let ours = w.account.intents[ids[0]]!.lease!
        w.account.failRenewals = 3
        w.run(for: 40_000)
        #expect(!w.runaway)
        let failed = w.reports.filter {
            if case .notice(_, let text) = $0 { return text.hasPrefix("lease renewal failed, retried in 1 s") }
            return false
        }
        #expect(failed.count == 3)
        #expect(w.account.failRenewals == 0)
        // Failed at the half-lease mark, then once per retry delay (the old engine asked all
        // four inside one handle, in the same second).
        let times = w.account.renewalTimes.prefix(4)
        #expect(times.count == 4 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 >= 1 }, "\(Array(times))")
        #expect(w.account.intents[ids[0]]!.lease == ours, "the claim is kept and renewed once the account answers")
        #expect(w.account.leases[ours]!.expiresAt > w.unix + 30)
    }

    /// Path 1, a payload that does not read back: it was let go and left to its lease, the
    /// empty claim released at once and claimed again, for ever (66,667 lease rows in one
    /// pump). Now it gets a terminal decision that says why, and the rest of the batch goes.
    @Test func aStoredPayloadThatDoesNotReadBackIsRejectedOnceWithItsReason() {
        let w = EngineWorld()
        let broken = Fixtures.event(w.unix, content: "broken")
        let good = Fixtures.event(w.unix, content: "good")
        let ids = w.account.enqueue(broken, relays: [w.urls[0]]) + w.account.enqueue(good, relays: [w.urls[0]])
        w.account.corruptPayloads = [broken.id]
        w.start()
        w.run(for: 5_000)
        #expect(!w.runaway)
        #expect(w.account.leases.count <= 3, "claimed once, not in a loop: \(w.account.leases.count) leases")
        let intent = w.account.intents[ids[0]]!
        #expect(intent.state == DeliveryState.rejected && intent.category == DeliveryCategory.invalid)
        #expect(intent.message.contains("does not read back"))
        #expect(w.account.intents[ids[1]]!.state == .accepted)
        #expect(!w.relays[0].stored.contains { $0.id == broken.id })
    }

    /// Path 12: a relay refused past 5 subscriptions once (a burst limit, a restart) and then
    /// took 32; the budget learned 5 and kept it for the engine's life. Now the next connection
    /// starts again from the default, and pages go out as many at once as the relay takes.
    @Test func aTransientSubscriptionLimitTeachesOnlyItsOwnConnection() {
        let w = EngineWorld()
        w.relays[0].maxSubscriptions = 5
        let all = SyncEngineTests.storeConversations(in: w, ids: (0..<40).map { "sub\($0)" }, eventsEach: 10, from: w.unix - 500)
        w.start()
        w.run(for: 60_000)
        #expect(all.allSatisfy { w.account.events[$0.id] != nil })
        let learned = w.engine.relays[0].requests.limit
        #expect(learned <= 5)
        // The relay takes 32 from now on; new events come for every subscription.
        w.relays[0].maxSubscriptions = 32
        w.relays[0].mostSubscriptions = 0
        w.cut(0)
        w.run(for: 60_000)
        #expect(w.engine.relays[0].requests.limit > learned, "still \(w.engine.relays[0].requests.limit) after a new connection")
        #expect(w.relays[0].mostSubscriptions > 5, "at most \(w.relays[0].mostSubscriptions) REQs open at once on the new connection")
    }
}
