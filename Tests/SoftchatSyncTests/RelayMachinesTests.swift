import SoftchatCore
import Testing

@testable import SoftchatSync

/// The engine's per-relay sub-machines on their own, without the engine: the REQ budget, the
/// keepalive, and the named timer table.
@Suite struct RelayMachinesTests {
    func q(_ id: String) -> QueuedRequest { QueuedRequest(id: id, filtersJSON: [#"{"kinds":[1]}"#]) }

    @Test func theBudgetHandsOutQueuedREQsOnlyWhileASlotIsFreeAndInOrder() {
        var budget = RequestBudget(limit: 3)
        budget.liveChunks["~live0"] = ["a", "b"]
        for id in ["p1", "p2", "p3"] { budget.enqueue(q(id)) }
        // The live REQ and one NIP-77 session hold two of three slots.
        let first = budget.nextToSend(negotiations: 1)
        #expect(first?.id == "p1")
        budget.opened(first!)
        let v1 = budget.nextToSend(negotiations: 1)
        #expect(v1 == nil)
        #expect(budget.inUse(negotiations: 1) == 3)
        // p1's EOSE frees its slot: p2 goes.
        let v2 = budget.ended("p1")
        #expect(v2)
        let v3 = budget.nextToSend(negotiations: 1)?.id
        #expect(v3 == "p2")
        // A queued REQ dropped before it was sent frees nothing.
        let v4 = budget.ended("p3")
        #expect(!v4)
        #expect(budget.queue.isEmpty)
    }

    @Test func aRefusalLowersTheLimitToWhatAnswersAndUnheardREQsComeBackAfterTheWait() {
        var budget = RequestBudget(limit: 16)
        budget.liveChunks["~live0"] = ["a"]
        for id in ["p1", "p2", "p3", "p4"] {
            budget.enqueue(q(id))
            budget.opened(budget.nextToSend(negotiations: 0)!)
        }
        budget.heard("p1")
        budget.heard("p2")
        // "too many subscriptions": two answer (plus the live REQ), two are silent.
        let v5 = budget.refused(now: 1_000, negotiations: 0)
        #expect(v5 == 3)
        #expect(budget.limit == 3)
        #expect(budget.nextSuspectDue(wait: 2_000) == 3_000)
        let v6 = budget.dueSuspects(now: 2_999, wait: 2_000, negotiations: 0)
        #expect(v6.isEmpty)
        // No room while the three that answer hold the limit: both wait another round.
        let full = budget.dueSuspects(now: 3_000, wait: 2_000, negotiations: 0)
        #expect(full.isEmpty)
        #expect(budget.nextSuspectDue(wait: 2_000) == 5_000)
        // p1 ends: room for one, so p3 goes again in place and p4 waits another round.
        let freed = budget.ended("p1")
        #expect(freed)
        let v7 = budget.dueSuspects(now: 5_000, wait: 2_000, negotiations: 0).map(\.id)
        #expect(v7 == ["p3"])
        #expect(budget.nextSuspectDue(wait: 2_000) == 7_000)
        // A second refusal with nothing new open does not lower it further than one beside live.
        budget.heard("p3")
        let v8 = budget.refused(now: 3_100, negotiations: 0)
        #expect(v8 == nil)
        // NIP-11 never raises a learned limit.
        budget.stated(32)
        #expect(budget.limit == 3)
        budget.stated(2)
        #expect(budget.limit == 2)
    }

    @Test func aLostConnectionWithdrawsEveryREQ() {
        var budget = RequestBudget(limit: 4)
        budget.liveChunks["~live0"] = ["a"]
        budget.enqueue(q("p1"))
        budget.opened(budget.nextToSend(negotiations: 0)!)
        budget.enqueue(q("p2"))
        let v9 = budget.withdrawAll()
        #expect(v9 == ["~live0", "p1"])
        #expect(budget.inUse(negotiations: 0) == 0 && budget.queue.isEmpty)
        #expect(budget.limit == 4, "the limit is the relay's, kept across connections")
    }

    /// Issue 45, path 12: one refusal (a burst limit, a restart) capped the budget for the
    /// engine's life. A refusal now teaches its own connection; the next starts from what the
    /// relay stated (or the default), never above it.
    @Test func aRefusalLowersTheLimitForItsConnectionOnlyAndTheNextStartsFromTheCeiling() {
        var budget = RequestBudget(limit: 16)
        budget.liveChunks["~live0"] = ["a"]
        for id in ["p1", "p2", "p3"] {
            budget.enqueue(q(id))
            budget.opened(budget.nextToSend(negotiations: 0)!)
        }
        budget.heard("p1")
        #expect(budget.refused(now: 1_000, negotiations: 0) == 2)
        _ = budget.withdrawAll()
        #expect(budget.limit == 16 && budget.ceiling == 16)
        // NIP-11 lowers the ceiling; a later, larger statement does not raise it.
        budget.stated(8)
        budget.stated(32)
        #expect(budget.limit == 8 && budget.ceiling == 8)
        budget.liveChunks["~live0"] = ["a"]
        budget.enqueue(q("p4"))
        budget.opened(budget.nextToSend(negotiations: 0)!)
        #expect(budget.refused(now: 2_000, negotiations: 0) == 2)
        _ = budget.withdrawAll()
        #expect(budget.limit == 8)
    }

    @Test func keepalivePingsOnTheIntervalGridAndAnUnansweredPingEndsTheConnection() {
        var k = Keepalive()
        k.heard(12_345)
        // Silence for at least one interval, on the grid: every idle connection in one wakeup.
        #expect(k.pingDue(30_000) == 60_000)
        let v10 = k.poll(now: 59_999, interval: 30_000, readDeadline: 10_000)
        #expect(v10 == .nothing)
        let v11 = k.poll(now: 60_000, interval: 30_000, readDeadline: 10_000)
        #expect(v11 == .ping)
        #expect(k.deadline(interval: 30_000, readDeadline: 10_000) == 70_000)
        let v12 = k.poll(now: 65_000, interval: 30_000, readDeadline: 10_000)
        #expect(v12 == .nothing, "one ping at a time")
        let v13 = k.poll(now: 70_000, interval: 30_000, readDeadline: 10_000)
        #expect(v13 == .lost)
        // An answer (any frame) clears it.
        var answered = Keepalive()
        answered.heard(0)
        let v14 = answered.poll(now: 30_000, interval: 30_000, readDeadline: 10_000)
        #expect(v14 == .ping)
        answered.heard(30_100)
        let v15 = answered.poll(now: 45_000, interval: 30_000, readDeadline: 10_000)
        #expect(v15 == .nothing)
        #expect(answered.deadline(interval: 30_000, readDeadline: 10_000) == 90_000, "a full interval of silence after the answer")
    }

    /// Issue 45, path 11: only whole messages counted, so a large message on a slow link (a
    /// minute for its frame) looked like a minute of silence: pinged at the interval, its pong
    /// queued behind the message, lost at the read deadline. Bytes arriving count as life: no
    /// ping while they come, an outstanding ping is answered by them, and silence is counted
    /// again from the last byte.
    @Test func bytesOfAMessageStillArrivingCountAsLife() {
        var k = Keepalive()
        k.heard(0)
        var due: [Keepalive.Due] = []
        for t in stride(from: Int64(1_000), through: 60_000, by: 1_000) {
            k.bytesArrived(t)
            due.append(k.poll(now: t, interval: 30_000, readDeadline: 10_000))
        }
        #expect(due.allSatisfy { $0 == .nothing }, "\(due)")
        // Bytes of a message that began before the ping: they answer it, its pong waits behind.
        var pinged = Keepalive()
        pinged.heard(0)
        let v1 = pinged.poll(now: 30_000, interval: 30_000, readDeadline: 10_000)
        #expect(v1 == .ping)
        pinged.bytesArrived(35_000)
        let v2 = pinged.poll(now: 40_000, interval: 30_000, readDeadline: 10_000)
        #expect(v2 == .nothing, "the ping's deadline passed while bytes arrived")
        // The bytes stop: an interval of silence from the last one, then a ping, then the deadline.
        let v3 = pinged.poll(now: 89_999, interval: 30_000, readDeadline: 10_000)
        let v4 = pinged.poll(now: 90_000, interval: 30_000, readDeadline: 10_000)
        let v5 = pinged.poll(now: 100_000, interval: 30_000, readDeadline: 10_000)
        #expect(v3 == .nothing)
        #expect(v4 == .ping)
        #expect(v5 == .lost)
    }

    /// Issue 45, path 13: `auth-required:` from a relay that refused our AUTH was "later" for
    /// ever. While our AUTH stands refused on the connection, each claim so answered is one try
    /// (its events together), counted across connections; from the third in a row the answer is
    /// a rejection, reported once; an accepted AUTH (or one taken as accepted) starts again.
    @Test func refusedTriesCountOnePerClaimAcrossConnectionsUntilAnAuthIsAccepted() {
        let retry = AuthenticationMachine.Denial.retry
        let (rejectFirst, reject) = (AuthenticationMachine.Denial.reject(first: true), AuthenticationMachine.Denial.reject(first: false))
        var a = AuthenticationMachine()
        a.connected(now: 0, challengeExpected: false, grace: 300)
        let before = a.publishDenied(claim: "c1")
        #expect(before == retry && a.refusedTries == 0, "no AUTH of ours was refused: auth-required is only later")
        a.answered(now: 10)
        a.refused("restricted: not on the list")
        #expect(a.isRefused && a.refusal == "restricted: not on the list" && a.answerDeadline == nil)
        let (t1, t1again) = (a.publishDenied(claim: "c1"), a.publishDenied(claim: "c1"))
        #expect(t1 == retry && t1again == retry && a.refusedTries == 1, "a claim's events are one try")
        // The connection ends; on the next one nothing counts until our AUTH is refused there too.
        a.connectionLost()
        a.connected(now: 5_000, challengeExpected: false, grace: 300)
        let unrefused = a.publishDenied(claim: "c2")
        #expect(unrefused == retry && a.refusedTries == 1)
        a.answered(now: 5_010)
        a.refused("restricted: not on the list")
        let (t2, t3, t3again, t4) = (
            a.publishDenied(claim: "c2"), a.publishDenied(claim: "c3"), a.publishDenied(claim: "c3"), a.publishDenied(claim: "c4")
        )
        #expect(t2 == retry && t3 == rejectFirst && t3again == reject && t4 == reject)
        #expect(a.refusedTries == 4)
        // A new challenge answered: until it is refused, auth-required is later again.
        a.answered(now: 6_000)
        let answering = a.publishDenied(claim: "c5")
        #expect(answering == retry && a.refusedTries == 4)
        // Accepted (here by a second of silence): the count starts again.
        let silent = a.silentlyAccepted(now: 7_000)
        #expect(silent && a.isAccepted && a.refusedTries == 0)
        a.refused("restricted: not on the list")
        let (r1, r2, r3) = (a.publishDenied(claim: "c6"), a.publishDenied(claim: "c7"), a.publishDenied(claim: "c8"))
        #expect(r1 == retry && r2 == retry && r3 == rejectFirst, "reported again after an accepted AUTH")
    }

    /// Every deadline is a named entry of one table on the monotonic clock; `pollTimeout()` is
    /// its earliest entry.
    @Test func theTimerTableNamesEveryDeadlineAndPollTimeoutIsItsEarliest() {
        let w = EngineWorld()
        w.relays[0].okRule = { _, _ in .silent }
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.start { c in
            c.keepaliveIntervalMilliseconds = 30_000
            c.leaseSeconds = 60
        }
        w.run(for: 1_000)
        _ = w.account.enqueue(Fixtures.event(w.unix, content: "timed"), relays: [w.urls[0]])
        w.handle(.workAvailable)
        w.settle()
        let table = w.engine.relays[0].timers(now: w.now, configuration: w.engine.configuration)
        // The event is written and unanswered: its acknowledgement deadline, the lease's renewal
        // at half its 60 s, the keepalive, and the paged subscription's deeper window (6 h).
        #expect(Set(table.keys) == [.acknowledgement, .leaseRenewal, .keepalive, .deeperResync])
        #expect(table[.deeperResync]! >= w.mono + 6 * 3_600_000 - 2_000)
        #expect(table[.acknowledgement] == w.mono + 15_000)
        #expect(table[.leaseRenewal] == w.mono + 30_000)
        #expect(w.engine.pollTimeout() == table.values.min())
        // Cut: the connection's timers go, the reconnect's comes.
        w.cut(0)
        let after = w.engine.relays[0].timers(now: w.now, configuration: w.engine.configuration)
        #expect(after[.reconnect] != nil && after[.keepalive] == nil && after[.acknowledgement] == nil)
    }
}
