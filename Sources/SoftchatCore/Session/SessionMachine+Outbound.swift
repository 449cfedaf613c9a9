extension SessionMachine {
    // MARK: Draining

    /// True while frames queued behind our AUTH wait for its OK (armed by `authenticate` when
    /// the session knows the time, so the wait is always bounded).
    var holdingForAuthentication: Bool { authWaitUntil != nil && authEventID != nil && !authenticated }

    mutating func drainOutbound(max: Int) throws(SoftchatError) -> [OutboundRelayFrame] {
        try requireOpen("drainOutbound")
        let bound = RelaySessionContract.defaultDrainMax
        guard max >= 1 && max <= bound.value else {
            throw .invalidRelaySession("drainOutbound: max must be 1 to \(bound.value), not \(max)")
        }
        guard connection == .connected else { return [] }
        var out: [OutboundRelayFrame] = []
        let holding = holdingForAuthentication
        var index = 0
        while out.count < max, index < queue.count {
            if holding && queue[index].purpose.waitsForAuthentication {
                index += 1
                continue
            }
            let entry = queue.remove(at: index)
            switch entry.purpose {
            case .subscription(let id): liveREQs.insert(id)
            case .close(let id): liveREQs.remove(id)
            default: break
            }
            drained.append(entry)
            out.append(OutboundRelayFrame(frame: entry.frame, deliveryEventIDs: entry.deliveryEventIDs))
        }
        if holding { return out }
        // Publish frames are built here; a drained one counts towards the outbound bound too.
        while out.count < max, outboundCount < RelaySessionContract.maxOutboundFrames.value, let entry = nextPublishFrame() {
            nextFrameSerial += 1
            drained.append(entry)
            for id in entry.deliveryEventIDs {
                deliveries[id]!.drained = true
                deliveries[id]!.frame = entry.serial
                // The order frames are handed out in is the order they are written (frames not
                // written are forgotten with the transport), and the order an in-order relay
                // answers in: an answer may overtake the host's confirmSent.
                noteWritten(id)
            }
            out.append(OutboundRelayFrame(frame: entry.frame, deliveryEventIDs: entry.deliveryEventIDs))
        }
        return out
    }

    /// The oldest publish batch's pending, undrained events, packed into one frame: one EVENT,
    /// or one EVENTS frame of as many of them (in publish order) as fit `frameLimit`; the rest
    /// go into the next frames. For relays without EVENTS, one EVENT per frame.
    func nextPublishFrame() -> OutboundEntry? {
        let ready = deliveries.values.filter { $0.stage == .pending && !$0.drained }
        guard let first = ready.min(by: { $0.sequence < $1.sequence }) else { return nil }
        func single(_ e: VerifiedEvent) -> OutboundEntry {
            OutboundEntry(frame: ClientRelayFrame.event(e).toJSON(), deliveryEventIDs: [e.id], purpose: .publish, serial: nextFrameSerial)
        }
        guard config.supportsEventsBatch else { return single(first.event) }
        let batch = ready.filter { $0.batch == first.batch }.sorted { $0.sequence < $1.sequence }.map { $0.event }
        var packed: [VerifiedEvent] = []
        var size = Self.eventsFrameOverhead
        for e in batch {
            let added = e.jsonText.utf8.count + (packed.isEmpty ? 0 : 1)
            if !packed.isEmpty && size + added > frameLimit { break }
            packed.append(e)
            size += added
        }
        if packed.count == 1 { return single(packed[0]) }
        return OutboundEntry(
            frame: ClientRelayFrame.events(packed).toJSON(), deliveryEventIDs: packed.map { $0.id }, purpose: .publish,
            serial: nextFrameSerial)
    }

    /// `["EVENTS",` and `]` around the comma-separated events.
    static let eventsFrameOverhead = #"["EVENTS",]"#.utf8.count
    /// `["EVENT",` and `]` around the event.
    static let eventFrameOverhead = #"["EVENT",]"#.utf8.count

    mutating func confirmSent(_ deliveryEventIDs: [String], now: Int64?) throws(SoftchatError) {
        try requireConnected("confirmSent")
        guard let index = drained.firstIndex(where: { $0.deliveryEventIDs == deliveryEventIDs }) else {
            if deliveryEventIDs.isEmpty {
                throw .invalidRelaySession("confirmSent: no drained frame without events is waiting for confirmation")
            }
            throw .invalidDeliveryState(
                "confirmSent: no drained frame carries exactly \(deliveryEventIDs.count) event(s) starting with \(deliveryEventIDs[0])",
                operation: .relayPublish)
        }
        observe(now)
        let entry = drained.remove(at: index)
        if case .auth = entry.purpose, holdingForAuthentication, let now {
            // The wait runs from the AUTH's own write.
            authWaitUntil = now + config.authenticationWaitSeconds
        }
        // Only events still waiting in this frame move: one the relay already answered (an OK
        // may overtake the host's confirmation) is settled, or held for its auth resend, or
        // pending again in a newer frame, and stays so.
        for id in entry.deliveryEventIDs {
            guard let d = deliveries[id], d.frame == entry.serial else { continue }
            if d.stage == .awaitingAuthentication {
                // Answered auth-required before this confirmation: its deadline runs from this write.
                if d.sentAt == nil { deliveries[id]!.sentAt = now }
                continue
            }
            guard d.stage == .pending, d.drained else { continue }
            deliveries[id]!.drained = false
            deliveries[id]!.stage = .inFlight
            deliveries[id]!.sentAt = now
        }
    }

    /// Records a write for in-order correlation; past the window the correlation is given up
    /// for this connection rather than risk applying an answer to the wrong event.
    mutating func noteWritten(_ id: String) {
        guard config.correlateUnnamedAcknowledgements, !correlationLost else { return }
        if unanswered.count >= 2 * RelayPublishContract.maxPendingPublishes.value {
            correlationLost = true
            unanswered.removeAll()
            return
        }
        unanswered.append(id)
    }

    // MARK: Timers

    /// Each held event's acknowledgement deadline (from its own write), the AUTH wait, a waiting
    /// challenge's turn, and closed subscriptions' retries: the earliest, or nil when none is armed. An event written
    /// without a time makes the timer due at once (`lastNow`, or 0 before any time was given):
    /// the next `handleTimeout(now:)` starts its deadline from that `now`.
    func pollTimeout() -> Int64? {
        if closed { return nil }
        var earliest: Int64?
        func consider(_ t: Int64) { earliest = earliest.map { Swift.min($0, t) } ?? t }
        for d in deliveries.values where d.stage != .pending {
            consider(d.sentAt.map { $0 + config.acknowledgementTimeoutSeconds } ?? lastNow ?? 0)
        }
        if holdingForAuthentication, let until = authWaitUntil { consider(until) }
        if let due = deferredChallengeDue { consider(due) }
        if connection == .connected {
            for id in subscriptionOrder { if let at = subscriptions[id]!.retryAt { consider(at) } }
        }
        return earliest
    }

    /// Runs what is due at `now`: events past their own deadline become retryable (`timeout`)
    /// and leave the session (a late OK still settles them), the AUTH wait ends, and due
    /// subscription retries are queued.
    mutating func handleTimeout(now: Int64) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("handleTimeout")
        observe(now)
        var actions: [RelaySessionAction] = []
        for id in deliveryIDsInOrder {
            let d = deliveries[id]!
            guard d.stage != .pending else { continue }
            guard let sent = d.sentAt else {
                // Written without a time: its deadline starts now, never in the past.
                deliveries[id]!.sentAt = now
                continue
            }
            if sent + config.acknowledgementTimeoutSeconds > now { continue }
            deliveries[id] = nil
            timedOut.insert(id)
            actions.append(
                .deliveryChanged(
                    decision: DeliveryDecision(
                        eventID: id, state: .retryable, category: .timeout,
                        message: "no OK within \(config.acknowledgementTimeoutSeconds) s of the write")))
        }
        if holdingForAuthentication, let until = authWaitUntil, until <= now {
            // The relay never answered a good AUTH (some stay silent on success): send what waited.
            authWaitUntil = nil
            authWaitEnded = true
            // Treated as accepted: what waited for authentication is sent again, once.
            replayAfterAuthentication()
        }
        if connection == .connected {
            for id in subscriptionOrder {
                guard let at = subscriptions[id]!.retryAt, at <= now else { continue }
                guard outboundCount < RelaySessionContract.maxOutboundFrames.value else {
                    // No room: try again after the base delay rather than keep a past deadline.
                    subscriptions[id]!.retryAt = now + config.reconnectBaseDelaySeconds
                    continue
                }
                subscriptions[id]!.retryAt = nil
                queue.removeAll { $0.purpose == .subscription(id) }
                queue.append(reqEntry(id, filters: subscriptions[id]!.filters, newestConfirmed: subscriptions[id]!.newestConfirmed))
            }
        }
        // A challenge that waited for an answer in flight or for the interval.
        actions += offerDeferredChallenge(clock: now)
        return actions
    }
}
