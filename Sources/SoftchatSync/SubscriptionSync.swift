public import SoftchatCore
public import SoftchatJSON

/// The sans-IO plan for syncing one subscription on one relay, with all its state in this value
/// (`jsonValue` / `init(json:)`), so a cut anywhere — mid-page, between pages, a crash — resumes
/// where it was.
///
/// **The window.** A sync covers `[since, until]`, `until` = the `now` it began with and
/// `since` = cursor − horizon (none without a cursor). A host filter's own `since`/`until`
/// only narrow it, never widen it. The cursor moves, to `until`, only when every page of every
/// filter has ended: a cut leaves the cursor where it was, and future-dated events never move it
/// past `now`. The horizon is there because events reach relays late: NIP-59 gift wraps (kind
/// 1059, how NIP-17 chats travel) carry a `created_at` backdated up to two days on purpose, and
/// an outbox that was offline publishes late; so the default horizon is two days + 10 minutes
/// when a filter can match kind 1059 (it lists 1059 or no kinds), 300 s otherwise. The overlap
/// costs bandwidth only: ids already seen are reported `.duplicate` before verification.
///
/// **Pages.** Relays cap every REQ (LocalRelay at 500 events) and send newest first, so a window
/// is paged by `until`, one filter per REQ (`limit` applies per filter). The first page asks for
/// the window's `until`; each later page asks for `until` = the oldest `created_at` seen so far, *inclusive*
/// — written as that second for relays that read `until` inclusively (NIP-01) and as that
/// second + 1 for those that read it exclusively — so a run of equal `created_at` spanning a page
/// boundary is asked again whole under either convention, and the ids already seen at the
/// boundary come back as `.duplicate`. A page ends at its EOSE; paging of a filter ends when a
/// page brings fewer events than the page size and than the largest page the relay has sent
/// (``RelayPaging/largestPage``), counted as the relay sent them (by id, never by
/// what was new to the database: events may have come first from another relay), and a page
/// asked below it (`until` = its oldest − 1, a whole page's `limit`: a relay that filters its
/// answer after `LIMIT` answers a one-event ask with nothing while more lies below) brings
/// nothing. When it brings events, the relay
/// capped that page lower than it was known to send (its cap went down: a new configuration,
/// another backend behind the URL, a cap for clients not authenticated), cut its answer short
/// (a time or byte budget, events filtered out after `LIMIT`, an event sent after its EOSE), or
/// the event reached it after the page: paging goes on below the page as below a full one. A
/// second such page in a row *of the same count* makes the cap known (the page size drops to
/// that count): a cap answers the same count every time, a cut answer varies. The page size is
/// never lowered below the most events one page of the window brought (the relay's cap is at
/// least that): cut answers would otherwise walk it down to one event, where a single event
/// filtered out or sent after its EOSE reads as the end. A short page all at one second with
/// events below is reported incomplete at that second (a run the cut may have hidden). A full page
/// whose events all share the page's `until` second is a run at least a page long, which paging
/// by `until` cannot get past: that second is recorded in `incompleteSeconds` and the next page asks
/// for `until` − 1, so paging neither loops nor stops early. Each full page thus lowers `until`
/// below a second that held events, or steps below such a run (once per second): a filter needs
/// at most one page per distinct `created_at` in the window plus two (the last page and the
/// event asked below it), two per second when runs reach the page size.
///
/// **Cuts.** `restarted()` (connection lost) asks the same page again with the same `until`;
/// the events already received from the cut page are then `.duplicate`. A loaded state has no
/// connection, so `init(json:)` restarts it. Events arriving when no page is in flight are
/// `.notPaging` and never counted.
///
/// **What it learns.** The relay's cap and `until` convention, when `paging` does not know them,
/// and again when an answer contradicts what it knows (a short page with an event below it, a
/// page in the inclusive form that brings back nothing of the second the page before it ended
/// in): see ``RelayPaging``; ``paging`` holds what was learned, and ``learn(from:)`` takes in
/// what another subscription of the same relay learned.
///
/// **What it assumes.** The relay sends newest first (NIP-01). A state is for the filters it
/// holds: when the host's subscription changes, start a new one (no cursor) rather than loading
/// the old.
///
/// **Memory.** Ids are remembered for duplicates only (never for the decisions above): the
/// boundary second's ids from the last page (while a short page is confirmed, that page's oldest
/// second's ids instead), and the ids of the page in flight (all of them, and those at its
/// oldest second), each set at most one page size, so `rememberedIDCount` ≤ 3 × page size
/// whatever the window holds.
public struct SubscriptionSync: Sendable, Hashable {
    /// Two days (NIP-59's backdating) plus 10 minutes of margin.
    public static let giftWrapHorizon: Int64 = 2 * 86_400 + 600
    /// For filters that cannot match gift wraps.
    public static let ordinaryHorizon: Int64 = 300

