import SoftchatCore

/// A relay's share of the engine's inputs: what the host saw on its connection, the account's
/// answers to its work, starting and stopping. The engine routes each here
/// (`SyncEngine.withRelay(_:_:)`).
extension RelayRuntime {
    /// Handles an input about this relay's connection (`SyncEngine.handle(_:now:)` routes
    /// `relayInformation`, `opened`, `received`, `oversized`, `alive`, `bytesArrived`,
    /// `written`, `lost`, `drop` and `workAvailable` here; the others are the engine's).
    mutating func handle(_ cx: RelayContext, _ input: SyncEngineInput) {
        let mono = cx.now.monotonicMilliseconds
        switch input {
        case .relayInformation(_, let limits):
            guard !cx.stopping else { return }
            informationPending = false
            if let limits { cx.report(.relayInformation(relayURL: url, limits)) }
            if session == nil { startSession(cx, limits: limits) } else { informationArrived(cx, limits) }
        case .opened:
            opened(cx)
        case .received(_, let text):
            guard phase == .connected else { return }
            received(cx, text)
        case .oversized(_, let head, let bytes):
            guard phase == .connected else { return }
            oversized(cx, OversizedMessage(head: head, bytes: bytes))
        case .alive:
            connection?.keepalive.heard(mono)
        case .bytesArrived:
            // A message still arriving is life for the connection, and it may be the answer of
            // any REQ or NEG message waiting: none is given up while it comes (a page whose first
            // event takes longer than the REQ deadline on a slow link was closed and asked again
            // at every deadline, for ever).
            guard phase == .connected else { return }
            connection?.keepalive.bytesArrived(mono)
            requests.bytesArrived(deadline: mono + cx.requestDeadline)
            neg.bytesArrived(now: mono)
        case .written(_, let token):
            written(cx, token)
        case .lost(_, let reason):
            if !cx.stopping { cx.report(.connectionFailed(relayURL: url, reason)) }
            lost(cx, reason: reason)
        case .drop:
            guard phase == .connected || phase == .connecting else { return }
            cx.push(.action(.close(relay: index)))
            lost(cx, reason: "connection dropped on request")
        case .workAvailable:
            delivery.needsClaim = true
        case .account, .stop, .timer:
            break
        }
    }

    /// The account's policy is loaded: fetch NIP-11 first, or start the session at once.
    mutating func start(_ cx: RelayContext) {
        if cx.configuration.fetchRelayInformation {
            setState(cx, .fetchingInformation)
            askInformation(cx)
        } else {
            startSession(cx, limits: nil)
        }
    }

    /// Records and reports this relay's connection state (the engine sums the overall one).
    func setState(_ cx: RelayContext, _ state: RelayConnectionState) { cx.setState(index, state) }

    // MARK: Account replies

    /// The account answered work of this relay's: a claim, a renewal, decisions applied, a
    /// release, reconciliation items.
    mutating func accountReplied(_ cx: RelayContext, _ reply: AccountReply, _ context: SyncEngine.Context) {
        let mono = cx.now.monotonicMilliseconds
        switch context {
        case .claim:
            if case .heldUntil(let unix) = reply {
                // Another lease holds the work: ask again the moment it expires (never later than
                // a lease from now, whatever the wall clock says).
                let wait = min(max(0, unix - cx.now.unixSeconds), cx.configuration.leaseSeconds)
                delivery.claimAnswered(pauseUntil: mono + wait * 1000 + 100)
                return
            }
            delivery.claimAnswered()
            guard case .claimed(let result) = reply else { return }
            claimed(cx, result)
        case .renew:
            guard case .renewed(let claim) = reply else {
                delivery.renewalFailed(stale: false, retryAt: mono + cx.configuration.retryDelaySeconds * 1000)
                return
            }
            delivery.renewed(claim, renewAt: mono + cx.configuration.leaseSeconds * 500)
        case .apply(_, let results):
            for r in results {
                statistics.count(r.decision)
                cx.report(.delivery(relayURL: url, intentID: r.intentID, decision: r.decision))
            }
        case .release(_, let leaseID):
            delivery.released(leaseID)
        case .items(_, let subscription, let connection):
            guard case .reconciliationItems(let items) = reply else { return }
            itemsLoaded(cx, subscription, connection: connection, items: items)
        case .load, .markWritten, .commit, .loadNegentropy, .recordNegentropy:
            break
        }
    }

    /// Work of this relay's failed in the account: nothing of it happened.
    mutating func accountFailed(_ cx: RelayContext, _ error: SoftchatError, _ context: SyncEngine.Context) {
        let retryAt = cx.now.monotonicMilliseconds + cx.configuration.retryDelaySeconds * 1000
        switch context {
        case .claim:
            delivery.claimAnswered(pauseUntil: retryAt)
            cx.report(.notice(relayURL: url, "claim failed: \(error.code.rawValue): \(error.message)"))
        case .renew:
            // Stale (`invalid_delivery_state`): another claim owns the work; drop ours. Else back off.
            let stale = error.code == .invalidDeliveryState
            delivery.renewalFailed(stale: stale, retryAt: retryAt)
            cx.report(
                .notice(
                    relayURL: url,
                    stale
                        ? "lease renewal refused as stale, its work was claimed again: \(error.message)"
                        : "lease renewal failed, retried in \(cx.configuration.retryDelaySeconds) s: \(error.code.rawValue): \(error.message)"))
        case .markWritten:
            // A stale claim: another claim owns those intents now; the relay's answers for them
            // are applied by nobody here (the other claim publishes them again).
            cx.report(.notice(relayURL: url, "in-flight mark not applied: \(error.message)"))
        case .apply(_, let results):
            delivery.notApplied(results)
            cx.report(.notice(relayURL: url, "delivery results not applied: \(error.message)"))
        case .items(_, let subscription, let connection):
            cx.report(.notice(relayURL: url, "cannot read reconciliation items: \(error.code.rawValue): \(error.message)"))
            if connection == neg.connection { fallBack(cx, subscription, reason: "reconciliation items unreadable") }
        case .release(_, let leaseID):
            // A stale lease releases nothing: forget it (its work is another claim's now).
            delivery.released(leaseID)
        case .load, .commit, .loadNegentropy, .recordNegentropy:
            break
        }
    }

    /// A commit that carried `events` from this relay (or a sync state of its) failed: the
    /// session takes the events back, the sync states go back to what is durable (the pages are
    /// asked again), and the connection is cut, so the relay's answers come again.
    mutating func commitFailed(_ cx: RelayContext, _ events: [VerifiedEvent], _ error: SoftchatError) {
        for event in events { session?.ingestionFailed(event.id) }
        reloadDurableStates()
        cx.report(.notice(relayURL: url, "account write failed: \(error.code.rawValue): \(error.message)"))
        guard phase == .connected || phase == .connecting else { return }
        cx.push(.action(.close(relay: index)))
        lost(cx, reason: "account write failed")
    }

    // MARK: Stopping

    /// The engine stops: the session cancels what it holds, the connection closes.
    mutating func stop(_ cx: RelayContext) {
        if let session, phase != .stopped {
            if let actions = try? session.cancel() { process(cx, actions) }
            if phase == .connected || phase == .connecting { cx.push(.action(.close(relay: index))) }
        }
        phase = .stopped
    }

    /// The last of stopping, once the final commits are queued: every claim released, the
    /// session closed.
    mutating func finishStop(_ cx: RelayContext) {
        for claim in delivery.releaseAll() {
            cx.push(.account(.release(claim), .release(relay: index, leaseID: claim.leaseID)))
        }
        try? session?.close()
        session = nil
        setState(cx, .stopped)
    }
}
