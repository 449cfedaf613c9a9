import SoftchatJSON

extension SessionMachine {
    /// Validates relay text with relay.wire and returns the actions it causes, in order. An
    /// invalid frame throws its relay.wire code and changes nothing.
    mutating func receive(_ text: String, now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireConnected("receive")
        return try receive(IncomingFrame(text: text), now: now)
    }

    mutating func receive(_ frame: IncomingFrame, now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireConnected("receive")
        let actions =
            if let event = frame.event {
                try receiveEvent(subscriptionID: event.subscriptionID, unverified: event.unverified, clock: now ?? lastNow)
            } else {
                try receive(frame.reader, clock: now ?? lastNow)
            }
        // Only a frame that was accepted moves the session's clock.
        observe(now)
        return actions
    }

    mutating func receive(_ reader: FrameReader, clock: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        switch try parseRelayResponseFrame(reader) {
        case .event:
            preconditionFailure("EVENT frames are read by IncomingFrame and take receiveEvent")
        case .ok(let eventID, let accepted, let message):
            return receiveOK(eventID: eventID, accepted: accepted, message: message.bounded, clock: clock)
        case .eose(let id):
            if subscriptions[id] != nil { subscriptions[id]!.closedRetries = 0 }
            return [.endOfStoredEvents(subscriptionID: id)]
        case .closed(let id, let message):
            return receiveClosed(id: id, message: message.bounded, clock: clock)
        case .notice(let message):
            let message = message.bounded
            return [.notice(subscriptionID: nil, eventID: nil, prefix: message.prefix, message: message.message, reason: nil)]
        case .auth(let challenge):
            return receiveChallenge(challenge, clock: clock)
        case .count(let id, let result):
            guard !closedCounts.contains(id), pendingCounts.removeValue(forKey: id) != nil else {
                return [
                    .notice(
                        subscriptionID: id, eventID: nil, prefix: nil,
                        message: "COUNT answer for \"\(id)\", which has no pending count request", reason: nil)
                ]
            }
            countOrder.removeAll { $0 == id }
            return [.countResult(subscriptionID: id, count: result)]
        case .negMessage(let id, _), .negError(let id, _):
            // NIP-77 reconciliation is the sync engine's (it reads these frames before the
            // session does); a session on its own has none open.
            return [
                .notice(
                    subscriptionID: id, eventID: nil, prefix: nil,
                    message: "\(reader.verb) for \"\(id)\", which has no negentropy reconciliation in this session", reason: nil)
            ]
        }
    }

    /// An EVENT, its shape already read (`IncomingFrame`): dedupe by id before any signature
    /// work, then verification, then the subscription's filters, then the hand-off bound.
    /// `clock` (the time of arrival, when known) caps how far the event can move the
    /// resubscription's `since` (``SessionMachine/confirmIngested(_:)``).
    mutating func receiveEvent(subscriptionID: String, unverified: UnverifiedEvent, clock: Int64?) throws(SoftchatError)
        -> [RelaySessionAction]
    {
        let id = unverified.id
        func rejected(_ reason: String) -> [RelaySessionAction] {
            [.eventRejected(subscriptionID: subscriptionID, eventID: id, reason: reason)]
        }
        guard let filters = subscriptions[subscriptionID]?.filters ?? lingeringFilters(subscriptionID) else {
            return rejected("no subscription \"\(subscriptionID)\"")
        }
        if let pending = awaiting[id] {
            // Already handed out. Offer it again only if the transport was lost since.
            guard pending.reofferable else { return [] }
            awaiting[id]!.reofferable = false
            return [.persistEvent(subscriptionID: pending.subscriptionID, event: pending.event)]
        }
        if recentlyConfirmed.contains(id) { return [] }
        let event: VerifiedEvent
        do throws(EventIssue) {
            event = try EventVerifier.verify(unverified)
        } catch {
            return rejected(error.message)
        }
        guard RelayFilter.anyMatches(filters, event) else {
            return rejected("the event matches none of the subscription's filters")
        }
        let bound = RelayIngestionContract.maxAwaitingPersistence
        guard awaiting.count < bound.value else {
            throw SoftchatError(
                bound.error,
                "receive: \(awaiting.count) events await persistence, the limit is \(bound.value); confirm ingestion first",
                operation: .relayIngestion)
        }
        awaiting[id] = Awaiting(event: event, subscriptionID: subscriptionID, arrivedAt: clock)
        return [.persistEvent(subscriptionID: subscriptionID, event: event)]
    }

