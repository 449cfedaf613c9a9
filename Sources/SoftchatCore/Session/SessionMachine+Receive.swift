import SoftchatJSON

extension SessionMachine {
    /// Validates relay text with relay.wire and returns the actions it causes, in order. An
    /// invalid frame throws its relay.wire code and changes nothing.
    mutating func receive(_ text: String) throws(SoftchatError) -> [RelaySessionAction] {
        try requireConnected("receive")
        let reader = try FrameReader(text: text, direction: "relay")
        if reader.verb == "EVENT" { return try receiveEvent(reader) }
        switch try parseRelayResponseFrame(reader) {
        case .event:
            preconditionFailure("EVENT frames take receiveEvent")
        case .ok(let eventID, let accepted, let message):
            return receiveOK(eventID: eventID, accepted: accepted, message: message)
        case .eose(let id):
            return [.with(.endOfStoredEvents) { $0.subscriptionID = id }]
        case .closed(let id, let message):
            return receiveClosed(id: id, message: message)
        case .notice(let message):
            return [.with(.notice) {
                $0.prefix = message.prefix
                $0.message = message.message
            }]
        case .auth(let challenge):
            // Each challenge is asked for once and answered once: a relay repeating it cannot
            // start an auth loop.
            if challenge == self.challenge || answeredChallengeTexts.contains(challenge) { return [] }
            self.challenge = challenge
            return [.with(.authenticationRequested) { $0.challenge = challenge }]
        case .count(let id, let result):
            guard pendingCounts.removeValue(forKey: id) != nil else {
                return [.with(.notice) {
                    $0.subscriptionID = id
                    $0.message = "COUNT answer for \"\(id)\", which has no pending count request"
                }]
            }
            countOrder.removeAll { $0 == id }
            return [.with(.countResult) {
                $0.subscriptionID = id
                $0.count = result
            }]
        }
    }

    /// An EVENT: shape first, then dedupe by id before any signature work, then verification,
    /// then the subscription's filters, then the hand-off bound.
    mutating func receiveEvent(_ reader: FrameReader) throws(SoftchatError) -> [RelaySessionAction] {
        try reader.arity(3, "[\"EVENT\", subscription id, event]")
        let subscriptionID = try reader.subscriptionID(1)
        let unverified: UnverifiedEvent
        do throws(EventIssue) {
            unverified = try reader.unverifiedEvent(2)
        } catch {
            throw .invalidRelayFrame("EVENT event: \(error.message)")
        }
        let id = unverified.id
        func rejected(_ reason: String) -> [RelaySessionAction] {
            [.with(.eventRejected) {
                $0.subscriptionID = subscriptionID
                $0.eventID = id
                $0.reason = reason
            }]
        }
        guard let subscription = subscriptions[subscriptionID] else { return rejected("no subscription \"\(subscriptionID)\"") }
        if let pending = awaiting[id] {
            // Already handed out. Offer it again only if the transport was lost since.
            guard pending.reofferable else { return [] }
            awaiting[id]!.reofferable = false
            return [.with(.persistEvent) {
                $0.subscriptionID = pending.subscriptionID
                $0.event = pending.event
            }]
        }
        if recentlyConfirmed.contains(id) { return [] }
        let event: VerifiedEvent
        do throws(EventIssue) {
            event = try EventVerifier.verify(unverified)
        } catch {
            return rejected(error.message)
        }
        guard RelayFilter.anyMatches(subscription.filters, event) else {
            return rejected("the event matches none of the subscription's filters")
        }
        let bound = RelayIngestionContract.maxAwaitingPersistence
        guard awaiting.count < bound.value else {
            throw SoftchatError(bound.error,
                "receive: \(awaiting.count) events await persistence, the limit is \(bound.value); confirm ingestion first",
                operation: .relayIngestion)
        }
        awaiting[id] = Awaiting(event: event, subscriptionID: subscriptionID)
        return [.with(.persistEvent) {
            $0.subscriptionID = subscriptionID
            $0.event = event
        }]
    }

    mutating func receiveClosed(id: String, message: RelayMessage) -> [RelaySessionAction] {
        pendingCounts[id] = nil
        countOrder.removeAll { $0 == id }
        if subscriptions[id] != nil, message.prefix == "auth-required", !subscriptions[id]!.authReplayUsed {
            subscriptions[id]!.awaitingAuthReplay = true
        }
        return [.with(.subscriptionClosed) {
            $0.subscriptionID = id
            $0.prefix = message.prefix
            $0.message = message.message
        }]
    }

    mutating func receiveOK(eventID: String?, accepted: Bool, message: RelayMessage) -> [RelaySessionAction] {
        if let eventID, eventID == authEventID {
            authEventID = nil
            guard accepted else {
                return [.with(.authenticationFailed) {
                    $0.eventID = eventID
                    $0.prefix = message.prefix
                    $0.message = message.message
                }]
            }
            authenticated = true
            return [.with(.authenticated) { $0.eventID = eventID }] + replayAfterAuthentication()
        }
        var eventID = eventID
        if eventID == nil && config.correlateUnnamedAcknowledgements {
            // In-order relay: the unnamed OK answers the oldest event still in flight.
            eventID = deliveries.values.filter { $0.state == .inFlight }.min { $0.sentOrder < $1.sentOrder }?.event.id
        }
        guard let eventID, let delivery = deliveries[eventID], delivery.state == .inFlight else {
            // Relay prose about nothing we have in flight: diagnostic only, applied to nothing.
            return [.with(.notice) {
                $0.eventID = eventID
                $0.prefix = message.prefix
                $0.message = message.message
                $0.reason = eventID == nil ? "OK without an event id" : "OK for an event that is not in flight"
            }]
        }
        let decision = classify(eventID: eventID, accepted: accepted, message: message)
        if decision.state.isTerminal {
            deliveries[eventID] = nil
        } else {
            deliveries[eventID]!.state = .retryable
            if decision.category == .authRequired && !delivery.authResendUsed {
                deliveries[eventID]!.awaitingAuthResend = true
            }
        }
        return [.with(.deliveryChanged) { $0.decision = decision }]
    }

