import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// A relay text that `receive` must refuse with its relay.wire code.
struct SessionInvalidFrameCase: Sendable, CustomTestStringConvertible {
    var name: String
    var text: String
    var code: SoftchatErrorCode
    var testDescription: String { name }
}

/// `receive`: persistEvent only for verified, matching, new events; dedupe before verification;
/// the ingestion hand-off bound; the other relay messages; NIP-42 rounds and their limits.
@Suite struct SessionReceiveTests {
    typealias F = SessionFixtures

    /// A connected session with subscription "chat" (kind 1) whose REQ went out.
    func chatSession(_ filters: [String] = [F.kind1]) throws -> RelaySession {
        let session = try RelaySession.connected()
        try session.subscribe(id: "chat", filtersJSON: filters)
        try session.sendAll()
        return session
    }

    // MARK: persistEvent and eventRejected

    @Test func verifiedMatchingEventIsHandedOutForPersistence() throws {
        let session = try chatSession()
        let e = F.note(1)
        let actions = try session.receive(F.event("chat", e))
        #expect(actions.kinds == [.persistEvent])
        let action = try #require(actions.first)
        #expect(action.subscriptionID == "chat" && action.event == e && action.event?.content == e.content)
        #expect(session.snapshot().awaitingPersistence == 1)
    }

    /// `read` then `receive(frame)`: the host looks at what an EVENT claims between the two,
    /// with no callback into it under the session's lock (the engine's screen used to run
    /// there). Reading changes nothing, and what it claims is not yet verified.
    @Test func readingAFrameChangesNothingAndTellsWhatAnEventClaimsBeforeVerification() throws {
        let session = try chatSession()
        let e = F.note(1)
        let before = session.snapshot()
        let frame = try session.read(F.event("chat", json: e.badSignatureJSON))
        #expect(frame.verb == "EVENT")
        let claimed = try #require(frame.claimedEvent)
        #expect(claimed.subscriptionID == "chat" && claimed.eventID == e.id && claimed.createdAt == e.createdAt)
        #expect(session.snapshot() == before, "reading is not receiving")
        // Applied, the claim is verified: a bad signature is refused, never persisted.
        #expect(try session.receive(frame, now: nil).kinds == [.eventRejected])
        #expect(try session.receive(session.read(F.event("chat", e)), now: nil).kinds == [.persistEvent])
        #expect(try session.read(#"["EOSE","chat"]"#).claimedEvent == nil)
        #expect(throws: SoftchatError.self) { _ = try session.read(#"["EVENT","chat",{"id":"not hex"}]"#) }
    }

    @Test func eventsThatFailVerificationAreRejectedAndNeverPersisted() throws {
        let session = try chatSession()
        let e = F.note(1)
        for (json, what) in [(e.badSignatureJSON, "signature"), (e.tamperedContentJSON, "id")] {
            let actions = try session.receive(F.event("chat", json: json))
            #expect(actions.kinds == [.eventRejected], "\(what)")
            #expect(actions.first?.subscriptionID == "chat" && actions.first?.eventID == e.id && actions.first?.event == nil)
            #expect(actions.first?.reason?.contains(what) == true, "reason \(actions.first?.reason ?? "nil") lacks \(what)")
        }
        #expect(session.snapshot().awaitingPersistence == 0)
        // a refused copy does not poison the id: the genuine event is still persisted
        #expect(try session.receive(F.event("chat", e)).kinds == [.persistEvent])
    }

