public import SoftchatCore

/// The two clocks the engine is given with every input: monotonic milliseconds for its timers
/// (a wall clock that jumps must not fire or starve a deadline) and Unix seconds for what is
/// about dates (sync windows, NIP-42 `created_at`, lease expiry stored in the account).
public struct EngineTime: Sendable, Hashable {
    /// Milliseconds on a clock that never jumps, for timers and deadlines.
    public var monotonicMilliseconds: Int64
    /// Wall-clock time in Unix seconds, for dates.
    public var unixSeconds: Int64
    /// Creates a reading of both clocks.
    ///
    /// - Parameters:
    ///   - monotonicMilliseconds: Milliseconds on a monotonic clock (any origin, never jumping).
    ///   - unixSeconds: Wall-clock time, in Unix seconds.
    public init(monotonicMilliseconds: Int64, unixSeconds: Int64) {
        self.monotonicMilliseconds = monotonicMilliseconds
        self.unixSeconds = unixSeconds
    }
}

/// What a relay's NIP-11 document says that the engine uses. Its numbers are the relay's
/// choice, so each holds only a value in `RelayStatedNumber.statedRange` (1 to 2^31 − 1): any
/// other, given to the initializer or assigned, reads as nil ("not stated").
public struct RelayLimits: Sendable, Hashable {
    /// `limitation.max_message_length`: the largest frame the relay takes.
    public var maxMessageLength: Int? { didSet { maxMessageLength = RelayStatedNumber.limit(maxMessageLength) } }
    /// `limitation.max_limit`: the most events it sends for one filter (a page).
    public var maxLimit: Int? { didSet { maxLimit = RelayStatedNumber.limit(maxLimit) } }
    /// It takes NIP-01 EVENTS batches.
    public var acceptsEventsBatch: Bool
    /// It speaks NIP-42 (it may challenge at once).
    public var supportsAuthentication: Bool
    /// `limitation.auth_required`.
    public var authenticationRequired: Bool
    /// `software`, for known quirks (nostr-relay answers EVENTs in order with empty ids, and
    /// never answers a good AUTH).
    public var software: String? { didSet { software = software.map { RelayText.forReport($0) } } }
    /// How the relay reads `until`, when known (nil: the engine's configured convention).
    public var untilConvention: RelayPaging.UntilConvention?
    /// NIP-77: true when the document lists 77, false when it is known not to speak it, nil
    /// when unknown (the engine then asks with NEG-OPEN and remembers the answer).
    public var supportsNegentropy: Bool?
    /// `limitation.max_subscriptions`: the most REQs the relay holds open per connection (nil:
    /// not stated; the engine then starts at `SyncEngine.defaultREQBudget` and learns).
    public var maxSubscriptions: Int? { didSet { maxSubscriptions = RelayStatedNumber.limit(maxSubscriptions) } }
    /// `limitation.max_filters`: the most filters one REQ may carry.
    public var maxFilters: Int? { didSet { maxFilters = RelayStatedNumber.limit(maxFilters) } }
    /// The document's `name`, for display only.
    public var name: String? { didSet { name = name.map { RelayText.forReport($0) } } }

    /// Creates limits; every value defaults to "not stated".
    ///
    /// - Parameters:
    ///   - maxMessageLength: `limitation.max_message_length`, the largest frame the relay takes.
    ///   - maxLimit: `limitation.max_limit`, the most events it sends for one filter.
    ///   - acceptsEventsBatch: Whether it takes NIP-01 EVENTS batches.
    ///   - supportsAuthentication: Whether it speaks NIP-42.
    ///   - authenticationRequired: `limitation.auth_required`.
    ///   - software: The document's `software`, for known quirks.
    ///   - untilConvention: How it reads `until`, when known.
    ///   - supportsNegentropy: Whether it speaks NIP-77: true, false, or nil when unknown.
    ///   - maxSubscriptions: `limitation.max_subscriptions`, the most REQs open per connection.
    ///   - maxFilters: `limitation.max_filters`, the most filters per REQ.
    ///   - name: The document's `name`, for display.
    public init(
        maxMessageLength: Int? = nil, maxLimit: Int? = nil, acceptsEventsBatch: Bool = false,
        supportsAuthentication: Bool = false, authenticationRequired: Bool = false, software: String? = nil,
        untilConvention: RelayPaging.UntilConvention? = nil, supportsNegentropy: Bool? = nil,
        maxSubscriptions: Int? = nil, maxFilters: Int? = nil, name: String? = nil
    ) {
        self.name = name.map { RelayText.forReport($0) }
        self.maxSubscriptions = RelayStatedNumber.limit(maxSubscriptions)
        self.maxFilters = RelayStatedNumber.limit(maxFilters)
        self.untilConvention = untilConvention
        self.supportsNegentropy = supportsNegentropy
        self.maxMessageLength = RelayStatedNumber.limit(maxMessageLength)
        self.maxLimit = RelayStatedNumber.limit(maxLimit)
        self.acceptsEventsBatch = acceptsEventsBatch
        self.supportsAuthentication = supportsAuthentication
        self.authenticationRequired = authenticationRequired
        self.software = software.map { RelayText.forReport($0) }
    }
}