    /// After the relay accepts our AUTH: subscriptions it closed with auth-required are sent
    /// again, and events it refused with auth-required go back to pending, each once.
    mutating func replayAfterAuthentication() -> [RelaySessionAction] {
        var actions: [RelaySessionAction] = []
        for id in subscriptionOrder where subscriptions[id]!.awaitingAuthReplay {
            subscriptions[id]!.awaitingAuthReplay = false
            subscriptions[id]!.authReplayUsed = true
            if outboundCount < RelaySessionContract.maxOutboundFrames.value {
                queue.append(reqEntry(id, filters: subscriptions[id]!.filters, newestConfirmed: subscriptions[id]!.newestConfirmed))
            }
        }
        for id in deliveries.keys.sorted(by: { deliveries[$0]!.sequence < deliveries[$1]!.sequence })
        where deliveries[id]!.awaitingAuthResend {
            deliveries[id]!.awaitingAuthResend = false
            deliveries[id]!.authResendUsed = true
            deliveries[id]!.state = .pending
            actions.append(.with(.deliveryChanged) {
                $0.decision = DeliveryDecision(eventID: id, state: .pending, category: .authRequired,
                    message: "sent again after authentication")
            })
        }
        return actions
    }

    /// The host's NIP-42 answer: a verified kind-22242 event for the latest challenge, sent
    /// ahead of everything queued. Each (pubkey, challenge) pair is answered once.
    mutating func authenticate(_ event: VerifiedEvent) throws(SoftchatError) -> [RelaySessionAction] {
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
            throw .invalidRelayAuthentication("authenticate: the event's challenge tag is not the relay's latest challenge")
        }
        let pair = event.pubkey + "|" + challenge
        guard !answeredChallenges.contains(pair) else {
            throw .invalidRelayAuthentication("authenticate: this key already answered this challenge")
        }
        try requireOutboundRoom(1, "authenticate")
        answeredChallenges.insert(pair)
        answeredChallengeTexts.insert(challenge)
        authEventID = event.id
        authenticated = false
        queue.insert(OutboundEntry(frame: ClientRelayFrame.auth(event).toJSON(), deliveryEventIDs: [], purpose: .auth(event.id)), at: 0)
        return []
    }

    // MARK: Publishing

    /// Queues 1–256 unique verified events as pending deliveries of one batch. Events already
    /// pending or in flight cannot be published again; retryable ones go back to pending.
    mutating func publish(_ events: [VerifiedEvent]) throws(SoftchatError) {
        try requireOpen("publish")
        try RelayPublishContract.maxPublishBatchEvents.check(events.count, "publish batch")
        var ids = Set<String>(minimumCapacity: events.count)
        var added = 0
        for e in events {
            guard ids.insert(e.id).inserted else {
                throw .invalidRelayBatch("publish batch holds event \(e.id) twice", operation: .relayPublish)
            }
            if let existing = deliveries[e.id] {
                guard existing.state == .retryable else {
                    throw .invalidDeliveryState("publish: event \(e.id) is already \(existing.state.rawValue)", operation: .relayPublish)
                }
            } else {
                added += 1
            }
        }
        let bound = RelayPublishContract.maxPendingPublishes
        guard deliveries.count + added <= bound.value else {
            throw SoftchatError(bound.error,
                "publish: \(deliveries.count) publishes are not yet terminal; \(added) more would pass the limit of \(bound.value)",
                operation: .relayPublish)
        }
        let batch = nextBatch
        nextBatch += 1
        for e in events {
            if deliveries[e.id] != nil {
                deliveries[e.id]!.state = .pending
                deliveries[e.id]!.batch = batch
                deliveries[e.id]!.sequence = nextSequence
                deliveries[e.id]!.awaitingAuthResend = false
            } else {
                deliveries[e.id] = Delivery(event: e, state: .pending, batch: batch, sequence: nextSequence)
            }
            nextSequence += 1
        }
    }

    /// The host's acknowledgement deadline passed: everything in flight becomes retryable with
    /// category `timeout`, in publish order.
    mutating func acknowledgementTimedOut(now: Int64) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("acknowledgementTimedOut")
        var actions: [RelaySessionAction] = []
        for id in deliveries.keys.sorted(by: { deliveries[$0]!.sequence < deliveries[$1]!.sequence })
        where deliveries[id]!.state == .inFlight {
            deliveries[id]!.state = .retryable
            actions.append(.with(.deliveryChanged) {
                $0.decision = DeliveryDecision(eventID: id, state: .retryable, category: .timeout,
                    message: "no OK before the host's deadline (\(now))")
            })
        }
        return actions
    }
}