    /// `giftWrapHorizon` when any filter lists kind 1059 or no kinds at all, else `ordinaryHorizon`.
    ///
    /// - Parameter filters: The subscription's filters.
    /// - Returns: The horizon, in seconds.
    public static func defaultHorizon(for filters: [RelayFilter]) -> Int64 {
        for filter in filters {
            guard let kinds = filter.kinds else { return giftWrapHorizon }
            if kinds.contains(1059) { return giftWrapHorizon }
        }
        return ordinaryHorizon
    }

    /// The host's filters, as given: their own `since`/`until` narrow every window.
    public let filters: [RelayFilter]
    /// Seconds re-asked behind the cursor when a window opens (never negative).
    public let horizon: Int64
    /// The relay's page size and `until` convention, with what paging has learned of them.
    public private(set) var paging: RelayPaging
    /// Newest `created_at` up to which every filter's window is known synced.
    public private(set) var cursor: Int64?
    /// Where the periodic deeper resync stands (see ``Deepening``).
    public internal(set) var deepening = Deepening()
    private var window: Window?
    private var outcome: SyncOutcome?

    /// The periodic deeper resync: the one way a relay without NIP-77 gives up an event that
    /// reached it later than the horizon allows (an outbox that was offline for days, a sender
    /// whose clock runs behind, a device clock that ran ahead). At most once per interval, the
    /// window that opens reaches `horizon × 4^level` behind the cursor instead of the horizon,
    /// the level growing by one each time until a window reaches back to the epoch; then it
    /// starts over. An event that arrived `d` seconds late is found by the window of the first
    /// level whose reach passes `d`: at most `⌈log₄(d / horizon)⌉` intervals after it arrived.
    /// Each such window costs what paging its reach costs (events already held are dropped by
    /// id, unverified).
    public struct Deepening: Sendable, Hashable {
        /// The level of the last deep window (0: none yet in this cycle).
        public var level = 0
        /// When the last deep window (or the first, full sync) opened, in Unix seconds.
        public var lastAt: Int64?

        /// Creates a state.
        ///
        /// - Parameters:
        ///   - level: The level of the last deep window (0: none yet in this cycle).
        ///   - lastAt: When the last deep window opened, in Unix seconds; nil: never.
        public init(level: Int = 0, lastAt: Int64? = nil) {
            self.level = level
            self.lastAt = lastAt
        }
    }

    struct Window: Sendable, Hashable {
        var since: Int64?
        var until: Int64
        var filterIndex = 0
        /// The inclusive `until` of the current filter's next page.
        var boundary: Int64
        /// Ids at `boundary` that the last page brought.
        var boundaryIDs: Set<String> = []
        var requests = 0
        var incompleteSeconds: [Int64] = []
        /// The count of the last page when it may have been cut by a cap not yet known (shorter
        /// than `pageSize`, not shorter than `largestPage`): the next page tells.
        var probe: Int?
        /// Seconds whose page was all at that second and possibly capped by a cap not yet known,
        /// with that page's count: reported incomplete at the end unless a larger page was seen.
        var unsure: [Int64: Int] = [:]
        /// The short page whose end the page in flight (a page below it) confirms.
        var shortPage: ShortPage?
        /// The count of the last short page an event below showed capped. One alone may be an
        /// event that reached the relay between the page and its confirmation (a backdated
        /// arrival), so only a second in a row makes the relay's cap known.
        var cappedCount: Int?
        /// The most events one page of this window brought, counted as the relay sent them: the
        /// relay's cap on this window is at least that, so a page size is never lowered below it
        /// (answers cut short would otherwise walk the page size down to one event, where a
        /// single event filtered out after `LIMIT` or sent after EOSE reads as the end).
        var mostSent = 0
        var page: Page?

        /// Whether two capped pages in a row, of `earlier` and `count` events, make the relay's
        /// cap known: the same count (a cap answers the same count every time, an answer cut
        /// short by a budget or a filter varies), and no fewer than a page of this window
        /// brought.
        func confirmsCap(_ earlier: Int?, _ count: Int) -> Bool { earlier == count && count >= mostSent }
    }

