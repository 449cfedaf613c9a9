import SoftchatCore
import SoftchatJSON

@testable import SoftchatSync

/// A relay in memory that speaks NIP-01 text: stores events, answers REQs newest first capped
/// per filter with `until` read either way, sends live events, answers EVENT(S) with OK.
struct WireRelay {
    var stored: [VerifiedEvent] = []
    var cap = 500
    var inclusiveUntil = true
    var subscriptions: [String: [RelayFilter]] = [:]
    /// Events the relay answered OK true for (or stored without answering), and OK false for.
    var saidAccepted: Set<String> = []
    var saidRejected: Set<String> = []
    /// When set, the relay answers every EVENT by this rule instead of OK true.
    var okRule: ((VerifiedEvent, inout SplitMix64) -> OKBehaviour)?
    var heldOKs: [String] = []
    var closeRule: ((String, inout SplitMix64) -> String?)?
    /// When set, a REQ this picks is answered with part of its events and then CLOSED with the
    /// message (no EOSE), as relays do when a query fails or a rate limit trips mid-answer.
    var midAnswerCloseRule: ((String, inout SplitMix64) -> String?)?
    var rng = SplitMix64(seed: 1)
    /// How NEG-OPEN is met: by default as relays without NIP-77 do (a NOTICE).
    var negentropy = NegentropyMode.notice
    /// When set, a NEG-OPEN this picks is refused with the NEG-ERR it returns (relays that speak
    /// NIP-77 still refuse some).
    var negErrorRule: ((inout SplitMix64) -> String?)?
    /// The responder's message limit (0: none).
    var negentropyFrameLimit = 0
    var reconcilers: [String: Negentropy] = [:]
    /// Like rust-nostr's LocalRelay: at most this many items held by the open reconciliations
    /// of a connection, else NEG-ERR "rate-limited: too many negentropy items".
    var negentropyMaxItems: Int?
    /// The most reconciliations open at once seen.
    var mostOpenReconcilers = 0
    /// NEG-ERRs sent for too many items.
    var tooManyItems = 0
    /// Like nostr-relay (32 by default): at most this many subscriptions open on a connection; a
    /// REQ past it is refused with a NOTICE only (no CLOSED, no EOSE).
    var maxSubscriptions: Int?
    /// The most subscriptions open at once, and REQs refused for the limit.
    var mostSubscriptions = 0
    var refusedSubscriptions = 0
    /// How a REQ past `maxSubscriptions` is refused: a NOTICE alone (nostr-relay) or a CLOSED.
    var refusesSubscriptionsWithClosed = false
    /// The NOTICE of that refusal: nostr-relay's by default; nostr-rs-relay sends "Subscription
    /// error: Maximum concurrent subscription count reached".
    var subscriptionLimitNotice = "rejected: too many subscriptions"
    /// When not empty, the refusals' NOTICEs take these in turn instead (a relay's words change
    /// with its version).
    var subscriptionLimitNotices: [String] = []
    /// When set, a REQ this picks (by id) gets no EOSE, no event and no CLOSED: nothing at all (a
    /// query the relay shed under load) or a NOTICE alone (nostr-relay's bare "rate-limited").
    var noAnswerRule: ((String) -> NoAnswer?)?
    /// NIP-42: when set, a REQ this picks is closed `auth-required:` until an AUTH is accepted on
    /// the connection, the first one with the challenge (`["AUTH", …]`) ahead of its CLOSED.
    var authRequiredRule: ((String) -> Bool)?
    /// Whether REQs are closed `auth-required:` until an AUTH is accepted.
    var readsNeedAuthentication: Bool { authRequiredRule != nil }
    /// NIP-42 for writes: an EVENT is answered `OK false "auth-required:"` until an AUTH is
    /// accepted on the connection, the first one with the challenge (`["AUTH", …]`) ahead of it.
    var eventsNeedAuthentication = false
    /// Events answered `auth-required:` (their ids, once per answer), over all connections.
    var refusedForAuthentication: [String] = []
    /// Whether an AUTH is accepted (`OK true`) or refused (`OK false "restricted:"`).
    var acceptsAuthentication = true
    /// An AUTH was accepted on this connection; the challenge was sent on it.
    var authenticated = false
    var challengeSent = false
    /// AUTHs received, and REQs closed `auth-required:` (their ids), over all connections.
    var authentications = 0
    var closedForAuthentication: [String] = []
    /// Every REQ id received, in order (a REQ sent again in place counts again).
    var requestIDs: [String] = []
    /// When set, a REQ this picks is refused for its rate before any answer: nostr-relay's bare
    /// NOTICE "rate-limited" (no subscription id, no CLOSED) or `CLOSED "rate-limited:"`.
    var reqRateRule: ((inout SplitMix64) -> RequestRateLimit?)?
    /// The longest client frame the relay reads; a longer EVENT is answered `OK false
    /// "invalid:"`, any other longer frame with a NOTICE, and dropped.
    var maxMessageLength: Int?
    /// What the relay's NIP-11 document states, so frames over a stated limit can be found.
    var stated = RelayLimits()
    /// Client frames over a limit the relay stated (length, filters per REQ), as found.
    var overStatedLimits: [String] = []
    /// A deliberate bug, for the model test's mutation checks: events the relay holds and never
    /// sends (in no answer, live or stored, and in no NIP-77 item).
    var hides: Set<String> = []
    /// Events NIP-77 lists (in the relay's items) that no REQ answer carries: deleted or expired
    /// between the reconciliation and the fetch, or an index that outlived its events.
    var listedNotServed: Set<String> = []
    /// Events the relay counts toward a REQ's cap and then leaves out of the answer (filtered
    /// after `LIMIT`: deleted, expired or blocked but not yet compacted out of its index). They
    /// are not held for anyone: no answer carries them.
    var removedAfterLimit: Set<String> = []
    /// When set, a REQ this picks is answered with only part of what it matches and an EOSE, as a
    /// relay whose query hit a time or byte budget does (a short page that is not the end).
    var budgetCutRule: ((inout SplitMix64) -> Bool)?
    /// When set, an answer this picks sends one of its stored events after its EOSE.
    var afterEOSERule: ((inout SplitMix64) -> Bool)?
    /// Events sent after their answer's EOSE (a `synced` reported between the two is not wrong:
    /// the relay said its stored events had ended; the event must still reach the account).
    var sentAfterEOSE: Set<String> = []
    /// When set, an answer this picks carries one of its events twice.
    var duplicateRule: ((inout SplitMix64) -> Bool)?
    /// When set, an answer this picks carries one matching event outside its `since`/`until`.
    var outsideRangeRule: ((inout SplitMix64) -> Bool)?
    /// Like nostr-rs-relay: a REQ whose id is already open on the connection is ignored (no
    /// answer at all), instead of replacing the open one as NIP-01 says.
    var ignoresRepeatedREQ = false
    /// NEG sessions count against `maxSubscriptions`, as REQs do (both hold a slot on relays
    /// that run NIP-77 on the same query engine).
    var negentropyCountsAsSubscription = false
    /// NEG-OPENs received, answered or refused.
    var negOpens = 0
    /// Every live REQ (`~live`) is closed for good with this message (`restricted:`, `blocked:`).
    var closesLiveFeeds: String?
    /// Each quirk, the times it changed an answer (see `Quirk`).
    var seen: [Quirk: Int] = [:]
    /// Every client frame's verb, in order.
    var verbs: [String] = []
    /// Every client frame's length, by verb.
    var longestFrame: [String: Int] = [:]

