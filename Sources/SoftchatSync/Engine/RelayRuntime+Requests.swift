import SoftchatCore
import SoftchatJSON

/// REQs share a budget per connection. Relays keep a handful of subscriptions per connection
/// (nostr-relay 32, strfry 20) and refuse past that, often with a NOTICE alone: no CLOSED, no
/// EOSE, so a refused page waited for ever and its subscription never synced. So:
/// - the live REQs of all subscriptions travel together, as few REQs as the filter bound and the
///   relay's frame allow (`~live0`, `~live1`…; each event is stored whichever filter matched it);
/// - every one-shot REQ (a page, an ahead REQ, a fetch by ids) waits in a queue for a slot, and
///   each that ends (its EOSE, a CLOSED) lets the next one go;
/// - the budget is NIP-11's `max_subscriptions` when stated, else ``defaultREQBudget``, and a
///   refusal ("too many subscriptions" as a NOTICE or a CLOSED) lowers it, for that connection
///   only, to what was open and answering. The refused REQ is among those that heard nothing yet, but so may be one whose
///   answer is on its way (relays answer out of order): each stays subscribed, so a late answer
///   still counts, and one still unheard ``refusedRetryMilliseconds`` later is sent again in
///   place, as the lowered budget makes room.
///
/// Every REQ fits the relay's frame (NIP-11's `max_message_length`, which the session enforces):
/// live REQs are packed by bytes as well as by filters, fetches by ids carry as many ids as fit,
/// and a REQ the session refuses all the same is ended visibly (`requestNotSent`, a live one
/// `liveRefused`), never left waiting for an answer that cannot come.
///
/// A REQ can also get no answer at all: a query the relay shed under load, or one refused by a
/// NOTICE that names no REQ and no limit (nostr-relay's bare "rate-limited"). So (issue 45,
/// path 3):
/// - any relay NOTICE makes every one-shot that heard nothing yet a suspect, sent again in place
///   if it stays silent, the wait doubling per resend;
/// - every one-shot has an EOSE deadline (`requestDeadlineMilliseconds` of silence, the
///   `requestAnswer` timer): past it the REQ is closed and its slot freed; a page is asked again
///   on its doubling schedule (`pageFailed`, never reported synced meanwhile), an ahead REQ under
///   a new id after the same backoff (`refusalTries` times at most), a fetch by ids gives way
///   to paging.
extension SyncEngine {
    /// REQs held open at once on a connection when the relay does not say (below the common
    /// limits of 20 and 32).
    public static let defaultREQBudget = 16
    /// How long a REQ that may have been refused waits for an answer before it is sent again
    /// (doubled per time it was).
    static let refusedRetryMilliseconds: Int64 = 2_000
    /// Failures in a row of one page (CLOSED, or no answer by the deadline) after which its
    /// window is reported refused; the attempts an ahead REQ gets.
    static let refusalTries = 5

    /// The EOSE deadline of a one-shot REQ, in milliseconds (`requestDeadlineMilliseconds`).
    var requestDeadline: Int64 { min(max(1, configuration.requestDeadlineMilliseconds), Int64.max / 4) }

    /// The schedule a page or a REQ is asked again on: the sessions' reconnect schedule
    /// (`configuration.session`'s base, doubling, maximum), without jitter: after the `n`-th
    /// failure in a row, `retrySchedule.delayMilliseconds(attempt: n)`. Only ever read while a
    /// session runs on that configuration (so it is a valid one).
    var retrySchedule: ReconnectBackoff { ReconnectBackoff(config: configuration.session) }

    /// Whether relay text says it holds too many subscriptions (nostr-relay's "too many
    /// subscriptions", nostr-rs-relay's "Subscription error: Maximum concurrent subscription
    /// count reached").
    static func saysTooManySubscriptions(_ message: String) -> Bool {
        let m = message.lowercased()
        return m.contains("too many") && (m.contains("subscription") || m.contains("req"))
            || m.contains("max_subscriptions") || m.contains("subscription limit")
            || m.contains("concurrent subscription") || m.contains("subscription count")
    }

    /// The id of a subscription's ahead REQ: `<stem>~ahead`, then `<stem>~ahead2`… for each
    /// attempt after an unanswered one.
    static func aheadID(stem: String, attempt: Int) -> String { stem + "~ahead" + (attempt > 1 ? "\(attempt)" : "") }

    /// Bytes of `,"since":9223372036854775807`: the session checks a REQ with a `since` added to
    /// every filter (what a resubscription may add), so REQs are sized with it.
    static let sinceBytes = #","since":"#.utf8.count + String(Int64.max).utf8.count

    /// The bytes filters (JSON texts) add to a REQ as the session checks it: a comma, the filter
    /// and a `since` each.
    static func filterBytes(_ filters: [String]) -> Int { filters.reduce(0) { $0 + 1 + $1.utf8.count + sinceBytes } }

    /// The bytes of REQ `id` with `filters` as the session checks it against the relay's frame:
    /// `["REQ","<id>",<filter>,…]`, each filter with a `since`.
    static func requestBytes(id: String, filters: [String]) -> Int {
        #"["REQ",]"#.utf8.count + JSONValue.string(id).jsonText.utf8.count + filterBytes(filters)
    }
}