    /// A page shorter than the relay was known to send, waiting for the page asked below it: if
    /// events come, the relay capped it, and it is taken as the full page it was.
    struct ShortPage: Sendable, Hashable {
        /// The page's inclusive `until`.
        var until: Int64
        var count: Int
        var oldest: Int64
        /// Ids at `oldest` (the boundary of the next page if the page was capped).
        var oldestIDs: Set<String>
    }

    struct Page: Sendable, Hashable {
        var sent = false
        var count = 0
        var oldest: Int64?
        var oldestIDs: Set<String> = []
        /// Sent in the exclusive form (the convention unknown or exclusive): events of the second
        /// after the page's last are the relay's inclusive reading, and take places in the page.
        var exclusiveForm = false
        /// Such an event came: the relay reads `until` inclusively.
        var pastUntil = false
        /// An event of the page's `until` second came.
        var reachedUntil = false
        /// The page asks again a boundary second its inclusive form did not bring back: it is not
        /// doubted twice (a second whose events are gone from the relay would loop).
        var rechecked = false
        /// Ids received in this page, kept across a cut of it.
        var seen: Set<String> = []
    }

    /// Creates a sync with no window open; `begin(now:)` opens the first.
    ///
    /// - Parameters:
    ///   - filters: the host's filters (at least one; none traps).
    ///   - cursor: the durable cursor, nil when nothing was synced yet.
    ///   - horizon: seconds re-asked behind the cursor; nil for `defaultHorizon(for:)`, and a
    ///     negative value counts as 0.
    ///   - paging: the relay's page size and `until` convention.
    public init(filters: [RelayFilter], cursor: Int64? = nil, horizon: Int64? = nil, paging: RelayPaging = RelayPaging()) {
        precondition(!filters.isEmpty, "a subscription has at least one filter")
        self.filters = filters
        self.cursor = cursor
        self.horizon = max(0, horizon ?? Self.defaultHorizon(for: filters))
        self.paging = paging
    }

    /// True while a window is open (begun and not yet synced).
    public var isSyncing: Bool { window != nil }

    /// The open window's `since`: nil when no window is open, or when it has no lower bound (no
    /// cursor).
    public var windowSince: Int64? { window?.since }
    /// The open window's `until` (the `now` it began with), or nil when no window is open.
    public var windowUntil: Int64? { window?.until }

    /// Ids held for duplicate detection (bounded by 3 × page size).
    public var rememberedIDCount: Int {
        guard let window else { return 0 }
        let page = window.page
        return window.boundaryIDs.count + (page?.seen.count ?? 0) + (page?.oldestIDs.count ?? 0)
            + (window.shortPage?.oldestIDs.count ?? 0)
    }

    /// When the next deeper window is due (Unix seconds), for a sync with no window open: a
    /// connection that stays up opens it then (`begin(now:deepResyncInterval:)`). Nil while a
    /// window is open, before a first sync, or when `interval` is 0 or less.
    ///
    /// - Parameter interval: Seconds between deeper windows.
    public func deeperWindowDue(interval: Int64) -> Int64? {
        guard window == nil, interval > 0, cursor != nil, let last = deepening.lastAt else { return nil }
        return last + interval
    }

    /// Opens a window `[cursor − horizon, now]`, or a deeper one (see ``Deepening``) when
    /// `deepResyncInterval` has passed since the last. When a window is already open (a resumed
    /// one), it is kept as it was, `until` included.
    ///
    /// - Parameters:
    ///   - now: The current Unix time, in seconds (a negative value counts as 0).
    ///   - deepResyncInterval: Seconds between deeper windows; nil or 0: never deeper than the
    ///     horizon.
    public mutating func begin(now: Int64, deepResyncInterval: Int64? = nil) {
        guard window == nil else { return }
        let until = max(0, now)
        var since = cursor.map { max(0, $0 - horizon) }
        if let interval = deepResyncInterval, interval > 0 {
            if let cursor {
                if deepening.lastAt.map({ until - $0 >= interval || until < $0 }) ?? true {
                    let level = deepening.level + 1
                    var reach = max(horizon, 60)
                    for _ in 0..<level where reach < Int64.max / 8 { reach *= 4 }
                    let deep = cursor > reach ? cursor - reach : 0
                    since = deep
                    deepening = Deepening(level: deep == 0 ? 0 : level, lastAt: until)
                }
            } else {
                // A first sync reaches back to the start: a complete cycle.
                deepening = Deepening(level: 0, lastAt: until)
            }
        }
        window = Window(since: since, until: until, boundary: until)
        outcome = nil
    }

