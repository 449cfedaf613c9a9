public import SoftchatCore

/// The sans-IO plan for syncing one subscription with one relay by NIP-77 negentropy
/// reconciliation, all its state in this value (the engine keeps one per subscription while a
/// connection is up; a cut discards it, since a reconciliation is cheap to start again and the
/// events it fetched are already committed).
///
/// Reconciliation runs in *parts*: at first one per filter of the subscription, over the filter
/// without its `limit` (the whole set, every age). `start(items:)` gives the account's items,
/// one list per filter; `nextOpen()` hands out the NEG-OPEN of the next part waiting (the engine
/// decides how many run at once on a connection); each NEG-MSG goes to
/// `received(part:message:)`, which returns the next NEG-MSG or, once the part is settled, a
/// NEG-CLOSE. A relay that finds a part too big (`NEG-ERR "blocked: this query is too big"`, or
/// rust-nostr's `"rate-limited: too many negentropy items"`) gets it again as two parts split
/// by `created_at` (`split(part:)`), each with its `since`/`until`, until the parts fit.
///
/// The ids the relay has and the account lacks queue up as they are learnt and leave through
/// `nextFetch()` in batches of at most `fetchBatch` (a REQ by `ids` each, so the relay's
/// `max_limit` is respected); `fetchEnded()` marks a batch's EOSE. Ids the caller knows the
/// relay sends only over our frame bound leave the queue without a fetch
/// (`nextFetch(skipping:)`, listed in ``skippedIDs``); ids the relay does not send when asked are
/// listed in ``unservedIDs``. The sync is complete when
/// every part is settled and every batch has ended: then everything the relay held for the
/// filters when the reconciliation began is in the account (the live REQ covers what arrives
/// after).
public struct NegentropySync: Sendable {
    /// What to send.
    public enum Output: Sendable, Hashable {
        /// Send NEG-OPEN for part `part`: its filter and the initial negentropy message, in binary.
        case open(part: Int, filter: RelayFilter, message: [UInt8])
        /// Send NEG-MSG for part `part`: the next negentropy message, in binary.
        case message(part: Int, message: [UInt8])
        /// Part `part` is settled: send its NEG-CLOSE.
        case close(part: Int)
    }

    /// One reconciliation: a filter of the subscription, or a time slice of one.
    struct Part: Sendable {
        enum State: Sendable {
            case waiting
            case open(Negentropy)
            case settled, split
        }
        let filterIndex: Int
        let filter: RelayFilter
        /// The account's items in the part (until it opens).
        var items: [NegentropyItem]
        var state: State
    }

    /// The filters as reconciled (no `limit`).
    public let filters: [RelayFilter]
    /// The most ids in one fetch.
    public let fetchBatch: Int
    /// The largest negentropy message this side writes, in bytes of binary.
    public let frameSizeLimit: Int
    /// The newest `created_at` the result vouches for: the time the reconciliation began.
    public let until: Int64

    private var parts: [Part] = []
    private var queue: [String] = []
    private var queueStart = 0
    private var queued: Set<String> = []
    /// Fetches handed out by `nextFetch()` whose EOSE has not come yet (at most one).
    public private(set) var fetchesInFlight = 0
    /// Ids of the fetch in flight not received yet, and how many it brought so far.
    private var fetching: Set<String> = []
    private var fetchBrought = 0
    /// Ids given up, in order: asked again after a capped answer, and the relay sent none of them
    /// (it listed them, then no longer held them, or withholds them).
    public private(set) var unservedIDs: [String] = []
    /// How many ids were given up (``unservedIDs``).
    public var givenUp: Int { unservedIDs.count }
    /// Ids left out of every fetch because the caller knows the relay sends them only over our
    /// frame bound (`nextFetch(skipping:)`), in order.
    public private(set) var skippedIDs: [String] = []
    /// Ids the account has and the relay lacks (for a host that offers them back).
    public private(set) var have: [NegentropyID] = []
    /// Negentropy messages received.
    public private(set) var rounds = 0
    /// Ids learnt missing from the account.
    public var needed: Int { queued.count }
    /// REQs sent to fetch them.
    public private(set) var fetches = 0

