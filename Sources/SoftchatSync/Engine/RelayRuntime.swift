public import SoftchatCore
import SoftchatJSON

/// The engine's named deadlines for one relay (`RelayRuntime.timers`). `handle(.timer)` runs
/// the handler of each one that expired (`RelayRuntime.timerExpired(_:_:)`), relay by relay,
/// in the order of `allCases` — the order the checks ran in when every input ran all of them:
/// the connection first (reconnect, the session's timers, AUTH, keepalive), then what rides on
/// it (NIP-77, deeper windows, REQs), then publishing.
enum EngineTimer: String, CaseIterable, Sendable {
    /// The backoff before the next connection attempt ends.
    case reconnect
    /// An event written to the relay reaches its acknowledgement deadline (the session's).
    case acknowledgement
    /// Our AUTH went unanswered for a second (some relays never answer a good one).
    case authenticationAnswer
    /// An idle connection is pinged, or a ping's read deadline ends.
    case keepalive
    /// A NIP-77 message goes unanswered for the negentropy deadline.
    case negentropyAnswer
    /// A subscription synced by paging gets its deeper window (`deepResyncIntervalSeconds`,
    /// kept in Unix seconds with the sync state, converted here) while its connection stays up.
    case deeperResync
    /// A one-shot REQ (a page, an ahead REQ, a fetch by ids) silent past its deadline without its
    /// EOSE is given up: closed, its slot freed, and asked again after a backoff.
    case requestAnswer
    /// A REQ that may have been refused (a NOTICE came, or the relay's limit) is sent again.
    case refusedRequestRetry
    /// A page the relay closed with `error:`, `rate-limited:` or for its limit, or left
    /// unanswered, is asked again (the wait doubling per failure of the same page).
    case closedPageRetry
    /// A one-shot REQ asked again after its deadline waits out its backoff in the queue.
    case requestBackoff
    /// The wait for a NIP-42 challenge before the first write ends.
    case authenticationGrace
    /// A pause in claiming after the relay said "later" ends.
    case claimPause
    /// A held lease is renewed (at half its duration).
    case leaseRenewal
}

/// Everything the engine keeps for one relay, and what it does with it: the engine routes each
/// input to the relay it is for (`SyncEngine.withRelay(_:_:)`), and the relay's methods
/// (`RelayRuntime+Connection`, `+Paging`, `+Timers`, `+Requests`, `+Negentropy`, `+Delivery`,
/// `+Inputs`, `OversizedMessage`) work on their own state, reaching the engine only through a
/// `RelayContext`.
struct RelayRuntime {
    enum Phase: Equatable {
        /// Waiting for the policy or the NIP-11 document.
        case starting
        case connecting
        case connected
        case backingOff(until: Int64)
        case stopped
    }

    let url: String
    /// Its place in the engine's relays (`relay:` in inputs, actions and account contexts).
    let index: Int
    /// Where the connection stands. Leaving `connected` drops `connection`, whatever the cause
    /// (lost, dropped, stopped): nothing of a connection outlives it by a forgotten reset.
    var phase = Phase.starting {
        didSet { if phase != .connected { connection = nil } }
    }
    /// What exists only while connected (`phase == .connected`), created by `opened(_:)`.
    var connection: RelayConnection?
    var session: RelaySession?
    var limits: RelayLimits?
    /// When NIP-11 was last asked for (monotonic milliseconds), and whether the answer is due.
    var informationAskedAt: Int64?
    var informationPending = false
    /// How this relay pages: configured, narrowed by NIP-11, and learned by every subscription's
    /// pages (each passes on what it learns to the others).
    var paging: RelayPaging?
    var statistics = RelayStatistics()
    var everConnected = false

    // Subscriptions: the account's policy for this relay, and the sync of each.
    var policy: [EngineSubscription] = []
    var subscriptions: [String: SubscriptionRuntime] = [:]

    /// The REQ budget (RelayRuntime+Requests, RequestBudget).
    var requests = RequestBudget()

