import SoftchatCore
import SoftchatJSON
import Testing

/// One wrong-state call: the state a session is put in, and the call that is not valid there.
struct SessionWrongStateCase: Sendable, CustomTestStringConvertible {
    var state: String
    var call: String
    var testDescription: String { "\(call) while \(state)" }
}

/// RelaySession lifecycle, subscriptions, the outbound queue, reconnects and the snapshot: the
/// page's call sequences in order, every wrong-state call, and every bound at N and N+1.
@Suite struct SessionLifecycleTests {
    typealias F = SessionFixtures
    static let bob = WireKeys.bob.publicKeyHex

    // MARK: The page's sequences

    @Test func pageSequenceRunsFromConnectThroughAuthenticationToConfirmIngested() throws {
        let session = RelaySession()
        let filter = ##"{"kinds":[14],"#p":["\##(Self.bob)"],"limit":100}"##
        try session.subscribe(id: "chat", filtersJSON: [filter])
        #expect(try session.drainOutbound().isEmpty, "nothing is handed out before the transport is ready")
        #expect(try session.connect().kinds == [.openTransport])
        #expect(session.snapshot().state == "connecting")
        #expect(try session.transportConnected().isEmpty)
        #expect(session.snapshot().state == "ready")

        // authenticate when the relay asks: AUTH goes out ahead of the queued REQ
        let asked = try session.receive(F.authChallenge("c-1"))
        #expect(asked.kinds == [.authenticationRequested] && asked[0].challenge == "c-1")
        let answer = F.auth("c-1")
        #expect(try session.authenticate(answer).isEmpty)
        #expect(session.snapshot().state == "authenticating")
        let frames = try session.drainOutbound()
        #expect(frames.map(\.frame) == [ClientRelayFrame.auth(answer).toJSON(), #"["REQ","chat",\#(filter)]"#])
        #expect(frames.allSatisfy { $0.deliveryEventIDs.isEmpty })
        for f in frames { try session.confirmSent(f.deliveryEventIDs) }
        let accepted = try session.receive(F.ok(answer.id, true))
        #expect(accepted.kinds == [.authenticated] && accepted[0].eventID == answer.id)
        #expect(session.snapshot().state == "ready" && session.snapshot().authenticated)

        // receive → persistEvent → the host commits → confirmIngested
        let dm = F.note(1, kind: 14, tags: [["p", Self.bob]])
        let actions = try session.receive(F.event("chat", dm))
        #expect(actions.kinds == [.persistEvent])
        #expect(actions.first?.subscriptionID == "chat" && actions.first?.event == dm)
        #expect(session.snapshot().awaitingPersistence == 1)
        try session.confirmIngested(dm.id)
        #expect(session.snapshot().awaitingPersistence == 0)
        #expect(session.snapshot().outboundFrames == 0)
    }

