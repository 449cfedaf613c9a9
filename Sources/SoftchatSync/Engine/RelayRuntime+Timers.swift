import SoftchatCore
import SoftchatJSON

/// A relay's timers and output: each expired timer's handler (`timerExpired(_:_:)`, one case
/// per `EngineTimer`), the progress made after every input, and the session's frames written.
extension RelayRuntime {
    /// Relay `r`'s timers due at `cx.now`, in `EngineTimer.allCases` order: those at or before `cx.now`
    /// in its table as `pollTimeout()` saw it (at `previous`, the clocks of the last input) or as
    /// it stands cx.now (the wall clock may have moved a Unix-second deadline since).
    func expiredTimers(_ cx: RelayContext, since previous: EngineTime) -> [EngineTimer] {
        let mono = cx.now.monotonicMilliseconds
        let before = timers(now: previous, configuration: cx.configuration)
        let current = timers(now: cx.now, configuration: cx.configuration)
        return EngineTimer.allCases.filter { timer in
            before[timer].map { $0 <= mono } == true || current[timer].map { $0 <= mono } == true
        }
    }

    /// Runs what timer `timer` of relay `r` waited for. A handler may find nothing to do (the
    /// state moved since the table was read, or the wall clock is behind a Unix-second deadline:
    /// its entry, converted from the current clocks, then lies ahead); but none leaves its
    /// entry at or before `cx.now`, or the host would call `.timer` again at once, for ever. How
    /// each keeps that is said per case.
    mutating func timerExpired(_ cx: RelayContext, _ timer: EngineTimer) {
        let mono = cx.now.monotonicMilliseconds
        switch timer {
        case .reconnect:
            // Moves: `connect` makes the relay `connecting`; one the session refuses backs off
            // again from cx.now.
            guard case .backingOff(let until) = phase, mono >= until, !cx.stopping else { return }
            connect(cx)
            if case .backingOff(let still) = phase, still <= mono {
                phase = .backingOff(until: mono + cx.retrySchedule.delayMilliseconds(attempt: 1))
            }
        case .acknowledgement:
            // Moves: `handleTimeout` times out each event past its deadline (or starts one that
            // had none), ends the AUTH wait, queues each due subscription retry (or puts it a base
            // delay later) and offers a waiting challenge, so its `pollTimeout()` lies ahead.
            // Nothing while the wall clock is behind it: the entry lies ahead then.
            guard phase == .connected, let session = session,
                let due = session.pollTimeout(), cx.now.unixSeconds >= due
            else { return }
            do { process(cx, try session.handleTimeout(now: cx.now.unixSeconds)) } catch {
                cx.report(.notice(relayURL: url, "handleTimeout refused: \(error.message)"))
            }
        case .authenticationAnswer:
            // Moves: silence taken as acceptance ends the wait.
            guard phase == .connected, authentication.silentlyAccepted(now: mono) else { return }
            // No answer to our AUTH: some relays stay silent on success (nostr-relay does).
            setState(cx, .ready)
            authenticationAccepted(cx)
        case .keepalive:
            // Moves: a ping waits for its read deadline; a ping unanswered that long ends the
            // connection (its timers go with it).
            guard
                let due = connection?.keepalive.poll(
                    now: mono, interval: cx.configuration.keepaliveIntervalMilliseconds, readDeadline: cx.configuration.readDeadlineMilliseconds)
            else { return }
            switch due {
            case .lost:
                cx.push(.action(.close(relay: index)))
                lost(cx, reason: "no answer to a keepalive ping within \(cx.configuration.readDeadlineMilliseconds) ms")
            case .nothing:
                break
            case .ping:
                cx.push(.action(.ping(relay: index)))
                // Intents another process committed to the same account file send no wake to
                // this one: look for work on the keepalive's wakeup (the progress pass claims),
                // so nothing waits for a reconnect.
                delivery.needsClaim = true
            }
        case .negentropyAnswer:
            // Moves: each late NEG subscription is given up (closed, its wait forgotten).
            guard phase == .connected else { return }
            negentropyDeadlines(cx, mono)
        case .deeperResync:
            // Moves: each due subscription opens its deeper window (none is due while one is
            // open, and the next is an interval after this one). Nothing while the wall clock is
            // behind it: the entry lies ahead then.
            guard phase == .connected else { return }
            deeperResyncs(cx)
        case .requestAnswer:
            // Moves: each overdue one-shot is ended, its deadline with it.
            requestDeadlines(cx, mono)
        case .refusedRequestRetry:
            // Moves: each due suspect is sent again (no longer a suspect) or, without room,
            // waits another round from cx.now.
            retrySuspects(cx, mono)
        case .closedPageRetry:
            // Moves: each due page's hold is lifted and the page asked again.
            retryClosedPages(cx, mono)
        case .requestBackoff:
            // In the table only while ahead: a REQ whose backoff passed goes cx.now if the budget
            // has room, else when a slot frees (`requestEnded`).
            sendQueuedRequests(cx)
        case .authenticationGrace:
            // In the table only while ahead: what waited for the window, the progress pass after
            // the timers writes.
            break
        case .claimPause:
            // In the table only while ahead: the progress pass after the timers claims.
            break
        case .leaseRenewal:
            // Moves: the due lease goes to the account, and no renewal is due while one is asked.
            if let claim = delivery.renewalDue(now: mono) { cx.push(.account(.renew(claim), .renew(relay: index))) }
        }
    }

