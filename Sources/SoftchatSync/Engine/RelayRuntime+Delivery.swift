import SoftchatCore

/// Publishing: claims and leases, the session's decisions made durable, ingestion commits.
extension SyncEngine {
    /// One `applyResults` per lease for everything decided since the last flush, then the
    /// release of every claim that holds nothing more.
    func flushDeliveries() {
        for r in relays.indices { withRelay(r) { $0.flushDeliveries($1) } }
    }

    // MARK: Ingestion

    /// One commit for every event received since the last one, with the sync state of every
    /// subscription that changed: the state never runs ahead of the events it counted.
    func flushIngest() {
        var states: [CommittedState] = []
        var records: [SyncStateRecord] = []
        for r in relays.indices { withRelay(r) { relay, _ in relay.takeChangedStates(into: &states, &records) } }
        let events = pendingIngest
        pendingIngest.removeAll()
        guard !events.isEmpty || !records.isEmpty else { return }
        push(
            .account(
                .commit(events: events.map(\.event), syncStates: records, receivedAt: now.unixSeconds),
                .commit(events: events, states: states)))
    }

    /// A commit went through: each relay's session hears which of its events are held, the
    /// host gets one `ingested` report per relay, then each sync state written becomes durable
    /// (and a window it completed is reported `synced`).
    func committed(_ events: [(relay: Int, event: VerifiedEvent)], _ states: [CommittedState], _ result: IngestionResult) {
        var perRelay: [Int: IngestionResult] = [:]
        var idsPerRelay: [Int: [String]] = [:]
        let accepted = Set(result.accepted)
        let present = Set(result.alreadyPresent)
        for (r, event) in events {
            idsPerRelay[r, default: []].append(event.id)
            var partial = perRelay[r] ?? IngestionResult()
            if accepted.contains(event.id) {
                partial.accepted.append(event.id)
            } else if present.contains(event.id) {
                partial.alreadyPresent.append(event.id)
            } else {
                partial.rejected.append(event.id)
            }
            perRelay[r] = partial
        }
        for r in idsPerRelay.keys.sorted() { withRelay(r) { relay, _ in relay.ingested(idsPerRelay[r]!) } }
        for r in perRelay.keys.sorted() { report(.ingested(relayURL: configuration.relayURLs[r], perRelay[r]!)) }
        for state in states { withRelay(state.relay) { $0.stateCommitted($1, state) } }
        replayDeferred()
    }
}

/// A sync state as it was written by one commit.
struct CommittedState {
    let relay: Int
    let subscription: String
    let outcome: SyncOutcome?
    let sync: SubscriptionSync
}

extension RelayRuntime {
    /// Queues this relay's decisions since the last flush, one `applyResults` per lease, then
    /// the release of every claim that holds nothing more.
    mutating func flushDeliveries(_ cx: RelayContext) {
        for (claim, results) in delivery.takeResults() {
            cx.push(.account(.applyResults(claim, results: results), .apply(relay: index, results: results)))
        }
        releaseFinishedClaims(cx)
    }

    /// Appends the sync state of every subscription that changed since the last commit (and
    /// marks it committed-to-be).
    mutating func takeChangedStates(into states: inout [CommittedState], _ records: inout [SyncStateRecord]) {
        for id in subscriptions.keys.sorted() where subscriptions[id]!.dirty {
            let sub = subscriptions[id]!
            states.append(CommittedState(relay: index, subscription: id, outcome: sub.completed, sync: sub.sync))
            records.append(
                SyncStateRecord(
                    relayURL: url, subscriptionID: id, filtersJSON: sub.filtersJSON,
                    stateJSON: sub.sync.jsonValue.jsonText, cursor: sub.completed?.cursor))
            subscriptions[id]!.dirty = false
        }
    }

    /// Events of this relay's were committed (held, already present or refused by the account):
    /// the session lets them go.
    mutating func ingested(_ eventIDs: [String]) {
        for id in eventIDs {
            try? session?.confirmIngested(id)
        }
    }

    /// A sync state of this relay's was committed: it is durable now, and a window it completed
    /// up to this connection's start is reported `synced`.
    mutating func stateCommitted(_ cx: RelayContext, _ state: CommittedState) {
        let (id, outcome) = (state.subscription, state.outcome)
        guard var sub = subscriptions[id] else { return }
        sub.durable = state.sync
        if let outcome, sub.completed == outcome {
            sub.completed = nil
        }
        // Synced means: everything up to this connection's start is held.
        if let outcome, outcome.cursor >= sub.connectedAt {
            sub.syncedOnce = true
            var reported = outcome
            if case .refused(let reason) = sub.live { reported.liveFeedRefused = reason }
            // What the windows since the last report left out, and why (issue 45, path 10).
            reported.skipped = sub.skipped
            cx.report(.synced(relayURL: url, subscriptionID: id, events: sub.windowEvents, outcome: reported))
            sub.windowEvents = 0
            sub.skipped = []
        }
        subscriptions[id] = sub
    }

