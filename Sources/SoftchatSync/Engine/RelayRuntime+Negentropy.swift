import SoftchatCore
import SoftchatJSON

/// NIP-77: on each connection, each subscription is reconciled with the relay by negentropy
/// (`NegentropySync`) when the relay speaks it, and what the account lacks is fetched by id;
/// the subscription then counts as synced up to the connection's start, whatever the age of
/// what was missing. A relay that refuses NEG-OPEN (a NEG-ERR other than "too big", closed or
/// auth-required; a NOTICE that reads as "unknown message") is recorded in the account as not
/// speaking it (asked again after `negentropyRecheckSeconds`, a week); one that stays silent
/// past `negentropyDeadlineMilliseconds` is recorded too, but asked again after
/// `negentropySilenceRecheckSeconds` (an hour); a connection lost before the answer records
/// nothing (after `NegentropyMachine.silentConnectionsBeforePaging` such connections this
/// process stops asking). Its subscriptions sync by REQ paging
/// (`SubscriptionSync`), as they do when the account holds nothing for a subscription yet
/// (paging is cheaper than listing every id) or the relay's frames are too small.
extension SyncEngine {
    /// True for text whose verb starts with `NEG-` (read before the session, which has none).
    static func isNegentropyFrame(_ text: String) -> Bool {
        var bytes = Substring(text).utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        guard bytes.first == UInt8(ascii: "[") else { return false }
        bytes = bytes.dropFirst().drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        return bytes.starts(with: "\"NEG-".utf8)
    }

    /// What a NEG-ERR means for the reconciliation it ends.
    enum NegentropyRefusal: Equatable {
        /// `blocked:` or `rate-limited:` with "too big", "too many" or "too large" (NIP-77's
        /// "blocked: this query is too big", rust-nostr's "rate-limited: too many negentropy
        /// items"): split the query.
        case tooBig
        /// `closed:`, another `rate-limited:`, `auth-required:` (the relay speaks NIP-77 and
        /// wants NIP-42 first), or a subscription limit in either prefix ("blocked: too many open
        /// subscriptions"): this reconciliation ends, the relay speaks NIP-77.
        case ended
        /// Anything else: before any NEG-MSG, taken as "not spoken here".
        case refused
    }

    static func negentropyRefusal(_ message: RelayMessage) -> NegentropyRefusal {
        let text = message.text.lowercased()
        switch message.prefix {
        case "blocked", "rate-limited":
            // "too many open subscriptions" is the relay's slot limit, not the query's size:
            // splitting would only multiply the refusals.
            if saysTooManySubscriptions(text) { return .ended }
            if text.contains("too big") || text.contains("too many") || text.contains("too large") { return .tooBig }
            return message.prefix == "rate-limited" ? .ended : .refused
        case "closed", "auth-required":
            return .ended
        default:
            return .refused
        }
    }

    static func readsAsUnknownMessage(_ text: String) -> Bool {
        let t = text.lowercased()
        return ["neg", "unknown", "unsupported", "not supported", "unrecognized", "invalid", "bad msg", "command", "cmd", "verb"]
            .contains { t.contains($0) }
    }
}

extension RelayRuntime {
    /// True when subscription `id` on relay `r` should try negentropy on this connection.
    func wantsNegentropy(_ cx: RelayContext) -> Bool {
        guard cx.configuration.negentropy, limits?.supportsNegentropy != false, negentropyFrameLimit(cx) != nil else { return false }
        return neg.worthAsking(
            now: cx.now.unixSeconds, recheckSeconds: cx.configuration.negentropyRecheckSeconds,
            silenceRecheckSeconds: cx.configuration.negentropySilenceRecheckSeconds)
    }

    /// The largest binary negentropy message that fits the relay's frames as hex (the session's
    /// frame, `frameBytes`, less 256 bytes for the NEG-MSG around it, halved), or nil when that is
    /// below the protocol's 4,096-byte floor.
    func negentropyFrameLimit(_ cx: RelayContext) -> Int? {
        let limit = (frameBytes(cx) - 256) / 2
        return limit >= 4096 ? limit : nil
    }

    /// Asks the account for the subscription's items; the reconciliation starts with them.
    mutating func beginNegentropy(_ cx: RelayContext, _ id: String) {
        guard let sub = subscriptions[id] else { return }
        subscriptions[id]!.awaitingItems = true
        cx.push(
            .account(
                .reconciliationItems(relayURL: url, subscriptionID: id, filtersJSON: sub.filters.map { $0.withoutLimit().toJSON() }),
                .items(relay: index, subscription: id, connection: neg.connection)))
    }