    /// What to do next. A `.send` counts as sent when returned.
    ///
    /// - Returns: `.send` with the next page's REQ, `.awaitingEndOfStoredEvents` while a page is in
    ///   flight, `.synced` once the window is complete, or `.idle` when no window was begun.
    public mutating func next() -> SyncStep {
        settle()
        guard var window else { return outcome.map(SyncStep.synced) ?? .idle }
        if let page = window.page, page.sent { return .awaitingEndOfStoredEvents }
        var page = window.page ?? Page()
        page.sent = true
        page.exclusiveForm = paging.until != .inclusive
        window.page = page
        window.requests += 1
        self.window = window
        return .send(request(window))
    }

    /// An event of the page in flight, by the id and `created_at` it claims. Call it for every
    /// event the relay sends on the page's subscription, before verification; a `.new` event that
    /// fails verification should be passed to `forget(eventID:)`.
    ///
    /// - Parameters:
    ///   - eventID: The id the event claims, before verification.
    ///   - createdAt: The `created_at` the event claims.
    /// - Returns: `.new` (verify and store it), `.duplicate` (drop it unverified), or
    ///   `.outsideRequest` / `.notPaging` (not counted by the page).
    public mutating func received(eventID: String, createdAt: Int64) -> SyncDisposition {
        guard self.window?.page?.sent == true, var window = self.window else { return .notPaging }
        // Moved out and back so the id sets are mutated in place, not copied per event.
        self.window = nil
        defer { self.window = window }
        guard let range = self.range(window) else { return .notPaging }
        if window.page?.exclusiveForm == true, createdAt - 1 == range.until {  // createdAt ≥ 0: no overflow
            // Asked in the exclusive form, answered inclusively: one of the page's places taken.
            window.page?.count += 1
            window.page?.pastUntil = true
            return .outsideRequest
        }
        guard createdAt >= range.since, createdAt <= range.until else { return .outsideRequest }
        var page = window.page ?? Page()
        window.page = nil
        defer { window.page = page }
        let limit = paging.pageSize
        page.count += 1
        if createdAt == range.until { page.reachedUntil = true }
        if page.oldest.map({ createdAt < $0 }) ?? true {
            page.oldest = createdAt
            page.oldestIDs = [eventID]
        } else if page.oldest == createdAt, page.oldestIDs.count < limit {
            page.oldestIDs.insert(eventID)
        }
        let disposition: SyncDisposition
        if window.boundaryIDs.contains(eventID) || page.seen.contains(eventID) {
            disposition = .duplicate
        } else {
            if page.seen.count < limit { page.seen.insert(eventID) }
            disposition = .new
        }
        return disposition
    }

    /// An event of the page in flight that arrived over our frame bound and was skipped unread,
    /// by what its first bytes claim (either may be unknown). It takes its place in the page —
    /// a page the relay cut at its cap still reads as full — and a known `created_at` may be
    /// the page's oldest, so the next page starts at or below it.
    ///
    /// - Parameters:
    ///   - eventID: The id its head claims, if it was read.
    ///   - createdAt: The `created_at` its head claims, if it was read.
    public mutating func receivedOversized(eventID: String?, createdAt: Int64?) {
        if let createdAt {
            _ = received(eventID: eventID ?? "", createdAt: createdAt)
        } else if window?.page?.sent == true {
            window?.page?.count += 1
        }
    }

    /// Drops an id from duplicate detection (its event failed verification, so a valid copy
    /// must not be taken for a duplicate).
    ///
    /// - Parameter eventID: The id of the event that failed verification.
    public mutating func forget(eventID: String) {
        guard window != nil else { return }
        window?.boundaryIDs.remove(eventID)
        window?.shortPage?.oldestIDs.remove(eventID)
        window?.page?.seen.remove(eventID)
    }