    enum NegentropyMode {
        case answer, notice, silent
        case error(String)
    }

    enum RequestRateLimit {
        case notice, closed
    }

    /// How `noAnswerRule` leaves a REQ unanswered.
    enum NoAnswer: Sendable, Equatable {
        case silence
        case notice(String)
    }

    enum OKBehaviour {
        case accept
        case reject(String)
        case retry(String)
        case silent, late
        /// Stored, and answered by an OK whose event id is not one (empty): no client can match it.
        case malformed
    }

    mutating func saw(_ quirk: Quirk) { seen[quirk, default: 0] += 1 }

    /// Events whose frames are over the client's frame bound (a 600 KB event): the world hands
    /// the engine what the transport would, `.oversized` with the frame's first kilobyte.
    var overOurBound: Set<String> = []
    /// NEG-MSG answers longer than this are over the client's frame bound.
    var negentropyMessagesOverOurBound: Int?

    /// The size the transport would report for `text` when it is over the client's bound (the
    /// quirk counted), nil when it arrives whole.
    mutating func sizeOverOurBound(_ text: String) -> Int? {
        if let bound = negentropyMessagesOverOurBound, text.hasPrefix("[\"NEG-MSG\""), text.utf8.count > bound {
            saw(.negentropyMessageOverOurBound)
            return 524_288 + text.utf8.count
        }
        guard !overOurBound.isEmpty, text.hasPrefix("[\"EVENT\""), case .event(_, let e)? = try? parseRelayResponseFrame(text),
            overOurBound.contains(e.id)
        else { return nil }
        saw(.eventOverOurBound)
        return 600_000 + text.utf8.count
    }

