/// The value types of the managed transport as the C ABI and the facades see it (Schema/
/// relay.recovery.json). The unions that carry them (`ManagedTransportStateChange`,
/// `ManagedTransportActivity`) are generated from the schema into this module; these enums
/// are their tags and fields, spelled as the schema declares them.

/// Where one relay connection (or the transport as a whole) is in its lifecycle.
public enum RelayPhase: String, Sendable, Hashable, CaseIterable {
    /// The phases of a connection:
    /// - `fetchingInformation`: fetching the relay's NIP-11 document.
    /// - `connecting`: opening the connection (TCP, TLS or Noise, then WebSocket).
    /// - `authenticating`: answering the relay's NIP-42 challenge.
    /// - `ready`: connected; subscriptions are live and intents are delivered.
    /// - `backingOff`: waiting to reconnect (`delayMilliseconds` says how long).
    /// - `stopped`: stopped by the host; nothing more happens.
    case fetchingInformation, connecting, authenticating, ready, backingOff, stopped
}

/// The tag of `ManagedTransportStateChange`.
public enum ManagedTransportStateChangeKind: String, Sendable, Hashable, CaseIterable {
    /// `overall`: the transport as a whole, as advanced as its least advanced relay (ready once every
    /// relay is); `relay`: one relay's connection.
    case overall, relay
}

/// The tag of `ManagedTransportActivity`.
public enum ManagedTransportActivityKind: String, Sendable, Hashable, CaseIterable {
    /// What happened:
    /// - `delivery`: a relay's decision on one intent, committed to the account.
    /// - `ingested`: events from a relay, committed to the account.
    /// - `synced`: a subscription's whole window on a relay is in the account, and its cursor moved.
    /// - `notice`: a relay's NOTICE.
    /// - `connectionFailed`: a connection attempt or an open connection failed; it is retried on the
    ///   backoff schedule.
    case delivery, ingested, synced, notice, connectionFailed
}