    /// EOSE of the page in flight. Returns false (and does nothing) when no page is in flight.
    ///
    /// - Returns: True when a page was in flight and has ended.
    @discardableResult
    public mutating func endOfStoredEvents() -> Bool {
        guard var window, let page = window.page, page.sent else { return false }
        self.window = nil
        let pageUntil = range(window)?.until ?? window.boundary
        window.page = nil
        if page.pastUntil {
            // An exclusive relay never sends an event at the `until` it was given: this relay
            // reads it inclusively. Ask again in that form (the extra events took places).
            paging.show(.inclusive)
            window.page = Self.askedAgain(page)
            self.window = window
            return true
        }
        if !page.exclusiveForm, !page.reachedUntil, !page.rechecked, !window.boundaryIDs.isEmpty {
            // Asked in the inclusive form for the second the last page ended in, and nothing of
            // it came back: the relay reads `until` exclusively now. The convention is doubted
            // (the exclusive form is right under both readings) and the page asked again, once.
            paging.show(.unknown)
            var again = Self.askedAgain(page)
            again.rechecked = true
            window.page = again
            self.window = window
            return true
        }
        window.mostSent = max(window.mostSent, page.count)
        if let short = window.shortPage {
            window.shortPage = nil
            if page.count > 0 {
                // An event below a short page: the relay capped it, lower than it was known to
                // send (or cut its answer, or the event reached it after the page). Paging goes
                // on below the page as below a full one; a second capped page in a row of the
                // same count, no shorter than a page this window brought, makes the cap known.
                if window.confirmsCap(window.cappedCount, short.count) {
                    paging.pageSize = min(paging.pageSize, short.count)
                    paging.largestPage = paging.pageSize
                    window.cappedCount = nil
                } else {
                    window.cappedCount = short.count
                }
                if short.oldest < short.until {
                    window.boundary = short.oldest
                    window.boundaryIDs = short.oldestIDs
                } else {
                    // All at one second and capped: a run at least a page long. Step below.
                    if !window.incompleteSeconds.contains(short.until) { window.incompleteSeconds.append(short.until) }
                    window.boundary = short.until - 1
                    window.boundaryIDs = []
                }
                // What it brought comes again in the next page: duplicates.
                if range(window) != nil { window.page = Self.askedAgain(page) }
            } else {
                // Nothing below it: the short page was the relay's whole answer. Filter done.
                Self.endFilter(&window)
            }
            self.window = window
            settle()
            return true
        }
        let known = paging.largestPage
        if let probe = window.probe, let oldest = page.oldest, oldest < pageUntil, window.confirmsCap(probe, page.count) {
            // The last page (fewer events than asked) was cut by the relay's cap: more lay below,
            // and this page was cut at the same count.
            paging.pageSize = min(paging.pageSize, probe)
        }
        window.probe = nil
        paging.largestPage = min(paging.pageSize, max(known, page.count))
        let full = page.count >= paging.pageSize
        if full { window.cappedCount = nil }
        if page.count == 0 {
            // Nothing at or before the page's until. Filter done.
            Self.endFilter(&window)
        } else if !full && page.count < known {
            // Shorter than a page the relay has sent: everything it holds at or before the page's
            // until, unless its cap went down since. A page asked below it tells.
            let oldest = page.oldest ?? pageUntil
            window.shortPage = ShortPage(until: pageUntil, count: page.count, oldest: oldest, oldestIDs: page.oldestIDs)
            window.boundary = oldest - 1
            window.boundaryIDs = []
            // Nothing of the window below it: nothing to ask.
            if range(window) == nil { Self.endFilter(&window) }
        } else if let oldest = page.oldest, oldest < pageUntil {
            window.boundary = oldest
            window.boundaryIDs = page.oldestIDs
            if !full { window.probe = page.count }
        } else {
            // A page all at one second: a run at least as long as the relay sends. Record it and
            // step below.
            if full {
                if !window.incompleteSeconds.contains(pageUntil) { window.incompleteSeconds.append(pageUntil) }
            } else {
                window.unsure[pageUntil] = page.count
            }
            window.boundary = pageUntil - 1
            window.boundaryIDs = []
        }
        self.window = window
        settle()
        return true
    }

    /// A page asked again after its EOSE (a convention learned or doubted, a short page found
    /// capped): what it brought is kept for duplicates only.
    private static func askedAgain(_ page: Page) -> Page {
        var again = Page()
        again.seen = page.seen
        again.rechecked = page.rechecked
        return again
    }

    /// The current filter is done: the next one starts at the window's `until`.
    private static func endFilter(_ window: inout Window) {
        window.filterIndex += 1
        window.boundary = window.until
        window.boundaryIDs = []
        window.shortPage = nil
        window.cappedCount = nil
    }

    /// The connection was cut: the page in flight (if any) will be sent again with the same
    /// `until`; what it already brought is kept for duplicate detection only.
    public mutating func restarted() {
        guard let sent = window?.page?.sent, sent else { return }
        window?.page?.sent = false
        window?.page?.count = 0
        window?.page?.pastUntil = false
        window?.page?.exclusiveForm = false
        window?.page?.reachedUntil = false
        window?.page?.oldest = nil
        window?.page?.oldestIDs = []
    }

    // MARK: Planning

    /// The current filter's `since`…`until` (inclusive) for its next page; nil when empty.
    private func range(_ window: Window) -> (since: Int64, until: Int64)? {
        guard window.filterIndex < filters.count else { return nil }
        let filter = filters[window.filterIndex]
        let since = max(filter.since ?? 0, window.since ?? 0)
        let until = min(filter.until ?? Int64.max, window.boundary)
        return since <= until ? (since, until) : nil
    }

