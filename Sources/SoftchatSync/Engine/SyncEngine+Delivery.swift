import SoftchatCore

/// Publishing: claims and leases, the session's decisions made durable, ingestion commits.
extension SyncEngine {
    func maybeClaim(_ r: Int, _ mono: Int64) {
        guard configuration.publishes, !stopping, relays[r].delivery.mayClaim(now: mono) else { return }
        leaseCounter += 1
        relays[r].delivery.claimSent(now: mono, pace: configuration.retryDelaySeconds * 1000)
        push(
            .account(
                .claim(
                    relayURL: relays[r].url, leaseID: "\(configuration.leasePrefix)-\(leaseCounter)",
                    max: relays[r].delivery.claimSize(batch: configuration.claimBatch)),
                .claim(relay: r)))
    }

    func claimed(_ r: Int, _ result: DeliveryClaimResult?) {
        guard let result else {
            relays[r].delivery.nothingToClaim()
            return
        }
        let lease = result.claim.leaseID
        relays[r].delivery.hold(result.claim, renewAt: now.monotonicMilliseconds + configuration.leaseSeconds * 500)
        var fresh: [VerifiedEvent] = []
        var settled: [DeliveryResult] = []
        for payload in result.payloads {
            switch relays[r].delivery.claimed(payload, lease: lease) {
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
                relays[r].delivery.letGo(payload.eventID)
                let decision = DeliveryDecision(
                    eventID: payload.eventID, state: .rejected, category: .invalid,
                    message: "the stored event does not read back (\(error.message)); it was not sent")
                relays[r].statistics.count(decision)
                settled.append(DeliveryResult(intentID: payload.intentID, decision: decision))
                continue
            }
            if let refusal = relays[r].session?.frameRefusal(for: event) {
                // No frame to this relay can carry it: its decision, not the batch's failure.
                relays[r].delivery.letGo(payload.eventID)
                relays[r].statistics.count(refusal)
                settled.append(DeliveryResult(intentID: payload.intentID, decision: refusal))
                continue
            }
            fresh.append(event)
        }
        if !settled.isEmpty {
            relays[r].delivery.queue(settled, lease: lease)
            queueDeliveryFlush()
        }
        if !fresh.isEmpty, let session = relays[r].session {
            do {
                try session.publish(fresh)
                relays[r].delivery.published(fresh.map { $0.id })
            } catch {
                relays[r].delivery.publishRefused(
                    fresh.map { $0.id }, pauseUntil: now.monotonicMilliseconds + configuration.retryDelaySeconds * 1000)
                report(.notice(relayURL: relays[r].url, "publish refused: \(error.code.rawValue): \(error.message)"))
            }
        }
        if settled.isEmpty { releaseFinishedClaims(r) }
    }

    /// The session changed an event's delivery state: terminal and retryable decisions become
    /// results of the claim that holds the event's intent, committed at the next flush.
    func deliveryChanged(_ r: Int, _ decision: DeliveryDecision) {
        var decision = decision
        if decision.state == .retryable && decision.category == .authRequired { decision = authenticationDenied(r, decision) }
        let decided = relays[r].delivery.decided(
            decision, now: now.monotonicMilliseconds, retryDelayMilliseconds: configuration.retryDelaySeconds * 1000)
        if let latency = decided.latency { relays[r].statistics.recordLatency(latency) }
        if decided.queued { queueDeliveryFlush() }
    }

    /// An event the relay answered `auth-required:` (or held for an AUTH it then refused). While
    /// the relay refuses our AUTH, each claim so answered is a refused try, counted across
    /// connections until an AUTH is accepted (`AuthenticationMachine.publishDenied`); from the
    /// `refusedTriesLimit`-th in a row the event is rejected (`restricted`: we may not write
    /// there), reported once in a notice. It used to be asked again every ~15 s for ever,
    /// spending no retry budget (issue 45, path 13); `auth-required:` while no AUTH of ours
    /// was refused is still "later".
    func authenticationDenied(_ r: Int, _ decision: DeliveryDecision) -> DeliveryDecision {
        let claim = relays[r].delivery.holder[decision.eventID]?.lease
        guard case .reject(let first) = relays[r].authentication.publishDenied(claim: claim) else { return decision }
        let tries = relays[r].authentication.refusedTries
        let refusal = relays[r].authentication.refusal
        if first {
            report(
                .notice(
                    relayURL: relays[r].url,
                    "publishing refused: the relay wants NIP-42 authentication and refused our AUTH (\(refusal)) \(tries) tries in a "
                        + "row; what it answers auth-required: is rejected until it accepts an AUTH of ours"))
        }
        return DeliveryDecision(
            eventID: decision.eventID, state: .rejected, category: .restricted,
            message: "the relay wants NIP-42 authentication and refused our AUTH (\(refusal)) \(tries) tries in a row: \(decision.message)")
    }

    /// One `applyResults` per lease for everything decided since the last flush, then the
    /// release of every claim that holds nothing more.
    func flushDeliveries() {
        for r in relays.indices {
            for (claim, results) in relays[r].delivery.takeResults() {
                push(.account(.applyResults(claim, results: results), .apply(relay: r, results: results)))
            }
            releaseFinishedClaims(r)
        }
    }

    func releaseFinishedClaims(_ r: Int) {
        for claim in relays[r].delivery.finishedClaims() {
            push(.account(.release(claim), .release(relay: r, leaseID: claim.leaseID)))
        }
    }

    // MARK: Ingestion

    /// One commit for every event received since the last one, with the sync state of every
    /// subscription that changed: the state never runs ahead of the events it counted.
    func flushIngest() {
        var states: [CommittedState] = []
        var records: [SyncStateRecord] = []
        for r in relays.indices {
            for id in relays[r].subscriptions.keys.sorted() where relays[r].subscriptions[id]!.dirty {
                let sub = relays[r].subscriptions[id]!
                states.append(CommittedState(relay: r, subscription: id, outcome: sub.completed, sync: sub.sync))
                records.append(
                    SyncStateRecord(
                        relayURL: relays[r].url, subscriptionID: id, filtersJSON: sub.filtersJSON,
                        stateJSON: sub.sync.jsonValue.jsonText, cursor: sub.completed?.cursor))
                relays[r].subscriptions[id]!.dirty = false
            }
        }
        let events = pendingIngest
        pendingIngest.removeAll()
        guard !events.isEmpty || !records.isEmpty else { return }
        push(
            .account(
                .commit(events: events.map(\.event), syncStates: records, receivedAt: now.unixSeconds),
                .commit(events: events, states: states)))
    }

    func committed(_ events: [(relay: Int, event: VerifiedEvent)], _ states: [CommittedState], _ result: IngestionResult) {
        var perRelay: [Int: IngestionResult] = [:]
        let accepted = Set(result.accepted)
        let present = Set(result.alreadyPresent)
        for (r, event) in events {
            try? relays[r].session?.confirmIngested(event.id)
            relays[r].awaitingCommit -= 1
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
        for r in perRelay.keys.sorted() { report(.ingested(relayURL: relays[r].url, perRelay[r]!)) }
        for state in states {
            let (r, id, outcome) = (state.relay, state.subscription, state.outcome)
            guard var sub = relays[r].subscriptions[id] else { continue }
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
                report(.synced(relayURL: relays[r].url, subscriptionID: id, events: sub.windowEvents, outcome: reported))
                sub.windowEvents = 0
                sub.skipped = []
            }
            relays[r].subscriptions[id] = sub
        }
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
