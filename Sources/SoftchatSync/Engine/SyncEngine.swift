public import SoftchatCore
import SoftchatJSON

/// Settings of a `SyncEngine`.
public struct SyncEngineConfiguration: Sendable {
    /// The relays, by URL; `relay: Int` in inputs and actions is an index into this list.
    public var relayURLs: [String]
    /// Answers NIP-42 challenges; nil: `auth-required` is final.
    public var identity: SoftchatIdentity?
    /// The base of every relay's session configuration (the engine sets `relayURL`,
    /// `answersAuthentication`, the acknowledgement timeout and what NIP-11 says).
    public var session = RelaySessionConfig()
    /// Whether multi-event publishes go out as one EVENTS frame.
    public var eventsBatching = EventsBatching.auto
    /// Seconds without an OK before an event in flight becomes retryable (`timeout`); default
    /// `relay.publish.acknowledgementTimeoutSeconds`.
    public var acknowledgementTimeoutSeconds = Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value)
    /// Intents claimed (and published) at once, 1–256.
    public var claimBatch = 256
    /// After a relay answers "later" (rate-limited, auth-required, error…), wait this long
    /// before claiming again, doubling per consecutive answer up to 60 s.
    public var retryDelaySeconds: Int64 = 1
    /// Fetch each relay's NIP-11 document before its first connection.
    public var fetchRelayInformation = true
    /// Page size and `until` convention; a relay's NIP-11 `max_limit` lowers the page size.
    public var paging = RelayPaging()
    /// Per relay URL, a paging the host knows for it, in place of `paging`: where that relay
    /// starts (NIP-11 can only lower its page size; its answers correct it, see `RelayPaging`).
    public var relayPaging: [String: RelayPaging] = [:]
    /// The account's lease duration: leases are renewed at half of it while work is held.
    public var leaseSeconds: Int64 = 60
    /// A connection silent this long gets a ping…
    public var keepaliveIntervalMilliseconds: Int64 = 30_000
    /// …and is declared lost when nothing at all arrives this long after it.
    public var readDeadlineMilliseconds: Int64 = 10_000
    /// After connecting to a relay that speaks NIP-42, wait this long for a challenge before
    /// writing anything, so the AUTH goes ahead of the first REQ or EVENT.
    public var authenticationGraceMilliseconds: Int64 = 300
    /// Claim and publish the account's intents (false: receive only).
    public var publishes = true
    /// Whether NIP-42 challenges are answered over a connection nothing authenticates (`ws://`,
    /// or `noise://` with `unauthenticated=yes`) to a host other than this machine. False by
    /// default: anyone on such a path can relay the real relay's challenge and take the signed
    /// answer for it. Loopback hosts and `wss://` or pinned `noise://` relays are answered
    /// either way (when an identity is set).
    public var authenticatesOverCleartext = false
    /// Unique per process run: lease ids are `<prefix>-<n>`.
    public var leasePrefix: String
    /// Per subscription id, the late-arrival horizon in seconds (default: `SubscriptionSync.defaultHorizon`).
    public var horizons: [String: Int64] = [:]
    /// Seconds between a subscription's deeper resyncs on a relay it pages (see
    /// `SubscriptionSync.Deepening`): how late arrivals past the horizon are found without
    /// NIP-77. 0 turns them off. Default 6 hours: with the 300 s horizon of ordinary kinds, an
    /// event that reached a relay a day late is found within 30 hours, a year late within 54, and
    /// the whole history is paged again every 72 hours (the twelfth level reaches the epoch).
    public var deepResyncIntervalSeconds: Int64 = 6 * 3_600
    /// Sync by NIP-77 negentropy where the relay speaks it (REQ paging otherwise).
    public var negentropy = true
    /// A NEG-OPEN or NEG-MSG unanswered this long: the relay is taken not to speak NIP-77 (when
    /// it never answered one on the connection) or the reconciliation is given up for paging.
    public var negentropyDeadlineMilliseconds: Int64 = 10_000
    /// A one-shot REQ (a page, an ahead REQ, a fetch by ids) that brings nothing this long —
    /// since it went out, its last event, or the last bytes of a message still arriving (which
    /// may be its answer) — without its EOSE is given up: closed, its
    /// slot of the REQ budget freed, and asked again after a backoff (a page on its doubling
    /// schedule and never reported synced meanwhile; a fetch by ids falls back to paging).
    /// Relays shed queries under load and refuse REQs with a NOTICE alone; an unanswered REQ
    /// held its slot for the life of the connection. At least 1.
    public var requestDeadlineMilliseconds: Int64 = 20_000
    /// A relay recorded as not speaking NIP-77 is asked again after this long.
    public var negentropyRecheckSeconds: Int64 = 7 * 86_400
    /// A relay recorded as silent to a first NEG-OPEN (weak evidence: it may have been busy) is
    /// asked again after this long.
    public var negentropySilenceRecheckSeconds: Int64 = 3_600

    /// The paging relay `url` starts from: its own when the host gave one, else `paging`.
    public func paging(for url: String) -> RelayPaging { relayPaging[url] ?? paging }

    /// Creates a configuration with every other setting at its default.
    ///
    /// - Parameters:
    ///   - relayURLs: The relays, by URL.
    ///   - identity: The identity that answers NIP-42 challenges; nil to answer none.
    ///   - leasePrefix: The prefix of lease ids, unique per process run.
    public init(relayURLs: [String], identity: SoftchatIdentity?, leasePrefix: String) {
        self.relayURLs = relayURLs
        self.identity = identity
        self.leasePrefix = leasePrefix
    }
}