    /// Takes in what another subscription learned of the same relay (see
    /// ``RelayPaging/learn(from:)``); the page in flight, if any, is judged with it at its EOSE.
    ///
    /// - Parameter other: What another subscription of the same relay knows of its paging.
    public mutating func learn(from other: RelayPaging) { paging.learn(from: other) }

    /// Learns the relay's cap again from `start`'s page size (`RelayPaging.relearnCap(from:)`),
    /// at a new connection.
    mutating func relearnCap(from start: RelayPaging) { paging.relearnCap(from: start) }

    /// Skips filters with nothing left to ask and completes the window after the last.
    private mutating func settle() {
        guard var window, window.page == nil else { return }
        while window.filterIndex < filters.count, range(window) == nil { Self.endFilter(&window) }
        if window.filterIndex < filters.count {
            self.window = window
            return
        }
        cursor = window.until
        // A second whose page may have been capped stays unsure unless the relay has since sent
        // a larger page (then that page was its whole run).
        var incomplete = window.incompleteSeconds
        for (second, count) in window.unsure.sorted(by: { $0.key > $1.key })
        where count >= paging.largestPage && !incomplete.contains(second) {
            incomplete.append(second)
        }
        outcome = SyncOutcome(cursor: window.until, incompleteSeconds: incomplete, requests: window.requests)
        self.window = nil
    }

    private func request(_ window: Window) -> SyncRequest {
        let filter = filters[window.filterIndex]
        // `range` is non-nil here: `settle` moved past empty filters before a page was opened.
        let range = self.range(window) ?? (since: 0, until: window.boundary)
        var members = filter.json.members
        if window.since != nil || filter.since != nil { Self.set("since", range.since, in: &members) }
        let until = paging.until == .inclusive ? range.until : range.until + 1
        Self.set("until", until, in: &members)
        // A page below a short page confirms its end. It asks a whole page, not one event: a
        // relay that filters its answer after `LIMIT` (deleted, expired or blocked events still
        // in its index) answers a one-event ask with nothing while more lies below.
        let confirms = window.shortPage != nil
        Self.set("limit", Int64(paging.pageSize), in: &members)
        // Cannot fail: the members were valid and only non-negative integers were set.
        let sent = try! RelayFilter(json: .object(JSONObject(members: members)))
        return SyncRequest(
            filter: sent, filterIndex: window.filterIndex, until: range.until, number: window.requests, confirmsEnd: confirms)
    }

    /// Sets (or adds) a non-negative integer member of a filter's JSON; the engine's live and
    /// ahead REQs use it too.
    static func set(_ key: String, _ value: Int64, in members: inout [JSONObject.Member]) {
        let member = JSONObject.Member(key: key, value: .integer(max(0, value)))
        if let i = members.firstIndex(where: { $0.key == key }) { members[i] = member } else { members.append(member) }
    }
}

// MARK: Durable state

