import SoftchatCore
import SoftchatJSON

/// A relay's pages: each subscription's window is asked page by page (`SubscriptionSync`), and a
/// page the relay closes or leaves unanswered is held and asked again on a doubling schedule,
/// or once the relay accepts our AUTH, and reported refused after `SyncEngine.refusalTries`.
extension RelayRuntime {
    /// A page the relay closed, maybe part-way through its answer, or left unanswered past its
    /// deadline. The session would send a closed REQ again itself with a `since` of its newest
    /// event, which is a live subscription's rule: a page so narrowed ends short and looks final,
    /// and the rest of the window was skipped. The engine takes it back instead: the page is
    /// asked again whole (same `until`, under a new id; what it brought is kept for duplicates
    /// only), and never counts as ended (the window is not reported synced meanwhile).
    ///
    /// When (issue 45, path 6: each retry had a new id and the session's backoff counted per id,
    /// so a page the relay kept closing was asked every second, for ever):
    /// - `error:`, `rate-limited:`, the relay's limit, or no answer: after
    ///   `cx.retrySchedule.delayMilliseconds(attempt:)` of the failures of the same page in a row —
    ///   the reconnect schedule (`ReconnectBackoff`) without jitter: the reconnect base, doubling
    ///   per failure up to the reconnect maximum, where it stays; at the `refusalTries`-th the
    ///   window is reported refused;
    /// - `auth-required:`: once the relay accepts our AUTH, not on a clock (at once if it already
    ///   has, once); refused when this engine does not authenticate here;
    /// - anything else (`blocked:`, `restricted:`, `invalid:`, no prefix): refused, the window
    ///   open until the next connection.
    ///
    /// One notice per page: at its first failure (and one more when its window is refused).
    mutating func pageFailed(_ cx: RelayContext, _ pageID: String, owner: String, _ failure: SyncEngine.PageFailure) {
        try? session?.unsubscribe(id: pageID)
        requestEnded(cx, pageID)
        guard var sub = subscriptions[owner] else { return }
        sub.pageID = nil
        sub.sync.restarted()
        sub.pageFailures += 1
        let tries = sub.pageFailures
        let mono = cx.now.monotonicMilliseconds
        let cause: String
        let retryable: Bool
        switch failure {
        case .closed(let prefix, let message):
            cause = "the relay closed a page (\(prefix ?? "no prefix"): \(message))"
            retryable = prefix == "error" || prefix == "rate-limited" || SyncEngine.saysTooManySubscriptions(message)
        case .unanswered:
            cause = "no answer to a page within \(cx.requestDeadline) ms"
            retryable = true
        }
        var notice: String?
        var refusal: String?
        if case .closed(let prefix, _) = failure, prefix == "auth-required" {
            if !answersChallenges(cx) {
                sub.pageHold = .refused
                refusal = "\(cause), and this engine does not authenticate to it; the window stays open until the next connection"
            } else if !authentication.isAccepted {
                sub.pageHold = .authentication
                if authentication.isRefused {
                    // Our AUTH already stands refused here: nothing this connection will bring
                    // answers the page (`authenticationRefused` has passed). Said now.
                    refusal = "\(cause), and the relay refused our AUTH; it is asked again once the relay accepts one"
                } else if tries == 1 {
                    notice = "\(owner): \(cause); it is asked again once the relay accepts our AUTH"
                }
            } else if !sub.pageAuthReplayed {
                // Our AUTH was accepted before this CLOSED came (a relay that answers out of
                // order): once more, at once.
                sub.pageAuthReplayed = true
                sub.pageHold = .retryAt(mono)
            } else {
                sub.pageHold = .refused
                refusal = "\(cause) although our AUTH was accepted; the window stays open until the next connection"
            }
        } else if retryable {
            let delay = cx.retrySchedule.delayMilliseconds(attempt: tries)
            sub.pageHold = .retryAt(mono + delay)
            if tries == 1 {
                notice = "\(owner): \(cause); it is asked again whole in \(delay) ms, the wait doubling per failure in a row"
            }
            if tries == SyncEngine.refusalTries {
                let longest = cx.retrySchedule.delayMilliseconds(attempt: Int.max) / 1_000
                refusal = "\(cause), \(tries) times in a row; not synced, it is asked again every \(longest) s at most"
            }
        } else {
            sub.pageHold = .refused
            refusal = "\(cause); the window stays open until the next connection"
        }
        if let refusal, !sub.refused {
            sub.refused = true
            notice = "\(owner): window refused: \(refusal)"
        }
        subscriptions[owner] = sub
        if let notice { cx.report(.notice(relayURL: url, notice)) }
    }

    /// Pages due to be asked again after their CLOSED or deadline.
    mutating func retryClosedPages(_ cx: RelayContext, _ mono: Int64) {
        guard phase == .connected else { return }
        for id in subscriptions.keys.sorted() {
            guard let due = subscriptions[id]!.pageRetryAt, due <= mono else { continue }
            subscriptions[id]!.pageHold = nil
            advanceSync(cx, id)
        }
    }

    /// Sends the subscription's next page, or records a completed window.
    mutating func advanceSync(_ cx: RelayContext, _ id: String) {
        // A held page is asked again by what it waits for (its clock, an accepted AUTH).
        guard var sub = subscriptions[id], sub.pageHold == nil, session != nil else { return }
        defer { subscriptions[id] = sub }
        switch sub.sync.next() {
        case .idle, .awaitingEndOfStoredEvents:
            return
        case .send(let request):
            sub.pageNumber += 1
            let pageID = sub.stem + "~p\(sub.pageNumber)"
            sub.pageID = pageID
            sub.dirty = true
            connection?.pageOwner[pageID] = id
            // Stored before it is sent: a REQ the session refuses ends the page at once
            // (`requestNotSent`), and that must not be written over.
            subscriptions[id] = sub
            self.request(cx, id: pageID, filtersJSON: [request.filter.toJSON()])
            sub = subscriptions[id]!
            cx.queueIngestFlush()
        case .synced(let outcome):
            sub.completed = outcome
            sub.dirty = true
            cx.queueIngestFlush()
            if outcome.cursor < sub.connectedAt {
                // A window resumed from an earlier connection ended before this one began:
                // what reached the relay since (live events we were not there for, with any
                // created_at after that window) is the next window's, cx.now.
                sub.sync.begin(now: cx.now.unixSeconds, deepResyncInterval: cx.configuration.deepResyncIntervalSeconds)
                subscriptions[id] = sub
                advanceSync(cx, id)
                sub = subscriptions[id]!
            }
        }
    }
}
