import SoftchatCore
import Testing

@testable import SoftchatSync

/// The engine's NIP-77 and NIP-42 sub-machines on their own.
@Suite struct NegentropyMachineTests {
    func open(_ m: inout NegentropyMachine, _ negID: String, _ sub: String, part: Int = 0, at now: Int64 = 0) {
        m.opened(negID, subscription: sub, part: part, frame: "[\"NEG-OPEN\",\"\(negID)\"]", now: now)
    }

    /// A NEG-MSG longer than the deadline on a slow link: bytes of a message still arriving may
    /// be its answer, so every wait counts from them, not from when the NEG message went out.
    @Test func bytesOfAMessageStillArrivingRestartEveryNIP77Wait() {
        var m = NegentropyMachine()
        m.connected()
        m.opened("a~n0", subscription: "a", part: 0, frame: "open a", now: 0)
        m.opened("b~n0", subscription: "b", part: 0, frame: "open b", now: 4_000)
        #expect(m.answerDeadline(10_000) == 10_000)
        m.bytesArrived(now: 9_000)
        #expect(m.answerDeadline(10_000) == 19_000)
        #expect(m.late(now: 18_999, deadline: 10_000).isEmpty)
        #expect(m.late(now: 19_000, deadline: 10_000) == ["a~n0", "b~n0"], "silence after the bytes still ends the wait")
    }

    @Test func atMostFourOpenAtOnceAndOneAfterARelayFindsAQueryTooBig() {
        var m = NegentropyMachine()
        m.connected()
        for n in 0..<4 { open(&m, "n\(n)", "s\(n)") }
        #expect(m.room == 0 && m.openCount == 4)
        let ended = m.ended("n0")
        #expect(ended?.subscription == "s0")
        #expect(m.room == 1)
        m.tooBig()
        #expect(m.room == 0, "three still open, one allowed")
        _ = m.connectionLost()
        m.connected()
        #expect(m.room == NegentropyMachine.maxOpen, "a new connection starts over")
    }

    @Test func silenceCountsPerConnectionAndStopsThisProcessAskingAfterTwoButAnAnswerForgivesIt() {
        var m = NegentropyMachine()
        #expect(m.worthAsking(now: 0, recheckSeconds: 100, silenceRecheckSeconds: 10))
        // First connection: the deadline passes unanswered.
        m.connected()
        open(&m, "n0", "s")
        #expect(m.late(now: 9_999, deadline: 10_000).isEmpty)
        #expect(m.late(now: 10_000, deadline: 10_000) == ["n0"])
        m.stopAsking(silent: true)
        #expect(m.room == 0)
        _ = m.connectionLost()  // already counted: not twice
        #expect(m.worthAsking(now: 0, recheckSeconds: 100, silenceRecheckSeconds: 10))
        // Second connection: lost while waiting, as silent.
        m.connected()
        open(&m, "n0", "s")
        _ = m.connectionLost()
        #expect(!m.worthAsking(now: 0, recheckSeconds: 100, silenceRecheckSeconds: 10), "two silent connections")
        // Had one answered, the count would start over.
        var n = NegentropyMachine()
        n.connected()
        open(&n, "n0", "s")
        n.stopAsking(silent: true)
        _ = n.connectionLost()
        n.connected()
        open(&n, "n0", "s")
        let owner = n.answered("n0")
        #expect(owner?.part == 0)
        let first = n.heardAnswer()
        let second = n.heardAnswer()
        #expect(first && !second, "the first answer is news once")
        _ = n.connectionLost()
        #expect(n.silentConnections == 0 && n.worthAsking(now: 0, recheckSeconds: 100, silenceRecheckSeconds: 10))
    }

    @Test func aRecordedRefusalWaitsForTheRecheckIntervalAndARecordedYesDoesNot() {
        var m = NegentropyMachine()
        m.record = NegentropySupportRecord(relayURL: "wss://r", supported: false, checkedAt: 1_000, reason: "NEG-ERR")
        #expect(!m.worthAsking(now: 1_099, recheckSeconds: 100, silenceRecheckSeconds: 10))
        #expect(m.worthAsking(now: 1_100, recheckSeconds: 100, silenceRecheckSeconds: 10))
        m.record = NegentropySupportRecord(
            relayURL: "wss://r", supported: false, checkedAt: 1_000, reason: NegentropyMachine.silenceReason + " within 10000 ms")
        #expect(!m.worthAsking(now: 1_009, recheckSeconds: 100, silenceRecheckSeconds: 10))
        #expect(m.worthAsking(now: 1_010, recheckSeconds: 100, silenceRecheckSeconds: 10), "silence is remembered briefly")
        m.record = NegentropySupportRecord(relayURL: "wss://r", supported: true, checkedAt: 1_000, reason: "answered")
        #expect(m.worthAsking(now: 1_000, recheckSeconds: 100, silenceRecheckSeconds: 10))
    }

    @Test func abandoningASubscriptionClosesItsPartsAndHandsBackItsFetches() {
        var m = NegentropyMachine()
        m.connected()
        open(&m, "a~n0", "a")
        open(&m, "a~n1", "a", part: 1)
        open(&m, "b~n0", "b")
        m.fetchOwner["a~f0"] = "a"
        m.fetchOwner["b~f0"] = "b"
        let fetches = m.abandon("a")
        #expect(fetches == ["a~f0"])
        #expect(m.openCount == 1 && m.fetchOwner == ["b~f0": "b"])
        var token = 10
        let writes = m.takeOutbox(nextToken: &token)
        #expect(writes.map { $0.token } == [11, 12, 13, 14, 15])
        #expect(writes.suffix(2).map { $0.text } == [#"["NEG-CLOSE","a~n0"]"#, #"["NEG-CLOSE","a~n1"]"#])
        let (w1, w2, w3) = (m.wrote(14), m.wrote(14), m.wrote(99))
        #expect(w1 && !w2 && !w3, "each NEG write once; others are the session's")
        #expect(m.answerDeadline(10_000) == 10_000, "b~n0 still waits")
    }

    // MARK: Authentication

    @Test func aRelayThatSpeaksNIP42GetsTheChallengeWindowAndASilentOKCountsAfterASecond() {
        var a = AuthenticationMachine()
        a.connected(now: 100, challengeExpected: true, grace: 300)
        #expect(!a.mayWrite(now: 399) && a.mayWrite(now: 400))
        #expect(a.graceDeadline(now: 100) == 400 && a.graceDeadline(now: 400) == nil)
        a.answered(now: 200)
        #expect(a.mayWrite(now: 200), "the window closes once we answered")
        #expect(a.answerDeadline == 1_200)
        let (early, due, again) = (a.silentlyAccepted(now: 1_199), a.silentlyAccepted(now: 1_200), a.silentlyAccepted(now: 1_300))
        #expect(!early && due && !again, "once, after a second")
        a.connected(now: 2_000, challengeExpected: false, grace: 300)
        #expect(a.mayWrite(now: 2_000) && a.graceDeadline(now: 2_000) == nil)
        a.answered(now: 2_100)
        a.decided()
        #expect(a.answerDeadline == nil)
    }
}