    /// A NIP-42 challenge, under the session's AUTH policy: one over `maxChallengeBytes` is
    /// refused with a notice; each is asked for once and answered once per connection (a relay
    /// repeating it cannot start an auth loop, one reusing it on a new connection is answered
    /// again); and at most one is asked for at a time: while our answer is in flight, or sooner
    /// than `authenticationIntervalSeconds` after the last answer, the newest challenge waits
    /// (replacing any older one waiting) and is asked for when the answer settles or the interval
    /// has passed. A relay flooding challenges gets at most one signature per interval.
    mutating func receiveChallenge(_ challenge: String, clock: Int64?) -> [RelaySessionAction] {
        let bound = RelaySessionContract.maxChallengeBytes.value
        guard challenge.utf8.count <= bound else {
            return [
                .notice(
                    subscriptionID: nil, eventID: nil, prefix: nil,
                    message: "AUTH challenge of \(challenge.utf8.count) bytes refused: over the \(bound)-byte bound, not answered",
                    reason: nil)
            ]
        }
        if challenge == self.challenge || challenge == deferredChallenge || answeredChallengeTexts.contains(challenge) { return [] }
        deferredChallenge = challenge
        return offerDeferredChallenge(clock: clock)
    }

    /// Our AUTH went out and neither its OK nor the end of its wait has come. Only with a wait
    /// armed (a clock known): without one the wait could never end, and a challenge held behind
    /// an answer a relay never acknowledges (nostr-relay never acknowledges a good one) would
    /// never be asked for.
    var answerInFlight: Bool { authEventID != nil && !authenticated && !authWaitEnded && authWaitUntil != nil }

    /// When the waiting challenge may be asked for (nil: at once, or none waits).
    var deferredChallengeDue: Int64? {
        guard deferredChallenge != nil, connection == .connected, !answerInFlight, let last = lastAnswerAt else { return nil }
        return last + Int64(RelaySessionContract.authenticationIntervalSeconds.value)
    }

    /// Asks the host to answer the waiting challenge, when no answer is in flight and the
    /// interval since the last answer has passed (`pollTimeout` arms the rest).
    mutating func offerDeferredChallenge(clock: Int64?) -> [RelaySessionAction] {
        guard let next = deferredChallenge, connection == .connected, !answerInFlight else { return [] }
        if let due = deferredChallengeDue, let now = clock ?? lastNow, now < due { return [] }
        deferredChallenge = nil
        challenge = next
        authRefused = false
        return [.authenticationRequested(challenge: next)]
    }