    mutating func itemsLoaded(_ cx: RelayContext, _ id: String, connection: Int, items: [[NegentropyItem]]) {
        guard connection == neg.connection, phase == .connected, var sub = subscriptions[id], sub.awaitingItems else {
            return
        }
        sub.awaitingItems = false
        subscriptions[id] = sub
        guard items.count == sub.filters.count, items.contains(where: { !$0.isEmpty }), let limit = negentropyFrameLimit(cx) else {
            // Nothing held yet: paging brings the whole window for less than an id list would.
            advanceSync(cx, id)
            return
        }
        // A fetch by ids holds a page's worth at most, and no more than the relay's frame carries.
        let batch = min(sub.sync.paging.pageSize, fetchBatchFitting(cx, stem: sub.stem))
        var reconciliation = NegentropySync(filters: sub.filters, until: sub.connectedAt, fetchBatch: batch, frameSizeLimit: limit)
        reconciliation.start(items: items)
        subscriptions[id]!.negentropy = reconciliation
        openNegentropy(cx)
    }

    /// Opens waiting reconciliation parts while the connection has room: subscriptions in
    /// order, at most `NegentropyMachine.maxOpen` at once, or one after a relay found one too big;
    /// each once its live REQ is registered, or refused (`LiveFeed.settled`: never waiting on a
    /// REQ that will not answer).
    mutating func openNegentropy(_ cx: RelayContext) {
        for id in subscriptions.keys.sorted() where subscriptions[id]!.live.settled {
            while neg.room > 0, var reconciliation = subscriptions[id]?.negentropy,
                let output = reconciliation.nextOpen()
            {
                subscriptions[id]!.negentropy = reconciliation
                sendNegentropy(cx, id, output)
            }
        }
    }

    /// The NEG subscription id of part `part` of subscription `id`'s reconciliation on relay `r`.
    func negentropyID(_ cx: RelayContext, _ id: String, _ part: Int) -> String {
        (subscriptions[id]?.stem ?? String(id.prefix(40))) + "~n\(part)"
    }

    mutating func sendNegentropy(_ cx: RelayContext, _ id: String, _ output: NegentropySync.Output) {
        switch output {
        case .open(let i, let filter, let message):
            let negID = negentropyID(cx, id, i)
            neg.opened(
                negID, subscription: id, part: i, frame: ClientRelayFrame.negOpen(subscriptionID: negID, filter: filter, message: message).toJSON(),
                now: cx.now.monotonicMilliseconds)
        case .message(let i, let message):
            let negID = negentropyID(cx, id, i)
            neg.messaged(
                negID, frame: ClientRelayFrame.negMessage(subscriptionID: negID, message: message).toJSON(), now: cx.now.monotonicMilliseconds)
        case .close(let i):
            let negID = negentropyID(cx, id, i)
            neg.closed(negID, frame: ClientRelayFrame.negClose(subscriptionID: negID).toJSON())
        }
    }

    /// A NEG-MSG or NEG-ERR from relay `r`.
    mutating func receivedNegentropy(_ cx: RelayContext, _ text: String) {
        // A reconciliation that ended (NEG-ERR, NEG-CLOSE sent, fallen back) frees a REQ slot
        // for what waits in the queue (found by the quirks model: with a budget of 2, fetches
        // queued behind NEG-ERRed reconciliations waited for ever).
        defer { sendQueuedRequests(cx) }
        let frame: RelayResponseFrame
        do { frame = try parseRelayResponseFrame(text) } catch {
            cx.report(.notice(relayURL: url, "relay sent an invalid frame: \(error.code.rawValue): \(error.message)"))
            return
        }
        switch frame {
        case .negMessage(let negID, let message):
            guard let (id, i) = neg.answered(negID) else { return }
            heardNegentropy(cx, reason: "answered NEG-OPEN")
            guard var reconciliation = subscriptions[id]?.negentropy else { return }
            do {
                let output = try reconciliation.received(part: i, message: message)
                subscriptions[id]!.negentropy = reconciliation
                if let output { sendNegentropy(cx, id, output) }
            } catch {
                cx.report(.notice(relayURL: url, "negentropy with \(id) ended: \(error.code.rawValue): \(error.message)"))
                fallBack(cx, id, reason: error.message)
                return
            }
            openNegentropy(cx)
            fetchMissing(cx, id)
        case .negError(let negID, let message):
            guard let (id, i) = neg.ended(negID) else { return }
            cx.report(.notice(relayURL: url, "NEG-ERR for \(id): \(message.text)"))
            switch SyncEngine.negentropyRefusal(message) {
            case .tooBig:
                // The relay speaks NIP-77; the query holds more items than it takes.
                heardNegentropy(cx, reason: "NEG-ERR \(message.text)")
                neg.tooBig()
                guard var reconciliation = subscriptions[id]?.negentropy, reconciliation.split(part: i) else {
                    fallBack(cx, id, reason: message.text)
                    return
                }
                subscriptions[id]!.negentropy = reconciliation
                openNegentropy(cx)
            case .ended:
                fallBack(cx, id, reason: message.text)
            case .refused:
                if neg.heard { fallBack(cx, id, reason: message.text) } else { notSupported(cx, reason: "NEG-ERR \(message.text)") }
            }
        default:
            break
        }
    }