    /// Creates a reconciliation that has not started: `start(items:)` gives it the account's items.
    ///
    /// - Parameters:
    ///   - filters: The subscription's filters, at least one; each is reconciled without its
    ///     `limit`.
    ///   - until: The time the reconciliation begins, in Unix seconds: the newest `created_at`
    ///     the result vouches for.
    ///   - fetchBatch: The most ids in one fetch REQ, at least 1.
    ///   - frameSizeLimit: The largest negentropy message this side writes, in bytes of binary.
    public init(filters: [RelayFilter], until: Int64, fetchBatch: Int, frameSizeLimit: Int) {
        precondition(!filters.isEmpty && fetchBatch > 0, "a reconciliation has filters and fetches at least one id at a time")
        self.filters = filters.map { $0.withoutLimit() }
        self.until = until
        self.fetchBatch = fetchBatch
        self.frameSizeLimit = frameSizeLimit
    }

    /// True once `start(items:)` ran.
    public var isStarted: Bool { !parts.isEmpty }

    /// True while some part waits to open or is reconciling.
    public var isReconciling: Bool {
        parts.contains { part in
            switch part.state {
            case .waiting, .open: true
            case .settled, .split: false
            }
        }
    }

    /// Every part settled and every fetch ended.
    public var isComplete: Bool { isStarted && !failed && !isReconciling && queueStart == queue.count && fetchesInFlight == 0 }

    /// A reconciliation ended without settling (a bad message, a NEG-ERR, a part too big that
    /// cannot be split): the sync cannot complete on this connection.
    public private(set) var failed = false

    /// Sets the account's items, `items[i]` for filter `i`; one part per filter waits to open.
    ///
    /// - Parameter items: One item list per filter, in the order of ``NegentropySync/filters``
    ///   (another count traps).
    public mutating func start(items: [[NegentropyItem]]) {
        precondition(items.count == filters.count, "one item list per filter")
        parts = filters.indices.map { Part(filterIndex: $0, filter: filters[$0], items: items[$0], state: .waiting) }
    }

    /// The NEG-OPEN of the next part waiting, or nil.
    ///
    /// - Returns: `.open` for the next waiting part, which is open from now on; nil when no part
    ///   waits or the sync has failed.
    public mutating func nextOpen() -> Output? {
        guard !failed, let p = parts.firstIndex(where: { if case .waiting = $0.state { true } else { false } }) else { return nil }
        let reconciler = Negentropy(storage: NegentropyStorage(items: parts[p].items), frameSizeLimit: frameSizeLimit)
        parts[p].items = []
        let message = reconciler.initiate()
        parts[p].state = .open(reconciler)
        return .open(part: p, filter: parts[p].filter, message: message)
    }

    /// A NEG-MSG for part `p`: the next message, or the close once it is settled.
    ///
    /// - Parameters:
    ///   - p: The part the NEG-MSG's subscription belongs to.
    ///   - message: The relay's negentropy message, in binary.
    /// - Returns: `.message` with the next NEG-MSG, `.close` once the part is settled, or nil for
    ///   a part that is unknown or not open (a late message).
    /// - Throws: `SoftchatError` with code `invalid_negentropy_message` when the message does not
    ///   decode; the part is then closed and the sync cannot complete (the caller falls back to
    ///   REQ paging).
    public mutating func received(part p: Int, message: [UInt8]) throws(SoftchatError) -> Output? {
        guard parts.indices.contains(p), case .open(let reconciler) = parts[p].state else { return nil }
        rounds += 1
        let step: NegentropyStep
        do {
            step = try reconciler.reconcile(message)
        } catch {
            parts[p].state = .settled
            failed = true
            throw error
        }
        have += step.have
        for id in step.need {
            let hex = id.hex
            if queued.insert(hex).inserted { queue.append(hex) }
        }
        if let next = step.next {
            parts[p].state = .open(reconciler)
            return .message(part: p, message: next)
        }
        parts[p].state = .settled
        return .close(part: p)
    }

    /// The relay ended part `p`'s reconciliation (NEG-ERR).
    ///
    /// - Parameter p: The part; one that is unknown or not open is ignored.
    public mutating func abandoned(part p: Int) {
        guard parts.indices.contains(p), case .open = parts[p].state else { return }
        parts[p].state = .settled
        failed = true
    }

