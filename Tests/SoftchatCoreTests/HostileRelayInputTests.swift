import SoftchatCore
import SoftchatJSON
import Testing

/// What a hostile relay sends the core (issue 44): numbers at the edges of Int64, texts as long
/// as a frame, challenges without end. Each test pins a guarantee: nothing traps, nothing a
/// relay says reaches a report whole, and no AUTH is signed past the session's policy.
@Suite struct HostileRelayInputTests {
    typealias F = SessionFixtures

    // MARK: Numbers

    /// 256 registers of 255 estimate about 10^79: `Int64(_:)` of it trapped in `combine`.
    @Test func combiningRegistersThatAllSay255SaturatesInsteadOfTrapping() throws {
        let full = try #require(HyperLogLog(hex: String(repeating: "ff", count: 256)))
        let combined = try #require(CountResult.combine([CountResult(count: 1, hll: full), CountResult(count: 2, hll: full)]))
        #expect(combined.count == Int64.max)
        #expect(combined.approximate)
        let parsed = try parseRelayResponseFrame(#"["COUNT","c",{"count":0,"hll":"\#(String(repeating: "ff", count: 256))"}]"#)
        guard case .count(_, let result) = parsed else {
            Issue.record("not a COUNT: \(parsed)")
            return
        }
        #expect(CountResult.combine([result])?.count == Int64.max)
    }

    @Test func statedNumbersOutsideOneToTwoToThe31AreNotStated() {
        for value: Int64 in [.min, -2, -1, 0, Int64(Int32.max) + 1, .max] {
            #expect(RelayStatedNumber.limit(value) == nil, "\(value)")
        }
        for value: Int64 in [1, 16_384, Int64(Int32.max)] {
            #expect(RelayStatedNumber.limit(value) == Int(value))
        }
        #expect(RelayStatedNumber.limit(Int64?.none) == nil)
    }

    // MARK: Relay text

    @Test func aReportCarriesAtMostTheBoundCutOnAScalarBoundaryWithTheOriginalSize() {
        let bound = RelayRecoveryContract.maxReportTextBytes.value
        #expect(bound == RelayText.maxReportBytes)
        let long = String(repeating: "N", count: 400_000)
        let cut = RelayText.forReport(long)
        #expect(cut.utf8.count <= bound)
        #expect(cut.hasSuffix("…(400000 bytes)"))
        // Four-byte scalars are never split.
        let emoji = String(repeating: "😀", count: 1_000)
        let cutEmoji = RelayText.forReport(emoji)
        #expect(cutEmoji.utf8.count <= bound)
        #expect(cutEmoji.unicodeScalars.allSatisfy { $0 == "😀" || "…(4000 bytes)".unicodeScalars.contains($0) })
        // Short printable text is unchanged.
        #expect(RelayText.forReport("rate-limited: slow down") == "rate-limited: slow down")
        #expect(RelayText.forReport("grüße 😀") == "grüße 😀")
    }

    @Test func controlAndBidiCharactersInRelayTextAreReplaced() {
        let hostile = "ok\u{1B}[2J\r\nFAKE LOG LINE\u{202E}txt.exe\u{2066}\u{7F}\u{85}"
        let shown = RelayText.forReport(hostile)
        #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(!shown.unicodeScalars.contains { [0x202E, 0x2066].contains($0.value) })
        #expect(shown.hasPrefix("ok\u{FFFD}[2J\u{FFFD}\u{FFFD}FAKE LOG LINE\u{FFFD}txt.exe"))
    }

    @Test func aNoticeOfFourHundredThousandCharactersReachesTheHostCut() throws {
        let session = try RelaySession.connected()
        let actions = try session.receive(#"["NOTICE","\#(String(repeating: "N", count: 400_000))"]"#)
        #expect(actions.kinds == [.notice])
        let message = try #require(actions.first?.message)
        #expect(message.utf8.count <= RelayText.maxReportBytes)
        #expect(message.hasSuffix("(400000 bytes)"))
    }

    @Test func aPrefixLongerThanAnyKnownOneIsDroppedAndTheMessageCut() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        _ = try session.sendAll()
        let prefix = String(repeating: "a", count: 100_000)
        let actions = try session.receive(F.closed("chat", prefix + ": " + String(repeating: "x", count: 100_000)))
        #expect(actions.kinds == [.subscriptionClosed])
        #expect(actions.first?.prefix == nil)
        #expect((actions.first?.message?.utf8.count ?? .max) <= RelayText.maxReportBytes)
    }

    @Test func anOKMessageIsCutBeforeItBecomesADeliveryDecision() throws {
        let session = try RelaySession.connected()
        let note = SessionFixtures.note(1)
        try session.publish([note])
        _ = try session.sendAll()
        let actions = try session.receive(F.ok(note.id, false, "blocked: " + String(repeating: "z", count: 300_000)))
        let decision = try #require(actions.decisions.first)
        #expect(decision.category == .blocked)
        #expect(decision.message.utf8.count <= RelayText.maxReportBytes)
    }

    // MARK: AUTH policy

    @Test func aChallengeOverTheBoundIsRefusedWithANoticeAndNeverAskedFor() throws {
        let session = try RelaySession.connected()
        let bound = RelaySessionContract.maxChallengeBytes.value
        let refused = try session.receive(F.authChallenge(String(repeating: "c", count: bound + 1)))
        #expect(refused.kinds == [.notice])
        #expect(refused.first?.message?.contains("\(bound + 1) bytes") == true)
        let taken = try session.receive(F.authChallenge(String(repeating: "c", count: bound)))
        #expect(taken.kinds == [.authenticationRequested])
    }

    /// 1,728 signed answers in 8 s before: every new challenge was asked for at once.
    @Test func challengesWhileAnAnswerIsInFlightWaitAndOnlyTheNewestIsAskedForAfterItsOK() throws {
        let t = SessionFixtures.baseTime
        let session = try RelaySession.connected(now: t)
        #expect(try session.receive(F.authChallenge("c0"), now: t).map(\.challenge) == ["c0"])
        let first = F.auth("c0")
        try session.authenticate(first, now: t)
        _ = try session.sendAll()
        var asked = 0
        for n in 1...1_000 { asked += try session.receive(F.authChallenge("c\(n)"), now: t).count }
        #expect(asked == 0, "nothing is asked for while our answer is in flight")
        // The OK comes 6 s later, past the interval: the newest challenge is asked for, once.
        let settled = try session.receive(F.ok(first.id, true), now: t + 6)
        #expect(settled.kinds == [.authenticated, .authenticationRequested])
        #expect(settled.last?.challenge == "c1000")
        #expect(try session.receive(F.authChallenge("c1000"), now: t + 6).isEmpty, "asked for once")
    }

    @Test func answersOnOneConnectionAreAtLeastTheIntervalApart() throws {
        let t = SessionFixtures.baseTime
        let interval = Int64(RelaySessionContract.authenticationIntervalSeconds.value)
        let session = try RelaySession.connected(now: t)
        _ = try session.receive(F.authChallenge("c0"), now: t)
        let first = F.auth("c0")
        try session.authenticate(first, now: t)
        _ = try session.sendAll()
        _ = try session.receive(F.ok(first.id, true), now: t + 1)
        // A new challenge a second after the answer waits for the interval.
        #expect(try session.receive(F.authChallenge("c1"), now: t + 1).isEmpty)
        #expect(try session.receive(F.authChallenge("c2"), now: t + 2).isEmpty)
        #expect(session.pollTimeout() == t + interval)
        #expect(try session.handleTimeout(now: t + interval - 1).isEmpty)
        let due = try session.handleTimeout(now: t + interval)
        #expect(due.kinds == [.authenticationRequested] && due.first?.challenge == "c2", "the newest replaced the older")
        #expect(try session.handleTimeout(now: t + interval + 1).isEmpty, "asked for once")
    }

    @Test func aRefusedAnswerAlsoLetsTheWaitingChallengeHaveItsTurn() throws {
        let t = SessionFixtures.baseTime
        let session = try RelaySession.connected(now: t)
        _ = try session.receive(F.authChallenge("c0"), now: t)
        let first = F.auth("c0")
        try session.authenticate(first, now: t)
        _ = try session.sendAll()
        #expect(try session.receive(F.authChallenge("c1"), now: t + 1).isEmpty)
        let refused = try session.receive(F.ok(first.id, false, "restricted: not you"), now: t + 10)
        #expect(refused.kinds == [.authenticationFailed, .authenticationRequested])
        #expect(refused.last?.challenge == "c1")
    }

    @Test func aWaitingChallengeIsForgottenWithTheConnection() throws {
        let t = SessionFixtures.baseTime
        let session = try RelaySession.connected(now: t)
        _ = try session.receive(F.authChallenge("c0"), now: t)
        try session.authenticate(F.auth("c0"), now: t)
        _ = try session.sendAll()
        #expect(try session.receive(F.authChallenge("c1"), now: t).isEmpty)
        try session.reconnect(readyAt: t + 100)
        #expect(try session.handleTimeout(now: t + 100).isEmpty)
        #expect(try session.receive(F.authChallenge("c2"), now: t + 100).map(\.challenge) == ["c2"])
    }

    /// The session's outbound queue holds only frames the host made, plus at most one AUTH
    /// answer the host signed: a relay repeating CLOSED (every prefix), challenges, NOTICEs and
    /// COUNTs while the host never drains re-queues each subscription's REQ once at most, so
    /// neither the frames nor their bytes grow with what the relay sends.
    @Test func aRelayFloodNeverGrowsTheOutboundQueuePastOneREQPerSubscription() throws {
        let t = SessionFixtures.baseTime
        let session = try RelaySession.connected(now: t)
        try session.subscribe(id: "a", filtersJSON: [F.kind1])
        try session.subscribe(id: "b", filtersJSON: [#"{"kinds":[7]}"#])
        let sent = try session.sendAll()
        var most = 0
        for i in 0..<5_000 {
            let now = t + Int64(i)
            for frame in [
                F.closed("a", "error: \(i)"), F.closed("b", "auth-required: \(i)"), F.closed("a", "rate-limited: slow"),
                F.closed("b", ""), F.authChallenge("c\(i)"), F.countAnswer("b", Int64(i)),
                wireFrame("NOTICE", .string(String(repeating: "n", count: 1_000))),
            ] {
                _ = try session.receive(frame, now: now)
            }
            _ = try session.handleTimeout(now: now)
            most = max(most, session.snapshot().outboundFrames)
        }
        #expect(most <= 2)
        let queued = try session.drainAll().map(\.frame)
        #expect(Set(queued).isSubset(of: Set(sent)), "only the subscriptions' own REQs, again")
        #expect(queued.reduce(0) { $0 + $1.utf8.count } <= sent.reduce(0) { $0 + $1.utf8.count })
    }
}