    /// The first NIP-77 answer on this connection: the relay speaks it.
    mutating func heardNegentropy(_ cx: RelayContext, reason: String) {
        guard neg.heardAnswer() else { return }
        if neg.record?.supported != true { recordSupport(cx, supported: true, reason: reason) }
    }

    /// Sends the next fetch of missing ids (one at a time), and completes the sync when nothing
    /// is left. Ids the relay sent over our frame bound before are not asked again; they, and
    /// the ids the relay did not send when asked, go to the subscription's next `synced` cx.report
    /// as skipped (issue 45, path 10: they left no trace, and each connection fetched the
    /// oversized ones again).
    mutating func fetchMissing(_ cx: RelayContext, _ id: String) {
        guard var reconciliation = subscriptions[id]?.negentropy, session != nil else { return }
        let oversized = oversizedIDs
        if let ids = reconciliation.nextFetch(skipping: { oversized.contains($0) }) {
            let fetchID = (subscriptions[id]?.stem ?? String(id.prefix(40))) + "~f\(reconciliation.fetches)"
            var filter = JSONObject()
            filter.append("ids", .array(ids.map(JSONValue.string)))
            filter.append("limit", .integer(Int64(ids.count)))
            // Stored before it is sent: a fetch the session refuses gives the reconciliation up
            // at once (`requestNotSent`), and that must not be written over.
            subscriptions[id]!.negentropy = reconciliation
            // Through the REQ budget: a fetch waits for a slot like a page.
            neg.fetchOwner[fetchID] = id
            request(cx, id: fetchID, filtersJSON: [JSONValue.object(filter).jsonText])
            return
        }
        subscriptions[id]!.negentropy = reconciliation
        guard reconciliation.isComplete, var sub = subscriptions[id] else { return }
        // Everything the relay held for the filters at the connection's start is committed
        // with (or before) this state: the window is synced, the cursor moves to that start.
        let until = reconciliation.until
        let deepening = sub.sync.deepening
        sub.sync = SubscriptionSync(filters: sub.filters, cursor: until, horizon: sub.sync.horizon, paging: sub.sync.paging)
        sub.sync.deepening = deepening
        sub.completed = SyncOutcome(cursor: until, incompleteSeconds: [], requests: reconciliation.fetches, method: .negentropy)
        for skippedID in reconciliation.skippedIDs { SkippedEvents.record(.oversized, eventID: skippedID, in: &sub.skipped) }
        for unservedID in reconciliation.unservedIDs { SkippedEvents.record(.notServed, eventID: unservedID, in: &sub.skipped) }
        sub.negentropy = nil
        sub.dirty = true
        subscriptions[id] = sub
        cx.queueIngestFlush()
    }

    /// A fetch's EOSE.
    mutating func fetchEnded(_ cx: RelayContext, _ fetchID: String) -> Bool {
        guard let id = neg.fetchOwner.removeValue(forKey: fetchID) else { return false }
        try? session?.unsubscribe(id: fetchID)
        subscriptions[id]?.negentropy?.fetchEnded()
        fetchMissing(cx, id)
        return true
    }