extension SubscriptionSync {
    /// Everything, as JSON (id sets sorted, so equal states write equal text).
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object.append("version", 1)
        object.append("filters", .array(filters.map { JSONValue.object($0.json) }))
        object.append("horizon", .integer(horizon))
        object.append("pageSize", .integer(Int64(paging.pageSize)))
        object.append("until", .string(paging.until.rawValue))
        object.append("largestPage", .integer(Int64(paging.largestPage)))
        object.append("untilRevision", .integer(Int64(paging.untilRevision)))
        object.append("cursor", cursor.map(JSONValue.integer) ?? .null)
        object.append("deepLevel", .integer(Int64(deepening.level)))
        object.append("deepAt", deepening.lastAt.map(JSONValue.integer) ?? .null)
        if let window {
            var w = JSONObject()
            w.append("since", window.since.map(JSONValue.integer) ?? .null)
            w.append("until", .integer(window.until))
            w.append("filter", .integer(Int64(window.filterIndex)))
            w.append("boundary", .integer(window.boundary))
            w.append("boundaryIDs", Self.ids(window.boundaryIDs))
            w.append("requests", .integer(Int64(window.requests)))
            w.append("incompleteSeconds", .array(window.incompleteSeconds.map(JSONValue.integer)))
            w.append("probe", window.probe.map { JSONValue.integer(Int64($0)) } ?? .null)
            w.append(
                "unsure",
                .array(window.unsure.sorted { $0.key > $1.key }.map { JSONValue.array([.integer($0.key), .integer(Int64($0.value))]) }))
            if let short = window.shortPage {
                var s = JSONObject()
                s.append("until", .integer(short.until))
                s.append("count", .integer(Int64(short.count)))
                s.append("oldest", .integer(short.oldest))
                s.append("oldestIDs", Self.ids(short.oldestIDs))
                w.append("shortPage", .object(s))
            } else {
                w.append("shortPage", .null)
            }
            w.append("cappedCount", window.cappedCount.map { JSONValue.integer(Int64($0)) } ?? .null)
            w.append("mostSent", .integer(Int64(window.mostSent)))
            if let page = window.page {
                var p = JSONObject()
                p.append("sent", .bool(page.sent))
                p.append("count", .integer(Int64(page.count)))
                p.append("oldest", page.oldest.map(JSONValue.integer) ?? .null)
                p.append("oldestIDs", Self.ids(page.oldestIDs))
                p.append("seen", Self.ids(page.seen))
                p.append("rechecked", .bool(page.rechecked))
                w.append("page", .object(p))
            } else {
                w.append("page", .null)
            }
            object.append("window", .object(w))
        } else {
            object.append("window", .null)
        }
        if let outcome {
            var o = JSONObject()
            o.append("cursor", .integer(outcome.cursor))
            o.append("incompleteSeconds", .array(outcome.incompleteSeconds.map(JSONValue.integer)))
            o.append("requests", .integer(Int64(outcome.requests)))
            object.append("outcome", .object(o))
        } else {
            object.append("outcome", .null)
        }
        return .object(object)
    }

    /// Reads `jsonValue`'s form. The state comes back as `restarted()` leaves it: a loaded state
    /// has no connection, so a page that was in flight is sent again with the same `until`.
    ///
    /// - Parameter json: A value ``SubscriptionSync/jsonValue`` produced.
    /// - Throws: ``SyncStateError`` naming the first field that is missing, of the wrong type or
    ///   out of range, or an invalid filter.
    public init(json: JSONValue) throws(SyncStateError) {
        func fail(_ message: String) -> SyncStateError { SyncStateError(message: message) }
        func int(_ value: JSONValue?, _ name: String) throws(SyncStateError) -> Int64 {
            guard let n = value?.int64Value else { throw fail("\(name) must be an integer") }
            return n
        }
        func optionalInt(_ value: JSONValue?, _ name: String) throws(SyncStateError) -> Int64? {
            if value?.isNull ?? false { return nil }
            return try int(value, name)
        }
        func ints(_ value: JSONValue?, _ name: String) throws(SyncStateError) -> [Int64] {
            guard let list = value?.arrayValue else { throw fail("\(name) must be an array") }
            var out: [Int64] = []
            for element in list { out.append(try int(element, name)) }
            return out
        }
        func ids(_ value: JSONValue?, _ name: String) throws(SyncStateError) -> Set<String> {
            guard let list = value?.arrayValue else { throw fail("\(name) must be an array") }
            var out: Set<String> = []
            for element in list {
                guard let s = element.stringValue else { throw fail("\(name) must hold strings") }
                out.insert(s)
            }
            return out
        }
        guard json["version"]?.int64Value == 1 else { throw fail("version must be 1") }
        guard let filterList = json["filters"]?.arrayValue, !filterList.isEmpty else { throw fail("filters must be a non-empty array") }
        var filters: [RelayFilter] = []
        for (i, value) in filterList.enumerated() {
            do { filters.append(try RelayFilter(json: value, index: i)) } catch { throw fail("\(error)") }
        }
        let pageSize = try int(json["pageSize"], "pageSize")
        guard pageSize > 0, pageSize <= Int64(Int32.max) else { throw fail("pageSize must be positive") }
        guard let untilText = json["until"]?.stringValue, let convention = RelayPaging.UntilConvention(rawValue: untilText)
        else { throw fail("until must be \"inclusive\", \"exclusive\" or \"unknown\"") }
        var paging = RelayPaging(pageSize: Int(pageSize), until: convention)
        // A state written before the cap was learned had it told: as large as the page size.
        if let largest = json["largestPage"], !largest.isNull {
            let n = try int(largest, "largestPage")
            guard n >= 0, n <= pageSize else { throw fail("largestPage must be 0 to pageSize") }
            paging.largestPage = Int(n)
        }
        // States written before conventions were revised have none: no revision yet.
        if let revision = json["untilRevision"], !revision.isNull {
            let n = try int(revision, "untilRevision")
            guard n >= 0, n <= Int64(Int32.max) else { throw fail("untilRevision is out of range") }
            paging.untilRevision = Int(n)
        }
        self.init(
            filters: filters, cursor: try optionalInt(json["cursor"], "cursor"), horizon: try int(json["horizon"], "horizon"),
            paging: paging)
        // States written before the deeper resync have neither: no deep window yet.
        if let level = json["deepLevel"], !level.isNull {
            let n = try int(level, "deepLevel")
            guard n >= 0, n <= 64 else { throw fail("deepLevel must be 0 to 64") }
            deepening.level = Int(n)
        }
        deepening.lastAt = try optionalInt(json["deepAt"], "deepAt")
        if let w = json["window"], !w.isNull {
            let filterIndex = try int(w["filter"], "window.filter")
            guard filterIndex >= 0, filterIndex <= Int64(filters.count) else { throw fail("window.filter is out of range") }
            let requests = try int(w["requests"], "window.requests")
            guard requests >= 0, requests <= Int64(Int32.max) else { throw fail("window.requests is out of range") }
            var window = Window(
                since: try optionalInt(w["since"], "window.since"), until: try int(w["until"], "window.until"),
                boundary: try int(w["boundary"], "window.boundary"))
            window.filterIndex = Int(filterIndex)
            window.boundaryIDs = try ids(w["boundaryIDs"], "window.boundaryIDs")
            window.requests = Int(requests)
            window.incompleteSeconds = try ints(w["incompleteSeconds"], "window.incompleteSeconds")
            if let probe = w["probe"], !probe.isNull {
                let n = try int(probe, "window.probe")
                // May reach the page size: another subscription can lower it after the probe.
                guard n > 0, n <= Int64(Int32.max) else { throw fail("window.probe is out of range") }
                window.probe = Int(n)
            }
            for entry in w["unsure"]?.arrayValue ?? [] {
                guard let pair = entry.arrayValue, pair.count == 2 else { throw fail("window.unsure must hold [second, count] pairs") }
                let count = try int(pair[1], "window.unsure count")
                guard count > 0, count <= Int64(Int32.max) else { throw fail("window.unsure count is out of range") }
                window.unsure[try int(pair[0], "window.unsure second")] = Int(count)
            }
            // States written before short pages were confirmed have none.
            if let short = w["shortPage"], !short.isNull {
                let count = try int(short["count"], "window.shortPage.count")
                guard count > 0, count <= Int64(Int32.max) else { throw fail("window.shortPage.count is out of range") }
                window.shortPage = ShortPage(
                    until: try int(short["until"], "window.shortPage.until"), count: Int(count),
                    oldest: try int(short["oldest"], "window.shortPage.oldest"),
                    oldestIDs: try ids(short["oldestIDs"], "window.shortPage.oldestIDs"))
            }
            if let capped = w["cappedCount"], !capped.isNull {
                let n = try int(capped, "window.cappedCount")
                guard n > 0, n <= Int64(Int32.max) else { throw fail("window.cappedCount is out of range") }
                window.cappedCount = Int(n)
            }
            // States written before the floor existed have none (0: no floor).
            if let most = w["mostSent"], !most.isNull {
                let n = try int(most, "window.mostSent")
                guard n >= 0, n <= Int64(Int32.max) else { throw fail("window.mostSent is out of range") }
                window.mostSent = Int(n)
            }
            if let p = w["page"], !p.isNull {
                guard p["sent"]?.boolValue != nil else { throw fail("window.page.sent must be a boolean") }
                var page = Page()
                page.seen = try ids(p["seen"], "window.page.seen")
                if let rechecked = p["rechecked"], !rechecked.isNull {
                    guard let b = rechecked.boolValue else { throw fail("window.page.rechecked must be a boolean") }
                    page.rechecked = b
                }
                // count, oldest and oldestIDs are checked but reset: the page is asked again.
                _ = try int(p["count"], "window.page.count")
                _ = try optionalInt(p["oldest"], "window.page.oldest")
                _ = try ids(p["oldestIDs"], "window.page.oldestIDs")
                window.page = page
            }
            self.window = window
        }
        if let o = json["outcome"], !o.isNull {
            let requests = try int(o["requests"], "outcome.requests")
            guard requests >= 0, requests <= Int64(Int32.max) else { throw fail("outcome.requests is out of range") }
            outcome = SyncOutcome(
                cursor: try int(o["cursor"], "outcome.cursor"),
                incompleteSeconds: try ints(o["incompleteSeconds"], "outcome.incompleteSeconds"),
                requests: Int(requests))
        }
    }

    private static func ids(_ set: Set<String>) -> JSONValue {
        .array(set.sorted().map(JSONValue.string))
    }
}