    /// A CLOSED: a pending COUNT ends; a subscription closed with `auth-required:` is sent
    /// again once after authenticating (at once when we already are); `error:` and
    /// `rate-limited:` are retried on the backoff schedule; `blocked:`, `restricted:`,
    /// `invalid:` and any other prefix are not retried on this connection (a reconnect sends
    /// every subscription again).
    mutating func receiveClosed(id: String, message: RelayMessage, clock: Int64?) -> [RelaySessionAction] {
        pendingCounts[id] = nil
        countOrder.removeAll { $0 == id }
        liveREQs.remove(id)
        var retryDelay: Int64?
        // A REQ queued after the one the relay closed (a replacement) still goes out as it is.
        if var sub = subscriptions[id], !queue.contains(where: { $0.purpose == .subscription(id) }) {
            sub.retryAt = nil
            switch message.prefix {
            case "auth-required" where !sub.authReplayUsed && config.answersAuthentication:
                if authenticated || authWaitEnded {
                    sub.authReplayUsed = true
                    if outboundCount < RelaySessionContract.maxOutboundFrames.value {
                        queue.append(reqEntry(id, filters: sub.filters, newestConfirmed: sub.newestConfirmed))
                        retryDelay = 0
                    } else {
                        // No room now: the retry timer sends it once there is.
                        sub.retryAt = (clock ?? 0) + config.reconnectBaseDelaySeconds
                        retryDelay = config.reconnectBaseDelaySeconds * 1000
                    }
                } else {
                    sub.awaitingAuthReplay = true
                }
            case "error", "rate-limited":
                if let now = clock {
                    sub.closedRetries += 1
                    let delay = closedRetryDelaySeconds(sub.closedRetries)
                    sub.retryAt = now + delay
                    retryDelay = delay * 1000
                }
            default:
                break
            }
            subscriptions[id] = sub
        }
        return [.subscriptionClosed(subscriptionID: id, prefix: message.prefix, message: message.message, retryDelayMilliseconds: retryDelay)]
    }

    /// base·2^(n-1) seconds, capped at the reconnect maximum: the reconnect schedule without jitter.
    func closedRetryDelaySeconds(_ n: Int) -> Int64 {
        ReconnectBackoff.cappedDoubling(base: config.reconnectBaseDelaySeconds, max: config.reconnectMaxDelaySeconds, attempt: n)
    }

    /// An OK: for our AUTH, authentication; otherwise the event it names (or, for in-order
    /// relays, the oldest unanswered write) is settled if the session holds it or timed it out
    /// on this connection. An OK arriving before `confirmSent` settles its event too. Terminal
    /// answers are final: a later answer for a settled event is only a notice.
    mutating func receiveOK(eventID: String?, accepted: Bool, message: RelayMessage, clock: Int64?) -> [RelaySessionAction] {
        if let eventID, eventID == authEventID {
            return receiveAuthenticationOK(eventID: eventID, accepted: accepted, message: message, clock: clock)
        }
        var eventID = eventID
        if let named = eventID {
            if let i = unanswered.firstIndex(of: named) { unanswered.remove(at: i) }
        } else if config.correlateUnnamedAcknowledgements && !correlationLost && !unanswered.isEmpty {
            // In-order relay: the unnamed OK answers the oldest write still unanswered (a
            // timed-out one included, so a late answer never lands on a later event).
            eventID = unanswered.removeFirst()
        }
        func notice(_ reason: String) -> [RelaySessionAction] {
            [.notice(subscriptionID: nil, eventID: eventID, prefix: message.prefix, message: message.message, reason: reason)]
        }
        guard let eventID else { return notice("OK without an event id") }
        let decision = classify(eventID: eventID, accepted: accepted, message: message)
        if let delivery = deliveries[eventID] {
            // After the relay refused our AUTH, with no challenge waiting to be asked for, nothing
            // would release a held event before its deadline (it left as `timeout`, was published
            // again and held again, for ever): it leaves at once, as when the host does not
            // answer challenges.
            let authenticationMayCome = !authRefused || deferredChallenge != nil
            if !decision.state.isTerminal && decision.category == .authRequired && !delivery.authResendUsed && config.answersAuthentication
                && authenticationMayCome
            {
                // The relay wants NIP-42 first: the session sends it again once, after (or, when
                // already authenticated, right away), within the original deadline.
                if authenticated || authWaitEnded {
                    deliveries[eventID]!.authResendUsed = true
                    deliveries[eventID]!.stage = .pending
                    deliveries[eventID]!.drained = false
                } else {
                    deliveries[eventID]!.stage = .awaitingAuthentication
                }
                return []
            }
            deliveries[eventID] = nil
            if decision.state.isTerminal { settled.insert(eventID) }
            return [.deliveryChanged(decision: decision)]
        }
        if timedOut.contains(eventID) {
            // A late answer after the deadline: a terminal one still counts.
            guard decision.state.isTerminal else { return notice("late retryable OK for an event that already timed out") }
            timedOut.remove(eventID)
            settled.insert(eventID)
            return [.deliveryChanged(decision: decision)]
        }
        return notice(settled.contains(eventID) ? "OK for an event already settled" : "OK for an event that is not in flight")
    }