/// Whether multi-event publishes go out as one EVENTS frame.
public enum EventsBatching: Sendable, Hashable {
    /// When the relay's NIP-11 document says it accepts them.
    case auto
    /// Always, whatever the relay's document says.
    case always
    /// Never: one EVENT frame per event.
    case never
}

/// A subscription the account keeps for a relay, with the sync state it has there.
public struct EngineSubscription: Sendable, Hashable {
    /// The subscription's id in the account's policy, also its live REQ's subscription id.
    public let subscriptionID: String
    /// The subscription's NIP-01 filters, as JSON text.
    public let filtersJSON: [String]
    /// The sync state the account holds for this relay and subscription (nil: never synced
    /// there); it is resumed only when `storedFiltersJSON` equals `filtersJSON`.
    public let storedStateJSON: String?
    /// The filters `storedStateJSON` was written for (nil when there is no stored state).
    public let storedFiltersJSON: [String]?
    /// The account's cursor, used only when no sync state is stored (`storedFiltersJSON` nil): a
    /// stored state carries its own cursor, and a state for other filters means the filters
    /// changed, so the sync starts without one.
    public let cursor: Int64?
    /// Seconds re-asked behind the cursor (nil: `SubscriptionSync.defaultHorizon`).
    public let horizon: Int64?

    /// Creates a subscription as the account holds it for one relay.
    ///
    /// - Parameters:
    ///   - subscriptionID: The subscription's id.
    ///   - filtersJSON: The subscription's NIP-01 filters, as JSON text.
    ///   - storedFiltersJSON: The filters the stored state was written for; nil without one.
    ///   - storedStateJSON: The stored sync state's JSON text; nil without one.
    ///   - cursor: The account's cursor for this relay and subscription, if any.
    ///   - horizon: Seconds re-asked behind the cursor; nil for the default.
    public init(
        subscriptionID: String, filtersJSON: [String], storedFiltersJSON: [String]? = nil, storedStateJSON: String? = nil,
        cursor: Int64? = nil, horizon: Int64? = nil
    ) {
        self.subscriptionID = subscriptionID
        self.filtersJSON = filtersJSON
        self.storedFiltersJSON = storedFiltersJSON
        self.storedStateJSON = storedStateJSON
        self.cursor = cursor
        self.horizon = horizon
    }
}

