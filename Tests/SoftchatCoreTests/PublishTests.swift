import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// One relay `OK` as a real relay sends it, and the decision it must classify to; `state` nil
/// means the OK names no event (empty id) and cannot be classified.
struct PublishAckCase: Sendable, CustomTestStringConvertible {
    var relay: String
    var named: Bool
    var accepted: Bool
    var text: String
    var state: DeliveryState?
    var category: DeliveryCategory?
    var testDescription: String { "\(relay): \(named ? "id" : "\"\"") \(accepted) \"\(text)\"" }
}

/// relay.publish: the acknowledgement classifier against what real relays send, EVENT/EVENTS
/// framing, delivery states and their transitions, and the publish bounds.
@Suite struct PublishTests {
    typealias F = SessionFixtures
    static let id = "b1a649ebe8b435ec71d3784793f3bbf4b93e64e17568a741aecd4c7ddeafce30"

    static func ack(
        _ relay: String, _ accepted: Bool, _ text: String, _ state: DeliveryState?, _ category: DeliveryCategory?,
        named: Bool = true
    ) -> PublishAckCase {
        PublishAckCase(relay: relay, named: named, accepted: accepted, text: text, state: state, category: category)
    }

    static let acknowledgements: [PublishAckCase] = [
        // nostr-relay 1.14 (as observed on loopback): duplicates are false; rejections carry an empty id
        ack("nostr-relay", true, "", .accepted, .accepted),
        ack("nostr-relay", false, "duplicate: exists", .accepted, .duplicate),
        ack("nostr-relay", false, "invalid: Bad signature", nil, nil, named: false),
        ack("nostr-relay", false, "invalid: 280 characters should be enough for anybody", nil, nil, named: false),
        ack("nostr-relay", false, "restricted: permission denied", nil, nil, named: false),
        ack("nostr-relay", false, "rate-limited: slow down", .retryable, .rateLimited),
        // nostr_sdk 0.45.1 LocalRelay (§3–4): duplicates are true
        ack("LocalRelay", true, "duplicate: already have this event", .accepted, .duplicate),
        ack("LocalRelay", false, "invalid: invalid event signature", .rejected, .invalid),
        ack("LocalRelay", false, "invalid: invalid event ID", .rejected, .invalid),
        ack("LocalRelay", false, "auth-required: you must auth", .retryable, .authRequired),
        ack("LocalRelay", false, "auth-required: received invalid challenge", .retryable, .authRequired),
        ack("LocalRelay", false, "pow: required a difficulty >= 8", .rejected, .pow),
        ack("LocalRelay", false, "blocked: pubkey is banned", .rejected, .blocked),
        ack("LocalRelay", false, "blocked: event size (65642 bytes) exceeds maximum allowed size (65536 bytes)", .rejected, .blocked),
        ack("LocalRelay", false, "rate-limited: slow down", .retryable, .rateLimited),
        // strfry (src/apps/relay/RelayIngester.cpp, RelayWriter.cpp, src/events.cpp): "invalid: " + the
        // verifier's error, write-policy and NIP-70 refusals, duplicates true, AUTH OK true with prose
        ack("strfry", true, "duplicate: have this event", .accepted, .duplicate),
        ack("strfry", false, "invalid: bad signature", .rejected, .invalid),
        ack("strfry", false, "invalid: created_at too early", .rejected, .invalid),
        ack("strfry", false, "blocked: event marked as protected", .rejected, .blocked),
        ack("strfry", false, "auth-required: event marked as protected", .retryable, .authRequired),
        ack("strfry", false, "restricted: must be published by the author", .rejected, .restricted),
        ack("strfry", false, "replaced: have newer event", .rejected, .replaced),
        ack("strfry", false, "deleted: user requested deletion", .rejected, .deleted),
        ack("strfry", false, "Write error: MDB_MAP_FULL: Environment mapsize limit reached", .retryable, .unknown),
        ack("strfry", true, "successfully authenticated", .accepted, .accepted),
        // strfry wraps NOTICE/CLOSED text as "ERROR: " + payload (sendNoticeError/sendClosedError); the
        // same wrapper on an OK is stripped before the prefix is read
        ack("strfry", false, "ERROR: auth-required: requested filter requires authentication", .retryable, .authRequired),
        ack("strfry", false, "ERROR: bad msg: unknown cmd", .retryable, .unknown),
        // khatru (handlers.go, adding.go, policies/ratelimits.go)
        ack("khatru", false, "invalid: id is computed incorrectly", .rejected, .invalid),
        ack("khatru", false, "invalid: signature is invalid", .rejected, .invalid),
        ack("khatru", false, "error: failed to verify signature", .retryable, .error),
        ack("khatru", false, "auth-required: must be published by authenticated event author", .retryable, .authRequired),
        ack("khatru", false, "blocked: must be published by event author", .rejected, .blocked),
        ack("khatru", false, "blocked: no reason", .rejected, .blocked),
        ack("khatru", false, "mute: no one was listening for this", .rejected, .mute),
        ack("khatru", true, "broadcasted to 3 listeners", .accepted, .accepted),
        ack("khatru", false, "rate-limited: slow down, please", .retryable, .rateLimited),
        ack("khatru", false, "error: failed to authenticate", .retryable, .error),
        // nostr-rs-relay (src/notice.rs: "<prefix>: <msg>", duplicates true with an empty message; src/db.rs)
        ack("nostr-rs-relay", true, "duplicate: ", .accepted, .duplicate),
        ack("nostr-rs-relay", false, "invalid: The event has already expired", .rejected, .invalid),
        ack("nostr-rs-relay", false, "blocked: event kind is blocked by relay", .rejected, .blocked),
        ack("nostr-rs-relay", false, "blocked: pubkey is not allowed to publish to this relay", .rejected, .blocked),
        ack("nostr-rs-relay", false, "blocked: User is not admitted", .rejected, .blocked),
        ack("nostr-rs-relay", false, "error: relay experienced an error trying to publish the latest event", .retryable, .error),
        // no prefix, an unknown one, or one that is not a lowercase word: retryable / unknown
        ack("any", false, "", .retryable, .unknown),
        ack("any", false, "something went wrong", .retryable, .unknown),
        ack("khatru (CLOSED text)", false, "unsupported: this relay does not support NIP-45", .retryable, .unknown),
        ack("nostr-relay (NOTICE text)", false, "rejected: too many subscriptions", .retryable, .unknown),
        ack("any", false, "Duplicate: shouting", .retryable, .unknown),
        ack("any", true, "rate-limited: but stored", .accepted, .accepted),
    ]

