import CSQLite
import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// Durable publish intents and delivery leases: idempotent enqueue, one intent per (event,
/// relay), the claim → written → apply / release lifecycle, lease expiry and reclaim, stale
/// claims that change nothing, the retry budget, all-or-nothing results; sync cursors, the
/// subscription policy and the invariant check.
@Suite struct AccountDeliveryTests {
    let relayA = StorageKeys.relayA
    let relayB = StorageKeys.relayB

    func events(_ n: Int, _ label: String = "out") -> [VerifiedEvent] {
        (0..<n).map { signed(kind: 14, tags: [["p", StorageKeys.bob.publicKeyHex]], content: "\(label) \($0)", createdAt: t0 + Int64($0)) }
    }

    // MARK: Enqueue

    @Test func enqueueIsIdempotentByOperationID() throws {
        let t = try TestAccount()
        let out = events(2)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op-1", events: out, relayURLs: [relayA, relayB], now: t0)
        #expect(ids.count == 4)
        #expect(Set(ids).count == 4)
        let counts = try t.tableCounts()
        let snapshot = try t.deliverySnapshot()
        // Same id, same content (freshly re-signed: same ids) → the same intents, nothing new.
        let again = try t.account.outgoing.enqueueSigned(operationID: "op-1", events: events(2), relayURLs: [relayA, relayB], now: t0 + 50)
        #expect(again == ids)
        #expect(try t.tableCounts() == counts)
        #expect(try t.deliverySnapshot() == snapshot)
        // Same id, different events or relays → invalid_delivery_state, nothing changes.
        expectSoftchatError(.invalidDeliveryState, mentioning: ["op-1"]) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op-1", events: events(3), relayURLs: [relayA, relayB], now: t0)
        }
        expectSoftchatError(.invalidDeliveryState, mentioning: ["op-1"]) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op-1", events: out, relayURLs: [relayA], now: t0)
        }
        expectSoftchatError(.invalidDeliveryState, mentioning: ["op-1"]) {
            _ = try t.account.outgoing.enqueueSigned(
                operationID: "op-1", events: [out[0], signed(content: "other")], relayURLs: [relayA, relayB], now: t0)
        }
        #expect(try t.tableCounts() == counts)
        #expect(try t.deliverySnapshot() == snapshot)
        #expect(try t.account.delivery.stateCounts() == [.pending: 4])
    }

    @Test func thereIsOneIntentPerEventAndRelayWhicheverOperationCreatedIt() throws {
        let t = try TestAccount()
        let e = events(3)
        let first = try t.account.outgoing.enqueueSigned(operationID: "op-1", events: [e[0], e[1]], relayURLs: [relayA, relayB], now: t0)
        let second = try t.account.outgoing.enqueueSigned(operationID: "op-2", events: [e[1], e[2]], relayURLs: [relayB], now: t0)
        // Intents come events × relays in order: e1@A, e1@B, e2@A, e2@B.
        #expect(second[0] == first[3], "e[1]@B already had an intent")
        #expect(!first.contains(second[1]))
        #expect(try t.scalar("SELECT COUNT(*) FROM publish_intents") == 5)
        #expect(try t.scalar("SELECT COUNT(DISTINCT event_id || ' ' || relay_url) FROM publish_intents") == 5)
        #expect(try t.account.delivery.stateCounts(relayURL: relayA) == [.pending: 2])
        #expect(try t.account.delivery.stateCounts(relayURL: relayB) == [.pending: 3])
        // Enqueued events are stored and served like any other.
        #expect(Set(try t.served(now: t0)) == Set(e.map(\.id)))
    }

    @Test func enqueueRejectsMalformedBatchesWithoutStoringAnything() throws {
        let t = try TestAccount()
        let e = events(2)
        let counts = try t.tableCounts()
        expectSoftchatError(.invalidRelayBatch) { _ = try t.account.outgoing.enqueueSigned(operationID: "", events: e, relayURLs: [relayA], now: t0) }
        expectSoftchatError(.invalidRelayBatch) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: [], relayURLs: [relayA], now: t0)
        }
        expectSoftchatError(.invalidRelayBatch) { _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: e, relayURLs: [], now: t0) }
        expectSoftchatError(.invalidRelayBatch) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: [e[0], e[0]], relayURLs: [relayA], now: t0)
        }
        expectSoftchatError(.invalidRelayBatch) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: e, relayURLs: [relayA, relayA], now: t0)
        }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["257"]) {
            _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(257, "many"), relayURLs: [relayA], now: t0)
        }
        #expect(try t.tableCounts() == counts)
        #expect(try t.account.outgoing.enqueueSigned(operationID: "op", events: events(256, "many"), relayURLs: [relayA], now: t0).count == 256)
    }

    @Test func anOwnReplaceableEventThatLosesToANewerOneStillHasItsPayload() throws {
        let t = try TestAccount()
        let newer = signed(kind: 0, content: "{\"name\":\"new\"}", createdAt: t0 + 10)
        let older = signed(kind: 0, content: "{\"name\":\"old\"}", createdAt: t0)
        try t.account.incoming.ingest([newer], receivedAt: t0 + 10)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "profile", events: [older], relayURLs: [relayA], now: t0 + 20)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayA, now: t0 + 20))
        #expect(claim.payloads.map(\.intentID) == ids)
        #expect(claim.payloads.first?.eventJSON == older.jsonText)
        #expect(try t.served(now: t0 + 20) == [newer.id])
        // A newer own replaceable replaces the served one, but the intent's event row stays.
        let newest = signed(kind: 0, content: "{\"name\":\"newest\"}", createdAt: t0 + 30)
        _ = try t.account.outgoing.enqueueSigned(operationID: "profile-2", events: [newest], relayURLs: [relayA], now: t0 + 30)
        #expect(try t.served(now: t0 + 30) == [newest.id])
        #expect(try t.account.check(now: t0 + 30).ok)
    }

    @Test func twoVersionsOfTheSameReplaceableEventInOneOperationBothGetIntents() throws {
        let t = try TestAccount()
        let old = signed(kind: 0, content: "{\"name\":\"v1\"}", createdAt: t0)
        let new = signed(kind: 0, content: "{\"name\":\"v2\"}", createdAt: t0 + 1)
        let articleV1 = signed(kind: 30_023, tags: [["d", "post"]], content: "v1", createdAt: t0)
        let articleV2 = signed(kind: 30_023, tags: [["d", "post"]], content: "v2", createdAt: t0 + 1)
        let ids = try t.account.outgoing.enqueueSigned(
            operationID: "profiles", events: [old, new, articleV2, articleV1], relayURLs: [relayA], now: t0 + 2)
        #expect(ids.count == 4)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayA, now: t0 + 2))
        #expect(claim.payloads.map(\.eventID) == [old.id, new.id, articleV2.id, articleV1.id])
        #expect(Set(try t.served(now: t0 + 2)) == [new.id, articleV2.id])
        let report = try t.account.check(now: t0 + 2)
        #expect(report.ok, "\(report.problems)")
    }

    // MARK: Claim lifecycle

    /// Every claim writes a lease row; a process that claims once a second for a year wrote
    /// 31 million. A claim now removes released or expired leases older than a day that no
    /// intent still names (a day keeps a reused lease id refused for as long as any host runs).
    @Test func leasesThatHoldNothingAreRemovedADayAfterTheyBegan() throws {
        let t = try TestAccount()
        let hours = 72
        for h in 0..<hours {
            let now = t0 + Int64(h) * 3_600
            _ = try t.account.outgoing.enqueueSigned(operationID: "op-\(h)", events: [events(1, "h\(h)")[0]], relayURLs: [relayA], now: now)
            let result = try #require(try t.account.delivery.claim(leaseID: "L\(h)", relayURL: relayA, now: now))
            try t.account.delivery.markSocketWritten(result.claim, intentIDs: result.payloads.map(\.intentID))
            try t.account.delivery.applyResults(
                result.claim, results: result.payloads.map { DeliveryResult(intentID: $0.intentID, decision: decision(.accepted, for: $0.eventID)) })
            try t.account.delivery.release(result.claim)
        }
        // The day's 24 leases and the newest one's hour remain; nothing older.
        let leases = try t.scalar("SELECT COUNT(*) FROM delivery_leases")
        #expect(leases <= 25, "\(leases) lease rows after \(hours) hourly claims")
        #expect(try t.account.delivery.stateCounts() == [.accepted: Int(hours)])
        // A lease an intent still names stays, however old: the intent's history keeps it.
        _ = try t.account.outgoing.enqueueSigned(operationID: "held", events: [events(1, "held")[0]], relayURLs: [relayB], now: t0)
        let held = try #require(try t.account.delivery.claim(leaseID: "held", relayURL: relayB, now: t0))
        _ = try t.account.outgoing.enqueueSigned(operationID: "later", events: [events(1, "later")[0]], relayURLs: [relayA], now: t0 + 10 * 86_400)
        _ = try #require(try t.account.delivery.claim(leaseID: "later", relayURL: relayA, now: t0 + 10 * 86_400))
        #expect(try t.scalar("SELECT COUNT(*) FROM delivery_leases") == 2)
        #expect(try t.scalar("SELECT COUNT(*) FROM delivery_leases WHERE lease_id = 'held'") == 1)
        #expect(try t.account.check(now: t0 + 10 * 86_400).ok)
        _ = held
    }

    @Test func claimWriteApplyReleaseLifecycleMovesEveryIntentThroughOneStateAtATime() throws {
        let t = try TestAccount()
        let out = events(4)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: out, relayURLs: [relayA], now: t0)
        #expect(try t.account.delivery.stateCounts() == [.pending: 4])

        let result = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0))
        #expect(result.claim.leaseID == "L1")
        #expect(result.claim.relayURL == relayA)
        #expect(result.claim.expiresAt == t0 + 60)
        #expect(result.payloads.map(\.intentID) == ids)
        #expect(result.payloads.map(\.eventID) == out.map(\.id))
        #expect(result.payloads.map(\.eventJSON) == out.map(\.jsonText))
        #expect(try t.account.delivery.heldIntents(result.claim).map(\.intentID) == ids)
        #expect(try t.account.check(now: t0).liveLeases == 1)

        try t.account.delivery.markSocketWritten(result.claim, intentIDs: [ids[0], ids[1], ids[2]])
        #expect(try t.account.delivery.stateCounts() == [.pending: 1, .inFlight: 3])
        #expect(try t.intent(ids[0])?.attempts == 1)
        // Writing again is not allowed: the intent is no longer pending.
        expectSoftchatError(.invalidDeliveryState, mentioning: ["inFlight"]) {
            try t.account.delivery.markSocketWritten(result.claim, intentIDs: [ids[0]])
        }

        try t.account.delivery.applyResults(
            result.claim,
            results: [
                DeliveryResult(intentID: ids[0], decision: decision(.accepted, for: out[0].id)),
                DeliveryResult(intentID: ids[1], decision: decision(.rejected, for: out[1].id)),
                DeliveryResult(intentID: ids[2], decision: decision(.retryable, for: out[2].id)),
            ])
        #expect(try t.account.delivery.stateCounts() == [.accepted: 1, .rejected: 1, .retryable: 1, .pending: 1])
        #expect(try t.intent(ids[1])?.category == "invalid")
        #expect(try t.intent(ids[2])?.category == "rate-limited")
        #expect(try t.account.delivery.heldIntents(result.claim).map(\.intentID) == [ids[3]])
        // A terminal intent is not under the claim any more.
        expectSoftchatError(.invalidDeliveryState, mentioning: ["not held"]) {
            try t.account.delivery.applyResults(result.claim, results: [DeliveryResult(intentID: ids[0], decision: decision(.accepted))])
        }

        try t.account.delivery.release(result.claim)
        #expect(try t.account.delivery.stateCounts() == [.accepted: 1, .rejected: 1, .retryable: 1, .pending: 1])
        #expect(try t.account.check(now: t0).liveLeases == 0)
        #expect(try t.scalar("SELECT COUNT(*) FROM publish_intents WHERE lease_id IS NOT NULL") == 0)

        // The retryable and the pending intent are claimable again; terminal ones never.
        let next = try #require(try t.account.delivery.claim(leaseID: "L2", relayURL: relayA, now: t0 + 1))
        #expect(Set(next.payloads.map(\.intentID)) == [ids[2], ids[3]])
        #expect(try t.account.delivery.stateCounts() == [.accepted: 1, .rejected: 1, .pending: 2])
        #expect(try t.account.check(now: t0 + 1).ok)
    }

    @Test func claimMaxMustBe1To256() throws {
        let t = try TestAccount()
        _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA], now: t0)
        for bad in [0, -1, 257] {
            expectSoftchatError(.invalidRelayBatch, mentioning: ["max"]) {
                _ = try t.account.delivery.claim(leaseID: "L\(bad)", relayURL: relayA, now: t0, max: bad)
            }
        }
        #expect(try t.scalar("SELECT COUNT(*) FROM delivery_leases") == 0)
        #expect(try t.account.delivery.claim(leaseID: "one", relayURL: relayA, now: t0, max: 1)?.payloads.count == 1)
        #expect(try t.account.delivery.claim(leaseID: "all", relayURL: relayA, now: t0, max: 256)?.payloads.count == 2)
    }

    @Test func claimReturnsNilWhenNothingIsClaimableAndRecordsNoLease() throws {
        let t = try TestAccount()
        #expect(try t.account.delivery.claim(leaseID: "empty", relayURL: relayA, now: t0) == nil)
        _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayB], now: t0)
        #expect(try t.account.delivery.claim(leaseID: "other relay", relayURL: relayA, now: t0) == nil)
        #expect(try t.scalar("SELECT COUNT(*) FROM delivery_leases") == 0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayB, now: t0))
        try t.account.delivery.markSocketWritten(claim.claim, intentIDs: claim.payloads.map(\.intentID))
        try t.account.delivery.applyResults(
            claim.claim, results: claim.payloads.map { DeliveryResult(intentID: $0.intentID, decision: decision(.accepted)) })
        // Everything is terminal: nothing to claim, even long after.
        #expect(try t.account.delivery.claim(leaseID: "done", relayURL: relayB, now: t0 + 100_000) == nil)
        // A lease id is used once, even when the claim found nothing.
        expectSoftchatError(.invalidDeliveryState, mentioning: ["already used"]) {
            _ = try t.account.delivery.claim(leaseID: "L", relayURL: relayB, now: t0 + 1)
        }
        expectSoftchatError(.invalidDeliveryState) { _ = try t.account.delivery.claim(leaseID: "", relayURL: relayB, now: t0) }
    }

    @Test func aLiveLeasesWorkIsNotClaimableByAnotherLease() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA], now: t0)
        let first = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0, max: 2))
        #expect(first.payloads.map(\.intentID) == [ids[0], ids[1]])
        try t.account.delivery.markSocketWritten(first.claim, intentIDs: [ids[0]])
        let second = try #require(try t.account.delivery.claim(leaseID: "L2", relayURL: relayA, now: t0 + 59))
        #expect(second.payloads.map(\.intentID) == [ids[2]])
        #expect(try t.account.delivery.claim(leaseID: "L3", relayURL: relayA, now: t0 + 59) == nil)
        #expect(try t.account.check(now: t0 + 59).liveLeases == 2)
    }

    @Test func anExpiredLeasesPendingAndInFlightWorkIsReclaimedByTheNextClaim() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA], now: t0)
        let first = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0))
        try t.account.delivery.markSocketWritten(first.claim, intentIDs: [ids[0]])
        #expect(try t.account.delivery.stateCounts() == [.inFlight: 1, .pending: 2])
        // Not a second before the expiry…
        #expect(try t.account.delivery.claim(leaseID: "early", relayURL: relayA, now: first.claim.expiresAt - 1) == nil)
        // …but at it, everything the dead lease held comes back, in enqueue order.
        let second = try #require(try t.account.delivery.claim(leaseID: "L2", relayURL: relayA, now: first.claim.expiresAt))
        #expect(second.payloads.map(\.intentID) == ids)
        #expect(try t.account.delivery.stateCounts() == [.pending: 3])
        #expect(try t.intent(ids[0])?.attempts == 1, "the write before the crash still counts")
        #expect(try t.account.delivery.heldIntents(first.claim).isEmpty)
        #expect(try t.account.delivery.heldIntents(second.claim).count == 3)
        try t.account.delivery.markSocketWritten(second.claim, intentIDs: ids)
        try t.account.delivery.applyResults(second.claim, results: ids.map { DeliveryResult(intentID: $0, decision: decision(.accepted)) })
        #expect(try t.account.delivery.stateCounts() == [.accepted: 3])
        #expect(try t.intent(ids[0])?.attempts == 2)
    }

    // MARK: Stale claims

    @Test func aReleasedClaimIsStaleAndChangesNothing() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0)).claim
        try t.account.delivery.markSocketWritten(claim, intentIDs: [ids[0]])
        try t.account.delivery.release(claim)
        #expect(try t.account.delivery.stateCounts() == [.pending: 2])
        let snapshot = try t.deliverySnapshot()
        expectStale(t, claim, ids)
        #expect(try t.deliverySnapshot() == snapshot)
        // The work went back to the pool.
        #expect(try t.account.delivery.claim(leaseID: "L2", relayURL: relayA, now: t0 + 1)?.payloads.count == 2)
    }

    @Test func anExpiredClaimWhoseWorkWasClaimedAgainIsStaleAndChangesNothing() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let old = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0)).claim
        try t.account.delivery.markSocketWritten(old, intentIDs: [ids[0]])
        let new = try #require(try t.account.delivery.claim(leaseID: "L2", relayURL: relayA, now: old.expiresAt + 5)).claim
        let snapshot = try t.deliverySnapshot()
        let counts = try t.account.delivery.stateCounts()
        expectStale(t, old, ids)
        #expect(try t.deliverySnapshot() == snapshot)
        #expect(try t.account.delivery.stateCounts() == counts)
        // The new claim is unaffected.
        try t.account.delivery.markSocketWritten(new, intentIDs: ids)
        try t.account.delivery.applyResults(new, results: ids.map { DeliveryResult(intentID: $0, decision: decision(.accepted)) })
        #expect(try t.account.delivery.stateCounts() == [.accepted: 2])
    }

    @Test func anExpiredClaimNotYetClaimedAgainMayStillFinishItsWork() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(1), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0)).claim
        try t.account.delivery.markSocketWritten(claim, intentIDs: ids)
        // Late (past expiresAt) but nobody took the work: the relay's answer still counts.
        try t.account.delivery.applyResults(claim, results: [DeliveryResult(intentID: ids[0], decision: decision(.accepted))])
        #expect(try t.account.delivery.stateCounts() == [.accepted: 1])
    }

    @Test func aClaimForTheWrongRelayOrAnUnknownLeaseIsRefused() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(1), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: relayA, now: t0)).claim
        let snapshot = try t.deliverySnapshot()
        expectStale(t, DeliveryClaim(leaseID: "L1", relayURL: relayB), ids)
        expectStale(t, DeliveryClaim(leaseID: "nope", relayURL: relayA), ids)
        #expect(try t.deliverySnapshot() == snapshot)
        // Rebuilt from lease id and relay (as the CLI does), the live claim works.
        try t.account.delivery.markSocketWritten(DeliveryClaim(leaseID: claim.leaseID, relayURL: relayA), intentIDs: ids)
    }

    /// markSocketWritten, applyResults and release all refuse `claim` with invalid_delivery_state.
    func expectStale(_ t: TestAccount, _ claim: DeliveryClaim, _ ids: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        expectSoftchatError(.invalidDeliveryState, sourceLocation: sourceLocation) {
            try t.account.delivery.markSocketWritten(claim, intentIDs: ids)
        }
        expectSoftchatError(.invalidDeliveryState, sourceLocation: sourceLocation) {
            try t.account.delivery.applyResults(claim, results: ids.map { DeliveryResult(intentID: $0, decision: decision(.accepted)) })
        }
        expectSoftchatError(.invalidDeliveryState, sourceLocation: sourceLocation) {
            try t.account.delivery.release(claim)
        }
    }

    // MARK: Retry budget

    static func failed(_ intentID: String) -> DeliveryResult {
        DeliveryResult(intentID: intentID, decision: DeliveryDecision(eventID: "", state: .retryable, category: .error, message: "error: test"))
    }

    @Test func relayFailuresEndRejectedExhaustedAfterTheDefaultTen() throws {
        let t = try TestAccount()
        #expect(t.account.policy.retryBudget == 10)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(1), relayURLs: [relayA], now: t0)
        for attempt in 1...10 {
            let claim = try #require(try t.account.delivery.claim(leaseID: "L\(attempt)", relayURL: relayA, now: t0 + Int64(attempt))).claim
            try t.account.delivery.markSocketWritten(claim, intentIDs: ids)
            try t.account.delivery.applyResults(claim, results: [Self.failed(ids[0])])
            let state = try #require(try t.intent(ids[0]))
            #expect(state.attempts == Int64(attempt))
            if attempt < 10 {
                #expect(state.state == "retryable" && state.category == "error", "attempt \(attempt)")
            } else {
                #expect(state.state == "rejected" && state.category == "exhausted")
            }
        }
        #expect(try t.account.delivery.claim(leaseID: "after", relayURL: relayA, now: t0 + 100) == nil)
        #expect(try t.account.check(now: t0 + 100).ok)
    }

    /// A relay that only says "later" — rate-limited, auth-required — or a session timeout or
    /// lost connection: the event is asked again as long as it takes, never `exhausted` by it.
    /// (Every socket write used to count, so a busy relay ended events rejected/exhausted.)
    @Test func rateLimitsTimeoutsAndLostConnectionsSpendNoRetryBudget() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(1), relayURLs: [relayA], now: t0)
        let later: [DeliveryCategory] = [.rateLimited, .authRequired, .timeout, .transportLost, .cancelled]
        for attempt in 1...30 {
            let claim = try #require(try t.account.delivery.claim(leaseID: "L\(attempt)", relayURL: relayA, now: t0 + Int64(attempt))).claim
            try t.account.delivery.markSocketWritten(claim, intentIDs: ids)
            let category = later[attempt % later.count]
            try t.account.delivery.applyResults(
                claim,
                results: [
                    DeliveryResult(intentID: ids[0], decision: DeliveryDecision(eventID: "", state: .retryable, category: category, message: ""))
                ])
            let state = try #require(try t.intent(ids[0]))
            #expect(state.state == "retryable" && state.category == category.rawValue, "attempt \(attempt)")
        }
        #expect(try t.intent(ids[0])?.attempts == 30)
        #expect(try t.scalar("SELECT failures FROM publish_intents") == 0)
    }

    @Test func leasesThatKeepExpiringAfterWritesEndRejectedExhausted() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        var now = t0
        for round in 1...10 {
            let claim = try #require(try t.account.delivery.claim(leaseID: "L\(round)", relayURL: relayA, now: now)).claim
            #expect(try t.account.delivery.heldIntents(claim).count == 2)
            // Only the first intent is ever written; the relay never answers; the process dies.
            try t.account.delivery.markSocketWritten(claim, intentIDs: [ids[0]])
            now = claim.expiresAt
        }
        #expect(try t.intent(ids[0])?.attempts == 10)
        let last = try #require(try t.account.delivery.claim(leaseID: "final", relayURL: relayA, now: now))
        #expect(last.payloads.map(\.intentID) == [ids[1]], "the never-written intent is still deliverable")
        let exhausted = try #require(try t.intent(ids[0]))
        #expect(exhausted.state == "rejected" && exhausted.category == "exhausted")
        #expect(try t.account.check(now: now).ok)
    }

    /// A message delivered one at a time takes two synced commits (its enqueue, the relay's
    /// answer): the claim and the socket-written mark, whose loss in a power cut only redoes
    /// work, commit without an fdatasync of their own. A claim that ends work past its retry
    /// budget (a reported state) is synced.
    @Test func onlyTheEnqueueAndTheAnswerAreSyncedUnlessAClaimEndsWork() throws {
        let t = try TestAccount(policy: AccountPolicy(leaseSeconds: 5, retryBudget: 1))
        let store = t.account.store
        func counts() -> (all: Int, unsynced: Int) {
            (store.commits.load(ordering: .relaxed), store.unsyncedCommits.load(ordering: .relaxed))
        }
        let start = counts()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "1", relayURL: relayA, now: t0, max: 1)).claim
        try t.account.delivery.markSocketWritten(claim, intentIDs: [ids[0]])
        try t.account.delivery.applyResults(
            claim,
            results: [DeliveryResult(intentID: ids[0], decision: DeliveryDecision(eventID: "", state: .accepted, category: .accepted, message: ""))])
        let delivered = counts()
        #expect(delivered.all - start.all == 4 && delivered.unsynced - start.unsynced == 2, "\(start) → \(delivered)")
        // The second intent is written and its lease runs out: its lost answer spends the budget
        // of one, so the next claim ends it rejected/exhausted, in a synced commit.
        let second = try #require(try t.account.delivery.claim(leaseID: "2", relayURL: relayA, now: t0)).claim
        try t.account.delivery.markSocketWritten(second, intentIDs: [ids[1]])
        let before = counts()
        #expect(try t.account.delivery.claim(leaseID: "3", relayURL: relayA, now: second.expiresAt) == nil)
        let after = counts()
        #expect(try t.intent(ids[1])?.category == "exhausted")
        // The unsynced attempt stopped before ending anything; the synced one ended it.
        #expect(after.all - before.all == 2 && after.unsynced - before.unsynced == 1, "\(before) → \(after)")
    }

    @Test func aSmallerRetryBudgetFromThePolicyApplies() throws {
        let t = try TestAccount(policy: AccountPolicy(leaseSeconds: 5, retryBudget: 2))
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(1), relayURLs: [relayA], now: t0)
        let c1 = try #require(try t.account.delivery.claim(leaseID: "1", relayURL: relayA, now: t0)).claim
        #expect(c1.expiresAt == t0 + 5)
        try t.account.delivery.markSocketWritten(c1, intentIDs: ids)
        let c2 = try #require(try t.account.delivery.claim(leaseID: "2", relayURL: relayA, now: t0 + 5)).claim
        try t.account.delivery.markSocketWritten(c2, intentIDs: ids)
        // One failure for the answer lost with c1's lease, one the relay reports: two of two.
        try t.account.delivery.applyResults(c2, results: [Self.failed(ids[0])])
        #expect(try t.intent(ids[0])?.category == "exhausted")
    }

    // MARK: All or nothing

    @Test func applyResultsIsAllOrNothing() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA, relayB], now: t0)
        let a = try #require(try t.account.delivery.claim(leaseID: "A", relayURL: relayA, now: t0)).claim
        let b = try #require(try t.account.delivery.claim(leaseID: "B", relayURL: relayB, now: t0)).claim
        let held = try t.account.delivery.heldIntents(a).map(\.intentID)
        try t.account.delivery.markSocketWritten(a, intentIDs: held)
        let snapshot = try t.deliverySnapshot()
        let good = held.map { DeliveryResult(intentID: $0, decision: decision(.accepted)) }
        let cases: [(String, [DeliveryResult])] = [
            ("another claim's intent", good + [DeliveryResult(intentID: ids[1], decision: decision(.accepted))]),
            ("an unknown intent", good + [DeliveryResult(intentID: "no-such-intent", decision: decision(.accepted))]),
            ("an intent twice", good + [good[0]]),
            ("a non-result state", [good[0], DeliveryResult(intentID: held[1], decision: decision(.inFlight))]),
            ("a pending decision", [DeliveryResult(intentID: held[2], decision: decision(.pending)), good[0]]),
        ]
        for (label, results) in cases {
            expectSoftchatError(.invalidDeliveryState) { try t.account.delivery.applyResults(a, results: results) }
            #expect(try t.deliverySnapshot() == snapshot, "\(label) changed something")
        }
        // markSocketWritten is all-or-nothing too.
        expectSoftchatError(.invalidDeliveryState) {
            try t.account.delivery.markSocketWritten(b, intentIDs: try t.account.delivery.heldIntents(b).map(\.intentID) + [held[0]])
        }
        #expect(try t.deliverySnapshot() == snapshot)
        try t.account.delivery.applyResults(a, results: good)
        #expect(try t.account.delivery.stateCounts(relayURL: relayA) == [.accepted: 3])
    }

    // MARK: Sync cursors and subscription policy

    @Test func syncCursorsAdvanceOnlyForwardPerRelayAndSubscription() throws {
        let t = try TestAccount()
        #expect(try t.account.syncCursor(relayURL: relayA, subscriptionID: "chat") == nil)
        try t.account.advanceSyncCursor(relayURL: relayA, subscriptionID: "chat", createdAt: t0 + 10, now: t0)
        try t.account.advanceSyncCursor(relayURL: relayA, subscriptionID: "chat", createdAt: t0 + 5, now: t0 + 1)
        #expect(try t.account.syncCursor(relayURL: relayA, subscriptionID: "chat") == t0 + 10)
        try t.account.advanceSyncCursor(relayURL: relayA, subscriptionID: "chat", createdAt: t0 + 20, now: t0 + 2)
        #expect(try t.account.syncCursor(relayURL: relayA, subscriptionID: "chat") == t0 + 20)
        try t.account.advanceSyncCursor(relayURL: relayB, subscriptionID: "chat", createdAt: t0 + 1, now: t0 + 2)
        try t.account.advanceSyncCursor(relayURL: relayA, subscriptionID: "notes", createdAt: t0 + 2, now: t0 + 2)
        #expect(try t.account.syncCursor(relayURL: relayB, subscriptionID: "chat") == t0 + 1)
        #expect(try t.account.syncCursor(relayURL: relayA, subscriptionID: "notes") == t0 + 2)
        #expect(try t.account.syncCursor(relayURL: relayA, subscriptionID: "chat") == t0 + 20)
        // Durable: a reopened account resubscribes from the same place.
        t.account.close()
        let reopened = try SoftchatAccount.open(path: t.path)
        defer { reopened.close() }
        #expect(try reopened.syncCursor(relayURL: relayA, subscriptionID: "chat") == t0 + 20)
    }

    @Test func theSubscriptionPolicyIsSetReplacedRemovedAndFilteredByRelay() throws {
        let t = try TestAccount()
        let chat = ##"{"kinds":[14],"#p":["\##(StorageKeys.alice.publicKeyHex)"]}"##
        try t.account.setSubscription(id: "chat", filtersJSON: [chat])
        try t.account.setSubscription(id: "notes", filtersJSON: [#"{"kinds":[1]}"#, #"{"kinds":[7],"limit":10}"#], relayURL: relayA)
        try t.account.setSubscription(id: "b-only", filtersJSON: [#"{"kinds":[0]}"#], relayURL: relayB)
        #expect(try t.account.subscriptions().map(\.subscriptionID) == ["b-only", "chat", "notes"])
        #expect(try t.account.subscriptions(for: relayA).map(\.subscriptionID) == ["chat", "notes"])
        #expect(try t.account.subscriptions(for: relayB).map(\.subscriptionID) == ["b-only", "chat"])
        let notes = try #require(try t.account.subscriptions(for: relayA).last)
        #expect(notes.filtersJSON == [#"{"kinds":[1]}"#, #"{"kinds":[7],"limit":10}"#])
        #expect(notes.relayURL == relayA)
        #expect(try t.account.subscriptions().first { $0.subscriptionID == "chat" }?.relayURL == nil)

        // Replace: new filters and a new relay, same id.
        try t.account.setSubscription(id: "notes", filtersJSON: [#"{"kinds":[1,6]}"#], relayURL: relayB)
        #expect(try t.account.subscriptions(for: relayA).map(\.subscriptionID) == ["chat"])
        #expect(try t.account.subscriptions(for: relayB).first { $0.subscriptionID == "notes" }?.filtersJSON == [#"{"kinds":[1,6]}"#])

        // Invalid filters are refused and change nothing.
        let before = try t.account.subscriptions()
        expectSoftchatError(.invalidRelayFilter) { try t.account.setSubscription(id: "bad", filtersJSON: [#"{"kinds":"1"}"#]) }
        expectSoftchatError(.invalidRelayFilter) { try t.account.setSubscription(id: "bad", filtersJSON: []) }
        expectSoftchatError(.invalidRelayFilter) { try t.account.setSubscription(id: "notes", filtersJSON: ["not json"]) }
        #expect(try t.account.subscriptions() == before)

        try t.account.removeSubscription(id: "notes")
        try t.account.removeSubscription(id: "never existed")
        #expect(try t.account.subscriptions().map(\.subscriptionID) == ["b-only", "chat"])
    }

    // MARK: check()

    @Test func checkReportsOKOnAHealthyAccount() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(content: "in"), signed(tags: [["expiration", "\(t0 - 1)"]], content: "old")], receivedAt: t0)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayA, now: t0)).claim
        try t.account.delivery.markSocketWritten(claim, intentIDs: [ids[0]])
        let report = try t.account.check(now: t0)
        #expect(report.ok, "\(report.problems)")
        #expect(report.events == 3)
        #expect(report.quarantined == 1)
        #expect(report.receipts == 1)
        #expect(report.intentsByState == [.inFlight: 1, .pending: 1])
        #expect(report.liveLeases == 1)
        #expect(try t.account.check(now: claim.expiresAt).liveLeases == 0)
    }

    @Test func checkReportsEveryBrokenInvariantOfADeliberatelyCorruptedAccount() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(content: "in")], receivedAt: t0)
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayA, now: t0, max: 1)).claim
        #expect(try t.account.check(now: t0).ok)

        // A second connection with foreign keys and CHECK constraints off writes what the
        // account never would.
        let raw = try SQLiteConnection(path: t.path)
        try raw.execute("PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON")
        try raw.execute("UPDATE publish_intents SET lease_id = 'ghost-lease' WHERE intent_id = '\(ids[1])'")
        try raw.execute("UPDATE publish_intents SET state = 'limbo' WHERE intent_id = '\(ids[2])'")
        try raw.execute("UPDATE publish_intents SET state = 'accepted' WHERE intent_id = '\(ids[0])'")
        try raw.execute("INSERT INTO ingest_receipts (received_at, total, inserted, duplicates, quarantined) VALUES (\(t0), 5, 1, 1, 1)")
        try raw.execute(
            """
            INSERT INTO publish_intents (intent_id, operation_id, event_id, relay_url, state, attempts, sequence, updated_at)
            VALUES ('orphan', 'op', '\(String(repeating: "0", count: 64))', '\(relayA)', 'pending', 0, 99, \(t0))
            """)
        let report = try t.account.check(now: t0)
        #expect(!report.ok)
        let problems = report.problems.joined(separator: "\n")
        #expect(problems.contains("1 intents name a lease that does not exist"), "\(problems)")
        #expect(problems.contains("intents in unknown states: [\"limbo\"]"), "\(problems)")
        #expect(problems.contains("1 terminal intents still hold a lease"), "\(problems)")
        #expect(problems.contains("1 ingestion receipts are not total"), "\(problems)")
        #expect(problems.contains("1 intents have no stored event"), "\(problems)")
        #expect(problems.contains("foreign key: publish_intents"), "\(problems)")
        _ = claim
    }

    /// A delivery state is read from its column as a `DeliveryState` or not at all: an unknown
    /// spelling (a file written by something else) used to read as `pending`, a state no relay
    /// said, in the operation's status and in a claim's held intents.
    @Test func anUnknownDeliveryStateInTheFileIsAnErrorNeverPending() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let claim = try #require(try t.account.delivery.claim(leaseID: "L", relayURL: relayA, now: t0)).claim
        do {
            let raw = try SQLiteConnection(path: t.path)
            try raw.execute("PRAGMA ignore_check_constraints = ON")
            try raw.execute("UPDATE publish_intents SET state = 'limbo' WHERE intent_id = '\(ids[1])'")
        }
        for (what, read) in [
            ("intents(operationID:)", { () throws(SoftchatError) in _ = try t.account.delivery.intents(operationID: "op") }),
            ("heldIntents", { () throws(SoftchatError) in _ = try t.account.delivery.heldIntents(claim) }),
            ("stateCounts", { () throws(SoftchatError) in _ = try t.account.delivery.stateCounts() }),
        ] as [(String, () throws(SoftchatError) -> Void)] {
            do {
                try read()
                Issue.record("\(what) read an unknown state as a state")
            } catch {
                #expect(error.code == .accountStorageFailed, "\(what): \(error)")
                #expect(error.message.contains("\"limbo\""), "\(what): \(error)")
            }
        }
        let report = try t.account.check(now: t0)
        #expect(report.intentsByState == [.pending: 1])
        #expect(report.problems.contains("intents in unknown states: [\"limbo\"]"))
    }

    @Test func checkReportsAnIntegrityFailureOfTheFileItself() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest((0..<50).map { signed(tags: [["t", "x\($0)"]], content: "n\($0)") }, receivedAt: t0)
        // Another program (Softchat's own connections are defensive and refuse this) rewrites an
        // index's definition behind SQLite's back: the index no longer matches its table.
        var raw: OpaquePointer?
        #expect(sqlite3_open(t.path, &raw) == SQLITE_OK)
        for sql in [
            "PRAGMA writable_schema = ON",
            "UPDATE sqlite_schema SET sql = 'CREATE INDEX event_tags_time ON event_tags (value, name, created_at DESC, event_seq)' WHERE name = 'event_tags_time'",
            "PRAGMA writable_schema = RESET",
        ] {
            #expect(sqlite3_exec(raw, sql, nil, nil, nil) == SQLITE_OK, "\(sql)")
        }
        sqlite3_close(raw)
        let report = try SoftchatAccount.open(path: t.path).check(now: t0)
        #expect(!report.ok)
        #expect(report.problems.contains { $0.hasPrefix("integrity:") }, "\(report.problems)")
    }
}
