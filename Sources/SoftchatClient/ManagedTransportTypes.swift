public import SoftchatCore
public import SoftchatSync
public import SoftchatTransport

/// The managed transport's overall lifecycle, observable as an `AsyncStream`: the least
/// advanced of its relays (ready once every relay is ready).
public enum ManagedTransportState: Sendable, Equatable, CustomStringConvertible {
    case connecting
    case authenticating
    case ready
    /// Every relay not ready is waiting to reconnect; the soonest in this many milliseconds.
    case backingOff(delayMilliseconds: Int64)
    case stopped(reason: String)

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
    case state(ManagedTransportState)
    case relayState(relayURL: String, RelayConnectionState)
    case relayInformation(relayURL: String, RelayInformation)
    /// An intent's relay decision, committed to the account.
    case delivery(relayURL: String, intentID: String, decision: DeliveryDecision)
    /// Events from this relay, committed to the account (inserted, already held, quarantined).
    case ingested(relayURL: String, IngestionResult)
    /// A subscription's whole window on this relay is synced: everything the relay held for it
    /// when this connection opened is in the account, and its cursor moved. `method` says whether
    /// NIP-77 reconciliation (every age) or REQ paging (the horizon window) did it.
    case synced(relayURL: String, subscriptionID: String, events: Int, method: SyncMethod)
    case notice(relayURL: String, String)
    case connectionFailed(relayURL: String, String)
}

/// One relay of a managed transport, as a snapshot.
public struct ManagedRelayStatus: Sendable, Hashable {
    public let relayURL: String
    public let state: RelayConnectionState
    /// Accepted, rejected, retried, reconnects, events received, duplicates skipped, latency.
    public let statistics: RelayStatistics
}

public struct ManagedTransportPolicy: Sendable {
    public var connection = ConnectionOptions()
    public var eventsBatch = EventsBatching.auto
    /// Seconds without an OK before events in flight become retryable (`timeout`).
    public var acknowledgementTimeoutSeconds: Int64 = 15
    /// Intents claimed (and published) at once, 1–256.
    public var claimBatch = 256
    /// After a relay answers "retryable" (rate-limited, auth-required, error…), wait this long
    /// before claiming again, doubling per consecutive retryable answer up to 60 s.
    public var retryDelaySeconds: Int64 = 1
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
    public var readDeadlineMilliseconds: Int64 = 10_000
    /// Claim and publish the account's intents (false: receive only).
    public var publishes = true
    /// Receives progress events on the transport's I/O thread; keep it quick.
    public var observer: (@Sendable (ManagedTransportEvent) -> Void)?

    public init() {}
}