    // MARK: The classifier

    @Test(arguments: acknowledgements)
    func classifierReadsStateAndCategoryFromRealRelayAcknowledgements(_ c: PublishAckCase) throws {
        let frame = try parseRelayResponseFrame(F.ok(c.named ? Self.id : "", c.accepted, c.text))
        guard let state = c.state, let category = c.category else {
            let error = expectSoftchatError(.invalidRelayFrame, mentioning: ["without an event id"]) {
                _ = try classifyDeliveryAcknowledgement(frame)
            }
            #expect(error?.operation == .relayPublish)
            return
        }
        let decision = try classifyDeliveryAcknowledgement(frame)
        #expect(decision.eventID == Self.id && decision.state == state && decision.category == category)
        #expect(decision.message == c.text, "relay prose is kept whole, for logs")
    }

    @Test(arguments: acknowledgements)
    func sessionAppliesEachAcknowledgementAsTheClassifierDoes(_ c: PublishAckCase) throws {
        let session = try RelaySession.connected(RelaySessionConfig(acknowledgementTimeoutSeconds: 10))
        let e = F.note(5000 + c.text.count, content: "\(c.relay) \(c.text)")
        try session.publish([e])
        try session.sendAll()
        let text = F.ok(c.named ? e.id : "", c.accepted, c.text)
        let actions = try session.receive(text)
        guard c.named else {
            #expect(actions.kinds == [.notice] && actions.first?.eventID == nil)
            #expect(try session.handleTimeout(now: 1).isEmpty, "written without a time: its deadline starts now")
            #expect(try session.handleTimeout(now: 11).decisions.map(\.eventID) == [e.id], "still in flight: applied to nothing")
            return
        }
        let decision = try classifyDeliveryAcknowledgement(parseRelayResponseFrame(text))
        if decision.category == .authRequired {
            // The relay wants NIP-42 first: the session holds the event and sends it again once
            // after authenticating; nothing is decided yet.
            #expect(actions.isEmpty && session.snapshot().pendingPublishes == 1)
            return
        }
        #expect(actions.kinds == [.deliveryChanged])
        #expect(decision == actions.first?.decision)
        #expect(session.snapshot().pendingPublishes == 0, "terminal and retryable events alike leave the session")
    }