/// The sans-IO engine that keeps one account in sync with many relays: a `RelaySession` per
/// relay and everything around it — delivery claims and leases, per-subscription sync windows
/// and paging (`SubscriptionSync`, durable with the events it counted), NIP-42, per-event
/// deadlines, keepalive, reconnect backoff. Its interface is quinn-proto's:
///
/// - `handle(_:now:)` for what happened (socket opened, text received, write completed,
///   connection lost, timer due, the answer to an account request);
/// - `pollAction()` for what to do next (open, write, ping, close, do this account work,
///   report), in order, until it returns nil;
/// - `pollTimeout()` for when to call `handle(.timer, now:)`.
///
/// It never does I/O, never reads a clock and never sleeps. Account work is returned as
/// `AccountRequest`s, one at a time: `pollAction()` returns nil while one is unanswered, so
/// every account write is committed before anything that depends on it happens (events and
/// the sync state that counted them are one transaction; a delivery decision is durable before
/// the next claim).
public final class SyncEngine {
    /// The configuration the engine was created with.
    public let configuration: SyncEngineConfiguration
    /// The relays, in `relayURLs` order; reached only through `withRelay(_:_:)`.
    var relays: [RelayRuntime] = []
    /// Per relay, the connection state last reported (what the overall state sums).
    var reportedStates: [RelayConnectionState] = []
    var queue: [Step] = []
    var queueStart = 0
    var awaiting: Context?
    /// The members' contexts while a `.group` awaits its reply (`awaiting` is the first).
    var awaitingGroup: [Context] = []
    /// The `.group` requests returned so far (statistics and tests).
    public private(set) var groupsSent = 0
    /// The writes those groups carried, members counted one by one.
    public private(set) var groupedWrites = 0
    var now: EngineTime
    var loaded = false
    var stopping = false
    /// The overall state last reported (`ManagedTransportEvent.state`).
    var overallReported: ManagedTransportState?
    var finished = false
    var leaseCounter = 0
    var nextToken = 0
    /// Ids committed or on their way to a commit, from any relay: later copies are dropped
    /// before verification.
    var recent = RecentIDs(capacity: 200_000)
    var ingestQueued = false
    var deliveriesQueued = false
    /// Events to commit with the next flush, in arrival order.
    var pendingIngest: [(relay: Int, event: VerifiedEvent)] = []