    mutating func insert(_ event: VerifiedEvent) {
        guard !stored.contains(where: { $0.id == event.id }) else { return }
        let i = stored.firstIndex { $0.createdAt < event.createdAt || ($0.createdAt == event.createdAt && $0.id > event.id) }
        stored.insert(event, at: i ?? stored.count)
    }

    func matches(_ filter: RelayFilter, _ e: VerifiedEvent) -> Bool { matches(filter, loose(filter), e) }

    /// The filter without `until` and `limit` (the relay applies those itself).
    func loose(_ filter: RelayFilter) -> RelayFilter? {
        var members = filter.json.members
        members.removeAll { $0.key == "until" || $0.key == "limit" }
        return try? RelayFilter(json: .object(JSONObject(members: members)))
    }

    func matches(_ filter: RelayFilter, _ loose: RelayFilter?, _ e: VerifiedEvent) -> Bool {
        guard let loose, loose.matches(e), !hides.contains(e.id), !listedNotServed.contains(e.id) else { return false }
        if let until = filter.until { return inclusiveUntil ? e.createdAt <= until : e.createdAt < until }
        return true
    }

    /// A new event arrives from elsewhere: stored, and sent to the live subscriptions it matches.
    mutating func publishFromElsewhere(_ event: VerifiedEvent) -> [String] {
        insert(event)
        var out: [String] = []
        for id in subscriptions.keys.sorted() where subscriptions[id]!.contains(where: { matches($0, event) }) {
            out.append(RelayResponseFrame.event(subscriptionID: id, event: event).toJSON())
        }
        return out
    }

    mutating func dropConnection() {
        subscriptions.removeAll()
        reconcilers.removeAll()
        heldOKs.removeAll()
        authenticated = false
        challengeSent = false
    }