/// Account work the engine needs done, in order. Each is one transaction; the host answers it
/// with `handle(.account(reply), now:)` before calling `pollAction()` again.
public enum AccountRequest: Sendable, Hashable {
    /// The subscription policy for each relay (answer: `.subscriptions`).
    case loadSubscriptions(relayURLs: [String])
    /// Claim up to `max` intents for `relayURL` under a new lease (answer: `.claimed`).
    case claim(relayURL: String, leaseID: String, max: Int)
    /// Extend a lease (answer: `.renewed`).
    case renew(DeliveryClaim)
    /// The frame carrying these intents was written to the socket (answer: `.done`).
    case markWritten(DeliveryClaim, intentIDs: [String])
    /// Relay decisions for intents the claim holds (answer: `.done`).
    case applyResults(DeliveryClaim, results: [DeliveryResult])
    /// Give the claim's unfinished work back (answer: `.done`).
    case release(DeliveryClaim)
    /// Store these events and sync states together (answer: `.committed`).
    case commit(events: [VerifiedEvent], syncStates: [SyncStateRecord], receivedAt: Int64)
    /// What the account recorded about these relays' NIP-77 support (answer: `.negentropySupport`).
    case loadNegentropySupport(relayURLs: [String])
    /// The negentropy items (created_at, id) of the stored events each filter matches, whatever
    /// their age (answer: `.reconciliationItems`, one list per filter, in order).
    case reconciliationItems(relayURL: String, subscriptionID: String, filtersJSON: [String])
    /// Remember what the relay did with NEG-OPEN (answer: `.done`).
    case recordNegentropySupport(NegentropySupportRecord)
    /// Several writes queued one after another (socket-written marks, delivery results,
    /// releases, commits of received events with their sync states, NIP-77 records), done in one
    /// transaction: each member as if alone (a member that fails changes nothing of its own and
    /// is answered `.failed`; the others still apply), the whole committed once before the
    /// answer (answer: `.group`, one reply per member, in order). When the transaction itself
    /// cannot commit, every member is answered `.failed`.
    case group([AccountRequest])

    /// Whether the request only writes and may join a `.group` with the writes queued beside it.
    public var joinsGroups: Bool {
        switch self {
        case .markWritten, .applyResults, .release, .commit, .recordNegentropySupport: true
        case .loadSubscriptions, .claim, .renew, .loadNegentropySupport, .reconciliationItems, .group: false
        }
    }
}

/// The host's answer to the last `AccountRequest`.
public enum AccountReply: Sendable {
    /// Per relay URL, its subscriptions.
    case subscriptions([String: [EngineSubscription]])
    /// The claim and its payloads, or nil when nothing was claimable (answers `.claim`).
    case claimed(DeliveryClaimResult?)
    /// Nothing was claimable, but work for the relay is held by another live lease until this
    /// Unix time (answers `.claim`): the engine claims again then, not at the next keepalive.
    case heldUntil(Int64)
    /// The claim with its new expiry (answers `.renew`).
    case renewed(DeliveryClaim)
    /// The request was carried out (answers `.markWritten`, `.applyResults`, `.release` and
    /// `.recordNegentropySupport`).
    case done
    /// What the commit did with each event (answers `.commit`).
    case committed(IngestionResult)
    /// Per relay URL, its record (relays without one are absent).
    case negentropySupport([String: NegentropySupportRecord])
    /// One list per filter.
    case reconciliationItems([[NegentropyItem]])
    /// The request failed; nothing of it happened.
    case failed(SoftchatError)
    /// One reply per member of a `.group`, in order.
    case group([AccountReply])
}

/// One relay connection's state, as the host shows it.
public enum RelayConnectionState: Sendable, Hashable, CustomStringConvertible {
    /// Fetching the relay's NIP-11 document.
    case fetchingInformation
    /// Opening the WebSocket.
    case connecting
    /// Connected and authenticating (NIP-42): the relay requires it, or an AUTH awaits its answer.
    case authenticating
    /// Connected: subscriptions and publishes go out.
    case ready
    /// Waiting to reconnect for this many milliseconds from when it was reported.
    case backingOff(delayMilliseconds: Int64)
    /// Stopped for good: the engine stopped, or the relay's session could not start.
    case stopped

    /// The state's name for logs, with the delay when backing off.
    public var description: String {
        switch self {
        case .fetchingInformation: "fetchingInformation"
        case .connecting: "connecting"
        case .authenticating: "authenticating"
        case .ready: "ready"
        case .backingOff(let ms): "backingOff(\(ms) ms)"
        case .stopped: "stopped"
        }
    }
}