    /// A queued step: an action for the host, account work, or engine work that must wait for
    /// the account work queued before it.
    enum Step {
        case action(SyncEngineAction)
        case account(AccountRequest, Context)
        case flushIngest
        case flushDeliveries
        case confirmSent(relay: Int, eventIDs: [String])
        case finishStop
    }

    /// What an account reply is for.
    enum Context {
        case load
        case claim(relay: Int)
        case renew(relay: Int)
        case markWritten(relay: Int)
        case apply(relay: Int, results: [DeliveryResult])
        case release(relay: Int, leaseID: String)
        case commit(events: [(relay: Int, event: VerifiedEvent)], states: [CommittedState])
        case loadNegentropy
        case items(relay: Int, subscription: String, connection: Int)
        case recordNegentropy
    }

    /// Creates an engine; its first action asks the account for the subscription policy.
    ///
    /// - Parameters:
    ///   - configuration: The relays and settings.
    ///   - now: The clocks at creation.
    public init(configuration: SyncEngineConfiguration, now: EngineTime) {
        self.configuration = configuration
        self.now = now
        relays = configuration.relayURLs.indices.map { RelayRuntime(url: configuration.relayURLs[$0], index: $0) }
        reportedStates = Array(repeating: .connecting, count: relays.count)
        queue.append(.account(.loadSubscriptions(relayURLs: configuration.relayURLs), .load))
    }

    // MARK: The interface

    /// Feeds what happened at `now`. An account reply is ignored when no account request awaits
    /// one.
    ///
    /// `.timer` runs the handler of each of the relays' timers that expired by `now`, and only
    /// those (`timerExpired(_:relay:)`, quinn's `handle_timeout`); no other input looks at a
    /// deadline. After every input, timer or not, each connected relay makes the progress the
    /// input may have allowed: queued REQs go as the budget has room, and once the challenge
    /// window allows writing, work is claimed when it waits and the NEG and session frames are
    /// written (`makeProgress(_:)`).
    ///
    /// - Parameters:
    ///   - input: What happened.
    ///   - now: The clocks when it happened.
    public func handle(_ input: SyncEngineInput, now: EngineTime) {
        // The clocks `pollTimeout()` answered with: a timer due at that reading is expired now,
        // even one the table holds only while it is ahead (see `RelayRuntime.timers`).
        let previous = self.now
        self.now = now
        var expiredSince: EngineTime?
        switch input {
        case .account(let reply):
            guard let context = awaiting else { return }
            awaiting = nil
            let members = awaitingGroup
            awaitingGroup = []
            if members.isEmpty {
                accountReplied(reply, context)
            } else if case .group(let replies) = reply, replies.count == members.count {
                for (memberReply, memberContext) in zip(replies, members) { accountReplied(memberReply, memberContext) }
            } else {
                // A group answered with one reply: a failure applies to every member; anything
                // else is not an answer to it.
                let error: SoftchatError =
                    if case .failed(let e) = reply { e } else {
                        .invalidPersistenceResult("a group of \(members.count) writes was answered with \(reply)", operation: .relayRecovery)
                    }
                for memberContext in members { accountReplied(.failed(error), memberContext) }
            }
        case .relayInformation(let relay, _), .opened(let relay), .received(let relay, _), .oversized(let relay, _, _),
            .alive(let relay), .bytesArrived(let relay), .written(let relay, _), .lost(let relay, _), .drop(let relay):
            guard relays.indices.contains(relay) else { return }
            withRelay(relay) { $0.handle($1, input) }
        case .workAvailable:
            for r in relays.indices { withRelay(r) { $0.handle($1, input) } }
        case .stop:
            stop()
        case .timer:
            expiredSince = previous
        }
        service(expiredSince: expiredSince)
    }

