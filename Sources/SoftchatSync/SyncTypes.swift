public import SoftchatCore
public import SoftchatJSON

/// How a relay answers a stored-events REQ: the most events it sends for one filter and how it
/// reads `until` — told by the caller, or learned from the relay's own answers, and either way
/// checked against them: what answers behind a URL can change (a new configuration, another
/// backend, a cap for clients not authenticated).
///
/// Relays differ and do not say: nostr-relay reads `until` exclusively, rust-nostr's LocalRelay
/// inclusively; relays cap a REQ's answer at 500, 300 or 20 events whatever `limit` asks, and
/// NIP-11's `max_limit` may be absent or wrong. Paging by `until` that assumes either wrongly
/// loses events silently (a page boundary inside a second, or a capped page taken for the end),
/// so what is not known is learned while paging (``SubscriptionSync``), and what is known is
/// given up when an answer contradicts it:
/// - **`until`.** ``UntilConvention/unknown`` sends the exclusive form (the page's last second
///   + 1), which an exclusive relay answers exactly. An inclusive relay also sends events of that
///   next second: the first one proves it inclusive, and that page is asked again in the
///   inclusive form (the extra events took places in it); such an event overturns a known
///   `.exclusive` the same way. A page asked in the inclusive form for the second the page before
///   it ended in, that brings back no event of that second, shows a relay that reads `until`
///   exclusively now: the convention goes back to `.unknown` (whose form is right under both)
///   and that page is asked again, once. Only a page's stored answer (before its EOSE) counts,
///   never a live event.
/// - **The cap.** ``largestPage`` is the most events the relay has been seen to send for one
///   REQ. A page at least that long but shorter than `pageSize` may have been cut by a cap not
///   yet known, so paging goes on from its oldest second until a page brings nothing older;
///   when it does bring older events and as many as the page before, the relay capped both at
///   that count: `pageSize` drops to it, now known (counts that differ are answers cut short, not
///   a cap). A page shorter than that is not proof of the end either (the cap may have
///   gone down since it was learned or told): a page is asked below it (`until` = its oldest
///   − 1, the page size as `limit`; one event would not do: a relay that filters its answer after
///   `LIMIT` sends nothing for it while more lies below). When the relay sends events, it capped
///   that page (or the event reached it
///   after the page, a backdated arrival, or cut its answer short): paging goes on below the
///   page, and a second such page in a row of the same count makes the cap known: `pageSize`
///   drops to that count. That costs one REQ per filter per window whose last page brought
///   events (an EOSE alone when nothing lies below). Whatever answers show, `pageSize` is never
///   lowered below the most events one page of the same window brought.
public struct RelayPaging: Sendable, Hashable {
    /// How a relay compares `created_at` with a filter's `until`.
    public enum UntilConvention: String, Sendable, Hashable {
        /// `created_at <= until`, as NIP-01 says.
        case inclusive
        /// `created_at < until`, as some relays implement it (nostr-relay).
        case exclusive
        /// Not known yet: learned from the relay's answers (the exclusive form is sent until then).
        case unknown
    }

    /// Events per page: the `limit` every REQ carries. Known to be at most what the relay really
    /// sends once ``largestPage`` reaches it.
    public internal(set) var pageSize: Int
    /// How the relay compares `created_at` with a filter's `until`.
    public internal(set) var until: UntilConvention
    /// The most events the relay has been seen to send for one REQ (0 when none yet), at most
    /// `pageSize`: a shorter page is the relay's whole answer once one event asked below it does
    /// not come.
    public internal(set) var largestPage: Int
    /// How many times an answer overturned a known `until` convention (an inclusive reading that
    /// brought back nothing of a boundary second, an event at the `until` an exclusive reading
    /// excludes). A later revision wins over what was known before it (``learn(from:)``), so a
    /// doubt reaches every subscription of the relay instead of being taken back by what they
    /// knew.
    public internal(set) var untilRevision = 0

    /// A relay whose cap and `until` convention the caller knows: where to start. An answer that
    /// contradicts either corrects it (an event below a short page, a boundary second that does
    /// not come back; see above), so what is told never switches learning off.
    ///
    /// - Parameters:
    ///   - pageSize: Events per page, at least 1 (less traps); at most what the relay really sends
    ///     for one filter.
    ///   - until: How the relay reads `until`: NIP-01's `.inclusive` unless it is known to differ,
    ///     or `.unknown` to learn it.
    public init(pageSize: Int, until: UntilConvention = .inclusive) {
        precondition(pageSize > 0, "a page holds at least one event")
        self.pageSize = pageSize
        self.until = until
        largestPage = pageSize
    }

