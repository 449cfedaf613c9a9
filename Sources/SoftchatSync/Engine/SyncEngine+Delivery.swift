import SoftchatCore

/// Publishing: claims and leases, the session's decisions made durable, ingestion commits.
extension SyncEngine {
    func maybeClaim(_ r: Int, _ mono: Int64) {
        // One claim at a time keeps the session's queue bounded; claim again when it drains.
        guard configuration.publishes, !stopping, relays[r].needsClaim, !relays[r].claiming, relays[r].inSession.isEmpty,
            mono >= relays[r].claimPausedUntil, relays[r].pendingResults.isEmpty
        else { return }
        leaseCounter += 1
        relays[r].claiming = true
        push(
            .account(
                .claim(relayURL: relays[r].url, leaseID: "\(configuration.leasePrefix)-\(leaseCounter)", max: configuration.claimBatch),
                .claim(relay: r)))
    }

    func claimed(_ r: Int, _ result: DeliveryClaimResult?) {
        guard let result else {
            relays[r].needsClaim = false
            return
        }
        let lease = result.claim.leaseID
        relays[r].claims[lease] = result.claim
        relays[r].renewAt[lease] = now.monotonicMilliseconds + configuration.leaseSeconds * 500
        var fresh: [VerifiedEvent] = []
        var settled: [DeliveryResult] = []
        for payload in result.payloads {
            if let decision = relays[r].lateTerminal.removeValue(forKey: payload.eventID) {
                settled.append(DeliveryResult(intentID: payload.intentID, decision: decision))
                continue
            }
            relays[r].holder[payload.eventID] = (lease, payload.intentID)
            relays[r].written.remove(payload.eventID)
            if relays[r].inSession.contains(payload.eventID) { continue }
            guard let event = try? VerifiedEvent(storedJSON: payload.eventJSON) else {
                relays[r].holder[payload.eventID] = nil
                report(.notice(relayURL: relays[r].url, "stored event \(payload.eventID) does not read back; left to its lease"))
                continue
            }
            if let refusal = relays[r].session?.frameRefusal(for: event) {
                // No frame to this relay can carry it: its decision, not the batch's failure.
                relays[r].holder[payload.eventID] = nil
                relays[r].statistics.count(refusal)
                settled.append(DeliveryResult(intentID: payload.intentID, decision: refusal))
                continue
            }
            fresh.append(event)
        }
        if !settled.isEmpty {
            relays[r].pendingResults[lease, default: []] += settled
            queueDeliveryFlush()
        }
        if !fresh.isEmpty, let session = relays[r].session {
            do {
                try session.publish(fresh)
                for e in fresh { relays[r].inSession.insert(e.id) }
            } catch {
                for e in fresh { relays[r].holder[e.id] = nil }
                report(.notice(relayURL: relays[r].url, "publish refused: \(error.code.rawValue): \(error.message)"))
                relays[r].claimPausedUntil = now.monotonicMilliseconds + configuration.retryDelaySeconds * 1000
            }
        }
        if settled.isEmpty { releaseFinishedClaims(r) }
    }

    /// The session changed an event's delivery state: terminal and retryable decisions become
    /// results of the claim that holds the event's intent, committed at the next flush.
    func deliveryChanged(_ r: Int, _ decision: DeliveryDecision) {
        let id = decision.eventID
        switch decision.state {
        case .pending:
            relays[r].inSession.insert(id)
            return
        case .inFlight:
            return
        case .accepted, .rejected, .retryable:
            relays[r].inSession.remove(id)
        }
        if let sent = relays[r].sentAt.removeValue(forKey: id), decision.state != .retryable {
            relays[r].statistics.recordLatency(now.monotonicMilliseconds - sent)
        }
        if decision.state == .accepted {
            relays[r].retryPause = 0
        } else if decision.state == .retryable && decision.category != .transportLost && decision.category != .timeout
            && decision.category != .cancelled
        {
            // The relay itself said "later": back off before claiming again. (A timeout is already
            // spaced by the acknowledgement deadline, and a lost connection by the reconnect.)
            let base = configuration.retryDelaySeconds * 1000
            relays[r].retryPause = relays[r].retryPause == 0 ? base : min(relays[r].retryPause * 2, 60_000)
            relays[r].claimPausedUntil = now.monotonicMilliseconds + relays[r].retryPause
        }
        if decision.state == .retryable { relays[r].needsClaim = true }
        relays[r].written.remove(id)
        guard let h = relays[r].holder.removeValue(forKey: id), relays[r].claims[h.lease] != nil else {
            // No claim holds it any more: a late terminal answer after its retryable decision.
            if decision.state.isTerminal { relays[r].lateTerminal[id] = decision }
            return
        }
        relays[r].pendingResults[h.lease, default: []].append(DeliveryResult(intentID: h.intent, decision: decision))
        queueDeliveryFlush()
    }

    /// One `applyResults` per lease for everything decided since the last flush, then the
    /// release of every claim that holds nothing more.
    func flushDeliveries() {
        for r in relays.indices {
            for lease in relays[r].pendingResults.keys.sorted() {
                guard let results = relays[r].pendingResults[lease], !results.isEmpty, let claim = relays[r].claims[lease] else { continue }
                push(.account(.applyResults(claim, results: results), .apply(relay: r, results: results)))
            }
            relays[r].pendingResults.removeAll()
            releaseFinishedClaims(r)
        }
    }

    func releaseFinishedClaims(_ r: Int) {
        let held = Set(relays[r].holder.values.map(\.lease))
        for lease in relays[r].claims.keys.sorted() where !held.contains(lease) && relays[r].pendingResults[lease] == nil {
            guard let claim = relays[r].claims[lease], !relays[r].releasing.contains(lease) else { continue }
            relays[r].releasing.insert(lease)
            push(.account(.release(claim), .release(relay: r, leaseID: lease)))
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
                report(.synced(relayURL: relays[r].url, subscriptionID: id, events: sub.windowEvents, outcome: outcome))
                sub.windowEvents = 0
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
