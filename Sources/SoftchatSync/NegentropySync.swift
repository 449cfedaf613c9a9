public import SoftchatCore

/// The sans-IO plan for syncing one subscription with one relay by NIP-77 negentropy
/// reconciliation, all its state in this value (the engine keeps one per subscription while a
/// connection is up; a cut discards it, since a reconciliation is cheap to start again and the
/// events it fetched are already committed).
///
/// One reconciliation runs per filter of the subscription, over the filter without its
/// `limit` (the whole set, every age): `start(items:)` gives the account's items, one list per
/// filter, and returns the NEG-OPENs; each NEG-MSG goes to `received(filterIndex:message:)`,
/// which returns the next NEG-MSG or, once the filter is settled, a NEG-CLOSE. The ids the
/// relay has and the account lacks queue up as they are learnt and leave through `nextFetch()`
/// in batches of at most `fetchBatch` (a REQ by `ids` each, so the relay's `max_limit` is
/// respected); `fetchEnded()` marks a batch's EOSE. The sync is complete when every filter is
/// settled and every batch has ended: then everything the relay held for the filters when the
/// reconciliation began is in the account (the live REQ covers what arrives after).
public struct NegentropySync: Sendable {
    /// What to send.
    public enum Output: Sendable, Hashable {
        case open(filterIndex: Int, filter: RelayFilter, message: [UInt8])
        case message(filterIndex: Int, message: [UInt8])
        case close(filterIndex: Int)
    }

    /// The filters as reconciled (no `limit`).
    public let filters: [RelayFilter]
    /// The most ids in one fetch.
    public let fetchBatch: Int
    /// The largest negentropy message this side writes, in bytes of binary.
    public let frameSizeLimit: Int
    /// The newest `created_at` the result vouches for: the time the reconciliation began.
    public let until: Int64

    private var reconcilers: [Negentropy] = []
    private var open: [Bool] = []
    private var queue: [String] = []
    private var queueStart = 0
    private var queued: Set<String> = []
    public private(set) var fetchesInFlight = 0
    /// Ids the account has and the relay lacks (for a host that offers them back).
    public private(set) var have: [NegentropyID] = []
    /// Negentropy messages received.
    public private(set) var rounds = 0
    /// Ids learnt missing from the account.
    public var needed: Int { queued.count }
    /// REQs sent to fetch them.
    public private(set) var fetches = 0

    public init(filters: [RelayFilter], until: Int64, fetchBatch: Int, frameSizeLimit: Int) {
        precondition(!filters.isEmpty && fetchBatch > 0, "a reconciliation has filters and fetches at least one id at a time")
        self.filters = filters.map { $0.withoutLimit() }
        self.until = until
        self.fetchBatch = fetchBatch
        self.frameSizeLimit = frameSizeLimit
    }

    /// True once `start(items:)` ran.
    public var isStarted: Bool { !reconcilers.isEmpty }

    /// True while some filter is still reconciling.
    public var isReconciling: Bool { open.contains(true) }

    /// Every filter settled and every fetch ended.
    public var isComplete: Bool { isStarted && !isReconciling && queueStart == queue.count && fetchesInFlight == 0 }

    /// The NEG-OPEN of each filter, over `items[i]` for filter `i`.
    public mutating func start(items: [[NegentropyItem]]) -> [Output] {
        precondition(items.count == filters.count, "one item list per filter")
        reconcilers = items.map { Negentropy(storage: NegentropyStorage(items: $0), frameSizeLimit: frameSizeLimit) }
        open = Array(repeating: true, count: filters.count)
        return filters.indices.map { .open(filterIndex: $0, filter: filters[$0], message: reconcilers[$0].initiate()) }
    }

    /// A NEG-MSG for filter `filterIndex`: the next message, or the close once it is settled.
    /// - Throws: `invalid_negentropy_message` when the message does not decode; the filter is
    ///   then closed and the sync cannot complete (the caller falls back to REQ paging).
    public mutating func received(filterIndex i: Int, message: [UInt8]) throws(SoftchatError) -> Output? {
        guard open.indices.contains(i), open[i] else { return nil }
        rounds += 1
        let step: NegentropyStep
        do {
            step = try reconcilers[i].reconcile(message)
        } catch {
            open[i] = false
            failed = true
            throw error
        }
        have += step.have
        for id in step.need {
            let hex = id.hex
            if queued.insert(hex).inserted { queue.append(hex) }
        }
        if let next = step.next { return .message(filterIndex: i, message: next) }
        open[i] = false
        return .close(filterIndex: i)
    }

    /// A reconciliation ended without settling (a bad message, NEG-ERR): the sync cannot
    /// complete on this connection.
    public private(set) var failed = false

    /// The relay ended filter `i`'s reconciliation (NEG-ERR).
    public mutating func abandoned(filterIndex i: Int) {
        guard open.indices.contains(i), open[i] else { return }
        open[i] = false
        failed = true
    }

    /// The next batch of ids to fetch, or nil (none queued, or a batch is in flight).
    public mutating func nextFetch() -> [String]? {
        guard fetchesInFlight == 0, queueStart < queue.count else { return nil }
        let end = min(queue.count, queueStart + fetchBatch)
        let batch = Array(queue[queueStart..<end])
        queueStart = end
        fetchesInFlight += 1
        fetches += 1
        return batch
    }

    /// The EOSE of a fetch.
    public mutating func fetchEnded() {
        if fetchesInFlight > 0 { fetchesInFlight -= 1 }
    }
}