    mutating func receiveAuthenticationOK(eventID: String, accepted: Bool, message: RelayMessage, clock: Int64?) -> [RelaySessionAction] {
        authWaitUntil = nil
        authEventID = nil
        guard accepted else {
            // A refusal after the wait ran out still counts: the connection is not authenticated.
            authWaitEnded = false
            authRefused = true
            // Held events do not wait for an authentication that failed: they leave as
            // retryable. Subscriptions closed for auth wait for a later successful AUTH.
            var actions: [RelaySessionAction] = [.authenticationFailed(eventID: eventID, prefix: message.prefix, message: message.message)]
            for id in deliveryIDsInOrder where deliveries[id]!.stage == .awaitingAuthentication {
                deliveries[id] = nil
                actions.append(
                    .deliveryChanged(
                        decision: DeliveryDecision(
                            eventID: id, state: .retryable, category: .authRequired, message: "the relay refused our authentication")))
            }
            // A challenge that came while this answer was in flight gets its turn now.
            return actions + offerDeferredChallenge(clock: clock)
        }
        authenticated = true
        authRefused = false
        replayAfterAuthentication()
        return [.authenticated(eventID: eventID)] + offerDeferredChallenge(clock: clock)
    }

    /// After the relay accepts our AUTH: subscriptions it closed with auth-required are sent
    /// again, and events it answered auth-required go back to pending, each once.
    mutating func replayAfterAuthentication() {
        for id in subscriptionOrder where subscriptions[id]!.awaitingAuthReplay {
            subscriptions[id]!.awaitingAuthReplay = false
            subscriptions[id]!.authReplayUsed = true
            if queue.contains(where: { $0.purpose == .subscription(id) }) {
                // Its REQ is already queued (a due retry): that one goes out, not a second.
            } else if outboundCount < RelaySessionContract.maxOutboundFrames.value {
                queue.append(reqEntry(id, filters: subscriptions[id]!.filters, newestConfirmed: subscriptions[id]!.newestConfirmed))
            } else {
                // No room now: the retry timer sends it once there is, never strands it.
                subscriptions[id]!.retryAt = (lastNow ?? 0) + config.reconnectBaseDelaySeconds
            }
        }
        for id in deliveryIDsInOrder where deliveries[id]!.stage == .awaitingAuthentication {
            deliveries[id]!.authResendUsed = true
            deliveries[id]!.stage = .pending
            deliveries[id]!.drained = false
        }
    }

