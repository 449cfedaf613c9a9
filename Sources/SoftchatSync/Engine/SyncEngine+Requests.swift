import SoftchatCore

/// REQs share a budget per connection. Relays keep a handful of subscriptions per connection
/// (nostr-relay 32, strfry 20) and refuse past that, often with a NOTICE alone: no CLOSED, no
/// EOSE, so a refused page waited for ever and its subscription never synced. So:
/// - the live REQs of all subscriptions travel together, as few REQs as the filter bound allows
///   (`~live0`, `~live1`…; each event is stored whichever filter matched it);
/// - every one-shot REQ (a page, an ahead REQ, a fetch by ids) waits in a queue for a slot, and
///   each that ends (its EOSE, a CLOSED) lets the next one go;
/// - the budget is NIP-11's `max_subscriptions` when stated, else ``defaultREQBudget``, and a
///   refusal ("too many subscriptions" as a NOTICE or a CLOSED) lowers it, for that connection
///   only, to what was open and answering. The refused REQ is among those that heard nothing yet, but so may be one whose
///   answer is on its way (relays answer out of order): each stays subscribed, so a late answer
///   still counts, and one still unheard ``refusedRetryMilliseconds`` later is sent again in
///   place, as the lowered budget makes room.
extension SyncEngine {
    /// REQs held open at once on a connection when the relay does not say (below the common
    /// limits of 20 and 32).
    public static let defaultREQBudget = 16
    /// How long a REQ that may have been refused waits for an answer before it is sent again.
    static let refusedRetryMilliseconds: Int64 = 2_000

    /// Subscriptions the relay holds for us now: live REQs, one-shots sent, NIP-77 sessions.
    func requestsInUse(_ r: Int) -> Int { relays[r].requests.inUse(negotiations: relays[r].neg.openCount) }

    /// Sends one-shot REQ `id` when a slot is free, else queues it (in order).
    func request(_ r: Int, id: String, filtersJSON: [String]) {
        relays[r].requests.enqueue(QueuedRequest(id: id, filtersJSON: filtersJSON))
        sendQueuedRequests(r)
    }

    /// Sends queued one-shots while the budget has room.
    func sendQueuedRequests(_ r: Int) {
        guard relays[r].phase == .connected, let session = relays[r].session else { return }
        while let next = relays[r].requests.nextToSend(negotiations: relays[r].neg.openCount) {
            do {
                try session.subscribe(id: next.id, filtersJSON: next.filtersJSON)
                relays[r].requests.opened(next)
            } catch {
                report(.notice(relayURL: relays[r].url, "cannot send REQ \(next.id): \(error.message)"))
            }
        }
    }

    /// One-shot `id` ended (EOSE, or a CLOSED the session will not retry): its slot is free.
    func requestEnded(_ r: Int, _ id: String) {
        if relays[r].requests.ended(id) { sendQueuedRequests(r) }
    }

    /// Something came for `id` (an event or its EOSE): the relay took it.
    func requestHeard(_ r: Int, _ id: String) { relays[r].requests.heard(id) }

    /// Whether relay text says it holds too many subscriptions.
    static func saysTooManySubscriptions(_ message: String) -> Bool {
        let m = message.lowercased()
        return m.contains("too many") && (m.contains("subscription") || m.contains("req"))
            || m.contains("max_subscriptions") || m.contains("subscription limit")
    }

    /// The relay refused a REQ for its subscription limit (see `RequestBudget.refused`).
    func requestsRefused(_ r: Int) {
        if let lowered = relays[r].requests.refused(now: now.monotonicMilliseconds, negotiations: relays[r].neg.openCount) {
            report(.notice(relayURL: relays[r].url, "the relay holds fewer subscriptions than asked: at most \(lowered) REQs open from now on"))
        }
    }

    /// Sends again, in place, each suspect still unheard after `refusedRetryMilliseconds`, as
    /// many as the budget holds beside the REQs that answer; the rest wait another round.
    func retrySuspects(_ r: Int, _ mono: Int64) {
        guard relays[r].phase == .connected, let session = relays[r].session else { return }
        let due = relays[r].requests.dueSuspects(now: mono, wait: Self.refusedRetryMilliseconds, negotiations: relays[r].neg.openCount)
        for (id, filters) in due {
            do {
                try session.subscribe(id: id, filtersJSON: filters)
            } catch {
                report(.notice(relayURL: relays[r].url, "cannot send REQ \(id) again: \(error.message)"))
            }
        }
    }

    /// The live REQs: every subscription's live filters, packed into as few REQs as the filter
    /// bound (relay.wire's, and the relay's NIP-11 `max_filters`) allows; a subscription's
    /// filters never split.
    func subscribeLive(_ r: Int) {
        guard let session = relays[r].session else { return }
        let bound = min(RelayWireContract.maxFilters.value, max(1, relays[r].limits?.maxFilters ?? Int.max))
        var chunks: [(ids: [String], filters: [String])] = []
        for id in relays[r].subscriptions.keys.sorted() {
            let live = relays[r].subscriptions[id]!.liveFilters()
            if let last = chunks.last, last.filters.count + live.count <= bound {
                chunks[chunks.count - 1].ids.append(id)
                chunks[chunks.count - 1].filters += live
            } else {
                chunks.append(([id], live))
            }
        }
        for (k, chunk) in chunks.enumerated() {
            let liveID = "~live\(k)"
            do {
                try session.subscribe(id: liveID, filtersJSON: chunk.filters)
                relays[r].requests.liveChunks[liveID] = chunk.ids
                for id in chunk.ids {
                    relays[r].subscriptions[id]!.liveSubscribed = true
                    relays[r].subscriptions[id]!.liveEnded = false
                }
            } catch {
                report(.notice(relayURL: relays[r].url, "cannot subscribe \(chunk.ids.joined(separator: ", ")) live: \(error.message)"))
            }
        }
    }

    /// Withdraws every REQ of the connection (it was lost).
    func withdrawRequests(_ r: Int) {
        for id in relays[r].requests.withdrawAll() { try? relays[r].session?.unsubscribe(id: id) }
    }
}
