/// What the core adds to the managed transport's values. The values themselves — the context an
/// app gives (`ManagedTransportContext`), the phases (`RelayPhase`), the report kinds, the
/// relay status and what a sync left out (`SkipReason`, `SkippedEvents`) — are declared once in
/// Schema/relay.recovery.json and generated into this module (`"swiftSurface": true`), so the
/// engine reads and writes the very types every binding renders.

extension SkippedEvents {
    /// The most ids one entry lists: a relay that sends 10,000 oversized events must not make a
    /// report of 640 KB.
    public static let maxListedIDs = 64

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