    /// Gives up negentropy for subscription `id` on this connection: its window is paged.
    mutating func fallBack(_ cx: RelayContext, _ id: String, reason: String) {
        for fetchID in neg.abandon(id) {
            try? session?.unsubscribe(id: fetchID)
            requestEnded(cx, fetchID)
        }
        defer { sendQueuedRequests(cx) }
        guard subscriptions[id] != nil else { return }
        let wasRunning = !subscriptions[id]!.atRest
        subscriptions[id]!.negentropy = nil
        subscriptions[id]!.awaitingItems = false
        if wasRunning && phase == .connected {
            advanceSync(cx, id)
            openNegentropy(cx)
        }
    }

    /// The relay does not speak NIP-77: remember it, and page every subscription instead.
    mutating func notSupported(_ cx: RelayContext, reason: String) {
        cx.report(.notice(relayURL: url, "no NIP-77 negentropy here (\(reason)): syncing by REQ pages"))
        recordSupport(cx, supported: false, reason: reason)
        neg.stopAsking(silent: false)
        for id in subscriptions.keys.sorted() { fallBack(cx, id, reason: reason) }
    }

    mutating func recordSupport(_ cx: RelayContext, supported: Bool, reason: String) {
        let record = NegentropySupportRecord(relayURL: url, supported: supported, checkedAt: cx.now.unixSeconds, reason: reason)
        neg.record = record
        cx.push(.account(.recordNegentropySupport(record), .recordNegentropy))
    }

    /// A NOTICE while a NEG-OPEN waits for its first answer, that reads as "I do not know that
    /// message" ("unknown command", "invalid: bad msg", "NEG-OPEN unsupported"): the relay
    /// does not speak NIP-77. Any other NOTICE (a rate limit, chatter) is not an answer to it;
    /// the deadline covers a relay that never answers.
    mutating func noticeDuringNegentropy(_ cx: RelayContext, _ text: String) {
        guard !neg.heard, !neg.sentAt.isEmpty, SyncEngine.readsAsUnknownMessage(text) else { return }
        notSupported(cx, reason: "NOTICE \(text)")
    }

    /// Unanswered negentropy past the deadline (the `negentropyAnswer` timer): each late NEG
    /// subscription is given up, so no wait is left past its deadline.
    mutating func negentropyDeadlines(_ cx: RelayContext, _ mono: Int64) {
        let late = neg.late(now: mono, deadline: cx.configuration.negentropyDeadlineMilliseconds)
        guard !late.isEmpty else { return }
        // A late wait no NEG subscription owns (nothing to give up) is forgotten: it would keep
        // the timer due for ever.
        defer { for negID in late where neg.owners[negID] == nil { neg.forgetWait(negID) } }
        if !neg.heard {
            // Silence is weak evidence (a busy relay, an answer lost; nostr-relay ignores the
            // frames): this connection pages, and it is remembered for
            // `negentropySilenceRecheckSeconds` (an hour), not the week a refusal is.
            let reason = "\(NegentropyMachine.silenceReason) within \(cx.configuration.negentropyDeadlineMilliseconds) ms"
            cx.report(.notice(relayURL: url, "\(reason): syncing by REQ pages"))
            neg.stopAsking(silent: true)
            recordSupport(cx, supported: false, reason: reason)
            for id in subscriptions.keys.sorted() { fallBack(cx, id, reason: reason) }
            return
        }
        for negID in late {
            guard let owner = neg.owners[negID] else { continue }
            cx.report(
                .notice(
                    relayURL: url,
                    "negentropy for \(owner.subscription) unanswered for \(cx.configuration.negentropyDeadlineMilliseconds) ms: paging instead"))
            fallBack(cx, owner.subscription, reason: "unanswered")
        }
    }

    /// Writes the queued NEG frames (after the authentication window). They bypass the session,
    /// so their write completions are not the session's to confirm (`negWrites`).
    mutating func drainNegentropy(_ cx: RelayContext) {
        for (token, text) in cx.withTokens({ neg.takeOutbox(nextToken: &$0) }) {
            cx.push(.action(.write(relay: index, text: text, token: token)))
        }
    }

    /// The connection ended: every reconciliation and fetch on it is gone (what was fetched is
    /// committed; the next connection reconciles again).
    mutating func negentropyLost(_ cx: RelayContext) {
        // Lost while the first NEG-OPEN waited: as silent as an unanswered one (see
        // `negentropyDeadlines`), and never a durable record.
        for id in neg.connectionLost() { try? session?.unsubscribe(id: id) }
        for id in subscriptions.keys {
            subscriptions[id]!.negentropy = nil
            subscriptions[id]!.awaitingItems = false
        }
    }
}
