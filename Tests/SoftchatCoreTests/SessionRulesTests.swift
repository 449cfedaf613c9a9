import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// The session rules of issue 17 that the replay regressions (Tests/SessionRegressions) do not
/// reach: NIP-42 over Noise URLs, the wait behind an AUTH, the resend of an auth-required
/// answer after authenticating, configuration bounds and byte packing at its edges.
@Suite struct SessionRulesTests {
    typealias F = SessionFixtures
    static let noiseURL = "noise://127.0.0.1:7447?pattern=IK&key=" + String(repeating: "ab", count: 32)

    @Test func nip42WorksOverNoiseRelayURLs() throws {
        let auth = try WireKeys.alice.createNip42Authentication(challenge: "c-noise", relayURL: Self.noiseURL, createdAt: F.baseTime)
        #expect(auth.tags.contains(["relay", Self.noiseURL]))
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: Self.noiseURL), now: F.baseTime)
        #expect(try session.receive(F.authChallenge("c-noise")).kinds == [.authenticationRequested])
        try session.authenticate(auth, now: F.baseTime)
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["AUTH"])
        // the same key for another Noise relay (another port) is refused
        let other = try WireKeys.bob.createNip42Authentication(
            challenge: "c-noise", relayURL: "noise://127.0.0.1:7448?pattern=IK&key=" + String(repeating: "ab", count: 32), createdAt: F.baseTime)
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["does not name"]) {
            try session.authenticate(other, now: F.baseTime)
        }
    }

    @Test func framesQueuedBehindAnAuthWaitForItsOkOrTheBoundedWait() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay, authenticationWaitSeconds: 5), now: F.baseTime)
        _ = try session.receive(F.authChallenge("c1"))
        try session.authenticate(F.auth("c1"), now: F.baseTime)
        try session.subscribe(id: "dm", filtersJSON: [#"{"kinds":[1059]}"#])
        try session.publish([F.note(1)])
        let first = try session.drainAll()
        #expect(first.map { clientVerb($0.frame) } == ["AUTH"], "REQ and EVENT wait behind the AUTH")
        try session.confirmSent([], now: F.baseTime + 1)
        #expect(session.pollTimeout() == F.baseTime + 6, "the wait runs from the AUTH's own write")
        #expect(try session.drainAll().isEmpty)
        #expect(try session.handleTimeout(now: F.baseTime + 5).isEmpty)
        #expect(try session.drainAll().isEmpty, "not yet due")
        // a relay that never answers a good AUTH: after the wait, what waited goes out
        _ = try session.handleTimeout(now: F.baseTime + 6)
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["REQ", "EVENT"])
        // and the late OK for the AUTH is still recognised as authentication
        #expect(try session.receive(F.ok(F.auth("c1").id, true)).kinds == [.authenticated])
    }

    @Test func authOkReleasesTheWaitingFramesAtOnce() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay), now: F.baseTime)
        _ = try session.receive(F.authChallenge("c1"))
        let answer = F.auth("c1")
        try session.authenticate(answer, now: F.baseTime)
        try session.subscribe(id: "dm", filtersJSON: [#"{"kinds":[1059]}"#])
        #expect(try session.sendAll().map(clientVerb) == ["AUTH"])
        #expect(try session.receive(F.ok(answer.id, true)).kinds == [.authenticated])
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["REQ"])
        #expect(session.pollTimeout() == nil)
    }

    @Test func authRequiredAnswerAfterAuthenticatingIsSentAgainOnceAtOnce() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay), now: F.baseTime)
        _ = try session.receive(F.authChallenge("c1"))
        let answer = F.auth("c1")
        try session.authenticate(answer, now: F.baseTime)
        try session.sendAll()
        _ = try session.receive(F.ok(answer.id, true))
        let e = F.note(1)
        try session.publish([e])
        try session.sendAll()
        // the relay still says auth-required (the EVENT raced the AUTH's processing)
        #expect(try session.receive(F.ok(e.id, false, "auth-required: not yet")).isEmpty)
        #expect(try session.sendAll() == [ClientRelayFrame.event(e).toJSON()], "sent again at once")
        let second = try session.receive(F.ok(e.id, false, "auth-required: still not"))
        #expect(second.decisions.map { [$0.state.rawValue, $0.category.rawValue] } == [["retryable", "auth-required"]])
        #expect(session.snapshot().pendingPublishes == 0)
    }

    @Test func authOutsideTheWindowAroundNowIsRefused() throws {
        let session = try RelaySession.connected(RelaySessionConfig(authenticationWindowSeconds: 60))
        _ = try session.receive(F.authChallenge("c1"))
        let answer = F.auth("c1")  // created at baseTime
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["created_at", "60 s"]) {
            try session.authenticate(answer, now: F.baseTime + 61)
        }
        try session.authenticate(answer, now: F.baseTime + 60)
    }

    @Test func cancelWhileIdleReturnsTheHeldDeliveries() throws {
        let session = RelaySession()
        let e = F.note(1)
        try session.publish([e])
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["cancel()"]) { try session.close() }
        let cancelled = try session.cancel()
        #expect(cancelled.decisions.map { [$0.eventID, $0.state.rawValue, $0.category.rawValue] } == [[e.id, "retryable", "cancelled"]])
        #expect(!cancelled.kinds.contains(.closeTransport), "no transport was active")
        try session.close()
        try session.close()
    }

    @Test(arguments: [
        (RelaySessionConfig(maxMessageBytes: 1023), "maxMessageBytes"),
        (RelaySessionConfig(relayURL: "https://relay.example.com"), "relayURL"),
        (RelaySessionConfig(acknowledgementTimeoutSeconds: 0), "acknowledgementTimeoutSeconds"),
        (RelaySessionConfig(authenticationWaitSeconds: 0), "authenticationWaitSeconds"),
    ])
    func invalidConfigurationIsRefused(_ config: RelaySessionConfig, _ field: String) {
        expectSoftchatError(.invalidRelaySession, mentioning: [field]) { _ = try RelaySession(config: config) }
    }

    /// Events of random sizes under random limits: every frame fits, every event is in one
    /// frame, in publish order, and the packer's size arithmetic equals the frame's length.
    @Test func byteAccountingMatchesTheFramesForRandomSizes() throws {
        var rng = WireRNG(seed: 17)
        for round in 0..<40 {
            let limit = 1024 + Int(rng.next() % 8192)
            let session = try RelaySession.connected(RelaySessionConfig(maxMessageBytes: Int64(limit)))
            let count = 1 + Int(rng.next() % 40)
            let events = (0..<count).map { i in
                F.note(round * 100 + i, content: String(repeating: "z", count: Int(rng.next() % UInt64(limit - 400))))
            }
            try session.publish(events)
            let frames = try session.drainAll()
            #expect(frames.allSatisfy { $0.frame.utf8.count <= limit }, "round \(round)")
            #expect(frames.flatMap(\.deliveryEventIDs) == events.map(\.id), "round \(round): each once, in order")
            for f in frames {
                let parsed = try parseClientRelayFrame(f.frame)
                switch parsed {
                case .event(let e): #expect([e.id] == f.deliveryEventIDs)
                case .events(let list): #expect(list.map(\.id) == f.deliveryEventIDs)
                default: Issue.record("not a publish frame: \(f.frame.prefix(20))")
                }
            }
            // greedy: no frame could have taken the next frame's first event
            for (a, b) in zip(frames, frames.dropFirst()) {
                let next = events.first { $0.id == b.deliveryEventIDs[0] }!
                #expect(a.frame.utf8.count + 1 + next.jsonText.utf8.count + (a.deliveryEventIDs.count == 1 ? 1 : 0) > limit)
            }
        }
    }

    // MARK: Found in review: each failed before its fix

    @Test func authRequiredAnswerBeforeTheWriteIsConfirmedIsStillSentAgainAfterAuth() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay), now: F.baseTime)
        _ = try session.receive(F.authChallenge("c1"))
        let e = F.note(1)
        try session.publish([e])
        let frames = try session.drainAll()
        #expect(try session.receive(F.ok(e.id, false, "auth-required: first")).isEmpty)
        try session.confirmSent(frames[0].deliveryEventIDs, now: F.baseTime)  // the late confirmation changes nothing
        let answer = F.auth("c1")
        try session.authenticate(answer, now: F.baseTime)
        #expect(try session.sendAll().map(clientVerb) == ["AUTH"])
        _ = try session.receive(F.ok(answer.id, true))
        #expect(try session.sendAll() == [ClientRelayFrame.event(e).toJSON()], "the one resend")
    }

    @Test func aConfirmationOfAnOlderFrameDoesNotMoveTheEventsNewerCopy() throws {
        let session = try RelaySession.connected(RelaySessionConfig(acknowledgementTimeoutSeconds: 10), now: F.baseTime)
        let e = F.note(1)
        try session.publish([e])
        let first = try session.drainAll()
        _ = try session.receive(F.ok(e.id, false, "rate-limited: slow"))  // answered before its confirmation
        try session.publish([e])
        let second = try session.drainAll()
        try session.confirmSent(first[0].deliveryEventIDs, now: F.baseTime + 1)
        #expect(session.pollTimeout() == nil, "the new copy is not in flight until its own frame is written")
        try session.confirmSent(second[0].deliveryEventIDs, now: F.baseTime + 2)
        #expect(session.pollTimeout() == F.baseTime + 12)
    }

    @Test func whenTheAuthWaitRunsOutWhatWaitedForAuthenticationIsSentOnce() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay, authenticationWaitSeconds: 2), now: F.baseTime)
        try session.subscribe(id: "dm", filtersJSON: [#"{"kinds":[1059]}"#])
        try session.sendAll()
        _ = try session.receive(F.authChallenge("c1"))
        _ = try session.receive(F.closed("dm", "auth-required: DMs need auth"))
        try session.authenticate(F.auth("c1"), now: F.baseTime)
        #expect(try session.sendAll().map(clientVerb) == ["AUTH"])
        _ = try session.handleTimeout(now: F.baseTime + 2)  // the relay stays silent on a good AUTH
        #expect(try session.sendAll().map(clientVerb) == ["REQ"], "the closed DM subscription comes back")
        #expect(try session.receive(F.closed("dm", "auth-required: still")).first?.retryDelayMilliseconds == nil, "once")
    }

    @Test func aREQThatWouldNotFitTheRelaysLimitAfterAReconnectIsRefusedUpFront() throws {
        let session = try RelaySession.connected(RelaySessionConfig(maxMessageBytes: 1024))
        let filter = ##"{"#t":["\##(String(repeating: "t", count: 985))"]}"##
        let req = ClientRelayFrame.req(subscriptionID: "x", filters: [try RelayFilter.fromJSON(filter)]).toJSON()
        #expect(req.utf8.count <= 1024, "fits as it is…")
        // …but not with the `since` a resubscription adds, so it could never be sent again
        expectSessionRejected(.invalidRelayFrame, session, mentioning: ["1024"]) { try session.subscribe(id: "x", filtersJSON: [filter]) }
        let long = ##"{"#t":["\##(String(repeating: "t", count: 1010))"]}"##
        expectSessionRejected(.invalidRelayFrame, session, mentioning: ["1024"]) { try session.count(id: "n", filtersJSON: [long]) }
        try session.subscribe(id: "ok", filtersJSON: [#"{"kinds":[14]}"#])
        #expect(try session.drainAll().allSatisfy { $0.frame.utf8.count <= 1024 })
    }

    @Test func unsubscribingAfterAReplacementClosesTheREQTheRelayHas() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[1]}"#])
        try session.sendAll()
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[7]}"#])  // queued, not sent
        try session.unsubscribe(id: "a")
        #expect(try session.sendAll() == [#"["CLOSE","a"]"#])
    }

    @Test func aCOUNTAlreadySentCannotBeReissuedUnderItsId() throws {
        let session = try RelaySession.connected()
        try session.count(id: "n", filtersJSON: [#"{"kinds":[1]}"#])
        try session.count(id: "n", filtersJSON: [#"{"kinds":[7]}"#])  // not sent yet: superseded
        #expect(try session.sendAll() == [#"["COUNT","n",{"kinds":[7]}]"#])
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["already went out"]) {
            try session.count(id: "n", filtersJSON: [#"{"kinds":[14]}"#])
        }
    }

    @Test func aRefusedFrameDoesNotMoveTheSessionsClock() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[1]}"#])
        try session.sendAll()
        expectSessionRejected(.invalidRelayFrame, session) { _ = try session.receive(#"["OK","x",true,""]"#, now: F.baseTime) }
        let closed = try session.receive(F.closed("a", "error: busy"))
        #expect(closed.first?.retryDelayMilliseconds == nil, "no time known: no retry scheduled")
        #expect(session.pollTimeout() == nil)
    }

    @Test func aCancelledCOUNTsIdIsNotReusedOnTheConnectionAndItsLateAnswerIsANotice() throws {
        let session = try RelaySession.connected()
        try session.count(id: "n", filtersJSON: [#"{"kinds":[1]}"#])
        try session.sendAll()
        try session.cancelCount(id: "n")
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["cancelled COUNT"]) {
            try session.count(id: "n", filtersJSON: [#"{"kinds":[7]}"#])
        }
        #expect(try session.receive(F.countAnswer("n", 5)).kinds == [.notice])
        try session.reconnect()
        try session.count(id: "n", filtersJSON: [#"{"kinds":[7]}"#])  // a new connection has no old answer
    }

    @Test func aRefusedAuthAfterTheWaitRanOutMeansNotAuthenticated() throws {
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay, authenticationWaitSeconds: 2), now: F.baseTime)
        _ = try session.receive(F.authChallenge("c1"))
        let answer = F.auth("c1")
        try session.authenticate(answer, now: F.baseTime)
        try session.sendAll()
        _ = try session.handleTimeout(now: F.baseTime + 2)
        #expect(try session.receive(F.ok(answer.id, false, "restricted: no")).kinds == [.authenticationFailed])
        let e = F.note(1)
        try session.publish([e])
        try session.sendAll()
        let refused = try session.receive(F.ok(e.id, false, "auth-required: x"))
        // Our AUTH was refused and no challenge waits: it is not held for an AUTH that is not
        // coming (issue 45, path 13), and not re-sent as if authenticated.
        #expect(refused.decisions.map { [$0.state.rawValue, $0.category.rawValue] } == [["retryable", "auth-required"]])
        #expect(session.snapshot().pendingPublishes == 0)
        #expect(try session.drainAll().isEmpty, "not re-sent as if authenticated")
    }

    /// Issue 45, path 13: an event the relay answered auth-required after it refused our AUTH was
    /// held for an AUTH nobody would send, left at its acknowledgement deadline as `timeout`, and
    /// was published again and held again, every 15 s, for ever. It leaves at once, retryable
    /// `auth-required` (the host decides what the relay's refusal means); while a new challenge
    /// waits to be answered, or once another AUTH was sent, it is held for it as before.
    @Test func anAuthRequiredAnswerAfterOurAuthWasRefusedIsNotHeldUnlessAnotherAuthMayCome() throws {
        let t = F.baseTime
        let session = try RelaySession.connected(RelaySessionConfig(relayURL: F.relay), now: t)
        _ = try session.receive(F.authChallenge("c1"), now: t)
        let first = F.auth("c1")
        try session.authenticate(first, now: t)
        try session.sendAll()
        #expect(try session.receive(F.ok(first.id, false, "restricted: not on the list"), now: t).kinds == [.authenticationFailed])
        let (a, b) = (F.note(1), F.note(2))
        try session.publish([a])
        try session.sendAll()
        let refused = try session.receive(F.ok(a.id, false, "auth-required: sign in"), now: t + 1)
        #expect(refused.decisions.map { [$0.eventID, $0.state.rawValue, $0.category.rawValue] } == [[a.id, "retryable", "auth-required"]])
        #expect(refused.decisions.first?.message == "auth-required: sign in", "in the relay's words")
        #expect(session.snapshot().pendingPublishes == 0)
        // A new challenge, kept for the interval after our last answer: another AUTH may come,
        // so what is answered auth-required waits for it again, and goes out once it is accepted.
        #expect(try session.receive(F.authChallenge("c2"), now: t + 2).isEmpty)
        try session.publish([b])
        try session.sendAll()
        #expect(try session.receive(F.ok(b.id, false, "auth-required: sign in"), now: t + 2).isEmpty, "held for the answer to c2")
        #expect(try session.handleTimeout(now: t + 5).kinds == [.authenticationRequested])
        let second = F.auth("c2")
        try session.authenticate(second, now: t + 5)
        #expect(try session.sendAll().map(clientVerb) == ["AUTH"])
        #expect(try session.receive(F.ok(second.id, true), now: t + 5).kinds == [.authenticated])
        #expect(try session.sendAll() == [ClientRelayFrame.event(b).toJSON()], "the one resend")
    }

    @Test func unsubscribingTwiceAroundAResubscriptionQueuesOneCLOSE() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[1]}"#])
        try session.sendAll()
        try session.unsubscribe(id: "a")
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[7]}"#])
        try session.unsubscribe(id: "a")
        #expect(try session.sendAll() == [#"["CLOSE","a"]"#])
    }

    @Test func anAuthReplayDoesNotQueueASecondREQBesideADueRetry() throws {
        let session = try RelaySession.connected(RelaySessionConfig(reconnectBaseDelaySeconds: 1, relayURL: F.relay), now: F.baseTime)
        try session.subscribe(id: "a", filtersJSON: [#"{"kinds":[1]}"#])
        try session.sendAll()
        _ = try session.receive(F.closed("a", "auth-required: x"), now: F.baseTime)
        _ = try session.receive(F.closed("a", "error: x"), now: F.baseTime)
        _ = try session.handleTimeout(now: F.baseTime + 5)
        _ = try session.receive(F.authChallenge("c1"))
        let answer = F.auth("c1")
        try session.authenticate(answer, now: F.baseTime + 5)
        #expect(try session.drainOutbound(max: 1).map { clientVerb($0.frame) } == ["AUTH"])
        _ = try session.receive(F.ok(answer.id, true))
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["REQ"])
    }
}
