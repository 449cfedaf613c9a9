public import SoftchatCore
public import SoftchatSync
public import SoftchatTransport

/// The managed transport's overall lifecycle, observable as an `AsyncStream`, summed up from
/// its relays' states: `stopped` once every relay stopped, `ready` once every relay that has
/// not stopped is ready, else `authenticating` while any relay authenticates, else
/// `connecting` while any connects or fetches its NIP-11 document, else `backingOff`.
public enum ManagedTransportState: Sendable, Equatable, CustomStringConvertible {
    /// Some relay is connecting or fetching its NIP-11 document, and none is authenticating.
    case connecting
    /// Some relay is authenticating (NIP-42).
    case authenticating
    /// Every relay is ready, apart from any that stopped for good.
    case ready
    /// Every relay neither ready nor stopped is waiting to reconnect; the soonest in this many
    /// milliseconds.
    case backingOff(delayMilliseconds: Int64)
    /// Every relay stopped for good, normally because the host called `stop()`, which ends the
    /// transport; `reason` is the transport's stop reason (`stopped by the host`).
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
}

/// What the managed transport did, for hosts that show progress. Never carries secrets or
/// challenges.
public enum ManagedTransportEvent: Sendable {
    /// The overall state changed to this one (the change ``ManagedTransport/states`` also yields).
    case state(ManagedTransportState)
    /// This relay's connection state changed.
    case relayState(relayURL: String, RelayConnectionState)
    /// This relay's NIP-11 document was fetched (before its first connection, when the policy
    /// asks for it).
    case relayInformation(relayURL: String, RelayInformation)
    /// An intent's relay decision, committed to the account.
    case delivery(relayURL: String, intentID: String, decision: DeliveryDecision)
    /// Events from this relay, committed to the account (inserted, already held, quarantined).
    case ingested(relayURL: String, IngestionResult)
    /// A subscription's whole window on this relay is synced: everything the relay held for it
    /// when this connection opened is in the account, and its cursor moved. `outcome.method`
    /// says whether NIP-77 reconciliation (every age) or REQ paging (the horizon window) did it;
    /// `outcome.incompleteSeconds` names seconds in which the relay held more events with one
    /// `created_at` than it sends for one REQ (paging cannot reach past them, so some of their
    /// events may be missing; empty when the window is known complete).
    case synced(relayURL: String, subscriptionID: String, events: Int, outcome: SyncOutcome)
    /// Text for a log about this relay: a NOTICE, a refused event or frame, a fallback from
    /// negentropy to paging, a lost connection, a failed account request.
    case notice(relayURL: String, String)
    /// This relay's connection failed to open or was lost, with the `TransportError`'s
    /// description; a reconnect follows on the session's backoff schedule.
    case connectionFailed(relayURL: String, String)
}

/// One relay of a managed transport, as a snapshot.
public struct ManagedRelayStatus: Sendable, Hashable {
    /// The relay's URL, as given at start.
    public let relayURL: String
    /// The relay's connection state.
    public let state: RelayConnectionState
    /// Accepted, rejected, retried, reconnects, events received, duplicates skipped, latency.
    public let statistics: RelayStatistics
}

/// How a managed transport connects, publishes and syncs; the defaults suit most hosts.
public struct ManagedTransportPolicy: Sendable {
    /// How connections open: TLS, timeout, message size, Noise static key file and rekeying.
    /// For noise:// relays of an account stored in a file, a nil key file becomes
    /// `<account database>.noise-key`.
    public var connection = ConnectionOptions()
    /// Whether multi-event publishes go out as one EVENTS frame (`auto`: when the relay's
    /// NIP-11 document says it accepts them).
    public var eventsBatch = EventsBatching.auto
    /// Seconds without an OK before events in flight become retryable (`timeout`); default
    /// `relay.publish.acknowledgementTimeoutSeconds`.
    public var acknowledgementTimeoutSeconds = Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value)
    /// Intents claimed (and published) at once, 1–256.
    public var claimBatch = 256
    /// After a relay answers "retryable" (rate-limited, auth-required, error…), wait this long
    /// before claiming again, doubling per consecutive retryable answer up to 60 s.
    public var retryDelaySeconds: Int64 = 1
    /// The base of every relay's session settings (reconnect backoff among them); the relay
    /// URL, NIP-42 answering, the acknowledgement timeout and NIP-11's limits are set over it.
    public var session = RelaySessionConfig()
    /// Page size and `until` convention for syncs; a relay's NIP-11 `max_limit` lowers the page.
    public var paging = RelayPaging()
    /// Per subscription id, the late-arrival horizon in seconds (default: two days + 10 min for
    /// filters that can match NIP-59 gift wraps, 300 s otherwise).
    public var horizons: [String: Int64] = [:]
    /// Sync by NIP-77 negentropy where a relay speaks it (`SyncEngineConfiguration.negentropy`).
    public var negentropy = true
    /// Fetch the NIP-11 document before the first connection and respect its limitation fields.
    public var fetchRelayInformation = true
    /// Ping a connection silent this long, and drop it when nothing arrives within
    /// `readDeadlineMilliseconds` after (a half-open socket: a phone that changed networks).
    public var keepaliveIntervalMilliseconds: Int64 = 30_000
    /// How long a pinged connection may stay silent before it is dropped as lost.
    public var readDeadlineMilliseconds: Int64 = 10_000
    /// Claim and publish the account's intents (false: receive only).
    public var publishes = true
    /// Receives progress events on the transport's I/O thread; keep it quick.
    public var observer: (@Sendable (ManagedTransportEvent) -> Void)?

    /// The default policy: publish and sync, NIP-11 and negentropy on.
    public init() {}
}