    /// A relay nothing is known of: pages of 500 events (strfry's and LocalRelay's cap), the cap
    /// and the `until` convention learned from its answers.
    public init() { self = .learning(pageSize: 500) }

    /// A relay whose cap (at most `pageSize`) and `until` convention are learned from its answers.
    ///
    /// - Parameter pageSize: The `limit` to ask for, at least 1 (less traps): the configured page
    ///   size, or a lower NIP-11 `max_limit`.
    /// - Returns: The paging, with nothing known yet.
    public static func learning(pageSize: Int) -> RelayPaging {
        var paging = RelayPaging(pageSize: pageSize, until: .unknown)
        paging.largestPage = 0
        return paging
    }

    /// True when `pageSize` is known to be at most the relay's cap (a page that long was seen, or
    /// the caller said so).
    public var isCapKnown: Bool { largestPage >= pageSize }

    /// Takes in what another subscription learned of the same relay: the smaller page size, the
    /// larger page seen, the `until` convention of the later revision (a doubt included), else a
    /// known one over an unknown one.
    ///
    /// - Parameter other: The other subscription's paging of the same relay.
    public mutating func learn(from other: RelayPaging) {
        pageSize = min(pageSize, other.pageSize)
        largestPage = min(pageSize, max(largestPage, other.largestPage))
        if other.untilRevision > untilRevision {
            until = other.until
            untilRevision = other.untilRevision
        } else if other.untilRevision == untilRevision, until == .unknown {
            until = other.until
        }
    }

    /// What a page's stored answer showed of how the relay reads `until` now: `.inclusive` (an
    /// event at the `until` an exclusive reading excludes) or `.unknown` (asked in the inclusive
    /// form, nothing of a second it had sent events of). Overturning a known convention is a
    /// revision.
    mutating func show(_ convention: UntilConvention) {
        guard until != convention else { return }
        if until != .unknown { untilRevision += 1 }
        until = convention
    }

    /// Narrowed by what a relay's NIP-11 document says, which may be absent or wrong: a
    /// `max_limit` below the page size only lowers the limit asked for (the cap is still learned
    /// from answers), and a convention known from its `software` fills one not yet known —
    /// never one configured or learned, nor one an answer has overturned. The same whether the
    /// document came before the first connection or late.
    ///
    /// - Parameters:
    ///   - maxLimit: The document's `limitation.max_limit`, if any.
    ///   - untilConvention: How its software reads `until`, when known.
    public mutating func narrow(maxLimit: Int?, untilConvention: UntilConvention?) {
        if let cap = maxLimit, cap > 0, cap < pageSize {
            pageSize = cap
            largestPage = min(largestPage, cap)
        }
        if until == .unknown, untilRevision == 0, let untilConvention { until = untilConvention }
    }

    /// Starts learning the cap again from `start`'s page size, when it is larger than the one
    /// learned (the `until` convention and the largest page seen stay). A cap learned from
    /// answers holds for the connection it was learned on: what answers behind a URL changes, and
    /// answers cut short (a time or byte budget, events filtered out after `LIMIT`, an event sent
    /// after its EOSE) look like a lower cap, which must not shrink every later page for good.
    mutating func relearnCap(from start: RelayPaging) {
        guard start.pageSize > pageSize else { return }
        pageSize = start.pageSize
    }
}

/// One REQ to send: a page of one filter of the subscription.
public struct SyncRequest: Sendable, Hashable {
    /// The filter to send, with the window's `since`, the page's `until` (written in the relay's
    /// convention) and `limit` = the page size (a host `limit` is replaced: a sync is complete).
    /// One filter per REQ: relays apply `limit` per filter, so several filters in one REQ have no
    /// single "oldest event seen" to page from.
    public let filter: RelayFilter
    /// Which of the host's filters this page belongs to.
    public let filterIndex: Int
    /// The newest `created_at` the page asks for, inclusive (whatever the relay's convention).
    public let until: Int64
    /// 1, 2, … for each REQ sent in this window (a re-sent page gets a new number): use a fresh
    /// subscription id per number and pass only that subscription's events.
    public let number: Int
    /// True for the page asked below a short page (`until` = that page's oldest − 1): the relay
    /// sends events when it capped that page, none when the page was its whole answer.
    public let confirmsEnd: Bool