    /// NIP-77 on this relay: the account's record, and this connection's reconciliations and
    /// fetches (NegentropyMachine, RelayRuntime+Negentropy).
    var neg = NegentropyMachine()
    /// Ids of events this relay sent over our frame bound, on any connection of this engine (the
    /// most recent `SyncEngine.oversizedIDsRemembered`): a reconciliation does not fetch them
    /// again, it reports them skipped (issue 45, path 10: each NIP-77 connection fetched them
    /// again, and skipped them again). Not durable: a new process asks once more.
    var oversizedIDs = RecentIDs(capacity: SyncEngine.oversizedIDsRemembered)

    /// Publishing: claims, leases, decisions waiting for their commit (DeliveryMachine).
    var delivery = DeliveryMachine()

    /// Events handed out by the session and not yet confirmed (its bound is 1,024): the
    /// session's count, asked, not mirrored.
    var awaitingCommit: Int { session?.awaitingPersistenceCount ?? 0 }

    var authentication = AuthenticationMachine()

    init(url: String, index: Int) {
        self.url = url
        self.index = index
    }

    /// Every deadline the engine keeps for this relay, by name, on the one monotonic clock (the
    /// session's deadlines and the deeper windows, kept in Unix seconds, are converted here from
    /// `now`: one not yet due on the wall clock always lies ahead). The engine's `pollTimeout()`
    /// is the earliest entry over all relays; `handle(.timer)` runs the handler of each entry due
    /// (`RelayRuntime.timerExpired(_:_:)`), as quinn's `handle_timeout` does, and no other
    /// input looks at the table. Each handler acts or moves its deadline, so no entry stays at or
    /// before `now` once its handler ran (the host would call `.timer` again at once, for ever).
    /// Three entries are here only while ahead of `now` — the challenge window
    /// (`authenticationGrace`), a REQ's backoff (`requestBackoff`) and a claim pause
    /// (`claimPause`): past their instant nothing is left but what the engine's progress pass
    /// does after every input (write, send a queued REQ as the budget has room, claim), so
    /// `handle(.timer)` finds them in the table as it stood at the previous input.
    func timers(now: EngineTime, configuration: SyncEngineConfiguration) -> [EngineTimer: Int64] {
        var table: [EngineTimer: Int64] = [:]
        func set(_ timer: EngineTimer, _ t: Int64?) { if let t { table[timer] = t } }
        switch phase {
        case .starting, .stopped, .connecting:
            break
        case .backingOff(let until):
            set(.reconnect, until)
        case .connected:
            set(.acknowledgement, session?.pollTimeout().map { now.monotonicMilliseconds + max(0, $0 - now.unixSeconds) * 1000 })
            set(.authenticationGrace, authentication.graceDeadline(now: now.monotonicMilliseconds))
            set(.authenticationAnswer, authentication.answerDeadline)
            set(.refusedRequestRetry, requests.nextSuspectDue(wait: SyncEngine.refusedRetryMilliseconds))
            set(.requestAnswer, requests.nextDeadline)
            set(.requestBackoff, requests.nextBackoffDue(now: now.monotonicMilliseconds))
            set(.closedPageRetry, subscriptions.values.compactMap(\.pageRetryAt).min())
            set(.negentropyAnswer, neg.answerDeadline(configuration.negentropyDeadlineMilliseconds))
            set(
                .keepalive,
                connection?.keepalive.deadline(
                    interval: configuration.keepaliveIntervalMilliseconds, readDeadline: configuration.readDeadlineMilliseconds))
            set(
                .claimPause, delivery.claimPauseDeadline(now: now.monotonicMilliseconds, publishes: configuration.publishes, sessionIdle: sessionIdle)
            )
            set(
                .deeperResync,
                deeperResyncDue(interval: configuration.deepResyncIntervalSeconds).map {
                    now.monotonicMilliseconds + max(0, $0 - now.unixSeconds) * 1000
                })
        }
        set(.leaseRenewal, delivery.renewalDeadline)
        return table
    }

    /// The session holds no delivery: its queue is drained (the condition of a new claim).
    var sessionIdle: Bool { (session?.heldDeliveryCount ?? 0) == 0 }