    /// What any input may have made ready on a connected relay, none of it on a clock: queued
    /// REQs go as the budget has room (a REQ ended, a NIP-77 session closed); and once the
    /// challenge window allows writing, work is claimed when it waits (`maybeClaim`: a wake, a
    /// decision, an account answer), then the NEG frames and the session's frames are written.
    mutating func makeProgress(_ cx: RelayContext) {
        guard phase == .connected, session != nil else { return }
        // Queued REQs whose backoff ended go as the budget has room.
        sendQueuedRequests(cx)
        let mono = cx.now.monotonicMilliseconds
        guard authentication.mayWrite(now: mono), phase == .connected else { return }
        maybeClaim(cx, mono)
        drainNegentropy(cx)
        drain(cx)
    }

    /// Opens the deeper window of every paged subscription at rest whose interval has passed
    /// while the connection stayed up (at a connection's start `begin` does it).
    mutating func deeperResyncs(_ cx: RelayContext) {
        let interval = cx.configuration.deepResyncIntervalSeconds
        guard let due = deeperResyncDue(interval: interval), cx.now.unixSeconds >= due else { return }
        for id in subscriptions.keys.sorted() {
            guard let sub = subscriptions[id], sub.atRest,
                let at = sub.sync.deeperWindowDue(interval: interval), cx.now.unixSeconds >= at
            else { continue }
            subscriptions[id]!.sync.begin(now: cx.now.unixSeconds, deepResyncInterval: interval)
            advanceSync(cx, id)
        }
    }

    mutating func drain(_ cx: RelayContext) {
        guard let session = session, phase == .connected else { return }
        let frames: [OutboundRelayFrame]
        do { frames = try session.drainOutbound() } catch {
            cx.report(.notice(relayURL: url, "drainOutbound refused: \(error.message)"))
            return
        }
        for frame in frames {
            let token = cx.newToken()
            delivery.frameQueued(token: token, eventIDs: frame.deliveryEventIDs)
            cx.push(.action(.write(relay: index, text: frame.frame, token: token)))
        }
    }

    mutating func written(_ cx: RelayContext, _ token: Int) {
        if neg.wrote(token) { return }
        guard let (ids, marks) = delivery.frameWritten(token: token, now: cx.now.monotonicMilliseconds) else { return }
        guard !ids.isEmpty else {
            confirmSent(cx, [])
            return
        }
        // Durable first: the intents are in flight before the session says so. An event sent
        // again after authentication is already in flight durably.
        for (claim, intentIDs) in marks { cx.push(.account(.markWritten(claim, intentIDs: intentIDs), .markWritten(relay: index))) }
        cx.push(.confirmSent(relay: index, eventIDs: ids))
    }

    mutating func confirmSent(_ cx: RelayContext, _ ids: [String]) {
        guard phase == .connected, let session = session else { return }
        do { try session.confirmSent(ids, now: cx.now.unixSeconds) } catch {
            cx.report(.notice(relayURL: url, "confirmSent refused: \(error.message)"))
        }
    }
}
