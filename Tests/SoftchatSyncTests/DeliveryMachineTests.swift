import SoftchatCore
import Testing

@testable import SoftchatSync

/// The engine's publishing sub-machine on its own: claims, leases, decisions and writes, with
/// no session, account or clock.
@Suite struct DeliveryMachineTests {
    let lease = "L-1"
    func claim(_ lease: String = "L-1") -> DeliveryClaim { DeliveryClaim(leaseID: lease, relayURL: "wss://r", expiresAt: 100) }
    func payload(_ n: Int) -> DeliveryPayload { DeliveryPayload(intentID: "i\(n)", eventID: "e\(n)", eventJSON: "{}") }
    func decision(_ n: Int, _ state: DeliveryState, _ category: DeliveryCategory = .accepted) -> DeliveryDecision {
        DeliveryDecision(eventID: "e\(n)", state: state, category: category, message: "")
    }

    /// A machine holding `count` events under one claim (published to the session, which the
    /// machine is told of, `sessionIdle`, rather than keeping a copy).
    func holding(_ count: Int) -> DeliveryMachine {
        var m = DeliveryMachine()
        m.claimSent()
        m.claimAnswered()
        m.hold(claim(), renewAt: 50)
        for n in 0..<count { #expect(m.claimed(payload(n), lease: lease) == .publish) }
        return m
    }

    @Test func oneClaimAtATimeAndOnlyOnceTheSessionAndTheResultsAreDrained() {
        var m = DeliveryMachine()
        #expect(m.mayClaim(now: 0, sessionIdle: true))
        m.claimSent()
        #expect(!m.mayClaim(now: 0, sessionIdle: true), "a claim in flight")
        m.claimAnswered(pauseUntil: 2_000)
        #expect(!m.mayClaim(now: 1_999, sessionIdle: true) && m.mayClaim(now: 2_000, sessionIdle: true), "held under another live lease until then")
        m = holding(2)
        #expect(!m.mayClaim(now: 10_000, sessionIdle: false), "the session still has events")
        _ = m.decided(decision(0, .accepted), now: 10, retryDelayMilliseconds: 1_000)
        _ = m.decided(decision(1, .accepted), now: 10, retryDelayMilliseconds: 1_000)
        #expect(!m.mayClaim(now: 10_000, sessionIdle: true), "their results are not committed yet")
        #expect(m.takeResults().map { $0.results.count } == [2])
        #expect(m.mayClaim(now: 10_000, sessionIdle: true))
        m.nothingToClaim()
        #expect(!m.mayClaim(now: 10_000, sessionIdle: true), "nothing waits until a wake")
    }

    @Test func laterFromTheRelayPausesClaimingOncePerClaimDoublingUpToAMinuteAndAnAcceptanceResetsIt() {
        var m = DeliveryMachine()
        var pauses: [Int64] = []
        for n in 0..<7 {
            // Each claim's whole burst answered "later": one doubling per claim, not per answer.
            m.hold(claim("L\(n)"), renewAt: 50)
            for k in 0..<3 { _ = m.claimed(DeliveryPayload(intentID: "i\(n)-\(k)", eventID: "e\(n)-\(k)", eventJSON: "{}"), lease: "L\(n)") }
            for k in 0..<3 {
                let later = DeliveryDecision(eventID: "e\(n)-\(k)", state: .retryable, category: .error, message: "error: busy")
                _ = m.decided(later, now: 0, retryDelayMilliseconds: 1_000)
            }
            pauses.append(m.claimPausedUntil)
        }
        #expect(pauses == [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000])
        m.hold(claim("L9"), renewAt: 50)
        _ = m.claimed(payload(9), lease: "L9")
        _ = m.decided(decision(9, .accepted), now: 0, retryDelayMilliseconds: 1_000)
        #expect(m.retryPause == 0)
        // A timeout or a lost connection is spaced already: no pause of its own.
        var t = holding(2)
        _ = t.decided(decision(0, .retryable, .timeout), now: 0, retryDelayMilliseconds: 1_000)
        _ = t.decided(decision(1, .retryable, .transportLost), now: 0, retryDelayMilliseconds: 1_000)
        #expect(t.claimPausedUntil == 0 && t.needsClaim)
    }

    @Test func theSendWindowStartsSmallDoublesUntilRateLimitedThenHalvesOncePerClaimAndPacesClaims() {
        var m = DeliveryMachine()
        #expect(m.claimSize(batch: 256) == DeliveryMachine.initialSendWindow)
        // Slow start: every acceptance adds one, so a claim fully accepted doubles it.
        m = holding(16)
        for n in 0..<16 { _ = m.decided(decision(n, .accepted), now: 0, retryDelayMilliseconds: 1_000) }
        #expect(m.claimSize(batch: 256) == 32)
        #expect(m.claimSize(batch: 20) == 20, "never past the batch")
        // A claim of 20, five accepted and fifteen rate-limited: halved once, to 10.
        var r = DeliveryMachine()
        _ = r.claimSize(batch: 256)
        r.hold(claim(), renewAt: 50)
        for n in 0..<20 { _ = r.claimed(payload(n), lease: lease) }
        for n in 0..<5 { _ = r.decided(decision(n, .accepted), now: 0, retryDelayMilliseconds: 1_000) }
        for n in 5..<20 { _ = r.decided(decision(n, .retryable, .rateLimited), now: 0, retryDelayMilliseconds: 1_000) }
        #expect(r.claimSize(batch: 256) == 10 && !r.slowStart && r.paced)
        // Paced from now on: a claim sent at t waits a pace before the next.
        r.claimSent(now: 5_000, pace: 1_000)
        r.claimAnswered()
        #expect(r.claimPausedUntil == 6_000)
        // Then it grows by one per window of acceptances, not per acceptance.
        r.released(lease)
        r.hold(claim("L-2"), renewAt: 50)
        for n in 30..<40 { _ = r.claimed(payload(n), lease: "L-2") }
        for n in 30..<39 { _ = r.decided(decision(n, .accepted), now: 0, retryDelayMilliseconds: 1_000) }
        #expect(r.claimSize(batch: 256) == 10)
        _ = r.decided(decision(39, .accepted), now: 0, retryDelayMilliseconds: 1_000)
        #expect(r.claimSize(batch: 256) == 11)
    }

    @Test func aTerminalAnswerAfterTheRetryableDecisionIsKeptAndAppliedAtTheNextClaim() {
        var m = holding(1)
        let retry = m.decided(decision(0, .retryable, .timeout), now: 5, retryDelayMilliseconds: 1_000)
        #expect(retry.queued)
        #expect(m.takeResults().first?.results.map { $0.decision.state } == [.retryable])
        // The late OK: no claim holds the event any more.
        let late = m.decided(decision(0, .accepted), now: 6, retryDelayMilliseconds: 1_000)
        #expect(!late.queued)
        // Claimed again: settled from the late answer, not published again.
        m.hold(claim("L-2"), renewAt: 50)
        #expect(m.claimed(payload(0), lease: "L-2") == .settled(DeliveryResult(intentID: "i0", decision: decision(0, .accepted))))
    }

    @Test func aClaimIsReleasedOnceWhenItHoldsNothingMore() {
        var m = holding(2)
        #expect(m.finishedClaims().isEmpty, "it holds two events")
        _ = m.decided(decision(0, .accepted), now: 1, retryDelayMilliseconds: 1_000)
        _ = m.decided(decision(1, .rejected, .invalid), now: 1, retryDelayMilliseconds: 1_000)
        #expect(m.finishedClaims().isEmpty, "its results wait for their commit")
        _ = m.takeResults()
        #expect(m.finishedClaims().map { $0.leaseID } == [lease])
        #expect(m.finishedClaims().isEmpty, "released once")
        m.released(lease)
        #expect(m.claims.isEmpty && m.renewalDeadline == nil)
    }

    @Test func aWrittenFrameMarksEachIntentInFlightOnceAndTimesItsAnswer() {
        var m = holding(2)
        m.frameQueued(token: 1, eventIDs: ["e0", "e1"])
        m.frameQueued(token: 2, eventIDs: ["e0"])  // sent again after authentication
        let first = m.frameWritten(token: 1, now: 100)
        #expect(first?.eventIDs == ["e0", "e1"])
        #expect(first?.marks.map { $0.intentIDs } == [["i0", "i1"]])
        #expect(m.frameWritten(token: 2, now: 150)?.marks.isEmpty == true, "already in flight durably")
        #expect(m.frameWritten(token: 9, now: 150) == nil, "not a frame of ours")
        #expect(m.decided(decision(0, .accepted), now: 400, retryDelayMilliseconds: 1_000).latency == 250)
        m.connectionLost()
        #expect(m.writes.isEmpty && m.sentAt.isEmpty)
    }

    @Test func aLeaseIsRenewedOnceAtItsDueTimeUntilAnswered() {
        var m = holding(1)
        #expect(m.renewalDue(now: 49) == nil)
        #expect(m.renewalDue(now: 50)?.leaseID == lease)
        #expect(m.renewalDue(now: 60) == nil, "one renewal at a time")
        #expect(m.renewalDeadline == nil)
        m.renewed(DeliveryClaim(leaseID: lease, relayURL: "wss://r", expiresAt: 200), renewAt: 150)
        #expect(m.renewalDeadline == 150 && m.claims[lease]?.expiresAt == 200)
        // A renewal answered after its lease was released brings nothing back.
        m.released(lease)
        m.renewed(claim(), renewAt: 300)
        #expect(m.claims.isEmpty)
    }
}