    @Test func classifierRefusesAFrameThatIsNotAnOK() {
        expectSoftchatError(.invalidRelayFrame, mentioning: ["NOTICE"]) { _ = try classifyDeliveryAcknowledgement(.notice(RelayMessage("hi"))) }
    }

    @Test func statesAndCategoriesHaveTheirJSONSpelling() {
        let spelled: [(DeliveryCategory, String)] = [
            (.rateLimited, "rate-limited"), (.authRequired, "auth-required"), (.transportLost, "transport-lost"),
            (.timeout, "timeout"), (.unknown, "unknown"), (.duplicate, "duplicate"), (.mute, "mute"),
        ]
        for (category, text) in spelled { #expect(category.rawValue == text) }
        #expect(DeliveryState.allCases.map(\.rawValue) == ["pending", "inFlight", "accepted", "rejected", "retryable"])
        #expect(DeliveryState.allCases.filter(\.isTerminal) == [.accepted, .rejected])
        let d = DeliveryDecision(eventID: "x", state: .retryable, category: .rateLimited, message: "slow down")
        #expect(d.jsonValue.jsonText == #"{"eventId":"x","state":"retryable","category":"rate-limited","message":"slow down"}"#)
    }

    // MARK: Framing

    @Test func singleEventGoesOutAsOneEventFrame() throws {
        let session = try RelaySession.connected()
        let e = F.note(1)
        try session.publish([e])
        let frames = try session.drainAll()
        #expect(frames.map(\.frame) == [#"["EVENT",\#(e.jsonText)]"#])
        #expect(frames.map(\.deliveryEventIDs) == [[e.id]])
        #expect(try parseClientRelayFrame(frames[0].frame) == .event(e))
    }

    @Test func severalEventsGoOutAsOneEventsFramePerPublishInOrder() throws {
        let session = try RelaySession.connected()
        let first = (1...3).map { F.note($0) }
        let second = (4...5).map { F.note($0) }
        try session.publish(first)
        try session.publish(second)
        let frames = try session.drainAll()
        #expect(frames.map(\.frame) == [first, second].map { #"["EVENTS",\#($0.map(\.jsonText).joined(separator: ","))]"# })
        #expect(frames.map(\.deliveryEventIDs) == [first.map(\.id), second.map(\.id)])
        #expect(try parseClientRelayFrame(frames[0].frame) == .events(first))
    }

    @Test func relayWithoutEventsSupportGetsConsecutiveEventFrames() throws {
        let session = try RelaySession.connected(RelaySessionConfig(supportsEventsBatch: false, acknowledgementTimeoutSeconds: 10))
        let batch = (1...3).map { F.note($0) }
        try session.publish(batch)
        let frames = try session.drainOutbound(max: 2)
        #expect(frames.map(\.frame) == batch[..<2].map { ClientRelayFrame.event($0).toJSON() })
        #expect(try session.drainOutbound().map(\.deliveryEventIDs) == [[batch[2].id]])
        for e in batch.reversed() { try session.confirmSent([e.id]) }
        let replies = [
            try session.receive(F.ok(batch[1].id, true)), try session.receive(F.ok(batch[0].id, false, "pow: required a difficulty >= 8")),
        ]
        #expect(replies.flatMap(\.decisions).map(\.state) == [.accepted, .rejected])
        // a retryable event published again goes out as its own EVENT
        _ = try session.receive(F.ok(batch[2].id, false, "rate-limited: slow down"))
        try session.publish([batch[2]])
        #expect(try session.sendAll() == [ClientRelayFrame.event(batch[2]).toJSON()])
        #expect(try session.handleTimeout(now: 9).isEmpty)
        #expect(try session.handleTimeout(now: 19).decisions.map(\.eventID) == [batch[2].id])
    }

    // MARK: Scenarios

    @Test func batchGetsOneOkPerEventAndPartialAcceptanceIsNormal() throws {
        let session = try RelaySession.connected()
        let batch = (1...4).map { F.note($0) }
        try session.publish(batch)
        try session.sendAll()
        let replies: [(VerifiedEvent, Bool, String)] = [
            (batch[2], false, "rate-limited: slow down"), (batch[0], true, ""),
            (batch[1], false, "invalid: invalid event signature"),
            (batch[3], true, "duplicate: already have this event"),
        ]
        var decisions: [DeliveryDecision] = []
        for (e, accepted, text) in replies {
            let actions = try session.receive(F.ok(e.id, accepted, text))
            #expect(actions.kinds == [.deliveryChanged])
            decisions += actions.decisions
        }
        #expect(decisions.map(\.eventID) == [2, 0, 1, 3].map { batch[$0].id })
        #expect(decisions.map(\.state) == [.retryable, .accepted, .rejected, .accepted])
        #expect(decisions.map(\.category) == [.rateLimited, .accepted, .invalid, .duplicate])
        #expect(session.snapshot().pendingPublishes == 0, "the retryable one left the session too: the host re-publishes it")
        #expect(try session.drainAll().isEmpty, "a retryable event waits for the host")
        try session.publish([batch[2]])
        #expect(try session.drainAll().map(\.frame) == [ClientRelayFrame.event(batch[2]).toJSON()])
    }

    @Test func authRequiredPublishIsSentAgainOnceAfterAuthenticationAndAccepted() throws {
        let session = try RelaySession.connected()
        let e = F.note(1)
        try session.publish([e])
        try session.sendAll()
        // LocalRelay: a challenge, then the refusal
        #expect(try session.receive(F.authChallenge("c1")).kinds == [.authenticationRequested])
        // held for the resend: no decision, still counted
        #expect(try session.receive(F.ok(e.id, false, "auth-required: you must auth")).isEmpty)
        #expect(session.snapshot().pendingPublishes == 1)
        #expect(try session.drainAll().isEmpty)
        let answer = F.auth("c1")
        try session.authenticate(answer)
        #expect(try session.sendAll() == [ClientRelayFrame.auth(answer).toJSON()])
        #expect(try session.receive(F.ok(answer.id, true)).kinds == [.authenticated])
        #expect(try session.sendAll() == [ClientRelayFrame.event(e).toJSON()])
        let accepted = try session.receive(F.ok(e.id, true)).decisions
        #expect(accepted.map(\.state) == [.accepted] && session.snapshot().pendingPublishes == 0)
    }

    @Test func authRequiredAgainAfterTheResendIsLeftToTheHost() throws {
        let session = try RelaySession.connected()
        let e = F.note(1)
        try session.publish([e])
        try session.sendAll()
        for (round, challenge) in ["c1", "c2"].enumerated() {
            _ = try session.receive(F.authChallenge(challenge))
            let refused = try session.receive(F.ok(e.id, false, "auth-required: you must auth"))
            // the first refusal is held for the one resend; the second leaves as retryable
            #expect(refused.decisions.map(\.category) == (round == 0 ? [] : [.authRequired]), "round \(round)")
            let answer = F.auth(challenge)
            try session.authenticate(answer)
            try session.sendAll()
            #expect(try session.receive(F.ok(answer.id, true)).kinds == [.authenticated], "round \(round)")
            try session.sendAll()
        }
        #expect(session.snapshot().pendingPublishes == 0)
        #expect(try session.drainAll().isEmpty, "no second resend: the retryable event waits for the host")
        try session.publish([e])
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[e.id]])
    }

    @Test func transportLossMakesInFlightEventsRetryableAndSendsPendingOnesAgain() throws {
        let session = try RelaySession.connected()
        let (a, b, c, d) = (F.note(1), F.note(2), F.note(3), F.note(4))
        try session.publish([a, b])
        try session.sendAll()
        try session.publish([c, d])
        let unconfirmed = try session.drainAll()
        let lost = try session.transportLost(now: 5)
        #expect(lost.kinds == [.deliveryChanged, .deliveryChanged, .scheduleReconnect])
        #expect(lost.decisions.map(\.eventID) == [a.id, b.id])
        #expect(lost.decisions.allSatisfy { $0.state == .retryable && $0.category == .transportLost })
        #expect(session.snapshot().pendingPublishes == 2, "the in-flight two left; the pending two stay")
        try session.reconnect()
        #expect(try session.drainAll() == unconfirmed, "the drained but unconfirmed batch goes out again")
        // a late OK from the old connection names nothing in flight
        #expect(try session.receive(F.ok(a.id, true)).kinds == [.notice])
        try session.publish([a, b])
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[a.id, b.id]])
    }

    /// One default for the acknowledgement deadline (relay.publish.acknowledgementTimeoutSeconds):
    /// the session's was 10 s while the engine's and the managed transport's were 15 s.
    @Test func theAcknowledgementDeadlineHasOneDefaultEverywhere() {
        #expect(RelayPublishContract.acknowledgementTimeoutSeconds.value == 15)
        #expect(RelaySessionConfig().acknowledgementTimeoutSeconds == 15)
    }

    @Test func aWriteConfirmedWithoutATimeGetsItsDeadlineFromTheNextTimerCall() throws {
        let session = try RelaySession.connected(RelaySessionConfig(supportsEventsBatch: false, acknowledgementTimeoutSeconds: 10))
        let (a, b, c) = (F.note(1), F.note(2), F.note(3))
        try session.publish([a, b, c])
        _ = try session.drainAll()
        try session.confirmSent([b.id])
        try session.confirmSent([a.id])
        #expect(session.pollTimeout() == Int64(0), "no time known: due at once, so the host calls handleTimeout")
        #expect(try session.handleTimeout(now: 1_700_000_020).isEmpty, "never timed out on a clock older than the write")
        #expect(session.pollTimeout() == Int64(1_700_000_030))
        let timedOut = try session.handleTimeout(now: 1_700_000_030)
        #expect(timedOut.kinds == [.deliveryChanged, .deliveryChanged])
        #expect(timedOut.decisions.map(\.eventID) == [a.id, b.id], "in publish order")
        #expect(timedOut.decisions.allSatisfy { $0.state == .retryable && $0.category == .timeout })
        #expect(session.snapshot().pendingPublishes == 1, "timed-out events leave the session; c is still pending")
        #expect(try session.handleTimeout(now: 1_700_000_031).isEmpty, "nothing is in flight any more")
        try session.confirmSent([c.id], now: 1_700_000_032)
        #expect(session.pollTimeout() == Int64(1_700_000_042))
        #expect(try session.handleTimeout(now: 1_700_000_041).isEmpty)
        #expect(try session.handleTimeout(now: 1_700_000_042).decisions.map(\.eventID) == [c.id])
        // a late terminal OK still settles the event, and a settled event is never published again
        #expect(try session.receive(F.ok(a.id, true)).decisions.map(\.state) == [.accepted])
        expectSessionRejected(.invalidDeliveryState, session, mentioning: ["terminally"]) { try session.publish([a]) }
        // a late retryable OK only says so
        #expect(try session.receive(F.ok(b.id, false, "error: later")).kinds == [.notice])
        try session.publish([b])
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[b.id]])
        // the host owns the timers: a timeout may arrive while disconnected
        try session.confirmSent([b.id], now: 1_700_000_043)
        _ = try session.transportLost(now: nil)
        #expect(try session.handleTimeout(now: 1_700_000_060).isEmpty)
    }

    @Test func okForNothingInFlightIsANoticeAppliedToNothing() throws {
        let session = try RelaySession.connected()
        let (a, waiting) = (F.note(1), F.note(2))
        try session.publish([a])
        try session.sendAll()
        try session.publish([waiting])
        #expect(try session.receive(F.ok(a.id, true)).decisions.map(\.state) == [.accepted])
        let before = session.snapshot()
        let stray: [(String, String?, String, String?)] = [
            (F.ok(a.id, true, "duplicate: already have this event"), a.id, "already settled", "duplicate"),
            (F.ok(a.id, false, "blocked: changed my mind"), a.id, "already settled", "blocked"),
            (F.ok(F.note(99).id, false, "blocked: pubkey is banned"), F.note(99).id, "not in flight", "blocked"),
            (#"["OK","",false,"invalid: Bad signature"]"#, nil, "without an event id", "invalid"),
            (#"["OK","",false,"restricted: permission denied"]"#, nil, "without an event id", "restricted"),
        ]
        for (text, id, reason, prefix) in stray {
            let actions = try session.receive(text)
            #expect(actions.kinds == [.notice], "\(text)")
            #expect(actions.first?.eventID == id && actions.first?.prefix == prefix && actions.first?.reason?.contains(reason) == true)
            #expect(session.snapshot() == before)
        }
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[waiting.id]], "the pending event is untouched")
    }

    @Test func inOrderRelayOptionAppliesUnnamedOksToTheOldestEventWritten() throws {
        // nostr-relay answers a connection's EVENTs in order and rejects with an empty id (peers README §3)
        let session = try RelaySession.connected(RelaySessionConfig(supportsEventsBatch: false, correlateUnnamedAcknowledgements: true))
        let (a, b, c) = (F.note(1), F.note(2), F.note(3))
        try session.publish([a, b])
        _ = try session.drainAll()
        // frames are written in the order they were handed out, whatever order the host
        // confirms them in, and an answer may overtake the confirmation
        try session.confirmSent([b.id])
        let first = try session.receive(#"["OK","",false,"invalid: Bad signature"]"#).decisions
        #expect(first.map(\.eventID) == [a.id] && first.map(\.state) == [.rejected], "a was handed out first")
        try session.confirmSent([a.id])
        #expect(try session.receive(F.ok(b.id, true)).decisions.map(\.state) == [.accepted])
        #expect(try session.receive(#"["OK","",false,"restricted: permission denied"]"#).kinds == [.notice], "nothing unanswered")
        try session.publish([c])
        _ = try session.drainAll()
        let last = try session.receive(#"["OK","",false,"restricted: permission denied"]"#).decisions
        #expect(last.map(\.eventID) == [c.id] && last.map(\.category) == [.restricted], "answered before its confirmation")
        try session.confirmSent([c.id])
        #expect(session.snapshot().pendingPublishes == 0)
    }

    // MARK: Bounds and transitions

    @Test func pendingPublishBoundIs1024AndTheCallThatWouldPassItQueuesNothing() throws {
        let bound = RelayPublishContract.maxPendingPublishes.value
        #expect(bound == 1024)
        let events = Array(F.many[..<1026])
        let session = try RelaySession.connected()
        for start in stride(from: 0, to: 768, by: 256) { try session.publish(Array(events[start..<start + 256])) }
        try session.publish(Array(events[768..<1023]))
        #expect(session.snapshot().pendingPublishes == 1023)
        expectSessionRejected(.relaySessionQueueFull, session, mentioning: ["1023", "1024"]) { try session.publish([events[1023], events[1024]]) }
        try session.publish([events[1023]])
        #expect(session.snapshot().pendingPublishes == bound)
        expectSessionRejected(.relaySessionQueueFull, session) { try session.publish([events[1024]]) }
        let frames = try session.drainAll()
        #expect(frames.flatMap(\.deliveryEventIDs) == events[..<bound].map(\.id), "nothing of a refused batch was queued")
        for f in frames { try session.confirmSent(f.deliveryEventIDs) }
        // retryable events still count, but publishing one again adds nothing
        _ = try session.receive(F.ok(events[0].id, false, "rate-limited: slow down"))
        try session.publish([events[0]])
        expectSessionRejected(.relaySessionQueueFull, session) { try session.publish([events[1024]]) }
        // a terminal acknowledgement makes room
        _ = try session.receive(F.ok(events[1].id, true))
        try session.publish([events[1024]])
        #expect(session.snapshot().pendingPublishes == bound)
    }

    @Test func publishBatchesHold1To256UniqueEvents() throws {
        #expect(RelayPublishContract.maxPublishBatchEvents.value == 256)
        let session = try RelaySession.connected()
        expectSessionRejected(.invalidRelayBatch, session, mentioning: ["0 events"]) { try session.publish([]) }
        expectSessionRejected(.invalidRelayBatch, session, mentioning: ["257 events"]) { try session.publish(Array(F.many[..<257])) }
        let e = F.note(1)
        let error = expectSoftchatError(.invalidRelayBatch, mentioning: [e.id, "twice"]) { try session.publish([e, F.note(2), e]) }
        #expect(error?.operation == .relayPublish)
        #expect(try session.drainAll().isEmpty && session.snapshot().pendingPublishes == 0)
        try session.publish(Array(F.many[..<256]))
        #expect(try session.drainAll().map(\.deliveryEventIDs.count) == [256])
    }

    @Test func republishingAPendingOrInFlightEventIsAnInvalidDeliveryState() throws {
        let session = try RelaySession.connected()
        let (flying, waiting, fresh) = (F.note(1), F.note(2), F.note(3))
        try session.publish([flying])
        try session.sendAll()
        try session.publish([waiting])
        for batch in [[flying], [waiting], [fresh, waiting], [fresh, flying]] {
            expectSessionRejected(.invalidDeliveryState, session, mentioning: ["already"]) { try session.publish(batch) }
        }
        #expect(try session.drainAll().map(\.deliveryEventIDs) == [[waiting.id]], "the fresh event was not queued")
    }

    @Test func retryableEventGoesBackToPendingWhenPublishedAgain() throws {
        let session = try RelaySession.connected()
        let e = F.note(1)
        try session.publish([e])
        try session.sendAll()
        #expect(try session.receive(F.ok(e.id, false, "error: failed to verify signature")).decisions.map(\.state) == [.retryable])
        try session.publish([e])
        expectSessionRejected(.invalidDeliveryState, session, mentioning: ["pending"]) { try session.publish([e]) }
        #expect(try session.sendAll() == [ClientRelayFrame.event(e).toJSON()])
        expectSessionRejected(.invalidDeliveryState, session, mentioning: ["in flight"]) { try session.publish([e]) }
        #expect(try session.receive(F.ok(e.id, true)).decisions.map(\.state) == [.accepted])
        #expect(session.snapshot().pendingPublishes == 0)
    }

    @Test func deliveryChangesComeBeforeTheActionsThatDependOnThem() throws {
        let session = try RelaySession.connected(RelaySessionConfig(supportsEventsBatch: false))
        let events = (1...4).map { F.note($0) }
        try session.publish(events)
        let frames = try session.drainAll()
        for f in frames.reversed() { try session.confirmSent(f.deliveryEventIDs) }
        let cancelled = try session.cancel()
        #expect(cancelled.kinds == Array(repeating: .deliveryChanged, count: 4) + [.closeTransport])
        #expect(cancelled.decisions.map(\.eventID) == events.map(\.id), "in publish order")
        _ = try session.connect()
        try session.transportConnected()
        try session.publish(events)
        try session.sendAll()
        let lost = try session.transportLost(now: nil)
        #expect(lost.kinds == Array(repeating: .deliveryChanged, count: 4) + [.scheduleReconnect])
    }
}