extension RelayRuntime {
    /// Subscriptions the relay holds for us now: live REQs, one-shots sent, NIP-77 sessions.
    func requestsInUse(_ cx: RelayContext) -> Int { requests.inUse(negotiations: neg.openCount) }

    /// Sends one-shot REQ `id` when a slot is free, else queues it (in order).
    mutating func request(_ cx: RelayContext, id: String, filtersJSON: [String]) {
        requests.enqueue(QueuedRequest(id: id, filtersJSON: filtersJSON))
        sendQueuedRequests(cx)
    }

    /// Sends queued one-shots while the budget has room.
    mutating func sendQueuedRequests(_ cx: RelayContext) {
        guard phase == .connected, let session = session else { return }
        let mono = cx.now.monotonicMilliseconds
        while let next = requests.nextToSend(negotiations: neg.openCount, now: mono) {
            do {
                try session.subscribe(id: next.id, filtersJSON: next.filtersJSON)
                requests.opened(next, deadline: mono + cx.requestDeadline)
            } catch {
                requestNotSent(cx, next.id, error)
            }
        }
    }

    /// The session refused to send one-shot `id` (over the relay's frame, or past one of its
    /// own bounds): nothing will answer it, so nothing waits for it. A fetch by ids gives its
    /// reconciliation up (the window is paged); a page leaves its window open on this connection
    /// (never reported synced; the next connection asks again); an ahead REQ is dropped.
    mutating func requestNotSent(_ cx: RelayContext, _ id: String, _ error: SoftchatError) {
        cx.report(.notice(relayURL: url, "cannot send REQ \(id): \(error.message)"))
        if let owner = neg.fetchOwner[id] {
            fallBack(cx, owner, reason: "fetch not sent: \(error.message)")
        } else if let owner = connection?.pageOwner.removeValue(forKey: id) {
            subscriptions[owner]?.pageID = nil
            subscriptions[owner]?.sync.restarted()
            subscriptions[owner]?.pageHold = .refused
            subscriptions[owner]?.refused = true
            cx.report(.notice(relayURL: url, "\(owner): a page cannot be sent; its window stays open until the next connection"))
        } else {
            connection?.aheadREQs.removeValue(forKey: id)
        }
    }

    /// One-shot `id` ended (EOSE, or a CLOSED the session will not retry): its slot is free.
    mutating func requestEnded(_ cx: RelayContext, _ id: String) {
        if requests.ended(id) { sendQueuedRequests(cx) }
    }

    /// Something came for `id` (an event or its EOSE): the relay took it, and its deadline moves
    /// on (an answer still coming is not given up).
    mutating func requestHeard(_ cx: RelayContext, _ id: String) {
        requests.heard(id, deadline: cx.now.monotonicMilliseconds + cx.requestDeadline)
    }

    /// The relay refused a REQ for its subscription limit (see `RequestBudget.refused`).
    mutating func requestsRefused(_ cx: RelayContext) {
        if let lowered = requests.refused(now: cx.now.monotonicMilliseconds, negotiations: neg.openCount) {
            cx.report(.notice(relayURL: url, "the relay holds fewer subscriptions than asked: at most \(lowered) REQs open from cx.now on"))
        }
    }

    /// Sends again, in place, each suspect still unheard after `refusedRetryMilliseconds`, as
    /// many as the budget holds beside the REQs that answer; the rest wait another round.
    mutating func retrySuspects(_ cx: RelayContext, _ mono: Int64) {
        guard phase == .connected, let session = session else { return }
        let due = requests.dueSuspects(now: mono, wait: SyncEngine.refusedRetryMilliseconds, negotiations: neg.openCount)
        for (id, filters) in due {
            do {
                try session.subscribe(id: id, filtersJSON: filters)
            } catch {
                cx.report(.notice(relayURL: url, "cannot send REQ \(id) again: \(error.message)"))
            }
        }
    }

    /// One-shots silent past their deadline: each is closed and its slot freed; a page is asked
    /// again on its doubling schedule (`pageFailed`), an ahead REQ under a new id after the same
    /// backoff, a fetch by ids gives way to paging.
    mutating func requestDeadlines(_ cx: RelayContext, _ mono: Int64) {
        guard phase == .connected else { return }
        for id in requests.overdue(now: mono) {
            guard let request = requests.open[id] else { continue }
            if let owner = connection?.pageOwner.removeValue(forKey: id) {
                pageFailed(cx, id, owner: owner, .unanswered)
                continue
            }
            try? session?.unsubscribe(id: id)
            _ = requests.ended(id)
            if let owner = connection?.aheadREQs.removeValue(forKey: id) {
                aheadUnanswered(cx, owner: owner, request)
            } else if let owner = neg.fetchOwner[id] {
                cx.report(
                    .notice(
                        relayURL: url,
                        "\(owner): no answer to fetch \(id) within \(cx.requestDeadline) ms: the window is paged instead"))
                fallBack(cx, owner, reason: "fetch unanswered")
            }
        }
        sendQueuedRequests(cx)
    }