    mutating func receive(_ text: String) -> [String] {
        guard let frame = try? parseClientRelayFrame(text) else { return [RelayResponseFrame.notice(RelayMessage("invalid: cannot parse")).toJSON()] }
        verbs.append(frame.verb)
        let length = text.utf8.count
        longestFrame[frame.verb] = max(longestFrame[frame.verb] ?? 0, length)
        if let limit = stated.maxMessageLength, length > limit { overStatedLimits.append("\(frame.verb) of \(length) bytes over \(limit)") }
        if case .req(_, let filters) = frame, let limit = stated.maxFilters, filters.count > limit {
            overStatedLimits.append("REQ of \(filters.count) filters over \(limit)")
        }
        if let limit = maxMessageLength, length > limit {
            saw(.messageTooLong)
            let refusal = RelayMessage("invalid: message too large (\(length) > \(limit))")
            switch frame {
            case .event(let e):
                saidRejected.insert(e.id)
                return [RelayResponseFrame.ok(eventID: e.id, accepted: false, message: refusal).toJSON()]
            case .events(let list):
                for e in list { saidRejected.insert(e.id) }
                return list.map { RelayResponseFrame.ok(eventID: $0.id, accepted: false, message: refusal).toJSON() }
            default: return [RelayResponseFrame.notice(refusal).toJSON()]
            }
        }
        switch frame {
        case .req(let id, let filters):
            requestIDs.append(id)
            if let rule = authRequiredRule, !authenticated, rule(id) {
                saw(.readsClosedAuthRequired)
                closedForAuthentication.append(id)
                var out: [String] = []
                if !challengeSent {
                    challengeSent = true
                    out.append(RelayResponseFrame.auth(challenge: "challenge-\(authentications)").toJSON())
                }
                out.append(RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage("auth-required: sign in first")).toJSON())
                return out
            }
            if ignoresRepeatedREQ, subscriptions[id] != nil {
                saw(.repeatedREQIgnored)
                return []
            }
            if let text = closesLiveFeeds, id.hasPrefix("~live") {
                saw(.liveFeedClosedForGood)
                return [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage(text)).toJSON()]
            }
            let open = subscriptions.count + (negentropyCountsAsSubscription ? reconcilers.count : 0)
            if let limit = maxSubscriptions, subscriptions[id] == nil, open >= limit {
                if subscriptions.count < limit { saw(.negentropyHoldsSubscriptionSlots) }
                refusedSubscriptions += 1
                if refusesSubscriptionsWithClosed {
                    saw(.subscriptionsRefusedByClosed)
                    return [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage("error: too many subscriptions")).toJSON()]
                }
                saw(.subscriptionsRefusedByNotice)
                let text =
                    subscriptionLimitNotices.isEmpty
                    ? subscriptionLimitNotice : subscriptionLimitNotices[refusedSubscriptions % subscriptionLimitNotices.count]
                if text.hasPrefix("ERROR:") { saw(.subscriptionLimitInStrfrysWords) }
                if text.hasPrefix("Subscription error:") { saw(.subscriptionLimitInRsRelaysWords) }
                return [RelayResponseFrame.notice(RelayMessage(text)).toJSON()]
            }
            if let rule = noAnswerRule, let way = rule(id) {
                switch way {
                case .silence: return []
                case .notice(let text): return [RelayResponseFrame.notice(RelayMessage(text)).toJSON()]
                }
            }
            if let rule = reqRateRule, let limit = rule(&rng) {
                switch limit {
                case .notice:
                    saw(.requestRateLimitedByNotice)
                    return [RelayResponseFrame.notice(RelayMessage("rate-limited")).toJSON()]
                case .closed:
                    saw(.requestRateLimitedByClosed)
                    return [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage("rate-limited: slow down")).toJSON()]
                }
            }
            if let rule = closeRule, let message = rule(id, &rng) {
                saw(.closedBeforeAnswer)
                return [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage(message)).toJSON()]
            }
            var out: [String] = []
            var sent: Set<String> = []
            for filter in filters {
                let asked = filter.limit.map { Int($0) } ?? Int.max
                var n = min(cap, asked)
                if n > 1, let rule = budgetCutRule, rule(&rng) {
                    n = 1 + Int(rng.next() % UInt64(n - 1))
                    saw(.answerCutByBudget)
                }
                var count = 0
                var more = false
                let looseFilter = loose(filter)
                for e in stored where matches(filter, looseFilter, e) {
                    if count == n {
                        more = true
                        break
                    }
                    count += 1
                    if removedAfterLimit.contains(e.id) {
                        saw(.filteredAfterLimit)
                        continue
                    }
                    if sent.insert(e.id).inserted { out.append(RelayResponseFrame.event(subscriptionID: id, event: e).toJSON()) }
                }
                if let rule = outsideRangeRule, filter.since != nil || filter.until != nil, rule(&rng),
                    let e = stored.first(where: { e in
                        looseFilter.map { f in outside(filter, e, matchingApartFromTime: f) } == true && !hides.contains(e.id)
                            && !listedNotServed.contains(e.id) && !removedAfterLimit.contains(e.id)
                    })
                {
                    saw(.eventOutsideRange)
                    out.append(RelayResponseFrame.event(subscriptionID: id, event: e).toJSON())
                }
                if more && cap < asked && cap < 500 && stated.maxLimit != cap { saw(.unstatedCapBelowPage) }
                if let until = filter.until, stored.contains(where: { $0.createdAt == until && looseFilter?.matches($0) == true }) {
                    saw(inclusiveUntil ? .untilInclusive : .untilExclusive)
                }
            }
            if let rule = midAnswerCloseRule, let message = rule(id, &rng) {
                let kept = out.isEmpty ? 0 : Int(rng.next() % UInt64(out.count + 1))
                if kept > 0 { saw(.closedMidAnswer) }
                return Array(out.prefix(kept)) + [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage(message)).toJSON()]
            }
            if !out.isEmpty, let rule = duplicateRule, rule(&rng) {
                saw(.duplicateInAnswer)
                out.insert(out[Int(rng.next() % UInt64(out.count))], at: Int(rng.next() % UInt64(out.count + 1)))
            }
            var afterEOSE: [String] = []
            if !out.isEmpty, let rule = afterEOSERule, rule(&rng) {
                saw(.eventAfterEOSE)
                let frame = out.remove(at: Int(rng.next() % UInt64(out.count)))
                if case .event(_, let e)? = try? parseRelayResponseFrame(frame) { sentAfterEOSE.insert(e.id) }
                afterEOSE.append(frame)
            }
            out.append(RelayResponseFrame.eose(subscriptionID: id).toJSON())
            out += afterEOSE
            subscriptions[id] = filters
            mostSubscriptions = max(mostSubscriptions, subscriptions.count)
            return out
        case .close(let id):
            subscriptions[id] = nil
            return []
        case .event(let e):
            return answer(e)
        case .events(let list):
            return list.flatMap { answer($0) }
        case .auth(let e):
            guard authRequiredRule != nil || eventsNeedAuthentication else { return [] }
            authentications += 1
            authenticated = acceptsAuthentication
            saw(acceptsAuthentication ? .authenticationAccepted : .authenticationRefused)
            let message = RelayMessage(acceptsAuthentication ? "" : "restricted: not on the list")
            return [RelayResponseFrame.ok(eventID: e.id, accepted: acceptsAuthentication, message: message).toJSON()]
        case .count:
            return []
        case .negOpen(let id, let filter, let message):
            negOpens += 1
            switch negentropy {
            case .notice:
                saw(.negentropyNotice)
                return [RelayResponseFrame.notice(RelayMessage("invalid: unknown verb")).toJSON()]
            case .silent:
                saw(.negentropySilent)
                return []
            case .error(let text):
                saw(Quirk.negentropyError(text))
                return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage(text)).toJSON()]
            case .answer:
                if let rule = negErrorRule, let text = rule(&rng) {
                    saw(Quirk.negentropyError(text))
                    return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage(text)).toJSON()]
                }
                if negentropyCountsAsSubscription, let limit = maxSubscriptions, reconcilers[id] == nil,
                    subscriptions.count + reconcilers.count >= limit
                {
                    saw(.negentropyHoldsSubscriptionSlots)
                    return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage("blocked: too many open subscriptions")).toJSON()]
                }
                let items = stored.filter { filter.matches($0) && !hides.contains($0.id) && !removedAfterLimit.contains($0.id) }.compactMap {
                    NegentropyItem(createdAt: $0.createdAt, idHex: $0.id)
                }
                reconcilers[id] = nil
                if let max = negentropyMaxItems, reconcilers.values.reduce(items.count, { $0 + $1.storage.count }) > max {
                    tooManyItems += 1
                    saw(.negentropyErrorRateLimited)
                    return [
                        RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage("rate-limited: too many negentropy items")).toJSON()
                    ]
                }
                reconcilers[id] = Negentropy(storage: NegentropyStorage(items: items), frameSizeLimit: negentropyFrameLimit)
                mostOpenReconcilers = max(mostOpenReconcilers, reconcilers.count)
                return negentropyAnswer(id, message)
            }
        case .negMessage(let id, let message):
            guard case .answer = negentropy else { return [] }
            return negentropyAnswer(id, message)
        case .negClose(let id):
            reconcilers[id] = nil
            return []
        }
    }

    /// Whether `e` matches `filter` in everything but its time and falls outside its `since` or
    /// `until` (read as the relay reads it).
    func outside(_ filter: RelayFilter, _ e: VerifiedEvent, matchingApartFromTime loose: RelayFilter) -> Bool {
        var members = loose.json.members
        members.removeAll { $0.key == "since" }
        guard let timeless = try? RelayFilter(json: .object(JSONObject(members: members))), timeless.matches(e) else { return false }
        if let since = filter.since, e.createdAt < since { return true }
        if let until = filter.until { return inclusiveUntil ? e.createdAt > until : e.createdAt >= until }
        return false
    }

    mutating func negentropyAnswer(_ id: String, _ message: [UInt8]) -> [String] {
        guard let reconciler = reconcilers[id] else {
            return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage("closed: unknown")).toJSON()]
        }
        guard let answer = try? reconciler.respond(message) else {
            reconcilers[id] = nil
            return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage("error: bad message")).toJSON()]
        }
        return [RelayResponseFrame.negMessage(subscriptionID: id, message: answer).toJSON()]
    }

    mutating func answer(_ e: VerifiedEvent) -> [String] {
        if eventsNeedAuthentication && !authenticated {
            saw(.writesAnsweredAuthRequired)
            refusedForAuthentication.append(e.id)
            var out: [String] = []
            if !challengeSent {
                challengeSent = true
                out.append(RelayResponseFrame.auth(challenge: "challenge-\(authentications)").toJSON())
            }
            out.append(RelayResponseFrame.ok(eventID: e.id, accepted: false, message: RelayMessage("auth-required: sign in to write")).toJSON())
            return out
        }
        let behaviour = okRule.map { rule in rule(e, &rng) } ?? .accept
        switch behaviour {
        case .accept: break
        case .reject(let text): saw(text.contains("created_at") ? .createdAtRefused : .okRejected)
        case .retry(let text): saw(text.hasPrefix("rate-limited:") ? .eventRateLimited : .okRetryable)
        case .silent: saw(.okSilent)
        case .late: saw(.okLate)
        case .malformed: saw(.okWithoutID)
        }
        switch behaviour {
        case .accept:
            insert(e)
            saidAccepted.insert(e.id)
            return [RelayResponseFrame.ok(eventID: e.id, accepted: true, message: RelayMessage("")).toJSON()]
        case .reject(let text):
            if saidAccepted.contains(e.id) {
                return [RelayResponseFrame.ok(eventID: e.id, accepted: true, message: RelayMessage("duplicate: have it")).toJSON()]
            }
            saidRejected.insert(e.id)
            return [RelayResponseFrame.ok(eventID: e.id, accepted: false, message: RelayMessage(text)).toJSON()]
        case .retry(let text):
            return [RelayResponseFrame.ok(eventID: e.id, accepted: false, message: RelayMessage(text)).toJSON()]
        case .silent:
            insert(e)
            saidAccepted.insert(e.id)
            return []
        case .malformed:
            insert(e)
            saidAccepted.insert(e.id)
            return [#"["OK","",true,""]"#]
        case .late:
            insert(e)
            saidAccepted.insert(e.id)
            heldOKs.append(RelayResponseFrame.ok(eventID: e.id, accepted: true, message: RelayMessage("")).toJSON())
            return []
        }
    }
}