    /// The next thing to do, or nil (nothing now, or an account request is unanswered).
    ///
    /// - Returns: The next action, in order; nil when there is none now or an account request
    ///   awaits its answer.
    public func pollAction() -> SyncEngineAction? {
        while awaiting == nil, queueStart < queue.count {
            let step = queue[queueStart]
            queueStart += 1
            if queueStart > 1024 && queueStart * 2 > queue.count {
                queue.removeFirst(queueStart)
                queueStart = 0
            }
            switch step {
            case .action(let action):
                return action
            case .account(let request, let context):
                awaiting = context
                // Writes queued one after another go to the account as one transaction.
                guard request.joinsGroups else { return .account(request) }
                var requests = [request]
                var contexts = [context]
                while queueStart < queue.count, case .account(let next, let nextContext) = queue[queueStart], next.joinsGroups {
                    requests.append(next)
                    contexts.append(nextContext)
                    queueStart += 1
                }
                guard requests.count > 1 else { return .account(request) }
                awaitingGroup = contexts
                groupsSent += 1
                groupedWrites += requests.count
                return .account(.group(requests))
            case .flushIngest:
                ingestQueued = false
                flushIngest()
            case .flushDeliveries:
                deliveriesQueued = false
                flushDeliveries()
            case .confirmSent(let relay, let ids):
                withRelay(relay) { $0.confirmSent($1, ids) }
            case .finishStop:
                finishStop()
            }
        }
        return nil
    }

    /// When to call `handle(.timer, now:)`, in monotonic milliseconds; nil when nothing is timed.
    /// Ask again after every `handle` and `pollAction()`: the earliest entry of every relay's
    /// timer table (`RelayRuntime.timers`), which `handle(.timer)` serves entry by entry. A time
    /// at or before now means at once; once `.timer` ran at it, it is never returned again for
    /// the same reason (each handler acts or moves its deadline).
    ///
    /// - Returns: The earliest deadline of any relay, in monotonic milliseconds; nil when nothing
    ///   is timed.
    public func pollTimeout() -> Int64? {
        guard !finished else { return nil }
        var next: Int64?
        func consider(_ t: Int64?) {
            guard let t else { return }
            next = min(next ?? t, t)
        }
        for relay in relays {
            consider(relay.nextDeadline(now: now, configuration: configuration))
        }
        return next
    }

    /// True once `.stopped` was returned.
    public var isStopped: Bool { finished && queueStart >= queue.count }

    /// Per relay URL, its connection state and statistics.
    public var relayStates: [(url: String, state: RelayConnectionState, statistics: RelayStatistics)] {
        relays.map { ($0.url, reportedStates[$0.index], $0.statistics) }
    }

    /// Per relay URL, per subscription id: true once a whole window was synced on this run.
    public var syncedSubscriptions: [String: [String: Bool]] {
        var out: [String: [String: Bool]] = [:]
        for relay in relays {
            var subs: [String: Bool] = [:]
            for (id, sub) in relay.subscriptions { subs[id] = sub.syncedOnce }
            out[relay.url] = subs
        }
        return out
    }

    /// Leases the engine holds now (a stopped engine holds none).
    public var heldLeaseCount: Int { relays.reduce(0) { $0 + $1.delivery.claims.count } }

    // MARK: Queue

    func push(_ step: Step) { queue.append(step) }

    /// Runs `body` on relay `r` with the context a relay's methods take: the one place the
    /// engine reaches into a relay's state (see `RelayContext`).
    func withRelay<T>(_ r: Int, _ body: (inout RelayRuntime, RelayContext) -> T) -> T {
        body(&relays[r], RelayContext(engine: self))
    }

    /// Queues a report for the host, its relay text bounded (`ManagedTransportEvent.bounded`).
    func report(_ event: ManagedTransportEvent) { push(.action(.report(event.bounded))) }

    /// Why the engine's relays all stopped, as the overall `stopped` state says.
    static let stopReason = "stopped by the host"

