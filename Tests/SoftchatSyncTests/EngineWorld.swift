import SoftchatCore
import SoftchatJSON

@testable import SoftchatSync

/// An account in memory with the semantics the engine relies on from `SoftchatAccount`
/// (claims and leases, the retry budget, commits of events with sync states). The engine's
/// tests over real SQLite files live beside the transport; this one keeps 100,000-step model
/// runs fast.
final class MemoryAccount {
    struct Intent {
        let intentID: String
        let eventID: String
        let relayURL: String
        var state: DeliveryState = .pending
        var category: DeliveryCategory = .accepted
        var message = ""
        var attempts = 0
        var failures = 0
        var lease: String?
        let sequence: Int
    }

    var events: [String: VerifiedEvent] = [:]
    var intents: [String: Intent] = [:]
    var leases: [String: (relay: String, expiresAt: Int64, released: Bool)] = [:]
    var states: [String: (filters: [String], state: String)] = [:]
    var cursors: [String: Int64] = [:]
    var policy: [(id: String, filters: [String], relay: String?)] = []
    var retryBudget = 10
    var leaseSeconds: Int64 = 60
    var failNextCommits = 0
    var commits = 0
    /// Received events committed again although the account held them (verified twice).
    var duplicateCommits = 0
    /// Ids a commit carried more than once across commits (an event committed twice).
    var committedTwice: [String] = []
    var negentropyRecords: [String: NegentropySupportRecord] = [:]
    private var sequence = 0

    func key(_ relay: String, _ sub: String) -> String { relay + "\u{0}" + sub }

    func enqueue(_ event: VerifiedEvent, relays: [String]) -> [String] {
        events[event.id] = event
        var ids: [String] = []
        for relay in relays {
            sequence += 1
            let id = "i\(sequence)"
            intents[id] = Intent(intentID: id, eventID: event.id, relayURL: relay, sequence: sequence)
            ids.append(id)
        }
        return ids
    }