    mutating func maybeClaim(_ cx: RelayContext, _ mono: Int64) {
        guard cx.configuration.publishes, !cx.stopping, delivery.mayClaim(now: mono, sessionIdle: sessionIdle) else { return }
        delivery.claimSent(now: mono, pace: cx.configuration.retryDelaySeconds * 1000)
        cx.push(
            .account(
                .claim(
                    relayURL: url, leaseID: cx.newLeaseID(),
                    max: delivery.claimSize(batch: cx.configuration.claimBatch)),
                .claim(relay: index)))
    }

    mutating func claimed(_ cx: RelayContext, _ result: DeliveryClaimResult?) {
        guard let result else {
            delivery.nothingToClaim()
            return
        }
        let lease = result.claim.leaseID
        delivery.hold(result.claim, renewAt: cx.now.monotonicMilliseconds + cx.configuration.leaseSeconds * 500)
        var fresh: [VerifiedEvent] = []
        var settled: [DeliveryResult] = []
        for payload in result.payloads {
            switch delivery.claimed(payload, lease: lease, inSession: session?.holdsDelivery(payload.eventID) ?? false) {
            case .settled(let result):
                settled.append(result)
                continue
            case .inSession:
                continue
            case .publish:
                break
            }
            let event: VerifiedEvent
            do throws(SoftchatError) {
                event = try VerifiedEvent(storedJSON: payload.eventJSON)
            } catch {
                // Left to its lease, it was released at once and claimed again, for ever (66,667
                // leases in one pump). It can never be sent: its terminal decision, said so.
                delivery.letGo(payload.eventID)
                let decision = DeliveryDecision(
                    eventID: payload.eventID, state: .rejected, category: .invalid,
                    message: "the stored event does not read back (\(error.message)); it was not sent")
                statistics.count(decision)
                settled.append(DeliveryResult(intentID: payload.intentID, decision: decision))
                continue
            }
            if let refusal = session?.frameRefusal(for: event) {
                // No frame to this relay can carry it: its decision, not the batch's failure.
                delivery.letGo(payload.eventID)
                statistics.count(refusal)
                settled.append(DeliveryResult(intentID: payload.intentID, decision: refusal))
                continue
            }
            fresh.append(event)
        }
        if !settled.isEmpty {
            delivery.queue(settled, lease: lease)
            cx.queueDeliveryFlush()
        }
        if !fresh.isEmpty, let session = session {
            do {
                try session.publish(fresh)
            } catch {
                delivery.publishRefused(
                    fresh.map { $0.id }, pauseUntil: cx.now.monotonicMilliseconds + cx.configuration.retryDelaySeconds * 1000)
                cx.report(.notice(relayURL: url, "publish refused: \(error.code.rawValue): \(error.message)"))
            }
        }
        if settled.isEmpty { releaseFinishedClaims(cx) }
    }

    /// The session changed an event's delivery state: terminal and retryable decisions become
    /// results of the claim that holds the event's intent, committed at the next flush.
    mutating func deliveryChanged(_ cx: RelayContext, _ decision: DeliveryDecision) {
        var decision = decision
        if decision.state == .retryable && decision.category == .authRequired { decision = authenticationDenied(cx, decision) }
        let decided = delivery.decided(
            decision, now: cx.now.monotonicMilliseconds, retryDelayMilliseconds: cx.configuration.retryDelaySeconds * 1000)
        if let latency = decided.latency { statistics.recordLatency(latency) }
        if decided.queued { cx.queueDeliveryFlush() }
    }

    /// An event the relay answered `auth-required:` (or held for an AUTH it then refused). While
    /// the relay refuses our AUTH, each claim so answered is a refused try, counted across
    /// connections until an AUTH is accepted (`AuthenticationMachine.publishDenied`); from the
    /// `refusedTriesLimit`-th in a row the event is rejected (`restricted`: we may not write
    /// there), reported once in a notice. It used to be asked again every ~15 s for ever,
    /// spending no retry budget (issue 45, path 13); `auth-required:` while no AUTH of ours
    /// was refused is still "later".
    mutating func authenticationDenied(_ cx: RelayContext, _ decision: DeliveryDecision) -> DeliveryDecision {
        let claim = delivery.holder[decision.eventID]?.lease
        guard case .reject(let first) = authentication.publishDenied(claim: claim) else { return decision }
        let tries = authentication.refusedTries
        let refusal = authentication.refusal
        if first {
            cx.report(
                .notice(
                    relayURL: url,
                    "publishing refused: the relay wants NIP-42 authentication and refused our AUTH (\(refusal)) \(tries) tries in a "
                        + "row; what it answers auth-required: is rejected until it accepts an AUTH of ours"))
        }
        return DeliveryDecision(
            eventID: decision.eventID, state: .rejected, category: .restricted,
            message: "the relay wants NIP-42 authentication and refused our AUTH (\(refusal)) \(tries) tries in a row: \(decision.message)")
    }

    mutating func releaseFinishedClaims(_ cx: RelayContext) {
        for claim in delivery.finishedClaims() {
            cx.push(.account(.release(claim), .release(relay: index, leaseID: claim.leaseID)))
        }
    }
}
