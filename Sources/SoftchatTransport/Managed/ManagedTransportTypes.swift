public import SoftchatCore
public import SoftchatStorage

/// The managed transport's lifecycle, observable as an `AsyncStream`.
public enum ManagedTransportState: Sendable, Equatable, CustomStringConvertible {
    case connecting
    case authenticating
    case ready
    /// Waiting to reconnect until this Unix time in milliseconds.
    case backingOff(untilMilliseconds: Int64)
    case stopped(reason: String)

    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .authenticating: "authenticating"
        case .ready: "ready"
        case .backingOff(let until): "backingOff(until: \(until))"
        case .stopped(let reason): "stopped(\(reason))"
        }
    }
}

/// What the managed transport did, for hosts that show progress (the demo prints these).
/// Never carries secrets or challenges.
public enum ManagedTransportEvent: Sendable {
    case state(ManagedTransportState)
    case relayInformation(RelayInformation)
    case delivery(intentID: String, decision: DeliveryDecision)
    case ingested(IngestionReceipt)
    case synced(subscriptionID: String, events: Int)
    case notice(String)
    case connectionFailed(String)
}

/// Whether to send multi-event publishes as one EVENTS frame.
public enum EventsBatchMode: Sendable, Hashable {
    /// Use EVENTS when the relay's NIP-11 document says it accepts it.
    case auto
    case always
    case never
}

public struct ManagedTransportPolicy: Sendable {
    public var connection = ConnectionOptions()
    public var eventsBatch = EventsBatchMode.auto
    /// Seconds without an OK before events in flight become retryable (`timeout`).
    public var acknowledgementTimeoutSeconds: Int64 = 15
    /// Intents claimed (and published) at once, 1–256.
    public var claimBatch = 256
    /// After a relay answers "retryable" (rate-limited, auth-required, error…), wait this long
    /// before claiming again, doubling per consecutive retryable answer up to 60 s; an accepted
    /// event resets it. Keeps a refusing relay from burning the retry budget in a burst.
    public var retryDelaySeconds: Int64 = 1
    public var session = RelaySessionConfig()
    /// Page stored events past a relay's silent cap on results with `until`, until a page brings
    /// nothing new; then the live subscription resumes.
    public var backfill = true
    /// Fetch the NIP-11 document before the first connection and respect its limitation fields.
    public var fetchRelayInformation = true
    /// Receives progress events on the transport's thread; keep it quick.
    public var observer: (@Sendable (ManagedTransportEvent) -> Void)?

    public init() {}
}