    func answer(_ request: AccountRequest, now: Int64) -> AccountReply {
        switch request {
        case .loadSubscriptions(let urls):
            var out: [String: [EngineSubscription]] = [:]
            for url in urls {
                out[url] = policy.filter { $0.relay == nil || $0.relay == url }.map { entry in
                    let stored = states[key(url, entry.id)]
                    return EngineSubscription(
                        subscriptionID: entry.id, filtersJSON: entry.filters, storedFiltersJSON: stored?.filters,
                        storedStateJSON: stored?.state, cursor: cursors[key(url, entry.id)])
                }
            }
            return .subscriptions(out)
        case .claim(let relay, let leaseID, let max):
            guard leases[leaseID] == nil else { return .failed(.invalidDeliveryState("lease reused", operation: .relayPublish)) }
            func free(_ lease: String?) -> Bool {
                guard let lease else { return true }
                let l = leases[lease]!
                return l.released || l.expiresAt <= now
            }
            let claimable = intents.values.filter { i in
                i.relayURL == relay && (((i.state == .pending || i.state == .retryable) && free(i.lease)) || (i.state == .inFlight && free(i.lease)))
            }.sorted { $0.sequence < $1.sequence }
            var taken: [Intent] = []
            for var i in claimable {
                if i.failures >= retryBudget {
                    i.state = .rejected
                    i.category = .exhausted
                    i.lease = nil
                    intents[i.intentID] = i
                    continue
                }
                if taken.count < max { taken.append(i) }
            }
            guard !taken.isEmpty else {
                // As the account answers: when work is held by another live lease, until when.
                let held = intents.values.filter { i in
                    i.relayURL == relay && !i.state.isTerminal && i.lease.map { !free($0) } == true
                }.compactMap { $0.lease.map { leases[$0]!.expiresAt } }.min()
                return held.map(AccountReply.heldUntil) ?? .claimed(nil)
            }
            leases[leaseID] = (relay, now + leaseSeconds, false)
            var payloads: [DeliveryPayload] = []
            for var i in taken {
                if let old = i.lease { leases[old]!.released = true }
                i.lease = leaseID
                i.state = .pending
                intents[i.intentID] = i
                payloads.append(DeliveryPayload(intentID: i.intentID, eventID: i.eventID, eventJSON: events[i.eventID]!.jsonText))
            }
            return .claimed(
                DeliveryClaimResult(
                    claim: DeliveryClaim(leaseID: leaseID, relayURL: relay, expiresAt: now + leaseSeconds),
                    payloads: payloads))
        case .renew(let claim):
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            leases[claim.leaseID]!.expiresAt = now + leaseSeconds
            return .renewed(DeliveryClaim(leaseID: claim.leaseID, relayURL: claim.relayURL, expiresAt: now + leaseSeconds))
        case .markWritten(let claim, let ids):
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            guard ids.allSatisfy({ intents[$0]?.lease == claim.leaseID && intents[$0]?.state == .pending }) else {
                return .failed(.invalidDeliveryState("not held", operation: .relayPublish))
            }
            for id in ids {
                intents[id]!.state = .inFlight
                intents[id]!.attempts += 1
            }
            return .done
        case .applyResults(let claim, let results):
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            guard results.allSatisfy({ intents[$0.intentID]?.lease == claim.leaseID }) else {
                return .failed(.invalidDeliveryState("not held", operation: .relayPublish))
            }
            for r in results {
                var i = intents[r.intentID]!
                i.message = r.decision.message
                if r.decision.category.spendsRetryBudget { i.failures += 1 }
                if r.decision.state.isTerminal {
                    i.state = r.decision.state
                    i.category = r.decision.category
                } else if i.failures >= retryBudget {
                    i.state = .rejected
                    i.category = .exhausted
                } else {
                    i.state = .retryable
                    i.category = r.decision.category
                }
                i.lease = nil
                intents[r.intentID] = i
            }
            return .done
        case .release(let claim):
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            for (id, i) in intents where i.lease == claim.leaseID && (i.state == .pending || i.state == .inFlight || i.state == .retryable) {
                intents[id]!.state = .pending
                intents[id]!.lease = nil
            }
            leases[claim.leaseID]!.released = true
            return .done
        case .commit(let batch, let syncStates, _):
            if failNextCommits > 0 {
                failNextCommits -= 1
                return .failed(SoftchatError(.accountStorageFailed, "injected commit failure", operation: .relayIngestion))
            }
            commits += 1
            var result = IngestionResult()
            var seen: Set<String> = []
            for e in batch where seen.insert(e.id).inserted {
                if events[e.id] != nil {
                    if !intents.values.contains(where: { $0.eventID == e.id }) { duplicateCommits += 1 }
                    result.alreadyPresent.append(e.id)
                } else {
                    events[e.id] = e
                    result.accepted.append(e.id)
                }
            }
            for s in syncStates {
                states[key(s.relayURL, s.subscriptionID)] = (s.filtersJSON, s.stateJSON)
                if let c = s.cursor { cursors[key(s.relayURL, s.subscriptionID)] = Swift.max(cursors[key(s.relayURL, s.subscriptionID)] ?? c, c) }
            }
            return .committed(result)
        case .loadNegentropySupport(let urls):
            return .negentropySupport(negentropyRecords.filter { urls.contains($0.key) })
        case .reconciliationItems(_, _, let filtersJSON):
            return .reconciliationItems(
                filtersJSON.map { text in
                    let filter = try! RelayFilter.fromJSON(text)
                    return events.values.filter { filter.matches($0) }.compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }
                })
        case .recordNegentropySupport(let record):
            negentropyRecords[record.relayURL] = record
            return .done
        }
    }

    var liveLeases: Int { leases.values.filter { !$0.released }.count }
}

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
    /// Every client frame's verb, in order.
    var verbs: [String] = []
    /// Every client frame's length, by verb.
    var longestFrame: [String: Int] = [:]

    enum NegentropyMode {
        case answer, notice, silent
        case error(String)
    }

    enum OKBehaviour {
        case accept
        case reject(String)
        case retry(String)
        case silent, late
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
        guard let loose, loose.matches(e) else { return false }
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
    }

    mutating func receive(_ text: String) -> [String] {
        guard let frame = try? parseClientRelayFrame(text) else { return [RelayResponseFrame.notice(RelayMessage("invalid: cannot parse")).toJSON()] }
        verbs.append(frame.verb)
        longestFrame[frame.verb] = max(longestFrame[frame.verb] ?? 0, text.utf8.count)
        switch frame {
        case .req(let id, let filters):
            if let limit = maxSubscriptions, subscriptions[id] == nil, subscriptions.count >= limit {
                refusedSubscriptions += 1
                return [RelayResponseFrame.notice(RelayMessage("rejected: too many subscriptions")).toJSON()]
            }
            if let rule = closeRule, let message = rule(id, &rng) {
                return [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage(message)).toJSON()]
            }
            var out: [String] = []
            var sent: Set<String> = []
            for filter in filters {
                let n = min(cap, filter.limit.map { Int($0) } ?? cap)
                var count = 0
                let looseFilter = loose(filter)
                for e in stored where count < n && matches(filter, looseFilter, e) {
                    count += 1
                    if sent.insert(e.id).inserted { out.append(RelayResponseFrame.event(subscriptionID: id, event: e).toJSON()) }
                }
            }
            if let rule = midAnswerCloseRule, let message = rule(id, &rng) {
                let kept = out.isEmpty ? 0 : Int(rng.next() % UInt64(out.count + 1))
                return Array(out.prefix(kept)) + [RelayResponseFrame.closed(subscriptionID: id, message: RelayMessage(message)).toJSON()]
            }
            out.append(RelayResponseFrame.eose(subscriptionID: id).toJSON())
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
        case .auth, .count:
            return []
        case .negOpen(let id, let filter, let message):
            switch negentropy {
            case .notice: return [RelayResponseFrame.notice(RelayMessage("invalid: unknown verb")).toJSON()]
            case .silent: return []
            case .error(let text): return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage(text)).toJSON()]
            case .answer:
                let items = stored.filter { filter.matches($0) }.compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }
                reconcilers[id] = nil
                if let max = negentropyMaxItems, reconcilers.values.reduce(items.count, { $0 + $1.storage.count }) > max {
                    tooManyItems += 1
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
        let behaviour = okRule.map { rule in rule(e, &rng) } ?? .accept
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
        case .late:
            insert(e)
            saidAccepted.insert(e.id)
            heldOKs.append(RelayResponseFrame.ok(eventID: e.id, accepted: true, message: RelayMessage("")).toJSON())
            return []
        }
    }
}