    /// The REQ's filter list: `filter` alone.
    public var filters: [RelayFilter] { [filter] }
}

/// A finished window.
public struct SyncOutcome: Sendable, Hashable {
    /// The new durable cursor: the window's `until`, never later than the `now` it began with.
    public let cursor: Int64
    /// Seconds in which more events shared one `created_at` than a page holds: paging by `until`
    /// cannot reach past the first page of such a run, so these seconds may be incomplete. Each
    /// second once, newest first for each filter in turn.
    public let incompleteSeconds: [Int64]
    /// REQs sent for the window, re-sent pages included (with negentropy: the fetches by id).
    public let requests: Int
    /// How the window was synced.
    public let method: SyncMethod
    /// Set in the engine's `synced` report when the relay refused this subscription's live REQ
    /// on the connection, in its words (`restricted: …`, `blocked: …`, `auth-required: …` with no
    /// AUTH of ours accepted) or the session's (a REQ over the relay's frame): the window is
    /// synced all the same, but nothing the relay receives after it reaches the account live;
    /// it comes with the next connection's sync. Nil while the live feed runs, and in
    /// `SubscriptionSync`'s own outcomes.
    public var liveFeedRefused: String?
    /// Set in the engine's `synced` report: what the window left out of the account and why, one
    /// entry per reason in `SkipReason.allCases` order, each with its count and at most
    /// `SkippedEvents.maxListedIDs` ids — events the relay sent over our frame bound (in a page,
    /// or for a NIP-77 fetch by id; on a relay that speaks NIP-77 such an id is not asked for
    /// again, and each later reconciliation reports it skipped), and ids NIP-77 found on the
    /// relay that it then did not send when asked. Everything since the subscription's last
    /// `synced` report on the relay counts. Empty when nothing was skipped, and in
    /// `SubscriptionSync`'s own outcomes.
    public var skipped: [SkippedEvents] = []

    /// Creates an outcome.
    ///
    /// - Parameters:
    ///   - cursor: The new durable cursor, in Unix seconds.
    ///   - incompleteSeconds: Seconds whose run of events was longer than a page.
    ///   - requests: REQs sent for the window.
    ///   - method: How the window was synced.
    public init(cursor: Int64, incompleteSeconds: [Int64], requests: Int, method: SyncMethod = .paging) {
        self.cursor = cursor
        self.incompleteSeconds = incompleteSeconds
        self.requests = requests
        self.method = method
    }
}

/// How a subscription's window was synced.
public enum SyncMethod: String, Sendable, Hashable {
    /// REQ pages by `until` over `[cursor − horizon, now]`.
    case paging
    /// NIP-77 reconciliation of the whole set (every age), then REQs by id for what was missing.
    case negentropy
}

/// What the planner says to do next.
public enum SyncStep: Sendable, Hashable {
    /// No window is open: call `begin(now:)`.
    case idle
    /// Send this REQ (it counts as sent now).
    case send(SyncRequest)
    /// A page is in flight: pass its events to `received(eventID:createdAt:)`, then its EOSE to
    /// `endOfStoredEvents()`.
    case awaitingEndOfStoredEvents
    /// The whole window is synced and the cursor has moved.
    case synced(SyncOutcome)
}

/// What `received(eventID:createdAt:)` made of an event.
public enum SyncDisposition: Sendable, Hashable {
    /// Counted in the page and not seen before in this window: verify and store it.
    case new
    /// Counted in the page, and this id was already received at the page boundary or earlier in
    /// this page (before a cut): drop it without verifying.
    case duplicate
    /// Outside the page's `since`…`until` (a relay that ignores a bound): not counted.
    case outsideRequest
    /// No page is in flight (a live event, or one that came after its page's EOSE): not counted;
    /// live events never extend paging.
    case notPaging
}

/// A stored state that does not decode.
public struct SyncStateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong with the state, naming the field.
    public let message: String
    /// The message, prefixed by "invalid sync state:".
    public var description: String { "invalid sync state: \(message)" }
}