    @Test func transportLostReportsInFlightDeliveriesBeforeSchedulingTheReconnect() throws {
        let session = try RelaySession.connected()
        let (a, b, c) = (F.note(1), F.note(2), F.note(3))
        try session.publish([a, b])
        try session.sendAll()
        try session.publish([c])
        let actions = try session.transportLost(now: 100)
        #expect(actions.kinds == [.deliveryChanged, .deliveryChanged, .scheduleReconnect])
        #expect(actions.decisions.map(\.eventID) == [a.id, b.id])
        #expect(actions.decisions.allSatisfy { $0.state == .retryable && $0.category == .transportLost })
        #expect(actions.last?.attempt == 1)
        #expect((500...1000).contains(actions.last?.delayMilliseconds ?? -1))
        #expect(session.snapshot().state == "backingOff" && session.snapshot().pendingPublishes == 1, "a and b left the session")
        // c was pending and goes out after the reconnect; a and b wait for the host to publish again
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[c.id]])
    }

    @Test func cancelReportsDeliveriesThenClosesTheTransportAndCanConnectAgain() throws {
        let session = try RelaySession.connected()
        let a = F.note(1)
        try session.publish([a])
        try session.sendAll()
        let actions = try session.cancel()
        #expect(actions.kinds == [.deliveryChanged, .closeTransport])
        let decision = try #require(actions.first?.decision)
        #expect(decision.eventID == a.id && decision.state == .retryable && decision.category == .cancelled)
        #expect(session.snapshot().state == "cancelled")
        #expect(try session.drainOutbound().isEmpty)
        #expect(try session.connect().kinds == [.openTransport])
        // cancelling a session that is backing off closes nothing
        _ = try session.transportLost(now: nil)
        #expect(try session.cancel().isEmpty)
        #expect(session.snapshot().state == "cancelled")
    }

    @Test func closeReleasesTheSessionAndEveryLaterCallFailsWhileSnapshotStillWorks() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        let e = F.note(1)
        try session.close()
        let snapshot = session.snapshot()
        #expect(snapshot.state == "closed" && snapshot.subscriptionIDs == ["chat"])
        let calls: [(String, () throws -> Void)] = [
            ("connect", { _ = try session.connect() }), ("transportConnected", { try session.transportConnected() }),
            ("transportLost", { _ = try session.transportLost() }), ("cancel", { _ = try session.cancel() }),
            ("subscribe", { try session.subscribe(id: "x", filtersJSON: [F.kind1]) }), ("unsubscribe", { try session.unsubscribe(id: "chat") }),
            ("count", { try session.count(id: "n", filtersJSON: [F.kind1]) }), ("publish", { try session.publish([e]) }),
            ("handleTimeout", { _ = try session.handleTimeout(now: 1) }),
            ("drainOutbound", { _ = try session.drainOutbound() }), ("confirmSent", { try session.confirmSent([]) }),
            ("receive", { _ = try session.receive(F.event("chat", e)) }), ("confirmIngested", { try session.confirmIngested(e.id) }),
            ("authenticate", { try session.authenticate(F.auth("c")) }),
        ]
        for (name, call) in calls {
            expectSessionRejected(.invalidRelaySession, session, mentioning: [name, "closed"]) { try call() }
        }
        try session.close()
        #expect(session.snapshot() == snapshot)
    }

    // MARK: Wrong-state calls change nothing

    static let wrongStateCases: [SessionWrongStateCase] = [
        ("idle", ["transportConnected", "transportLost", "receive", "confirmSent", "authenticate"]),
        ("connecting", ["connect", "receive", "confirmSent", "authenticate"]),
        ("ready", ["connect", "transportConnected"]),
        ("backingOff", ["transportConnected", "transportLost", "receive", "confirmSent", "authenticate"]),
        ("cancelled", ["transportConnected", "transportLost", "cancel", "receive", "confirmSent"]),
    ].flatMap { state, calls in calls.map { SessionWrongStateCase(state: state, call: $0) } }

    static let inFlight = F.note(900)
    static let later = F.note(901)

    /// A session with a subscription, an in-flight publish (once connected) and `state`.
    static func session(in state: String) throws -> RelaySession {
        let s = RelaySession()
        try s.subscribe(id: "chat", filtersJSON: [F.kind1])
        try s.publish([inFlight])
        if state == "idle" { return s }
        _ = try s.connect()
        if state == "connecting" { return s }
        try s.transportConnected(now: 10)
        try s.sendAll()
        switch state {
        case "backingOff": _ = try s.transportLost(now: 20)
        case "cancelled": _ = try s.cancel()
        default: break
        }
        return s
    }

    static func attempt(_ call: String, on s: RelaySession) throws {
        switch call {
        case "connect": _ = try s.connect()
        case "transportConnected": try s.transportConnected(now: 30)
        case "transportLost": _ = try s.transportLost(now: 30)
        case "cancel": _ = try s.cancel()
        case "receive": _ = try s.receive(F.event("chat", later))
        case "confirmSent": try s.confirmSent([])
        case "authenticate": try s.authenticate(F.auth("c"))
        default: Issue.record("unknown call \(call)")
        }
    }

    /// What a session does from here on, as text: each call's result or error code.
    static func transcript(_ s: RelaySession) -> [String] {
        var out: [String] = []
        func record(_ name: String, _ body: () throws -> String) {
            do { out.append("\(name): \(try body())") } catch { out.append("\(name) ! \((error as? SoftchatError)?.code.rawValue ?? "\(error)")") }
        }
        record("connect") { "\(try s.connect().kinds)" }
        record("transportConnected") { "\(try s.transportConnected(now: 40).kinds)" }
        record("drain") { try s.sendAll().joined(separator: "\n") }
        record("receive") { "\(try s.receive(F.event("chat", later)).map { "\($0.kind) \($0.event?.id ?? "")" })" }
        record("ok") { "\(try s.receive(F.ok(inFlight.id, true)).map { "\($0.kind) \($0.decision?.state.rawValue ?? "")" })" }
        record("lost") { "\(try s.transportLost(now: 50).map { "\($0.kind) \($0.attempt ?? 0)" })" }
        record("snapshot") { "\(s.snapshot())" }
        return out
    }

    @Test(arguments: wrongStateCases)
    func wrongStateCallFailsAndChangesNothing(_ c: SessionWrongStateCase) throws {
        let subject = try Self.session(in: c.state)
        let control = try Self.session(in: c.state)
        expectSessionRejected(.invalidRelaySession, subject) { try Self.attempt(c.call, on: subject) }
        #expect(subject.snapshot() == control.snapshot())
        #expect(Self.transcript(subject) == Self.transcript(control))
    }

    // MARK: Subscriptions

    @Test func subscriptionBoundIs128AndThe129thChangesNothing() throws {
        let bound = RelaySessionContract.maxSubscriptions.value
        #expect(bound == 128)
        let session = try RelaySession.connected()
        for i in 0..<bound { try session.subscribe(id: "s\(i)", filtersJSON: [F.kind1]) }
        #expect(session.snapshot().subscriptionIDs.count == bound && session.snapshot().outboundFrames == bound)
        expectSessionRejected(.relaySessionQueueFull, session, mentioning: ["128"]) {
            try session.subscribe(id: "s\(bound)", filtersJSON: [F.kind1])
        }
        // the same id replaces its subscription, also at the bound; its undrained REQ is superseded
        try session.subscribe(id: "s5", filtersJSON: [#"{"kinds":[7]}"#])
        #expect(session.snapshot().subscriptionIDs.count == bound && session.snapshot().outboundFrames == bound)
        let frames = try session.sendAll()
        #expect(frames.count == bound)
        #expect(frames.filter { $0.contains(#""s5""#) } == [#"["REQ","s5",{"kinds":[7]}]"#])
        try session.unsubscribe(id: "s0")
        try session.subscribe(id: "s\(bound)", filtersJSON: [F.kind1])
        #expect(session.snapshot().subscriptionIDs.count == bound)
    }

    @Test func subscribeBoundHoldsWhileDisconnectedToo() throws {
        let session = RelaySession()
        for i in 0..<128 { try session.subscribe(id: "s\(i)", filtersJSON: [F.kind1]) }
        expectSessionRejected(.relaySessionQueueFull, session) { try session.subscribe(id: "new", filtersJSON: [F.kind1]) }
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.drainAll().count == 128)
    }

    @Test func replacingASubscriptionAfterItsReqWentOutSendsTheNewReq() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.sendAll()
        try session.subscribe(id: "chat", filtersJSON: [#"{"kinds":[7]}"#])
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[7]}]"#])
        let kind1 = try session.receive(F.event("chat", F.note(1)))
        #expect(kind1.kinds == [.eventRejected], "the old filters no longer apply")
    }

    @Test func unsubscribeAfterTheReqWentOutQueuesClose() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.sendAll()
        try session.unsubscribe(id: "chat")
        #expect(try session.sendAll() == [#"["CLOSE","chat"]"#])
        #expect(session.snapshot().subscriptionIDs.isEmpty)
        // Sent before our CLOSE reached the relay (or after its EOSE): still the subscription's,
        // verified against its filters and handed out, not dropped for arriving late.
        #expect(try session.receive(F.event("chat", F.note(1))).kinds == [.persistEvent])
    }

    @Test func eventsForClosedSubscriptionsAreTakenForTheLast32Only() throws {
        let session = try RelaySession.connected()
        for i in 0..<33 {
            try session.subscribe(id: "s\(i)", filtersJSON: [F.kind1])
            try session.sendAll()
            try session.unsubscribe(id: "s\(i)")
        }
        // The oldest of 33 closed subscriptions is forgotten; the newest still takes its events.
        #expect(try session.receive(F.event("s0", F.note(1))).kinds == [.eventRejected])
        #expect(try session.receive(F.event("s32", F.note(2))).kinds == [.persistEvent])
        // Only matching events: the closed subscription's filters still apply.
        #expect(try session.receive(F.event("s31", F.note(3, kind: 7))).kinds == [.eventRejected])
    }

    @Test func unsubscribeBeforeTheReqWasDrainedDropsTheReq() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.subscribe(id: "other", filtersJSON: [F.kind1])
        try session.unsubscribe(id: "chat")
        #expect(session.snapshot().outboundFrames == 1)
        #expect(try session.sendAll() == [#"["REQ","other",{"kinds":[1]}]"#])
    }

    @Test func unsubscribeWhileDisconnectedLeavesItOutOfTheNextConnection() throws {
        let session = RelaySession()
        try session.subscribe(id: "a", filtersJSON: [F.kind1])
        try session.subscribe(id: "b", filtersJSON: [F.kind1])
        try session.unsubscribe(id: "a")
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["no subscription \"a\""]) { try session.unsubscribe(id: "a") }
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.sendAll() == [#"["REQ","b",{"kinds":[1]}]"#])
    }

    @Test func invalidSubscriptionInputIsRejectedWithItsWireCode() throws {
        let session = try RelaySession.connected()
        let cases: [(String, [String], SoftchatErrorCode)] = [
            ("chat", [], .invalidRelayFilter), ("chat", ["not json"], .invalidRelayFilter),
            ("chat", [#"{"kinds":"1"}"#], .invalidRelayFilter), ("chat", [#"{"colour":"red"}"#], .invalidRelayFilter),
            ("chat", Array(repeating: F.kind1, count: 65), .invalidRelayFilter),
            (String(repeating: "x", count: 65), [F.kind1], .invalidRelayFrame), ("", [F.kind1], .invalidRelayFrame),
        ]
        for (id, filters, code) in cases {
            expectSessionRejected(code, session) { try session.subscribe(id: id, filtersJSON: filters) }
            expectSessionRejected(code, session) { try session.count(id: id, filtersJSON: filters) }
        }
        try session.subscribe(id: String(repeating: "x", count: 64), filtersJSON: Array(repeating: F.kind1, count: 64))
        #expect(try session.drainAll().count == 1)
    }

    @Test func countQueuesACountFrameAndItsAnswerIsACountResult() throws {
        let session = try RelaySession.connected()
        try session.count(id: "n", filtersJSON: [F.kind1])
        #expect(try session.sendAll() == [#"["COUNT","n",{"kinds":[1]}]"#])
        let answer = try session.receive(F.countAnswer("n", 42))
        #expect(answer.kinds == [.countResult] && answer[0].subscriptionID == "n" && answer[0].count == CountResult(count: 42))
        // answered: another answer is a notice, and a reconnect does not ask again
        #expect(try session.receive(F.countAnswer("n", 43)).kinds == [.notice])
        _ = try session.transportLost(now: nil)
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.drainAll().isEmpty)
    }

    @Test func unansweredCountIsAskedAgainAfterReconnectAndCountNeverTakesASubscriptionId() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.count(id: "n", filtersJSON: [#"{"kinds":[7]}"#])
        try session.sendAll()
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["chat"]) { try session.count(id: "chat", filtersJSON: [F.kind1]) }
        _ = try session.transportLost(now: nil)
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[1]}]"#, #"["COUNT","n",{"kinds":[7]}]"#])
    }

    // MARK: The outbound queue

    /// A connected session holding exactly 1,024 control frames: 128 REQs and 896 COUNTs.
    static func fullSession(_ config: RelaySessionConfig = RelaySessionConfig()) throws -> RelaySession {
        let session = try RelaySession.connected(config)
        for i in 0..<128 { try session.subscribe(id: "s\(i)", filtersJSON: [F.kind1]) }
        for i in 0..<896 { try session.count(id: "c\(i)", filtersJSON: [F.kind1]) }
        return session
    }

    @Test func outboundBoundIs1024FramesAndTheCallThatWouldPassItQueuesNothing() throws {
        let bound = RelaySessionContract.maxOutboundFrames.value
        #expect(bound == 1024)
        let session = try Self.fullSession()
        #expect(session.snapshot().outboundFrames == bound)
        _ = try session.receive(F.authChallenge("c-full"))
        let answer = F.auth("c-full")
        expectSessionRejected(.relaySessionQueueFull, session, mentioning: ["1024"]) { try session.authenticate(answer) }
        expectSessionRejected(.relaySessionQueueFull, session) { try session.count(id: "one-more", filtersJSON: [F.kind1]) }
        // draining is not confirming: the drained frames still count
        #expect(try session.drainOutbound(max: 256).count == 256)
        expectSessionRejected(.relaySessionQueueFull, session) { try session.authenticate(answer) }
        // one confirmed write makes room for exactly one frame, and the refused answer was not used up
        try session.confirmSent([])
        try session.authenticate(answer)
        #expect(session.snapshot().outboundFrames == bound)
        #expect(try session.drainOutbound(max: 1).map { clientVerb($0.frame) } == ["AUTH"])
    }

    @Test func drainedPublishFramesCountTowardsTheOutboundBound() throws {
        let session = try Self.fullSession(RelaySessionConfig(supportsEventsBatch: false))
        #expect(try session.drainAll().count == 1024)
        let e = F.note(1)
        try session.publish([e])
        #expect(try session.drainOutbound().isEmpty, "a 1,025th frame is not handed out")
        #expect(session.snapshot().outboundFrames == 1024)
        try session.confirmSent([])
        #expect(try session.drainOutbound().map(\.deliveryEventIDs) == [[e.id]])
        #expect(session.snapshot().outboundFrames == 1024)
    }

    @Test func pendingCountsNeverMakeAReconnectImpossible() throws {
        let session = RelaySession()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        var accepted = 0
        for i in 0..<1100 {
            do {
                try session.count(id: "c\(i)", filtersJSON: [F.kind1])
                accepted += 1
            } catch let error as SoftchatError {
                #expect(error.code == .relaySessionQueueFull)
                break
            }
        }
        #expect(accepted == 1023, "what a reconnect must send (1 REQ + the COUNTs) fits in 1,024 frames")
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.drainAll().count == 1024)
        expectSessionRejected(.relaySessionQueueFull, session) { try session.subscribe(id: "two", filtersJSON: [F.kind1]) }
    }

    @Test func drainMaxAcceptsOneTo256AndRejectsTheRest() throws {
        #expect(RelaySessionContract.defaultDrainMax.value == 256)
        let session = try RelaySession.connected()
        for i in 0..<128 { try session.subscribe(id: "s\(i)", filtersJSON: [F.kind1]) }
        for i in 0..<172 { try session.count(id: "c\(i)", filtersJSON: [F.kind1]) }
        for bad in [0, -1, 257, Int.max] {
            expectSessionRejected(.invalidRelaySession, session, mentioning: ["1 to 256", "\(bad)"]) { _ = try session.drainOutbound(max: bad) }
        }
        #expect(try session.drainOutbound(max: 1).count == 1)
        #expect(try session.drainOutbound(max: 256).count == 256)
        #expect(try session.drainOutbound().count == 43)
        let idle = RelaySession()
        expectSessionRejected(.invalidRelaySession, idle) { _ = try idle.drainOutbound(max: 0) }
        #expect(try idle.drainOutbound(max: 256).isEmpty)
    }

    @Test func controlFramesGoOutBeforePublishes() throws {
        let session = try RelaySession.connected()
        try session.publish([F.note(1)])
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.count(id: "n", filtersJSON: [F.kind1])
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["REQ", "COUNT", "EVENT"])
    }

    @Test func framesDrainedButNotConfirmedAreSentAgainAfterReconnect() throws {
        let session = try RelaySession.connected()
        let e = F.note(1)
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.count(id: "n", filtersJSON: [F.kind1])
        try session.publish([e])
        let first = try session.drainAll()
        #expect(first.map { clientVerb($0.frame) } == ["REQ", "COUNT", "EVENT"])
        #expect(try session.transportLost(now: nil).kinds == [.scheduleReconnect], "nothing was in flight")
        #expect(session.snapshot().outboundFrames == 0)
        _ = try session.connect()
        try session.transportConnected()
        #expect(try session.drainAll() == first)
    }

    @Test func confirmSentMustNameADrainedFrameExactly() throws {
        let session = try RelaySession.connected()
        let (a, b) = (F.note(1), F.note(2))
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.publish([a, b])
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[], [a.id, b.id]])
        for wrong in [[a.id], [b.id, a.id], [F.note(3).id]] {
            expectSessionRejected(.invalidDeliveryState, session, mentioning: ["\(wrong.count) event(s)"]) { try session.confirmSent(wrong) }
        }
        try session.confirmSent([])
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["without events"]) { try session.confirmSent([]) }
        try session.confirmSent([a.id, b.id])
        expectSessionRejected(.invalidDeliveryState, session) { try session.confirmSent([a.id, b.id]) }
        #expect(session.snapshot().outboundFrames == 0)
    }

    // MARK: Snapshot

    @Test func snapshotIsRedactedInItsDescriptionAndJSON() throws {
        let secret = "meet me at the old mill at nine"
        let challenge = "challenge-b9d1e4"
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.sendAll()
        let received = F.note(1, content: secret)
        _ = try session.receive(F.event("chat", received))
        let outgoing = F.note(2, by: WireKeys.bob, content: "outgoing " + secret)
        try session.publish([outgoing])
        _ = try session.receive(F.authChallenge(challenge))
        let answer = F.auth(challenge, by: WireKeys.carol)
        try session.authenticate(answer)
        let snapshot = session.snapshot()
        let forbidden =
            try [secret, challenge, received.sig, outgoing.sig, answer.sig]
            + [WireKeys.alice, WireKeys.bob, WireKeys.carol]
            .flatMap { [$0.publicKeyHex, try $0.exportSecretHex()] }
        for text in [snapshot.description, "\(snapshot)", snapshot.jsonValue.jsonText] {
            for f in forbidden { #expect(!text.contains(f), "snapshot text reveals \(f.prefix(12))…") }
        }
        #expect(snapshot.description.contains("authenticating") && snapshot.description.contains("chat"))
        #expect(snapshot.state == "authenticating" && snapshot.subscriptionIDs == ["chat"] && snapshot.awaitingPersistence == 1)
        #expect(snapshot.pendingPublishes == 1 && snapshot.outboundFrames == 1 && !snapshot.authenticated)
        #expect(
            snapshot.jsonValue.objectValue?.members.map(\.key) == [
                "state", "subscriptionIds", "outboundFrames", "pendingPublishes", "awaitingPersistence", "reconnectAttempt", "authenticated",
            ])
    }
}