    /// Subscription `owner`'s ahead REQ `request` went unanswered past its deadline: asked again
    /// under a new id (a late answer to the old one is not taken for it) after the backoff; given
    /// up on this connection after `refusalTries` asks (what it would bring is the next window's).
    mutating func aheadUnanswered(_ cx: RelayContext, owner: String, _ request: OpenRequest) {
        guard let sub = subscriptions[owner] else { return }
        guard request.attempt < SyncEngine.refusalTries else {
            cx.report(
                .notice(
                    relayURL: url,
                    "\(sub.id): no answer to its REQ for events dated ahead, \(request.attempt) times: not asked again on this connection"))
            return
        }
        let next = SyncEngine.aheadID(stem: sub.stem, attempt: request.attempt + 1)
        connection?.aheadREQs[next] = owner
        requests.enqueue(
            QueuedRequest(
                id: next, filtersJSON: request.filtersJSON, attempt: request.attempt + 1,
                notBefore: cx.now.monotonicMilliseconds + cx.retrySchedule.delayMilliseconds(attempt: request.attempt)))
    }

    /// The live REQs: every subscription's live filters, packed into as few REQs as the filter
    /// bound (relay.wire's, and the relay's NIP-11 `max_filters`) and the relay's frame allow; a
    /// subscription's filters never split. One the session cannot send (a subscription whose
    /// filters alone are over the frame) is refused for its subscriptions (`liveRefused`).
    mutating func subscribeLive(_ cx: RelayContext) {
        guard let session = session else { return }
        let bound = min(RelayWireContract.maxFilters.value, max(1, limits?.maxFilters ?? Int.max))
        let frame = frameBytes(cx)
        var chunks: [(ids: [String], filters: [String], bytes: Int)] = []
        for id in subscriptions.keys.sorted() {
            let live = subscriptions[id]!.liveFilters()
            let bytes = SyncEngine.filterBytes(live)
            if let last = chunks.last, last.filters.count + live.count <= bound,
                SyncEngine.requestBytes(id: "~live\(chunks.count - 1)", filters: []) + last.bytes + bytes <= frame
            {
                chunks[chunks.count - 1].ids.append(id)
                chunks[chunks.count - 1].filters += live
                chunks[chunks.count - 1].bytes += bytes
            } else {
                chunks.append(([id], live, bytes))
            }
        }
        for (k, chunk) in chunks.enumerated() {
            let liveID = "~live\(k)"
            do {
                try session.subscribe(id: liveID, filtersJSON: chunk.filters)
                requests.liveChunks[liveID] = chunk.ids
                for id in chunk.ids { subscriptions[id]!.live = .sent }
            } catch {
                liveRefused(cx, chunk.ids, reason: "not sent: \(error.message)")
            }
        }
    }

    /// The live REQ of subscriptions `ids` will not run on this connection (the relay closed it
    /// for good, or the session could not send it): they are marked so, NIP-77 stops waiting for
    /// its EOSE (their reconciliations open cx.now), and their `synced` reports say so.
    mutating func liveRefused(_ cx: RelayContext, _ ids: [String], reason: String) {
        let reason = RelayText.forReport(reason)
        for id in ids { subscriptions[id]?.live = .refused(reason) }
        cx.report(
            .notice(
                relayURL: url,
                "live feed refused for \(ids.joined(separator: ", ")) (\(reason)): synced by NIP-77 or REQ pages, "
                    + "nothing reaches them live on this connection"))
        openNegentropy(cx)
    }

    // MARK: Frame sizes

    /// The largest frame relay `r` takes: its session's `frameLimit`, which the session enforces
    /// (relay.wire's bound, lowered to NIP-11's `max_message_length` when the session started
    /// with one it believes, see `startSession`). No session, nothing is sent: relay.wire's bound.
    func frameBytes(_ cx: RelayContext) -> Int { session?.frameLimit ?? RelayWireContract.maxFrameBytes.value }

    /// The most ids one fetch by ids of the subscription with REQ id stem `stem` carries so that
    /// its REQ fits relay `r`'s frame: `{"ids":[…],"limit":n}` sized with the widest fetch number
    /// and limit, each id adding 67 bytes (64 hex digits, quotes, a comma). At least one: NIP-77
    /// runs only on frames of 8 KiB and more, where hundreds fit (a fetch refused all the same
    /// gives its reconciliation up, `requestNotSent`).
    func fetchBatchFitting(_ cx: RelayContext, stem: String) -> Int {
        let widest = String(Int32.max)
        let empty = SyncEngine.requestBytes(id: stem + "~f" + widest, filters: [#"{"ids":[],"limit":"# + widest + "}"])
        return max(1, (frameBytes(cx) - empty + 1) / 67)
    }

    /// Withdraws every REQ of the connection (it was lost).
    mutating func withdrawRequests(_ cx: RelayContext) {
        for id in requests.withdrawAll() { try? session?.unsubscribe(id: id) }
    }
}