/// Counters per relay since the engine started.
public struct RelayStatistics: Sendable, Hashable {
    /// Publish decisions committed as accepted.
    public var accepted = 0
    /// Publish decisions committed as rejected.
    public var rejected = 0
    /// Retryable outcomes (timeouts, lost connections, rate limits…): the intent goes back to the pool.
    public var retried = 0
    /// Connections opened after the first.
    public var reconnects = 0
    /// Events received and verified, then queued for a commit.
    public var eventsReceived = 0
    /// Events dropped by id before verification (the sync overlap, copies from other relays).
    public var duplicatesSkipped = 0
    /// Publish → OK round trip of the last answered event, in milliseconds; nil before the first.
    public var lastLatencyMilliseconds: Int64?
    /// Mean publish → OK round trip over every answered event, in milliseconds; nil before the
    /// first.
    public var meanLatencyMilliseconds: Int64?
    var latencyTotal: Int64 = 0
    var latencyCount: Int64 = 0

    /// Creates statistics with every counter at zero.
    public init() {}

    mutating func recordLatency(_ ms: Int64) {
        lastLatencyMilliseconds = ms
        latencyTotal += ms
        latencyCount += 1
        meanLatencyMilliseconds = latencyTotal / latencyCount
    }
}

/// The transport's lifecycle as a whole, summed up from its relays' states: `stopped` once every
/// relay stopped, `ready` once every relay that has not stopped is ready, else `authenticating`
/// while any relay authenticates, else `connecting` while any connects or fetches its NIP-11
/// document, else `backingOff`.
public enum ManagedTransportState: Sendable, Hashable, CustomStringConvertible {
    /// Some relay is connecting or fetching its NIP-11 document, and none is authenticating.
    case connecting
    /// Some relay is authenticating (NIP-42).
    case authenticating
    /// Every relay is ready, apart from any that stopped for good.
    case ready
    /// Every relay neither ready nor stopped is waiting to reconnect; the soonest in this many
    /// milliseconds.
    case backingOff(delayMilliseconds: Int64)
    /// Every relay stopped for good, normally because the host stopped the engine; `reason`
    /// says why (`stopped by the host`).
    case stopped(reason: String)

    /// The case's name, with the delay or the reason in parentheses.
    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .authenticating: "authenticating"
        case .ready: "ready"
        case .backingOff(let ms): "backingOff(\(ms) ms)"
        case .stopped(let reason): "stopped(\(reason))"
        }
    }

    /// The least advanced of `states`, as defined above.
    public static func summing(_ states: [RelayConnectionState], stopReason: String) -> ManagedTransportState {
        if states.allSatisfy({ $0 == .stopped }) { return .stopped(reason: stopReason) }
        if states.allSatisfy({ $0 == .ready || $0 == .stopped }) { return .ready }
        if states.contains(.authenticating) { return .authenticating }
        if states.contains(where: { $0 == .connecting || $0 == .fetchingInformation }) { return .connecting }
        var soonest: Int64?
        for case .backingOff(let ms) in states { soonest = min(soonest ?? ms, ms) }
        if let soonest { return .backingOff(delayMilliseconds: soonest) }
        return .ready
    }
}

/// What the transport did, for hosts that show progress — the one vocabulary of its reports:
/// the engine reports these (`SyncEngineAction.report`), the managed transport publishes them as
/// they come (`ManagedTransport.events`, the policy's observer), and the C ABI encodes each once
/// into the schema's `ManagedTransportStateChange` / `ManagedTransportActivity`. Never carries
/// secrets or challenges.
public enum ManagedTransportEvent: Sendable, Hashable {
    /// The overall state changed to this one (the change `ManagedTransport.states` also yields).
    case state(ManagedTransportState)
    /// This relay's connection state changed.
    case relayState(relayURL: String, RelayConnectionState)
    /// This relay's NIP-11 document was read: what the engine takes from it.
    case relayInformation(relayURL: String, RelayLimits)
    /// An intent's relay decision, committed to the account.
    case delivery(relayURL: String, intentID: String, decision: DeliveryDecision)
    /// Events from this relay, committed to the account (inserted, already held, quarantined).
    case ingested(relayURL: String, IngestionResult)
    /// A subscription's whole window on this relay is synced: everything the relay held for it
    /// when this connection opened is in the account (apart from what `outcome.skipped` names:
    /// events sent over our frame bound, ids NIP-77 found that the relay did not send), and its
    /// cursor moved. `outcome.method` says whether NIP-77
    /// reconciliation (every age) or REQ paging (the horizon window) did it;
    /// `outcome.incompleteSeconds` names seconds in which the relay held more events with one
    /// `created_at` than it sends for one REQ (paging cannot reach past them, so some of their
    /// events may be missing; empty when the window is known complete);
    /// `outcome.liveFeedRefused` says when the relay refused the subscription's live REQ on this
    /// connection (nothing reaches it live until the next connection's sync).
    case synced(relayURL: String, subscriptionID: String, events: Int, outcome: SyncOutcome)
    /// Text for a log about this relay: a NOTICE, a refused event or frame, a message over our
    /// frame bound, a fallback from negentropy to paging, a lost connection, a failed account
    /// request.
    case notice(relayURL: String, String)
    /// This relay's connection failed to open or was lost, with the transport's description; a
    /// reconnect follows on the session's backoff schedule.
    case connectionFailed(relayURL: String, String)
}