    /// When the first of this relay's paged subscriptions is due its deeper window (Unix
    /// seconds): only those at rest (no window, no reconciliation) — a relay that speaks NIP-77
    /// reconciles every age on each connection, and while connected the live REQ brings every
    /// event the relay receives, so what a deeper window finds arrived while we were away.
    func deeperResyncDue(interval: Int64) -> Int64? {
        guard !neg.heard else { return nil }
        return subscriptions.values.filter(\.atRest)
            .compactMap { $0.sync.deeperWindowDue(interval: interval) }.min()
    }

    /// The earliest time something is due for this relay.
    func nextDeadline(now: EngineTime, configuration: SyncEngineConfiguration) -> Int64? {
        timers(now: now, configuration: configuration).values.min()
    }

    /// Back to the durable sync states (after a commit that failed).
    mutating func reloadDurableStates() {
        for (id, sub) in subscriptions {
            subscriptions[id] = sub.reloaded()
        }
    }
}

/// What a relay's connection holds while it is up, dropped whole when it ends (`RelayRuntime.phase`
/// leaving `connected`): the REQs' owners, text held back for a commit, the keepalive.
struct RelayConnection {
    /// Session subscription id of a page → the policy subscription it pages.
    var pageOwner: [String: String] = [:]
    /// Session subscription id of a one-shot REQ for events dated after a window (future-dated
    /// ones) → the policy subscription it asks for, as `pageOwner` is for pages: closed at its
    /// EOSE, asked again for its owner when unanswered.
    var aheadREQs: [String: String] = [:]
    /// Relay text held back while too many events await their commit, in arrival order.
    var deferred: [String] = []
    /// When the relay was last heard, and the ping in flight (monotonic ms).
    var keepalive = Keepalive()

    /// A connection that opened at `now` (monotonic ms): heard then.
    init(openedAt now: Int64) { keepalive.heard(now) }
}

/// Where a subscription's live REQ stands on the current connection.
enum LiveFeed: Equatable {
    /// Not sent: no connection, or it has just opened.
    case notSent
    /// Sent; the relay has not answered it yet.
    case sent
    /// Its EOSE came: the relay has registered it, so every event it stores from now on
    /// reaches us live. A reconciliation opens only after it: its set is the relay's at
    /// NEG-OPEN, and an event stored between that and the live REQ (which asks one stored
    /// event) would be in neither.
    case registered
    /// It will not run on this connection, for this reason (the relay's words, or the
    /// session's): the relay closed it and the session does not send it again on its own
    /// (`restricted:`, `blocked:`, `invalid:`, no prefix, `auth-required:` while no AUTH of ours
    /// was accepted), or the session could not send it (over the relay's frame). Nothing
    /// reaches the subscription live; NIP-77 and paging do not wait for it, and its `synced`
    /// reports say so (`SyncOutcome.liveFeedRefused`). An EOSE for it after all (the session's
    /// replay once the relay accepted our AUTH) makes it `registered`.
    case refused(String)

    /// Nothing more to wait for: a reconciliation may open.
    var settled: Bool {
        switch self {
        case .registered, .refused: true
        case .notSent, .sent: false
        }
    }
}

/// One policy subscription's sync on one relay.
struct SubscriptionRuntime {
    let id: String
    /// The stem of this subscription's REQ ids: its id cut to 40 characters and its index among
    /// the relay's subscriptions, so two ids that share a prefix never share a REQ id.
    var stem = ""
    let filtersJSON: [String]
    let filters: [RelayFilter]
    var sync: SubscriptionSync
    /// The state last committed (what a failed commit falls back to).
    var durable: SubscriptionSync
    /// The session subscription id of the page in flight.
    var pageID: String?
    var pageNumber = 0
    /// The relay closed the page or left it unanswered: why it is not in flight, and when it is
    /// asked again (`RelayRuntime.pageFailed`).
    var pageHold: PageHold?
    /// Failures in a row of the same page on this connection (CLOSED or no answer by the
    /// deadline): its backoff's exponent. Back to 0 at the page's EOSE.
    var pageFailures = 0
    /// The page already went out again at once after an `auth-required:` that came when our AUTH
    /// had been accepted (a relay that answers out of order); the next such one is a refusal.
    var pageAuthReplayed = false
    /// This window was reported refused on this connection (once per page): the relay refused
    /// its page for good or `SyncEngine.refusalTries` times in a row, or the session could not
    /// send it. Never `synced` meanwhile.
    var refused = false
    /// This connection's live REQ for the subscription (the `~live…` chunk that carries it).
    var live = LiveFeed.notSent
    /// A page boundary or the window changed since the last commit (what a page in flight
    /// counted is not durable: a loaded state asks that page again).
    var dirty = false
    /// The window completed since the last commit.
    var completed: SyncOutcome?
    var windowEvents = 0
    /// What the windows since the last `synced` report left out of the account, and why, for
    /// the next one (`SyncOutcome.skipped`).
    var skipped: [SkippedEvents] = []
    var syncedOnce = false
    /// When the current connection opened (Unix seconds): a window resumed from an earlier
    /// connection ends before it, so another window follows at once, up to now.
    var connectedAt: Int64 = 0
    /// The NIP-77 reconciliation on this connection, once its items are loaded.
    var negentropy: NegentropySync?
    /// Waiting for the account's reconciliation items.
    var awaitingItems = false