    /// The most parts one reconciliation is split into (``split(part:)``): room for a relay whose
    /// item limit is a thousandth of the window, while a relay that calls every NEG-OPEN too big
    /// (or says "too many" for another reason) costs a bounded number of them, not one per second
    /// of the window (found by the simulator, issue 45: 2^31 parts for a window from the epoch).
    public static let maxParts = 2_048

    /// The relay found part `p` too big: it is replaced by two parts waiting to open, split at
    /// the median `created_at` of the account's items in it (the relay's set is likely shaped
    /// like the account's), or at the middle of its time range when that does not divide it.
    ///
    /// - Parameter p: The open part the relay refused.
    /// - Returns: True when the part was split. False when it is unknown or not open, when it
    ///   spans a single second and cannot be split, or when the reconciliation already holds
    ///   ``maxParts`` (the sync then cannot complete on this connection, and falls back to
    ///   paging).
    public mutating func split(part p: Int) -> Bool {
        guard parts.indices.contains(p), case .open(let reconciler) = parts[p].state else { return false }
        let part = parts[p]
        let low = part.filter.since ?? 0
        let high = part.filter.until
        let top = high ?? max(until, low)
        let items = reconciler.storage.items
        var middle = items.isEmpty ? low : Int64(clamping: items[items.count / 2].timestamp)
        if !(middle > low && middle <= top) { middle = low + (top - low + 1) / 2 }
        guard middle > low, middle <= top, parts.count + 2 <= Self.maxParts else {
            parts[p].state = .settled
            failed = true
            return false
        }
        parts[p].state = .split
        let below = items.prefix { $0.timestamp < UInt64(middle) }
        let above = items[below.count...]
        parts.append(Part(filterIndex: part.filterIndex, filter: part.filter.withUntil(middle - 1), items: Array(below), state: .waiting))
        parts.append(Part(filterIndex: part.filterIndex, filter: part.filter.withSince(middle), items: Array(above), state: .waiting))
        return true
    }

    /// The next batch of ids to fetch, or nil (none queued, or a batch is in flight).
    ///
    /// - Returns: Up to ``NegentropySync/fetchBatch`` event ids (hex) for one REQ by `ids`, now in
    ///   flight until `fetchEnded()`; nil when none are queued or a batch is in flight.
    public mutating func nextFetch() -> [String]? { nextFetch(skipping: { _ in false }) }

    /// The next batch of ids to fetch, leaving out the ids `skip` picks: the caller knows the
    /// relay sends those only over our frame bound (an earlier connection's fetch), so asking
    /// for them again would only bring the same skipped message. They leave the queue for
    /// ``skippedIDs``.
    ///
    /// - Parameter skip: True for an id not to ask for.
    /// - Returns: Up to ``NegentropySync/fetchBatch`` event ids (hex) for one REQ by `ids`, now in
    ///   flight until `fetchEnded()`; nil when none are queued (or all were skipped) or a batch
    ///   is in flight.
    public mutating func nextFetch(skipping skip: (String) -> Bool) -> [String]? {
        guard fetchesInFlight == 0 else { return nil }
        var batch: [String] = []
        while queueStart < queue.count, batch.count < fetchBatch {
            let id = queue[queueStart]
            queueStart += 1
            if skip(id) { skippedIDs.append(id) } else { batch.append(id) }
        }
        guard !batch.isEmpty else { return nil }
        fetchesInFlight += 1
        fetches += 1
        fetching = Set(batch)
        fetchBrought = 0
        return batch
    }

    /// An event the relay sent for the fetch in flight, by the id it claims (before
    /// verification: an event that fails it was the relay's answer all the same).
    ///
    /// - Parameter id: The event id, in hex.
    public mutating func fetchReceived(_ id: String) {
        if fetching.remove(id) != nil { fetchBrought += 1 }
    }

    /// The EOSE of a fetch. Relays cap an answer by ids as they cap any other (a fetch of 500
    /// ids from a relay that sends 13 per REQ): the ids it did not send are queued again, as
    /// long as each answer brings some; ids an answer brought none of are given up (the relay
    /// no longer holds them).
    public mutating func fetchEnded() {
        if fetchesInFlight > 0 { fetchesInFlight -= 1 }
        if !fetching.isEmpty {
            if fetchBrought > 0 { queue += fetching.sorted() } else { unservedIDs += fetching.sorted() }
            fetching = []
        }
        fetchBrought = 0
    }
}