    @Test func eventMatchingNoFilterOfItsSubscriptionIsRejected() throws {
        let session = try chatSession([F.kind1, #"{"kinds":[7],"authors":["\#(WireKeys.bob.publicKeyHex)"]}"#])
        let aliceReaction = F.note(1, kind: 7)
        let actions = try session.receive(F.event("chat", aliceReaction))
        #expect(actions.kinds == [.eventRejected] && actions.first?.reason?.contains("matches none") == true)
        #expect(try session.receive(F.event("chat", F.note(2, kind: 7, by: WireKeys.bob))).kinds == [.persistEvent])
        #expect(session.snapshot().awaitingPersistence == 1)
    }

    @Test func eventForAnUnknownSubscriptionIsRejected() throws {
        let session = try chatSession()
        let actions = try session.receive(F.event("elsewhere", F.note(1)))
        #expect(actions.kinds == [.eventRejected])
        #expect(actions.first?.subscriptionID == "elsewhere" && actions.first?.reason?.contains("no subscription") == true)
        #expect(session.snapshot().awaitingPersistence == 0)
    }

    @Test func duplicateEventAcrossTwoSubscriptionsIsPersistedOnce() throws {
        let session = try RelaySession.connected()
        try session.subscribe(id: "notes", filtersJSON: [F.kind1])
        try session.subscribe(id: "alice", filtersJSON: [#"{"authors":["\#(WireKeys.alice.publicKeyHex)"]}"#])
        try session.sendAll()
        let e = F.note(1)
        #expect(try session.receive(F.event("notes", e)).kinds == [.persistEvent])
        #expect(try session.receive(F.event("alice", e)).isEmpty, "awaiting persistence: not handed out twice")
        try session.confirmIngested(e.id)
        #expect(try session.receive(F.event("alice", e)).isEmpty, "recently confirmed")
        #expect(try session.receive(F.event("notes", e)).isEmpty)
        #expect(session.snapshot().awaitingPersistence == 0)
    }

    @Test func dedupeByIdHappensBeforeSignatureVerification() throws {
        let session = try chatSession()
        let (awaited, confirmed, fresh) = (F.note(1), F.note(2), F.note(3))
        _ = try session.receive(F.event("chat", awaited))
        _ = try session.receive(F.event("chat", confirmed))
        try session.confirmIngested(confirmed.id)
        // known ids are dropped without verifying: no action at all, not even a rejection
        #expect(try session.receive(F.event("chat", json: awaited.badSignatureJSON)).isEmpty)
        #expect(try session.receive(F.event("chat", json: confirmed.badSignatureJSON)).isEmpty)
        // an unknown id is verified, and a bad signature is rejected
        #expect(try session.receive(F.event("chat", json: fresh.badSignatureJSON)).kinds == [.eventRejected])
        #expect(session.snapshot().awaitingPersistence == 1)
    }

    @Test func eventAwaitingPersistenceIsOfferedAgainOnlyWhenResentAfterAReconnect() throws {
        let session = try chatSession()
        let e = F.note(1)
        _ = try session.receive(F.event("chat", e))
        #expect(try session.receive(F.event("chat", e)).isEmpty, "same connection: still awaiting")
        _ = try session.transportLost(now: nil)
        _ = try session.connect()
        try session.transportConnected()
        try session.sendAll()
        // resent after the reconnect, even as a corrupted copy, the verified original is offered once more
        let again = try session.receive(F.event("chat", json: e.badSignatureJSON))
        #expect(again.kinds == [.persistEvent] && again.first?.event == e && again.first?.event?.sig == e.sig)
        #expect(try session.receive(F.event("chat", e)).isEmpty, "offered again once")
        try session.confirmIngested(e.id)
        expectSessionRejected(.invalidRelaySession, session) { try session.confirmIngested(e.id) }
    }

    // MARK: The ingestion hand-off

    @Test func ingestionHandOffBoundIs1024AndAFullReceiveAppliesNothing() throws {
        let bound = RelayIngestionContract.maxAwaitingPersistence.value
        #expect(bound == 1024)
        let session = try chatSession()
        for e in F.many[..<bound] { #expect(try session.receive(F.event("chat", e)).kinds == [.persistEvent]) }
        #expect(session.snapshot().awaitingPersistence == bound)
        let next = F.many[bound]
        expectSessionRejected(.relaySessionQueueFull, session, mentioning: ["1024", "confirm"]) { _ = try session.receive(F.event("chat", next)) }
        // what needs no room still works: duplicates, rejections and other messages
        #expect(try session.receive(F.event("chat", F.many[0])).isEmpty)
        #expect(try session.receive(F.event("chat", F.note(1, kind: 7))).kinds == [.eventRejected])
        #expect(try session.receive(#"["EOSE","chat"]"#).kinds == [.endOfStoredEvents])
        try session.confirmIngested(F.many[0].id)
        #expect(try session.receive(F.event("chat", next)).kinds == [.persistEvent], "the refused event was not recorded")
        #expect(session.snapshot().awaitingPersistence == bound)
    }

    @Test func confirmIngestedIsValidOnlyForAnEventHandedOutAndNotYetConfirmed() throws {
        let session = try chatSession()
        let (e, rejected) = (F.note(1), F.note(2, kind: 7))
        _ = try session.receive(F.event("chat", e))
        _ = try session.receive(F.event("chat", rejected))
        for id in [F.note(3).id, rejected.id, "not an id"] {
            expectSessionRejected(.invalidRelaySession, session, mentioning: ["was not handed out"]) { try session.confirmIngested(id) }
        }
        // the host may commit after the transport went away
        _ = try session.transportLost(now: nil)
        try session.confirmIngested(e.id)
        expectSessionRejected(.invalidRelaySession, session, mentioning: [e.id]) { try session.confirmIngested(e.id) }
        let error = expectSoftchatError(.invalidRelaySession) { try session.confirmIngested(e.id) }
        #expect(error?.operation == .relayIngestion)
    }

    @Test func validateIngestionResultAcceptsOnlyATotalDisjointResult() throws {
        let (a, b, c, d) = (F.note(1), F.note(2), F.note(3), F.note(4))
        let batch = IngestionBatch(events: [a, b, c])
        try validateIngestionResult(batch: batch, result: IngestionResult(accepted: [a.id], alreadyPresent: [b.id], rejected: [c.id]))
        try validateIngestionResult(batch: batch, result: IngestionResult(accepted: [c.id, a.id, b.id]))
        try validateIngestionResult(batch: IngestionBatch(events: []), result: IngestionResult())
        let refused: [(IngestionBatch, IngestionResult, [String])] = [
            (batch, IngestionResult(accepted: [a.id, b.id]), [c.id, "missing"]),
            (batch, IngestionResult(accepted: [a.id, b.id, c.id], rejected: [b.id]), [b.id, "both"]),
            (batch, IngestionResult(accepted: [a.id, b.id, c.id], alreadyPresent: [d.id]), [d.id, "not in the batch"]),
            (batch, IngestionResult(accepted: [a.id, a.id, b.id, c.id]), [a.id]),
            (IngestionBatch(events: [a, a]), IngestionResult(accepted: [a.id]), [a.id, "twice"]),
            (IngestionBatch(events: []), IngestionResult(rejected: [a.id]), ["not in the batch"]),
        ]
        for (batch, result, parts) in refused {
            let error = expectSoftchatError(.invalidPersistenceResult, mentioning: parts) {
                try validateIngestionResult(batch: batch, result: result)
            }
            #expect(error?.operation == .relayIngestion)
        }
    }

    @Test func pageIngestionRecipeConfirmsOnlyAfterTheResultValidates() throws {
        let session = try chatSession()
        let events = (1...3).map { F.note($0) }
        let persisted = try events.flatMap { try session.receive(F.event("chat", $0)) }.compactMap(\.event)
        let batch = IngestionBatch(events: persisted)
        expectSoftchatError(.invalidPersistenceResult) {
            try validateIngestionResult(batch: batch, result: IngestionResult(accepted: [events[0].id]))
            for e in batch.events { try session.confirmIngested(e.id) }
        }
        #expect(session.snapshot().awaitingPersistence == 3)
        try validateIngestionResult(batch: batch, result: IngestionResult(accepted: events.map(\.id)))
        for e in batch.events { try session.confirmIngested(e.id) }
        #expect(session.snapshot().awaitingPersistence == 0)
    }

    // MARK: Invalid frames

    static let validNote = F.note(77)
    static let invalidFrames: [SessionInvalidFrameCase] = [
        .init(name: "not JSON", text: "not json", code: .invalidRelayFrame),
        .init(name: "object", text: "{}", code: .invalidRelayFrame),
        .init(name: "empty array", text: "[]", code: .invalidRelayFrame),
        .init(name: "unknown verb", text: #"["HELLO","x"]"#, code: .invalidRelayFrame),
        .init(name: "EVENT arity", text: #"["EVENT","chat"]"#, code: .invalidRelayFrame),
        .init(name: "EVENT malformed event", text: #"["EVENT","chat",{"id":"abc"}]"#, code: .invalidRelayFrame),
        .init(name: "EVENT empty subscription", text: F.event("", validNote), code: .invalidRelayFrame),
        .init(name: "OK short id", text: #"["OK","abc",true,""]"#, code: .invalidRelayFrame),
        .init(name: "OK accepted not bool", text: wireFrame("OK", .string(validNote.id), "yes", ""), code: .invalidRelayFrame),
        .init(name: "EOSE arity", text: #"["EOSE"]"#, code: .invalidRelayFrame),
        .init(name: "CLOSED arity", text: #"["CLOSED","chat"]"#, code: .invalidRelayFrame),
        .init(name: "NOTICE number", text: #"["NOTICE",5]"#, code: .invalidRelayFrame),
        .init(name: "AUTH empty challenge", text: #"["AUTH",""]"#, code: .invalidRelayAuthentication),
        .init(name: "AUTH without challenge", text: #"["AUTH"]"#, code: .invalidRelayAuthentication),
        .init(name: "COUNT negative", text: #"["COUNT","n",{"count":-1}]"#, code: .invalidRelayFrame),
        .init(name: "over 512 KiB", text: wireFrame("NOTICE", .string(String(repeating: "x", count: 524_288))), code: .invalidRelayFrame),
    ]

    @Test(arguments: invalidFrames)
    func invalidFrameThrowsItsWireCodeAndChangesNothing(_ c: SessionInvalidFrameCase) throws {
        let (subject, control) = (try chatSession(), try chatSession())
        expectSessionRejected(c.code, subject) { _ = try subject.receive(c.text) }
        #expect(subject.snapshot() == control.snapshot())
        #expect(try subject.receive(F.event("chat", Self.validNote)) == control.receive(F.event("chat", Self.validNote)))
    }

    @Test func receiveNeedsAConnectedTransport() throws {
        let session = RelaySession()
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["receive", "idle"]) { _ = try session.receive(#"["EOSE","chat"]"#) }
        _ = try session.connect()
        expectSessionRejected(.invalidRelaySession, session, mentioning: ["connecting"]) { _ = try session.receive(#"["EOSE","chat"]"#) }
    }

    // MARK: EOSE, CLOSED, NOTICE, COUNT

    @Test func eoseClosedNoticeAndCountBecomeTheirActions() throws {
        let session = try chatSession()
        let eose = try session.receive(#"["EOSE","chat"]"#)
        #expect(eose.kinds == [.endOfStoredEvents] && eose[0].subscriptionID == "chat")
        // (text, prefix, message): LocalRelay, strfry's "ERROR: " wrapper, an empty reason
        let closedCases: [(String, String?, String)] = [
            ("rate-limited: too many REQs", "rate-limited", "too many REQs"),
            (
                "ERROR: auth-required: requested filter requires authentication", "auth-required",
                "requested filter requires authentication"
            ),
            ("blocked: kind 42 queries not allowed", "blocked", "kind 42 queries not allowed"), ("", nil, ""),
        ]
        for (text, prefix, message) in closedCases {
            let closed = try session.receive(F.closed("chat", text))
            #expect(closed.kinds == [.subscriptionClosed] && closed[0].subscriptionID == "chat")
            #expect(closed[0].prefix == prefix && closed[0].message == message, "\(text)")
        }
        // nostr-relay's bare "rate-limited", its "restricted: …", strfry's "ERROR: bad msg: …"
        let noticeCases: [(String, String?, String)] = [
            ("rate-limited", nil, "rate-limited"), ("restricted: permission denied", "restricted", "permission denied"),
            ("ERROR: bad msg: unknown cmd", nil, "bad msg: unknown cmd"),
        ]
        for (text, prefix, message) in noticeCases {
            let notice = try session.receive(wireFrame("NOTICE", .string(text)))
            #expect(notice.kinds == [.notice] && notice[0].prefix == prefix && notice[0].message == message, "\(text)")
        }
        try session.count(id: "n", filtersJSON: [F.kind1])
        try session.count(id: "hll", filtersJSON: [##"{"kinds":[3],"#p":["\##(WireKeys.alice.publicKeyHex)"]}"##])
        try session.sendAll()
        #expect(try session.receive(F.countAnswer("n", 5)).first?.count == CountResult(count: 5))
        let hll = #"["COUNT","hll",{"count":16578,"approximate":true,"hll":"\#(WireRelayFrameTests.nip45HLL)"}]"#
        let answer = try #require(try session.receive(hll).first)
        #expect(answer.kind == .countResult && answer.count?.count == 16578 && answer.count?.approximate == true && answer.count?.hll != nil)
        #expect(try session.receive(F.countAnswer("never-asked", 1)).kinds == [.notice])
    }

    // MARK: NIP-42

    @Test func authRequiredClosedIsResubscribedOnceAfterAuthentication() throws {
        let session = try chatSession()
        try session.subscribe(id: "blocked", filtersJSON: [#"{"kinds":[42]}"#])
        try session.sendAll()
        #expect(try session.receive(F.authChallenge("c1")).kinds == [.authenticationRequested])
        #expect(try session.receive(F.closed("chat", "auth-required: you must auth")).kinds == [.subscriptionClosed])
        _ = try session.receive(F.closed("blocked", "blocked: kind 42 queries not allowed"))
        #expect(try session.drainAll().isEmpty, "nothing is retried before authenticating")
        let answer = F.auth("c1")
        try session.authenticate(answer)
        #expect(try session.sendAll() == [ClientRelayFrame.auth(answer).toJSON()])
        #expect(try session.receive(F.ok(answer.id, true)).kinds == [.authenticated])
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[1]}]"#], "only the auth-required close is retried")
        // closed again for the same reason: no second retry, even after another authentication
        _ = try session.receive(F.closed("chat", "auth-required: still not allowed"))
        _ = try session.receive(F.authChallenge("c2"))
        let second = F.auth("c2")
        try session.authenticate(second)
        #expect(try session.sendAll() == [ClientRelayFrame.auth(second).toJSON()])
        #expect(try session.receive(F.ok(second.id, true)).kinds == [.authenticated])
        #expect(try session.drainAll().isEmpty)
    }

    @Test func authFloodOfOneChallengeAsksOnce() throws {
        let session = try chatSession()
        var asked: [RelaySessionAction] = []
        for _ in 0..<5 { asked += try session.receive(F.authChallenge("c1")) }
        #expect(asked.kinds == [.authenticationRequested] && asked[0].challenge == "c1")
        #expect(try session.receive(F.authChallenge("c2")).map(\.challenge) == ["c2"], "a new challenge asks again")
        let answer = F.auth("c2")
        try session.authenticate(answer)
        _ = try session.receive(F.ok(answer.id, true))
        #expect(try session.receive(F.authChallenge("c2")).isEmpty, "an answered challenge is not asked again")
        // a relay reusing its challenge on a new connection is answered again there, once
        try session.reconnect()
        #expect(try session.receive(F.authChallenge("c2")).kinds == [.authenticationRequested])
        try session.authenticate(F.auth("c2"))
        #expect(try session.receive(F.authChallenge("c2")).isEmpty)
        // Without a clock no answer counts as in flight (its wait could never end): a new
        // challenge is asked for at once. With one, it waits (HostileRelayInputTests).
        #expect(try session.receive(F.authChallenge("c3")).kinds == [.authenticationRequested])
    }

    /// The answered challenges are remembered in a bounded window (the latest 256), so a relay
    /// issuing a fresh challenge after every answer cannot grow the session; within the window
    /// a repeated challenge is still never asked twice.
    @Test func answeringManyChallengesKeepsAskingOnceWithinTheWindow() throws {
        let session = try chatSession()
        for n in 0..<600 {
            let challenge = "c\(n)"
            #expect(try session.receive(F.authChallenge(challenge)).map(\.challenge) == [challenge])
            let answer = F.auth(challenge)
            try session.authenticate(answer)
            _ = try session.sendAll()
            _ = try session.receive(F.ok(answer.id, true))
        }
        for n in 600 - 255..<600 {
            #expect(try session.receive(F.authChallenge("c\(n)")).isEmpty, "c\(n) was answered")
        }
    }

    @Test func authenticateRefusesAnswersThatDoNotFitTheLatestChallenge() throws {
        let session = try chatSession()
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["has not asked"]) { try session.authenticate(F.auth("c1")) }
        _ = try session.receive(F.authChallenge("c1"))
        _ = try session.receive(F.authChallenge("c2"))
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["current challenge"]) { try session.authenticate(F.auth("c1")) }
        let wrongKind = try WireKeys.alice.sign(
            UnsignedEvent(createdAt: F.baseTime, kind: 1, tags: [["relay", F.relay], ["challenge", "c2"]], content: ""))
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["22242"]) { try session.authenticate(wrongKind) }
        let noRelay = try WireKeys.alice.sign(UnsignedEvent(createdAt: F.baseTime, kind: 22242, tags: [["challenge", "c2"]], content: ""))
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["relay tag"]) { try session.authenticate(noRelay) }
        #expect(try session.drainAll().isEmpty)
        try session.authenticate(F.auth("c2"))
        // the same key may not answer the same challenge twice (a fresh event changes nothing)
        let again = try WireKeys.alice.createNip42Authentication(challenge: "c2", relayURL: F.relay, createdAt: F.baseTime + 1)
        expectSessionRejected(.invalidRelayAuthentication, session, mentioning: ["already answered"]) { try session.authenticate(again) }
        try session.authenticate(F.auth("c2", by: WireKeys.bob))
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["AUTH", "AUTH"])
        _ = try session.transportLost(now: nil)
        expectSessionRejected(.invalidRelaySession, session) { try session.authenticate(F.auth("c9")) }
    }

    @Test func refusedAuthenticationIsReportedAndReplaysNothing() throws {
        let session = try chatSession()
        let e = F.note(5)
        try session.publish([e])
        try session.sendAll()
        _ = try session.receive(F.authChallenge("c1"))
        _ = try session.receive(F.closed("chat", "auth-required: you must auth"))
        #expect(try session.receive(F.ok(e.id, false, "auth-required: you must auth")).isEmpty, "held for the resend")
        let answer = F.auth("c1")
        try session.authenticate(answer)
        try session.sendAll()
        // LocalRelay's answer to a bad AUTH
        let refused = try session.receive(F.ok(answer.id, false, "auth-required: received invalid challenge"))
        #expect(refused.kinds == [.authenticationFailed, .deliveryChanged])
        #expect(
            refused.first?.eventID == answer.id && refused.first?.prefix == "auth-required" && refused.first?.message == "received invalid challenge")
        // the held event does not wait for an authentication that failed
        #expect(refused.decisions.map { [$0.eventID, $0.state.rawValue, $0.category.rawValue] } == [[e.id, "retryable", "auth-required"]])
        #expect(try session.drainAll().isEmpty, "no REQ and no EVENT retried")
        #expect(session.snapshot().state == "ready" && !session.snapshot().authenticated && session.snapshot().pendingPublishes == 0)
        expectSessionRejected(.invalidRelayAuthentication, session) { try session.authenticate(answer) }
        // a fresh challenge can be answered, and then the retries happen once
        _ = try session.receive(F.authChallenge("c2"))
        let second = F.auth("c2")
        try session.authenticate(second)
        try session.sendAll()
        let accepted = try session.receive(F.ok(second.id, true))
        #expect(accepted.kinds == [.authenticated])
        #expect(try session.drainAll().map { clientVerb($0.frame) } == ["REQ"], "the closed subscription comes back; the event is the host's")
    }
}