    /// No NIP-77 reconciliation runs or waits for its items: paging owns the window.
    var atRest: Bool { negentropy == nil && !awaitingItems }

    /// When a held page is asked again (monotonic ms), if on a clock.
    var pageRetryAt: Int64? {
        guard case .retryAt(let t) = pageHold else { return nil }
        return t
    }

    /// The page ended with its EOSE, or the connection ended: failures in a row start over.
    mutating func clearPageFailures() {
        pageHold = nil
        pageFailures = 0
        pageAuthReplayed = false
        refused = false
    }

    func reloaded() -> SubscriptionRuntime {
        var copy = self
        copy.sync = durable
        copy.sync.restarted()
        copy.dirty = false
        copy.completed = nil
        copy.negentropy = nil
        copy.awaitingItems = false
        return copy
    }

    /// The live REQ's filters: the host's filters with `limit: 1`. Its stored events are the
    /// pages' business (the one it brings is dropped by id before verification); what it is
    /// for is every event the relay receives from now on, whatever its `created_at` — a gift
    /// wrap backdated by two days, a message from an outbox that was offline — so no `since`.
    func liveFilters() -> [String] {
        filters.map { filter in
            var members = filter.json.members
            SubscriptionSync.set("limit", 1, in: &members)
            return JSONValue.object(JSONObject(members: members)).jsonText
        }
    }

    /// The REQ for what is dated after the window: future-dated events already stored (a
    /// sender whose clock runs ahead) belong to no window yet and would wait for the next one.
    /// Newest first, so a page of them is the ones that matter. It starts at the window's last
    /// second, not after it: the window's first page asks for that second in the form of the
    /// `until` convention known, and a relay that changed to reading `until` exclusively answers
    /// it without that second's events, with no page before it to show the change (found by the
    /// simulator, issue 45). The second asked twice costs duplicates, dropped by id.
    func aheadFilters(now: Int64) -> [String] {
        let until = sync.windowUntil ?? now
        return filters.map { filter in
            var members = filter.json.members
            SubscriptionSync.set("since", max(until, filter.since ?? 0), in: &members)
            SubscriptionSync.set("limit", Int64(sync.paging.pageSize), in: &members)
            return JSONValue.object(JSONObject(members: members)).jsonText
        }
    }
}

/// Why a subscription's page is not in flight while its window is open: the relay closed it or
/// left it unanswered (`RelayRuntime.pageFailed`). It is asked again whole (same `until`).
enum PageHold: Equatable {
    /// At this monotonic time (ms): the backoff after a failure that may pass (`error:`,
    /// `rate-limited:`, the relay's limit, no answer by the deadline).
    case retryAt(Int64)
    /// Once the relay accepts our AUTH (it said `auth-required:`): not on a clock.
    case authentication
    /// Not on this connection (`blocked:`, `restricted:`, `invalid:`, no prefix, `auth-required:`
    /// we do not answer or that came again after our AUTH was accepted): the next one asks it.
    case refused
}

extension RelayStatistics {
    mutating func count(_ decision: DeliveryDecision) {
        switch decision.state {
        case .accepted: accepted += 1
        case .rejected: rejected += 1
        case .retryable: retried += 1
        case .pending, .inFlight: break
        }
    }
}