    /// The host's NIP-42 answer: a verified kind-22242 event for this connection's challenge,
    /// naming this session's relay, created within the window around `now`, sent ahead of
    /// everything queued (which waits for its OK, boundedly). Each (pubkey, challenge) pair is
    /// answered once per connection.
    mutating func authenticate(_ event: VerifiedEvent, now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireConnected("authenticate")
        guard let challenge else {
            throw .invalidRelayAuthentication("authenticate: the relay has not asked for authentication on this connection")
        }
        do throws(EventIssue) {
            try Nip42.checkShape(event)
        } catch {
            throw .invalidRelayAuthentication("authenticate: \(error.message)")
        }
        guard event.tags.first(where: { $0.first == "challenge" })?[1] == challenge else {
            throw .invalidRelayAuthentication("authenticate: the event's challenge tag is not the relay's current challenge")
        }
        if let relayURL = config.relayURL {
            let tag = event.tags.first(where: { $0.first == "relay" })![1]
            let expected = try RelayURL(relayURL)
            guard let given = try? RelayURL(tag), given == expected else {
                throw .invalidRelayAuthentication("authenticate: the event's relay tag \"\(tag)\" does not name this session's relay \(expected)")
            }
        }
        let clock = now ?? lastNow
        if let clock, !event.createdAt.isWithin(config.authenticationWindowSeconds, of: clock) {
            throw .invalidRelayAuthentication(
                "authenticate: created_at \(event.createdAt) is more than \(config.authenticationWindowSeconds) s from now (\(clock))")
        }
        let pair = event.pubkey + "|" + challenge
        guard !answeredChallenges.contains(pair) else {
            throw .invalidRelayAuthentication("authenticate: this key already answered this challenge on this connection")
        }
        let frame = ClientRelayFrame.auth(event).toJSON()
        guard frame.utf8.count <= frameLimit else {
            throw .invalidRelayAuthentication(
                "authenticate: the AUTH frame would be \(frame.utf8.count) bytes, over this relay's limit of \(frameLimit)")
        }
        try requireOutboundRoom(1, "authenticate")
        observe(now)
        answeredChallenges.insert(pair)
        answeredChallengeTexts.insert(challenge)
        lastAnswerAt = clock
        authEventID = event.id
        authenticated = false
        authWaitUntil = clock.map { $0 + config.authenticationWaitSeconds }
        authWaitEnded = false
        authRefused = false
        queue.insert(OutboundEntry(frame: frame, deliveryEventIDs: [], purpose: .auth(event.id)), at: 0)
        return []
    }

    // MARK: Publishing

    /// Queues 1–256 unique verified events as pending deliveries of one batch. An event the
    /// session already holds, or that this relay answered terminally, cannot be published
    /// again; an event too large for any frame is refused.
    /// The terminal decision for an event no frame to this relay can carry, or nil when it fits.
    func frameRefusal(_ e: VerifiedEvent) -> DeliveryDecision? {
        let frameBytes = e.jsonText.utf8.count + Self.eventFrameOverhead
        guard frameBytes > frameLimit else { return nil }
        let whose =
            config.maxMessageBytes.map { Int(clamping: $0) == frameLimit } ?? false
            ? "this relay's max_message_length (NIP-11)" : "relay.wire's frame bound"
        return DeliveryDecision(
            eventID: e.id, state: .rejected, category: .invalid,
            message: "event \(e.id) needs a \(frameBytes)-byte EVENT frame, over the \(frameLimit)-byte limit of \(whose); it was not sent")
    }

    mutating func publish(_ events: [VerifiedEvent]) throws(SoftchatError) {
        try requireOpen("publish")
        try RelayPublishContract.maxPublishBatchEvents.check(events.count, "publish batch")
        var ids = Set<String>(minimumCapacity: events.count)
        for e in events {
            guard ids.insert(e.id).inserted else {
                throw .invalidRelayBatch("publish batch holds event \(e.id) twice", operation: .relayPublish)
            }
            if let existing = deliveries[e.id] {
                throw .invalidDeliveryState(
                    "publish: event \(e.id) is already \(existing.stage == .pending ? "pending" : "in flight")",
                    operation: .relayPublish)
            }
            if settled.contains(e.id) {
                throw .invalidDeliveryState("publish: event \(e.id) was already answered terminally by this relay", operation: .relayPublish)
            }
            if let refusal = frameRefusal(e) { throw .invalidRelayBatch("publish: \(refusal.message)", operation: .relayPublish) }
        }
        let bound = RelayPublishContract.maxPendingPublishes
        guard deliveries.count + events.count <= bound.value else {
            throw SoftchatError(
                bound.error,
                "publish: \(deliveries.count) publishes are held; \(events.count) more would pass the limit of \(bound.value)",
                operation: .relayPublish)
        }
        let batch = nextBatch
        nextBatch += 1
        for e in events {
            timedOut.remove(e.id)
            deliveries[e.id] = Delivery(event: e, stage: .pending, batch: batch, sequence: nextSequence)
            nextSequence += 1
        }
    }
}
