/// The value types of the managed transport as the C ABI and the facades see it (Schema/
/// relay.recovery.json). The unions that carry them (`ManagedTransportStateChange`,
/// `ManagedTransportActivity`) are generated from the schema into this module; these enums
/// are their tags and fields, spelled as the schema declares them.

/// Where one relay connection (or the transport as a whole) is in its lifecycle.
public enum RelayPhase: String, Sendable, Hashable, CaseIterable {
    /// Fetching the relay's NIP-11 document.
    case fetchingInformation
    /// Opening the connection (TCP, TLS or Noise, then WebSocket).
    case connecting
    /// Answering the relay's NIP-42 challenge.
    case authenticating
    /// Connected; subscriptions are live and intents are delivered.
    case ready
    /// Waiting to reconnect (`delayMilliseconds` says how long).
    case backingOff
    /// Stopped by the host; nothing more happens.
    case stopped
}

/// The tag of `ManagedTransportStateChange`.
public enum ManagedTransportStateChangeKind: String, Sendable, Hashable, CaseIterable {
    /// The transport as a whole, as advanced as its least advanced relay (ready once every relay is).
    case overall
    /// One relay's connection.
    case relay
}

/// The tag of `ManagedTransportActivity`.
public enum ManagedTransportActivityKind: String, Sendable, Hashable, CaseIterable {
    /// A relay's decision on one intent, committed to the account.
    case delivery
    /// Events from a relay, committed to the account.
    case ingested
    /// A subscription's whole window on a relay is in the account, and its cursor moved.
    case synced
    /// A relay's NOTICE.
    case notice
    /// A connection attempt or an open connection failed; it is retried on the backoff schedule.
    case connectionFailed
}
