/// The value types of the managed transport as the C ABI and the facades see it (Schema/
/// relay.recovery.json). The unions that carry them (`ManagedTransportStateChange`,
/// `ManagedTransportActivity`) are generated from the schema into this module; these enums
/// are their tags and fields, spelled as the schema declares them.

/// Where one relay connection (or the transport as a whole) is in its lifecycle.
public enum RelayPhase: String, Sendable, Hashable, CaseIterable {
    case fetchingInformation, connecting, authenticating, ready, backingOff, stopped
}

/// The tag of `ManagedTransportStateChange`.
public enum ManagedTransportStateChangeKind: String, Sendable, Hashable, CaseIterable {
    case overall, relay
}

/// The tag of `ManagedTransportActivity`.
public enum ManagedTransportActivityKind: String, Sendable, Hashable, CaseIterable {
    case delivery, ingested, synced, notice, connectionFailed
}