    func setState(_ relay: Int, _ state: RelayConnectionState) {
        guard reportedStates[relay] != state else { return }
        reportedStates[relay] = state
        report(.relayState(relayURL: configuration.relayURLs[relay], state))
        // The overall state follows; `stopped` is reported last of all, by `finishStop`.
        guard !stopping else { return }
        let overall = ManagedTransportState.summing(reportedStates, stopReason: Self.stopReason)
        if overall != overallReported {
            overallReported = overall
            report(.state(overall))
        }
    }

    func queueIngestFlush() {
        guard !ingestQueued else { return }
        ingestQueued = true
        push(.flushIngest)
    }

    func queueDeliveryFlush() {
        guard !deliveriesQueued else { return }
        deliveriesQueued = true
        push(.flushDeliveries)
    }

    // MARK: Account replies

    func accountReplied(_ reply: AccountReply, _ context: Context) {
        if case .failed(let error) = reply {
            accountFailed(error, context)
            return
        }
        switch context {
        case .load:
            guard case .subscriptions(let byRelay) = reply else { return }
            loaded = true
            for r in relays.indices { withRelay(r) { relay, _ in relay.policy = byRelay[relay.url] ?? [] } }
            guard !stopping else { return }
            if configuration.negentropy {
                push(.account(.loadNegentropySupport(relayURLs: configuration.relayURLs), .loadNegentropy))
            }
            for r in relays.indices { withRelay(r) { $0.start($1) } }
        case .claim(let relay), .renew(let relay), .apply(let relay, _), .release(let relay, _), .items(let relay, _, _):
            withRelay(relay) { $0.accountReplied($1, reply, context) }
        case .markWritten, .recordNegentropy:
            break
        case .commit(let events, let states):
            guard case .committed(let result) = reply else { return }
            committed(events, states, result)
        case .loadNegentropy:
            guard case .negentropySupport(let records) = reply else { return }
            for r in relays.indices { withRelay(r) { relay, _ in relay.neg.record = records[relay.url] } }
        }
    }

    /// An account request failed: nothing of it happened. Work it carried is given back to
    /// durable state by cutting the connection (the relay's answers come again, the intents
    /// are claimed again once their lease ends).
    func accountFailed(_ error: SoftchatError, _ context: Context) {
        switch context {
        case .load:
            // Without the policy nothing can start.
            for url in configuration.relayURLs {
                report(.notice(relayURL: url, "cannot read the subscription policy: \(error.code.rawValue): \(error.message)"))
            }
            stop()
        case .claim(let relay), .renew(let relay), .markWritten(let relay), .apply(let relay, _), .release(let relay, _),
            .items(let relay, _, _):
            withRelay(relay) { $0.accountFailed($1, error, context) }
        case .loadNegentropy, .recordNegentropy:
            // Without the record the relay is asked again; a record not written is asked again.
            report(.notice(relayURL: configuration.relayURLs.first ?? "", "negentropy support record: \(error.code.rawValue): \(error.message)"))
        case .commit(let events, let states):
            var byRelay: [Int: [VerifiedEvent]] = [:]
            for (relay, event) in events { byRelay[relay, default: []].append(event) }
            for s in states where byRelay[s.relay] == nil { byRelay[s.relay] = [] }
            recent.removeAll()
            for relay in byRelay.keys.sorted() { withRelay(relay) { $0.commitFailed($1, byRelay[relay]!, error) } }
        }
    }

    // MARK: Stopping

    func stop() {
        guard !stopping else { return }
        stopping = true
        for r in relays.indices { withRelay(r) { $0.stop($1) } }
        queueIngestFlush()
        queueDeliveryFlush()
        push(.finishStop)
    }

    func finishStop() {
        for r in relays.indices { withRelay(r) { $0.finishStop($1) } }
        finished = true
        overallReported = .stopped(reason: Self.stopReason)
        report(.state(.stopped(reason: Self.stopReason)))
        push(.action(.stopped))
    }
}