/// Drives a `SyncEngine` against `WireRelay`s and a `MemoryAccount` with simulated time and
/// connections: no sockets, no clock.
final class EngineWorld {
    let urls: [String]
    var relays: [WireRelay]
    let account = MemoryAccount()
    var engine: SyncEngine!
    var mono: Int64 = 1_000_000
    var unix: Int64 = 1_750_000_000
    /// Frames in flight relay → engine, per relay (delivered in order).
    var inbox: [[String]]
    var connected: [Bool]
    var connecting: [Bool]
    var reports: [SyncEngineEvent] = []
    var stopped = false
    var opens = 0
    var pings = 0
    /// When false, a connection attempt fails.
    var reachable: [Bool]
    var limits: [RelayLimits?]

    init(relayCount: Int = 1) {
        urls = (0..<relayCount).map { "wss://relay\($0).test" }
        relays = Array(repeating: WireRelay(), count: relayCount)
        inbox = Array(repeating: [], count: relayCount)
        connected = Array(repeating: false, count: relayCount)
        connecting = Array(repeating: false, count: relayCount)
        reachable = Array(repeating: true, count: relayCount)
        limits = Array(repeating: nil, count: relayCount)
    }

    var now: EngineTime { EngineTime(monotonicMilliseconds: mono, unixSeconds: unix) }

