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
    /// `.group` requests answered (each member is answered as if alone).
    var groups = 0
    /// Groups to answer with one failure (their transaction could not commit), from now on.
    var failNextGroups = 0
    /// Received events committed again although the account held them (verified twice).
    var duplicateCommits = 0
    /// Ids a commit carried more than once across commits (an event committed twice).
    var committedTwice: [String] = []
    var negentropyRecords: [String: NegentropySupportRecord] = [:]
    /// Deliberate bugs, for the model test's mutation checks: a commit that reports its events
    /// stored and keeps none of them; a write taken for the relay's acceptance.
    var losesNextCommit = false
    var acceptsOnWrite = false
    /// Renewals to fail as a disk or a busy database would (not stale), from now on.
    var failRenewals = 0
    /// The wall-clock second of every renewal asked for.
    var renewalTimes: [Int64] = []
    /// Events whose stored payload no longer reads back (a corrupted row).
    var corruptPayloads: Set<String> = []
    private var sequence = 0

    func key(_ relay: String, _ sub: String) -> String { relay + "\u{0}" + sub }

    func enqueue(_ event: VerifiedEvent, relays: [String]) -> [String] {
        events[event.id] = event
        var ids: [String] = []
        for relay in relays {
            // One intent per event and relay, as the account's UNIQUE (event_id, relay_url) keeps.
            if let existing = intents.values.first(where: { $0.eventID == event.id && $0.relayURL == relay }) {
                ids.append(existing.intentID)
                continue
            }
            sequence += 1
            let id = "i\(sequence)"
            intents[id] = Intent(intentID: id, eventID: event.id, relayURL: relay, sequence: sequence)
            ids.append(id)
        }
        return ids
    }

    func answer(_ request: AccountRequest, now: Int64) -> AccountReply {
        switch request {
        case .group(let requests):
            groups += 1
            if failNextGroups > 0 {
                // The transaction could not commit: none of its members happened.
                failNextGroups -= 1
                return .failed(SoftchatError(.accountStorageFailed, "injected group commit failure", operation: .relayIngestion))
            }
            return .group(requests.map { answer($0, now: now) })
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
                let json = corruptPayloads.contains(i.eventID) ? String(events[i.eventID]!.jsonText.dropLast(2)) : events[i.eventID]!.jsonText
                payloads.append(DeliveryPayload(intentID: i.intentID, eventID: i.eventID, eventJSON: json))
            }
            return .claimed(
                DeliveryClaimResult(
                    claim: DeliveryClaim(leaseID: leaseID, relayURL: relay, expiresAt: now + leaseSeconds),
                    payloads: payloads))
        case .renew(let claim):
            renewalTimes.append(now)
            if failRenewals > 0 {
                failRenewals -= 1
                return .failed(SoftchatError(.accountStorageFailed, "injected renewal failure", operation: .relayPublish))
            }
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            leases[claim.leaseID]!.expiresAt = now + leaseSeconds
            return .renewed(DeliveryClaim(leaseID: claim.leaseID, relayURL: claim.relayURL, expiresAt: now + leaseSeconds))
        case .markWritten(let claim, let ids):
            guard let l = leases[claim.leaseID], !l.released else { return .failed(.invalidDeliveryState("stale", operation: .relayPublish)) }
            guard ids.allSatisfy({ intents[$0]?.lease == claim.leaseID && intents[$0]?.state == .pending }) else {
                return .failed(.invalidDeliveryState("not held", operation: .relayPublish))
            }
            for id in ids {
                intents[id]!.state = acceptsOnWrite ? .accepted : .inFlight
                if acceptsOnWrite { intents[id]!.category = .accepted }
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
                if acceptsOnWrite && i.state == .accepted { continue }
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
            let loses = losesNextCommit && !batch.isEmpty
            if loses { losesNextCommit = false }
            for e in batch where seen.insert(e.id).inserted {
                if loses {
                    result.accepted.append(e.id)
                } else if events[e.id] != nil {
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
    var reports: [ManagedTransportEvent] = []
    var stopped = false
    var opens = 0
    /// NIP-11 fetches the engine asked for.
    var informationFetches = 0
    var pings = 0
    /// When false, a connection attempt fails.
    var reachable: [Bool]
    var limits: [RelayLimits?]
    /// Relays whose NIP-11 document comes slowly: a fetch waits here until `answerInformation()`.
    var slowInformation: [Bool]
    var heldInformation: Set<Int> = []
    /// When each relay's current connection opened (monotonic milliseconds).
    var openedAt: [Int64]
    /// Called with every report as the engine makes it (the model test checks `synced` then).
    var onReport: ((ManagedTransportEvent) -> Void)?
    /// Actions the engine returned in the longest single `pump()`, and whether one pump ran past
    /// `runawayActions` (a loop without input: the pump gives up instead of hanging the test).
    var mostActionsPerPump = 0
    var runaway = false
    let runawayActions = 200_000

    /// A pong in a relay's inbox (not a text frame).
    static let pong = "\u{0}pong"

    init(relayCount: Int = 1, scheme: String = "wss") {
        urls = (0..<relayCount).map { "\(scheme)://relay\($0).test" }
        relays = Array(repeating: WireRelay(), count: relayCount)
        inbox = Array(repeating: [], count: relayCount)
        connected = Array(repeating: false, count: relayCount)
        connecting = Array(repeating: false, count: relayCount)
        reachable = Array(repeating: true, count: relayCount)
        limits = Array(repeating: nil, count: relayCount)
        slowInformation = Array(repeating: false, count: relayCount)
        openedAt = Array(repeating: 0, count: relayCount)
    }

    /// Answers the NIP-11 fetches that were held back.
    func answerInformation() {
        for r in heldInformation.sorted() {
            heldInformation.remove(r)
            handle(.relayInformation(relay: r, limits[r]))
        }
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
        var actions = 0
        defer { mostActionsPerPump = max(mostActionsPerPump, actions) }
        while let action = engine.pollAction() {
            actions += 1
            if actions > runawayActions {
                runaway = true
                return
            }
            switch action {
            case .fetchInformation(let r, _):
                informationFetches += 1
                if slowInformation[r] {
                    heldInformation.insert(r)
                    continue
                }
                engine.handle(.relayInformation(relay: r, limits[r]), now: now)
            case .open(let r, _):
                opens += 1
                connecting[r] = true
            case .write(let r, let text, let token):
                guard connected[r] else { continue }
                inbox[r] += relays[r].receive(text)
                engine.handle(.written(relay: r, token: token), now: now)
            case .ping(let r):
                // Answered like any frame: behind what the relay already sent (lost with it
                // when the relay falls silent).
                pings += 1
                if connected[r] { inbox[r].append(Self.pong) }
            case .close(let r):
                connected[r] = false
                connecting[r] = false
                relays[r].dropConnection()
                inbox[r].removeAll()
            case .account(let request):
                engine.handle(.account(account.answer(request, now: unix)), now: now)
            case .report(let event):
                reports.append(event)
                onReport?(event)
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
                openedAt[r] = mono
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
            if text == Self.pong {
                handle(.alive(relay: r))
            } else if let bytes = relays[r].sizeOverOurBound(text) {
                handle(.oversized(relay: r, head: String(decoding: text.utf8.prefix(1024), as: UTF8.self), bytes: bytes))
            } else {
                handle(.received(relay: r, text: text))
            }
            n += 1
        }
    }

    /// The process ends: the engine stops and every connection goes; the account and the relays
    /// stay, for a new process to `start` over.
    func endProcess() {
        engine.handle(.stop, now: now)
        pump()
        for r in relays.indices {
            connected[r] = false
            relays[r].dropConnection()
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
