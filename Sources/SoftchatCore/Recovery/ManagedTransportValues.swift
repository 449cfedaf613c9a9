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
    /// A subscription's whole window on a relay is in the account, and its cursor moved (what it
    /// left out, and why, in `skipped`).
    case synced
    /// A relay's NOTICE.
    case notice
    /// A connection attempt or an open connection failed; it is retried on the backoff schedule.
    case connectionFailed
}

/// Why a sync left an event out of the account (`SkippedEvents.reason`).
public enum SkipReason: String, Sendable, Hashable, CaseIterable {
    /// The relay's message carrying it was over our frame bound (`RelayWireContract.maxFrameBytes`):
    /// skipped unread, since no account can hold it. A relay that speaks NIP-77 is not asked for
    /// it by id again by the same transport.
    case oversized
    /// NIP-77 reconciliation listed it on the relay, but the relay sent nothing when asked for it
    /// by id (deleted, expired or withheld since).
    case notServed
}

/// What one subscription's window on a relay left out of the account for one reason: how many
/// events, and which (as far as their ids are known), at most `maxListedIDs` of them.
public struct SkippedEvents: Sendable, Hashable {
    /// The most ids one entry lists: a relay that sends 10,000 oversized events must not make a
    /// report of 640 KB.
    public static let maxListedIDs = 64

    /// Why these events were skipped.
    public var reason: SkipReason
    /// How many events were skipped for this reason, those whose id could not be read included.
    public var count: Int
    /// The ids of the first of them (at most ``maxListedIDs``), 64 lowercase hex characters
    /// each, in the order they were skipped; an event whose id could not be read is counted, not
    /// listed.
    public var eventIDs: [String]

    /// Creates an entry.
    ///
    /// - Parameters:
    ///   - reason: Why the events were skipped.
    ///   - count: How many were skipped.
    ///   - eventIDs: The ids of the first of them, at most ``maxListedIDs``.
    public init(reason: SkipReason, count: Int, eventIDs: [String]) {
        self.reason = reason
        self.count = count
        self.eventIDs = eventIDs
    }

    /// Counts one more event skipped for `reason` in `list` (one entry per reason, in
    /// `SkipReason.allCases` order): its id is listed while the entry has room; an id already
    /// listed is not counted twice (a page asked again brings the same event again).
    ///
    /// - Parameters:
    ///   - reason: Why it was skipped.
    ///   - eventID: Its id, when it was read (64 lowercase hex characters), else nil.
    ///   - list: The entries of one report.
    public static func record(_ reason: SkipReason, eventID: String?, in list: inout [SkippedEvents]) {
        guard let i = list.firstIndex(where: { $0.reason == reason }) else {
            list.append(SkippedEvents(reason: reason, count: 1, eventIDs: eventID.map { [$0] } ?? []))
            list.sort { $0.reason.order < $1.reason.order }
            return
        }
        if let eventID {
            if list[i].eventIDs.contains(eventID) { return }
            if list[i].eventIDs.count < maxListedIDs { list[i].eventIDs.append(eventID) }
        }
        list[i].count += 1
    }

    /// Two reports' entries as one (two `synced` reports of a subscription coalesced): counts
    /// added, less the events both list; ids listed by either, at most ``maxListedIDs`` per
    /// reason.
    ///
    /// - Parameters:
    ///   - list: The earlier report's entries.
    ///   - other: The later report's entries.
    /// - Returns: One entry per reason, in `SkipReason.allCases` order.
    public static func merged(_ list: [SkippedEvents], with other: [SkippedEvents]) -> [SkippedEvents] {
        var out = list
        for entry in other {
            guard let i = out.firstIndex(where: { $0.reason == entry.reason }) else {
                out.append(entry)
                continue
            }
            var count = out[i].count + entry.count
            for id in entry.eventIDs {
                if out[i].eventIDs.contains(id) {
                    count -= 1
                } else if out[i].eventIDs.count < maxListedIDs {
                    out[i].eventIDs.append(id)
                }
            }
            out[i].count = max(count, out[i].count)
        }
        return out.sorted { $0.reason.order < $1.reason.order }
    }
}

extension SkipReason {
    /// Its place in `allCases`, the order of a report's entries.
    var order: Int { Self.allCases.firstIndex(of: self) ?? 0 }
}