extension ManagedTransportEvent {
    /// The report as the engine gives it to the host: every text in it through
    /// `RelayText.forReport` (at most `maxReportTextBytes`, control and bidi characters
    /// replaced). Notices and connection failures quote relay text (a NOTICE, a NEG-ERR, an
    /// HTTP status line); a relay sending 512 KiB of it back to back must not fill the host's
    /// queues, logs or screen.
    public var bounded: ManagedTransportEvent {
        switch self {
        case .notice(let url, let text): .notice(relayURL: url, RelayText.forReport(text))
        case .connectionFailed(let url, let text): .connectionFailed(relayURL: url, RelayText.forReport(text))
        case .delivery(let url, let intentID, let decision):
            .delivery(
                relayURL: url, intentID: intentID,
                decision: DeliveryDecision(
                    eventID: decision.eventID, state: decision.state, category: decision.category,
                    message: RelayText.forReport(decision.message)))
        case .state, .relayState, .relayInformation, .ingested, .synced: self
        }
    }
}

/// What the host must do.
public enum SyncEngineAction: Sendable, Hashable {
    /// Fetch the relay's NIP-11 document; answer with `.relayInformation`.
    case fetchInformation(relay: Int, url: String)
    /// Open the WebSocket; answer with `.opened` or `.lost`.
    case open(relay: Int, url: String)
    /// Write this text frame; answer with `.written(token)` once every byte is written.
    case write(relay: Int, text: String, token: Int)
    /// Send a WebSocket ping (keepalive); a pong answers with `.alive`.
    case ping(relay: Int)
    /// Close the connection; no `.lost` is expected for it.
    case close(relay: Int)
    /// Do this account work and answer with `.account(reply)` before the next `pollAction()`.
    case account(AccountRequest)
    /// Show this to the app.
    case report(ManagedTransportEvent)
    /// Every relay has stopped and every lease is released: the engine is done.
    case stopped
}

/// What happened outside, fed to `handle(_:now:)`.
public enum SyncEngineInput: Sendable {
    /// The NIP-11 fetch ended (nil: no usable document).
    case relayInformation(relay: Int, RelayLimits?)
    /// The WebSocket of an `.open` action is connected.
    case opened(relay: Int)
    /// One complete text message.
    case received(relay: Int, text: String)
    /// A message over the transport's frame bound was skipped: its first bytes (up to 1 KiB)
    /// and its size (`IOEvent.oversized`).
    case oversized(relay: Int, head: String, bytes: Int)
    /// A pong or ping arrived: the connection is alive.
    case alive(relay: Int)
    /// Bytes arrived that completed no message (part of a large message on a slow link): the
    /// connection is alive, the keepalive does not count it silent, and no REQ or NIP-77 wait is
    /// given up while the message comes (it may be their answer). Hosts send it at most
    /// about once a second per connection (`IOEvent.bytesArrived`).
    case bytesArrived(relay: Int)
    /// Every byte of the `.write` action with this token was written.
    case written(relay: Int, token: Int)
    /// The connection failed to open, or ended.
    case lost(relay: Int, reason: String)
    /// The answer to the last account request.
    case account(AccountReply)
    /// New publish intents were committed: claim them.
    case workAvailable
    /// The host wants this connection cut (as a network failure would).
    case drop(relay: Int)
    /// Stop: cancel, close, release every lease, then `.stopped`.
    case stop
    /// `pollTimeout()` is due.
    case timer
}