    func start(_ configure: (inout SyncEngineConfiguration) -> Void = { _ in }) {
        var config = SyncEngineConfiguration(relayURLs: urls, identity: nil, leasePrefix: "test")
        config.fetchRelayInformation = true
        configure(&config)
        engine = SyncEngine(configuration: config, now: now)
        pump()
    }

    func handle(_ input: SyncEngineInput) {
        engine.handle(input, now: now)
        pump()
    }

    /// Runs every action the engine has, answering account requests at once.
    func pump() {
        while let action = engine.pollAction() {
            switch action {
            case .fetchInformation(let r, _):
                engine.handle(.relayInformation(relay: r, limits[r]), now: now)
            case .open(let r, _):
                opens += 1
                connecting[r] = true
            case .write(let r, let text, let token):
                guard connected[r] else { continue }
                inbox[r] += relays[r].receive(text)
                engine.handle(.written(relay: r, token: token), now: now)
            case .ping(let r):
                pings += 1
                _ = r
            case .close(let r):
                connected[r] = false
                connecting[r] = false
                relays[r].dropConnection()
                inbox[r].removeAll()
            case .account(let request):
                engine.handle(.account(account.answer(request, now: unix)), now: now)
            case .report(let event):
                reports.append(event)
            case .stopped:
                stopped = true
            }
        }
    }

    /// Completes pending connection attempts.
    func completeOpens() {
        for r in urls.indices where connecting[r] {
            connecting[r] = false
            if reachable[r] {
                connected[r] = true
                handle(.opened(relay: r))
            } else {
                handle(.lost(relay: r, reason: "unreachable"))
            }
        }
    }

    /// Delivers up to `max` frames from relay `r`.
    func deliver(_ r: Int, max: Int = Int.max) {
        var n = 0
        while n < max, connected[r], !inbox[r].isEmpty {
            let text = inbox[r].removeFirst()
            handle(.received(relay: r, text: text))
            n += 1
        }
    }

    func cut(_ r: Int) {
        guard connected[r] || connecting[r] else { return }
        connected[r] = false
        connecting[r] = false
        relays[r].dropConnection()
        inbox[r].removeAll()
        handle(.lost(relay: r, reason: "cut"))
    }

    /// Advances both clocks by `ms`, firing the engine's timer when it is due.
    func advance(_ ms: Int64) {
        let target = mono + ms
        // The wall clock moves with the monotonic one, a second each time it crosses a second
        // (it used to round every small step up, or drop a short tail, and drift either way).
        while let due = engine.pollTimeout(), due <= target {
            let next = max(mono, due)
            unix += next / 1000 - mono / 1000
            mono = next
            handle(.timer)
            completeOpens()
        }
        unix += target / 1000 - mono / 1000
        mono = target
        handle(.timer)
    }

    /// Runs until nothing is in flight anywhere (no frames, no opens) or `limit` rounds.
    func settle(rounds limit: Int = 10_000) {
        var rounds = 0
        while rounds < limit {
            rounds += 1
            completeOpens()
            var any = false
            for r in urls.indices where connected[r] && !inbox[r].isEmpty {
                deliver(r)
                any = true
            }
            if !any && !connecting.contains(true) { return }
        }
    }

    /// Settles, lets timers run for `ms`, settles again.
    func run(for ms: Int64) {
        settle()
        var left = ms
        while left > 0 {
            let step = min(left, 500)
            advance(step)
            settle()
            left -= step
        }
    }

    func synced(_ r: Int, _ sub: String) -> Bool { engine.syncedSubscriptions[urls[r]]?[sub] ?? false }

    var syncReports: [(String, String, Int)] {
        reports.compactMap { if case .synced(let url, let sub, let n, _) = $0 { (url, sub, n) } else { nil } }
    }
}

/// Signed test events.
enum Fixtures {
    static let author = SoftchatIdentity.generate()

    static func event(_ createdAt: Int64, kind: Int = 1, content: String) -> VerifiedEvent {
        try! author.sign(UnsignedEvent(createdAt: createdAt, kind: kind, content: content))
    }
}
