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
    /// True when subscription `id` on relay `r` should try negentropy on this connection.
    func wantsNegentropy(_ r: Int) -> Bool {
        guard configuration.negentropy, relays[r].limits?.supportsNegentropy != false, negentropyFrameLimit(r) != nil else { return false }
        return relays[r].neg.worthAsking(
            now: now.unixSeconds, recheckSeconds: configuration.negentropyRecheckSeconds,
            silenceRecheckSeconds: configuration.negentropySilenceRecheckSeconds)
    }

    /// The largest binary negentropy message that fits the relay's frames as hex (the session's
    /// frame, `frameBytes`, less 256 bytes for the NEG-MSG around it, halved), or nil when that is
    /// below the protocol's 4,096-byte floor.
    func negentropyFrameLimit(_ r: Int) -> Int? {
        let limit = (frameBytes(r) - 256) / 2
        return limit >= 4096 ? limit : nil
    }

    /// Asks the account for the subscription's items; the reconciliation starts with them.
    func beginNegentropy(_ r: Int, _ id: String) {
        guard let sub = relays[r].subscriptions[id] else { return }
        relays[r].subscriptions[id]!.awaitingItems = true
        push(
            .account(
                .reconciliationItems(relayURL: relays[r].url, subscriptionID: id, filtersJSON: sub.filters.map { $0.withoutLimit().toJSON() }),
                .items(relay: r, subscription: id, connection: relays[r].neg.connection)))
    }

    func itemsLoaded(_ r: Int, _ id: String, connection: Int, items: [[NegentropyItem]]) {
        guard connection == relays[r].neg.connection, relays[r].phase == .connected, var sub = relays[r].subscriptions[id], sub.awaitingItems else {
            return
        }
        sub.awaitingItems = false
        relays[r].subscriptions[id] = sub
        guard items.count == sub.filters.count, items.contains(where: { !$0.isEmpty }), let limit = negentropyFrameLimit(r) else {
            // Nothing held yet: paging brings the whole window for less than an id list would.
            advanceSync(r, id)
            return
        }
        // A fetch by ids holds a page's worth at most, and no more than the relay's frame carries.
        let batch = min(sub.sync.paging.pageSize, fetchBatchFitting(r, stem: sub.stem))
        var reconciliation = NegentropySync(filters: sub.filters, until: sub.connectedAt, fetchBatch: batch, frameSizeLimit: limit)
        reconciliation.start(items: items)
        relays[r].subscriptions[id]!.negentropy = reconciliation
        openNegentropy(r)
    }

    /// Opens waiting reconciliation parts while the connection has room: subscriptions in
    /// order, at most `NegentropyMachine.maxOpen` at once, or one after a relay found one too big;
    /// each once its live REQ is registered, or refused (`LiveFeed.settled`: never waiting on a
    /// REQ that will not answer).
    func openNegentropy(_ r: Int) {
        for id in relays[r].subscriptions.keys.sorted() where relays[r].subscriptions[id]!.live.settled {
            while relays[r].neg.room > 0, var reconciliation = relays[r].subscriptions[id]?.negentropy,
                let output = reconciliation.nextOpen()
            {
                relays[r].subscriptions[id]!.negentropy = reconciliation
                sendNegentropy(r, id, output)
            }
        }
    }

    /// The NEG subscription id of part `part` of subscription `id`'s reconciliation on relay `r`.
    func negentropyID(_ r: Int, _ id: String, _ part: Int) -> String { (relays[r].subscriptions[id]?.stem ?? String(id.prefix(40))) + "~n\(part)" }

    func sendNegentropy(_ r: Int, _ id: String, _ output: NegentropySync.Output) {
        switch output {
        case .open(let i, let filter, let message):
            let negID = negentropyID(r, id, i)
            relays[r].neg.opened(
                negID, subscription: id, part: i, frame: ClientRelayFrame.negOpen(subscriptionID: negID, filter: filter, message: message).toJSON(),
                now: now.monotonicMilliseconds)
        case .message(let i, let message):
            let negID = negentropyID(r, id, i)
            relays[r].neg.messaged(
                negID, frame: ClientRelayFrame.negMessage(subscriptionID: negID, message: message).toJSON(), now: now.monotonicMilliseconds)
        case .close(let i):
            let negID = negentropyID(r, id, i)
            relays[r].neg.closed(negID, frame: ClientRelayFrame.negClose(subscriptionID: negID).toJSON())
        }
    }

    /// True for text whose verb starts with `NEG-` (read before the session, which has none).
    static func isNegentropyFrame(_ text: String) -> Bool {
        var bytes = Substring(text).utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        guard bytes.first == UInt8(ascii: "[") else { return false }
        bytes = bytes.dropFirst().drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        return bytes.starts(with: "\"NEG-".utf8)
    }

    /// A NEG-MSG or NEG-ERR from relay `r`.
    func receivedNegentropy(_ r: Int, _ text: String) {
        // A reconciliation that ended (NEG-ERR, NEG-CLOSE sent, fallen back) frees a REQ slot
        // for what waits in the queue (found by the quirks model: with a budget of 2, fetches
        // queued behind NEG-ERRed reconciliations waited for ever).
        defer { sendQueuedRequests(r) }
        let frame: RelayResponseFrame
        do { frame = try parseRelayResponseFrame(text) } catch {
            report(.notice(relayURL: relays[r].url, "relay sent an invalid frame: \(error.code.rawValue): \(error.message)"))
            return
        }
        switch frame {
        case .negMessage(let negID, let message):
            guard let (id, i) = relays[r].neg.answered(negID) else { return }
            heardNegentropy(r, reason: "answered NEG-OPEN")
            guard var reconciliation = relays[r].subscriptions[id]?.negentropy else { return }
            do {
                let output = try reconciliation.received(part: i, message: message)
                relays[r].subscriptions[id]!.negentropy = reconciliation
                if let output { sendNegentropy(r, id, output) }
            } catch {
                report(.notice(relayURL: relays[r].url, "negentropy with \(id) ended: \(error.code.rawValue): \(error.message)"))
                fallBack(r, id, reason: error.message)
                return
            }
            openNegentropy(r)
            fetchMissing(r, id)
        case .negError(let negID, let message):
            guard let (id, i) = relays[r].neg.ended(negID) else { return }
            report(.notice(relayURL: relays[r].url, "NEG-ERR for \(id): \(message.text)"))
            switch Self.negentropyRefusal(message) {
            case .tooBig:
                // The relay speaks NIP-77; the query holds more items than it takes.
                heardNegentropy(r, reason: "NEG-ERR \(message.text)")
                relays[r].neg.tooBig()
                guard var reconciliation = relays[r].subscriptions[id]?.negentropy, reconciliation.split(part: i) else {
                    fallBack(r, id, reason: message.text)
                    return
                }
                relays[r].subscriptions[id]!.negentropy = reconciliation
                openNegentropy(r)
            case .ended:
                fallBack(r, id, reason: message.text)
            case .refused:
                if relays[r].neg.heard { fallBack(r, id, reason: message.text) } else { notSupported(r, reason: "NEG-ERR \(message.text)") }
            }
        default:
            break
        }
    }

    /// The first NIP-77 answer on this connection: the relay speaks it.
    func heardNegentropy(_ r: Int, reason: String) {
        guard relays[r].neg.heardAnswer() else { return }
        if relays[r].neg.record?.supported != true { recordSupport(r, supported: true, reason: reason) }
    }

    /// What a NEG-ERR means for the reconciliation it ends.
    enum NegentropyRefusal: Equatable {
        /// `blocked:` or `rate-limited:` with "too big", "too many" or "too large" (NIP-77's
        /// "blocked: this query is too big", rust-nostr's "rate-limited: too many negentropy
        /// items"): split the query.
        case tooBig
        /// `closed:`, another `rate-limited:`, or `auth-required:` (the relay speaks NIP-77 and
        /// wants NIP-42 first): this reconciliation ends, the relay speaks NIP-77.
        case ended
        /// Anything else: before any NEG-MSG, taken as "not spoken here".
        case refused
    }

    static func negentropyRefusal(_ message: RelayMessage) -> NegentropyRefusal {
        let text = message.text.lowercased()
        switch message.prefix {
        case "blocked", "rate-limited":
            if text.contains("too big") || text.contains("too many") || text.contains("too large") { return .tooBig }
            return message.prefix == "rate-limited" ? .ended : .refused
        case "closed", "auth-required":
            return .ended
        default:
            return .refused
        }
    }

    /// Sends the next fetch of missing ids (one at a time), and completes the sync when nothing
    /// is left. Ids the relay sent over our frame bound before are not asked again; they, and
    /// the ids the relay did not send when asked, go to the subscription's next `synced` report
    /// as skipped (issue 45, path 10: they left no trace, and each connection fetched the
    /// oversized ones again).
    func fetchMissing(_ r: Int, _ id: String) {
        guard var reconciliation = relays[r].subscriptions[id]?.negentropy, relays[r].session != nil else { return }
        let oversized = relays[r].oversizedIDs
        if let ids = reconciliation.nextFetch(skipping: { oversized.contains($0) }) {
            let fetchID = (relays[r].subscriptions[id]?.stem ?? String(id.prefix(40))) + "~f\(reconciliation.fetches)"
            var filter = JSONObject()
            filter.append("ids", .array(ids.map(JSONValue.string)))
            filter.append("limit", .integer(Int64(ids.count)))
            // Stored before it is sent: a fetch the session refuses gives the reconciliation up
            // at once (`requestNotSent`), and that must not be written over.
            relays[r].subscriptions[id]!.negentropy = reconciliation
            // Through the REQ budget: a fetch waits for a slot like a page.
            relays[r].neg.fetchOwner[fetchID] = id
            request(r, id: fetchID, filtersJSON: [JSONValue.object(filter).jsonText])
            return
        }
        relays[r].subscriptions[id]!.negentropy = reconciliation
        guard reconciliation.isComplete, var sub = relays[r].subscriptions[id] else { return }
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
        relays[r].subscriptions[id] = sub
        queueIngestFlush()
    }

    /// A fetch's EOSE.
    func fetchEnded(_ r: Int, _ fetchID: String) -> Bool {
        guard let id = relays[r].neg.fetchOwner.removeValue(forKey: fetchID) else { return false }
        try? relays[r].session?.unsubscribe(id: fetchID)
        relays[r].subscriptions[id]?.negentropy?.fetchEnded()
        fetchMissing(r, id)
        return true
    }

    /// Gives up negentropy for subscription `id` on this connection: its window is paged.
    func fallBack(_ r: Int, _ id: String, reason: String) {
        for fetchID in relays[r].neg.abandon(id) {
            try? relays[r].session?.unsubscribe(id: fetchID)
            requestEnded(r, fetchID)
        }
        defer { sendQueuedRequests(r) }
        guard relays[r].subscriptions[id] != nil else { return }
        let wasRunning = !relays[r].subscriptions[id]!.atRest
        relays[r].subscriptions[id]!.negentropy = nil
        relays[r].subscriptions[id]!.awaitingItems = false
        if wasRunning && relays[r].phase == .connected {
            advanceSync(r, id)
            openNegentropy(r)
        }
    }

    /// The relay does not speak NIP-77: remember it, and page every subscription instead.
    func notSupported(_ r: Int, reason: String) {
        report(.notice(relayURL: relays[r].url, "no NIP-77 negentropy here (\(reason)): syncing by REQ pages"))
        recordSupport(r, supported: false, reason: reason)
        relays[r].neg.stopAsking(silent: false)
        for id in relays[r].subscriptions.keys.sorted() { fallBack(r, id, reason: reason) }
    }

    func recordSupport(_ r: Int, supported: Bool, reason: String) {
        let record = NegentropySupportRecord(relayURL: relays[r].url, supported: supported, checkedAt: now.unixSeconds, reason: reason)
        relays[r].neg.record = record
        push(.account(.recordNegentropySupport(record), .recordNegentropy))
    }

    /// A NOTICE while a NEG-OPEN waits for its first answer, that reads as "I do not know that
    /// message" ("unknown command", "invalid: bad msg", "NEG-OPEN unsupported"): the relay
    /// does not speak NIP-77. Any other NOTICE (a rate limit, chatter) is not an answer to it;
    /// the deadline covers a relay that never answers.
    func noticeDuringNegentropy(_ r: Int, _ text: String) {
        guard !relays[r].neg.heard, !relays[r].neg.sentAt.isEmpty, Self.readsAsUnknownMessage(text) else { return }
        notSupported(r, reason: "NOTICE \(text)")
    }

    static func readsAsUnknownMessage(_ text: String) -> Bool {
        let t = text.lowercased()
        return ["neg", "unknown", "unsupported", "not supported", "unrecognized", "invalid", "bad msg", "command", "cmd", "verb"]
            .contains { t.contains($0) }
    }

    /// Unanswered negentropy past the deadline (the `negentropyAnswer` timer): each late NEG
    /// subscription is given up, so no wait is left past its deadline.
    func negentropyDeadlines(_ r: Int, _ mono: Int64) {
        let late = relays[r].neg.late(now: mono, deadline: configuration.negentropyDeadlineMilliseconds)
        guard !late.isEmpty else { return }
        // A late wait no NEG subscription owns (nothing to give up) is forgotten: it would keep
        // the timer due for ever.
        defer { for negID in late where relays[r].neg.owners[negID] == nil { relays[r].neg.forgetWait(negID) } }
        if !relays[r].neg.heard {
            // Silence is weak evidence (a busy relay, an answer lost; nostr-relay ignores the
            // frames): this connection pages, and it is remembered for
            // `negentropySilenceRecheckSeconds` (an hour), not the week a refusal is.
            let reason = "\(NegentropyMachine.silenceReason) within \(configuration.negentropyDeadlineMilliseconds) ms"
            report(.notice(relayURL: relays[r].url, "\(reason): syncing by REQ pages"))
            relays[r].neg.stopAsking(silent: true)
            recordSupport(r, supported: false, reason: reason)
            for id in relays[r].subscriptions.keys.sorted() { fallBack(r, id, reason: reason) }
            return
        }
        for negID in late {
            guard let owner = relays[r].neg.owners[negID] else { continue }
            report(
                .notice(
                    relayURL: relays[r].url,
                    "negentropy for \(owner.subscription) unanswered for \(configuration.negentropyDeadlineMilliseconds) ms: paging instead"))
            fallBack(r, owner.subscription, reason: "unanswered")
        }
    }

    /// Writes the queued NEG frames (after the authentication window). They bypass the session,
    /// so their write completions are not the session's to confirm (`negWrites`).
    func drainNegentropy(_ r: Int) {
        for (token, text) in relays[r].neg.takeOutbox(nextToken: &nextToken) {
            push(.action(.write(relay: r, text: text, token: token)))
        }
    }

    /// The connection ended: every reconciliation and fetch on it is gone (what was fetched is
    /// committed; the next connection reconciles again).
    func negentropyLost(_ r: Int) {
        // Lost while the first NEG-OPEN waited: as silent as an unanswered one (see
        // `negentropyDeadlines`), and never a durable record.
        for id in relays[r].neg.connectionLost() { try? relays[r].session?.unsubscribe(id: id) }
        for id in relays[r].subscriptions.keys {
            relays[r].subscriptions[id]!.negentropy = nil
            relays[r].subscriptions[id]!.awaitingItems = false
        }
    }
}
