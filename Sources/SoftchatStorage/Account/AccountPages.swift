public import SoftchatCore
import SoftchatJSON

/// Where a page of stored events ended: its last event, in the newest-first order pages are
/// served in (`created_at` descending, ties by lowest id first).
public struct EventCursor: Sendable, Hashable {
    /// The `created_at` of the page's last event.
    public var createdAt: Int64
    /// The id of the page's last event: 64 lowercase hex characters.
    public var id: String

    /// Creates a cursor at an event.
    ///
    /// - Parameters:
    ///   - createdAt: The event's `created_at`.
    ///   - id: The event's id, 64 lowercase hex characters.
    public init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }
}

/// One page of a stored-event query, and where the next one starts (nil: nothing older).
public struct EventPage: Sendable, Hashable {
    /// The page's events, newest first (ties by lowest id).
    public var events: [VerifiedEvent]
    /// Where the next, older page starts; nil when no older event matched.
    public var next: EventCursor?

    /// Creates a page.
    ///
    /// - Parameters:
    ///   - events: The page's events, newest first (ties by lowest id).
    ///   - next: Where the next page starts, or nil when this page is the last.
    public init(events: [VerifiedEvent], next: EventCursor?) {
        self.events = events
        self.next = next
    }
}

extension SoftchatAccount {
    /// The most a page may hold.
    public static let maxPageEvents = 1_000

    /// A page of the stored events matching any of `filtersJSON` — a conversation's history —
    /// newest first (ties by lowest id), at most `limit` (1–1,000) events strictly after
    /// `before` in that order. Following `next` walks the whole history exactly once, however
    /// many events share one `created_at`, and events stored meanwhile never shift a page.
    /// Each filter's own `limit` is replaced by the page size; `since`/`until` and every other
    /// condition apply as NIP-01 says. Deleted, replaced and expired events are never served.
    ///
    /// - Parameters:
    ///   - filtersJSON: 1 to 64 NIP-01 filters as JSON text; an event matching any is served.
    ///   - limit: The most events in the page, 1 to ``SoftchatAccount/maxPageEvents``.
    ///   - now: The current Unix time, in seconds: events expired by then are not served.
    ///   - before: The previous page's ``EventPage/next``; nil for the newest page.
    /// - Returns: The page, and where the next one starts.
    /// - Throws: `SoftchatError` with code `invalid_relay_filter` for a `limit` out of range, a
    ///   cursor id that is not 64 lowercase hex characters or an invalid filter;
    ///   `account_storage_failed` when SQLite fails; `invalid_persistence_result` once the account
    ///   is closed or when a stored event no longer reads back.
    public func queryEvents(filtersJSON: [String], limit: Int, now: Int64, before: EventCursor? = nil) throws(SoftchatError) -> EventPage {
        guard limit >= 1 && limit <= Self.maxPageEvents else {
            throw .invalidRelayFilter("queryEvents: limit must be 1 to \(Self.maxPageEvents), not \(limit)")
        }
        if let before, before.id.utf8.count != 64 || !before.id.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) {
            throw .invalidRelayFilter("queryEvents: the cursor's id must be 64 lowercase hex characters")
        }
        let filters = try SessionFilters.parse(filtersJSON)
        let atSecond = try before.map { b throws(SoftchatError) in
            try filters.map { f throws(SoftchatError) in try Self.paged(f, since: b.createdAt, until: b.createdAt, limit: nil) }
        }
        // Both reads in one snapshot: an event committed between them (at the cursor's second,
        // sorting before it) would otherwise end the walk early.
        return try store.snapshot("queryEvents") { db in
            // Events at the cursor's own second that sort at or before it were served already.
            var served = 0
            if let before, let atSecond {
                served = try Self.events(db, matching: atSecond, limit: nil, now: now).filter { $0.id <= before.id }.count
            }
            let want = limit + served + 1
            let candidates = try filters.map { f throws(SoftchatError) in try Self.paged(f, since: nil, until: before?.createdAt, limit: want) }
            var found = try Self.events(db, matching: candidates, limit: want, now: now)
            if let before { found.removeAll { $0.createdAt == before.createdAt && $0.id <= before.id } }
            let more = found.count > limit
            if more { found.removeLast(found.count - limit) }
            return EventPage(events: found, next: more ? found.last.map { EventCursor(createdAt: $0.createdAt, id: $0.id) } : nil)
        }
    }

    /// `filter` with its limit replaced and its time range narrowed (never widened).
    static func paged(_ filter: RelayFilter, since: Int64?, until: Int64?, limit: Int?) throws(SoftchatError) -> RelayFilter {
        var o = JSONObject()
        for member in filter.json where member.key != "limit" && member.key != "until" && member.key != "since" {
            o.append(member.key, member.value)
        }
        let lower = [filter.since, since].compactMap { $0 }.max()
        let upper = [filter.until, until].compactMap { $0 }.min()
        if let lower { o.append("since", .integer(lower)) }
        if let upper { o.append("until", .integer(upper)) }
        if let limit { o.append("limit", .integer(Int64(limit))) }
        return try RelayFilter(json: .object(o))
    }
}

/// One publish intent as the account holds it: its event, relay and delivery state.
public struct PublishIntentStatus: Sendable, Hashable {
    /// The intent's id: 32 lowercase hex characters.
    public var intentID: String
    /// The id of the event the intent publishes.
    public var eventID: String
    /// The relay the intent publishes to.
    public var relayURL: String
    /// The intent's delivery state.
    public var state: DeliveryState
    /// Why it is in its state (nil while pending or in flight).
    public var category: DeliveryCategory?
    /// The relay's (or the session's) text for that state, for logs only.
    public var message: String?
    /// Times it was written to a socket.
    public var attempts: Int
}

extension AccountDelivery {
    /// The intents of one publish operation, in publish order (then by relay): each event's
    /// state on each relay, exactly as the relays' answers left it. Empty for an unknown id.
    ///
    /// - Parameter operationID: The id given to `AccountOutgoing.enqueueSigned`.
    /// - Returns: The operation's intents; an (event, relay) pair whose intent another operation
    ///   created first is not among them.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func intents(operationID: String) throws(SoftchatError) -> [PublishIntentStatus] {
        try store.read("intents(operationID:)") { db in try Self.intents(db, operationID: operationID, limit: Int.max) }
    }

    /// The intents of one operation, in publish order (then by relay), at most `limit`.
    static func intents(_ db: SQLiteConnection, operationID: String, limit: Int) throws -> [PublishIntentStatus] {
        let s = try db.statement(
            """
            SELECT intent_id, event_id, relay_url, state, category, message, attempts FROM publish_intents
            WHERE operation_id = ? ORDER BY sequence, relay_url LIMIT ?
            """
        ).bind(.text(operationID), .int(Int64(Swift.min(limit, Int(Int64.max)))))
        defer { s.reset() }
        var out: [PublishIntentStatus] = []
        while try s.step() {
            out.append(
                PublishIntentStatus(
                    intentID: s.text(0), eventID: s.text(1), relayURL: s.text(2), state: try s.deliveryState(3),
                    category: s.optionalText(4).flatMap(DeliveryCategory.init(rawValue:)), message: s.optionalText(5),
                    attempts: Int(s.int64(6))))
        }
        return out
    }
}
