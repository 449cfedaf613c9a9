public import SoftchatCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Live queries: a screen observes a window of the account (the newest events matching its
// filters, at most `limit`) and gets a snapshot, then ordered changes that turn each window into
// exactly the window a fresh read would return. Changes are found in the commit, not by running
// every query again: the writer connection records the rowid of every `events` row a transaction
// inserts, updates or deletes (SQLite's update hook); after the commit the writer hands those
// rows to the live-query worker and goes on. The worker, on a read-only connection of its own,
// reads only those rows back and tests each only against the observations filed under its
// author, tag values or kind. A commit by another process (or another connection) is found
// through `PRAGMA data_version`, checked on the writer every `LiveQueryHub.pollMilliseconds`;
// then every window is read again and compared. Time moves
// windows too (a NIP-40 expiry, a future-dated event coming into range): each observation knows
// the next such moment and is read again at it.

extension SoftchatAccount {
    /// CLOCK_MONOTONIC in nanoseconds when this account's last commit with observations open
    /// returned from SQLite, before its changes were found (0 before any).
    @_spi(Benchmarks) public var lastObservedCommitNanoseconds: Int64 { store.live.lastCommitNanoseconds.load(ordering: .acquiring) }

    /// How many transactions this account's writer has committed (a group commit is one).
    @_spi(Benchmarks) public var commitsForBenchmarks: Int { store.commits.load(ordering: .relaxed) }

    /// The WAL frames (pages) the commit `body` makes writes: the frames in the WAL after a
    /// checkpoint, before and after it (a WAL the checkpoint emptied is restarted by the next
    /// commit, which then holds only its own). A benchmark's floor is that many frames made
    /// durable.
    @_spi(Benchmarks) public func walFramesForBenchmarks(_ body: () throws -> Void) rethrows -> Int {
        // (frames in the WAL, whether the checkpoint copied them all back: then the next commit
        // writes from the WAL's start).
        func checkpoint() -> (frames: Int64, emptied: Bool) {
            store.settleLiveQueries()
            // Outside any transaction (a checkpoint cannot run inside one).
            return store.writer.with { db in
                guard let s = try? db?.statement("PRAGMA wal_checkpoint(PASSIVE)"), (try? s.step()) == true else { return (0, false) }
                defer { s.reset() }
                return (s.int64(1), s.int64(0) == 0 && s.int64(1) == s.int64(2))
            }
        }
        let before = checkpoint()
        try body()
        let after = checkpoint().frames
        return Int(before.emptied ? after : after - before.frames)
    }

    /// How many windows the open observations keep (equal ones on the wall clock share one).
    @_spi(Benchmarks) public var openWindowsForBenchmarks: Int { store.live.state.withLock { $0.entries.count } }

    /// Waits until the live-query worker has applied every commit made so far.
    @_spi(Benchmarks) public func settleObservations() { store.settleLiveQueries() }

    /// Observes a window of the account: the newest events matching any of `filters` (as
    /// ``events(matching:limit:now:)`` reads them: deleted, replaced and expired events are
    /// never in it), at most `limit`. It yields the window, then the changes each commit makes to
    /// it, and the changes time makes (an expiry). The app's own writes (``AccountOutgoing/enqueueSigned(_:now:)``,
    /// ``AccountMessages/send(to:text:signer:now:tags:)``, ``AccountMessages/markRead(ownerKey:members:)``)
    /// return once every window holds them; ingestion hands its rows to the account's live-query
    /// worker and returns, and its changes follow within milliseconds; another process's commits
    /// arrive within about `LiveQueryHub.pollMilliseconds`.
    ///
    /// - Parameters:
    ///   - filters: The window's filters. A filter's own `limit` does not apply to a window:
    ///     give the window's `limit`.
    ///   - limit: The most events in the window, 1 to ``EventObservation/maxLimit`` (default
    ///     ``EventObservation/defaultLimit``).
    ///   - clock: The current Unix time in seconds, which decides expiry as a read's `now` does;
    ///     nil: ``EventObservation/wallClock``. Observations on the wall clock with the same
    ///     filters and limit share one window (kept and updated once).
    /// - Returns: The observation; keep it while the screen shows the window.
    /// - Throws: `invalid_relay_filter` for no filter, a filter with its own limit or a `limit`
    ///   out of range; `account_storage_failed` when SQLite fails.
    public func observe(
        _ filters: [RelayFilter], limit: Int = EventObservation.defaultLimit,
        clock: (@Sendable () -> Int64)? = nil
    ) throws(SoftchatError) -> EventObservation {
        guard !filters.isEmpty else { throw .invalidRelayFilter("observe: at least one filter is needed", operation: .relayIngestion) }
        guard (1...EventObservation.maxLimit).contains(limit) else {
            throw .invalidRelayFilter("observe: limit must be 1 to \(EventObservation.maxLimit), not \(limit)", operation: .relayIngestion)
        }
        if filters.contains(where: { $0.limit != nil }) {
            throw .invalidRelayFilter("observe: a filter's own limit does not apply to a window; give the window's limit", operation: .relayIngestion)
        }
        return try store.observe(filters, limit: limit, clock: clock)
    }

    /// As ``observe(_:limit:clock:)``, with the filters as NIP-01 JSON texts, parsed as a
    /// subscription's are (1 to `maxFilters`, each a valid filter): what every binding calls.
    ///
    /// - Throws: `invalid_relay_filter` for a text that is not a valid filter, none, more than
    ///   `maxFilters`, or as ``observe(_:limit:clock:)`` throws.
    public func observe(
        filtersJSON: [String], limit: Int = EventObservation.defaultLimit, clock: (@Sendable () -> Int64)? = nil
    ) throws(SoftchatError) -> EventObservation {
        try observe(SessionFilters.parse(filtersJSON), limit: limit, clock: clock)
    }
}

extension EventWindowChange {
    /// Applies `changes` in order to `window`.
    ///
    /// - Parameters:
    ///   - changes: One batch, as an observation gave it.
    ///   - window: The window before them; after, the window they describe.
    /// - Returns: False (and `window` left as far as it got) when a change does not fit the
    ///   window: an index out of range, or a removal whose id is not at its index.
    @discardableResult
    public static func apply(_ changes: [EventWindowChange], to window: inout [VerifiedEvent]) -> Bool {
        for change in changes {
            switch change {
            case .inserted(let event, let index):
                guard index >= 0, index <= window.count else { return false }
                window.insert(event, at: index)
            case .removed(let id, let index):
                guard index >= 0, index < window.count, window[index].id == id else { return false }
                window.remove(at: index)
            }
        }
        return true
    }
}

/// A live window over the account: ``SoftchatAccount/observe(_:limit:clock:)`` makes one. Read
/// it as an `AsyncSequence` (one reader) or with ``poll()``; ``cancel()`` (or letting it go)
/// ends it.
///
/// Memory: the window itself (at most `limit` events, 500 at most), the changes waiting for the
/// reader (at most ``maxBacklog``; past that they coalesce into one `EventWindowUpdate.reload`
/// carrying the window), and the index entries that find it (one per kind it names).
public final class EventObservation: AsyncSequence, Sendable {
    /// The most changes that wait for a slow reader before they coalesce into a reload
    /// (relay.ingestion.maxObservationBacklog).
    public static let maxBacklog = RelayIngestionContract.maxObservationBacklog.value
    /// The default window: the 100 newest matching events.
    public static let defaultLimit = 100
    /// The largest window an observation keeps (relay.ingestion.maxObservedWindow).
    public static let maxLimit = RelayIngestionContract.maxObservedWindow.value
    /// The system's Unix time in seconds: an observation's default clock.
    public static let wallClock: @Sendable () -> Int64 = { Int64(time(nil)) }

    /// Each update of this observation, in order.
    public typealias Element = EventWindowUpdate

    let id: Int
    @_spi(Benchmarks) public let queue: UpdateQueue
    private weak let hub: LiveQueryHub?

    init(id: Int, hub: LiveQueryHub, queue: UpdateQueue) {
        self.id = id
        self.hub = hub
        self.queue = queue
    }

    deinit { hub?.remove(id) }

    /// The window as this observation has it now (the updates not yet read included).
    public var window: [VerifiedEvent] { hub?.window(id) ?? [] }

    /// The next update if one waits, without waiting.
    public func poll() -> EventWindowUpdate? { queue.take() }

    /// Ends the observation: no update follows, and a reader waiting gets the end of the sequence.
    public func cancel() {
        hub?.remove(id)
        queue.finish()
    }

    /// Waits for each update in turn.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: UpdateQueue
        /// The next update; nil once the observation was cancelled (or its task was).
        public mutating func next() async -> EventWindowUpdate? { await queue.next() }
    }

    /// An iterator over the updates; one reader at a time.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: queue) }

    /// Calls `wake` after each update is queued and once the observation ends (and once now, for
    /// what already waits), so a reader that is not a task (the C ABI's delivery queue) takes
    /// them with ``poll()``. `wake` runs on the queuing thread: it must only schedule the reading.
    package func whenUpdated(_ wake: @escaping @Sendable () -> Void) { queue.whenUpdated(wake) }

    /// Whether the observation ended (nothing more will be queued).
    package var isFinished: Bool { queue.isFinished }
}

/// An update of a live observation as its queue holds it: changes, or a whole window (its
/// snapshot, or a reload).
public protocol LiveUpdate: Sendable {
    /// What the observed window holds.
    associatedtype Item: Sendable
    /// How many changes it carries (`changes`), or how many items its whole window holds.
    var extent: LiveUpdateExtent { get }
    /// The whole window again, in place of changes the reader did not take in time.
    static func reload(_ window: [Item]) -> Self
}

/// What a live update holds: so many changes, or a whole window of so many items.
public enum LiveUpdateExtent: Sendable, Hashable {
    /// Changes to the window, this many.
    case changes(Int)
    /// The whole window (a snapshot or a reload), of this many items.
    case window(Int)
}

extension LiveUpdate {
    /// How many changes it carries, or nil for a whole window.
    var changeCount: Int? {
        if case .changes(let n) = extent { return n }
        return nil
    }
    /// What it holds: its changes, or its window's items.
    var size: Int {
        switch extent {
        case .changes(let n), .window(let n): n
        }
    }
}

extension EventWindowUpdate: LiveUpdate {
    /// Its changes, or its window's events.
    public var extent: LiveUpdateExtent {
        switch self {
        case .changes(let c): .changes(c.count)
        case .snapshot(let w), .reload(let w): .window(w.count)
        }
    }
    /// The window again, as `EventWindowUpdate.reload`.
    public static func reload(_ window: [VerifiedEvent]) -> EventWindowUpdate { .reload(events: window) }
}

/// The updates waiting for an event observation's reader.
@_spi(Benchmarks) public typealias UpdateQueue = LiveUpdateQueue<EventWindowUpdate>

/// The updates waiting for an observation's reader, bounded by ``EventObservation/maxBacklog``
/// changes.
@_spi(Benchmarks) public final class LiveUpdateQueue<Update: LiveUpdate>: Sendable {
    struct State {
        var updates: [Update] = []
        var changes = 0
        var waiter: CheckedContinuation<Update?, Never>?
        var finished = false

        /// The oldest waiting update, its changes no longer counted as waiting.
        mutating func popFirst() -> Update? {
            guard !updates.isEmpty else { return nil }
            let first = updates.removeFirst()
            changes -= first.changeCount ?? 0
            return first
        }
    }
    private let state = Mutex(State())
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)

    init() {}

    func whenUpdated(_ wake: @escaping @Sendable () -> Void) {
        self.wake.withLock { $0 = wake }
        wake()
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Queues `update`; when more than `maxBacklog` changes would wait, they are replaced by one
    /// reload of `window`.
    func push(_ update: Update, window: @autoclosure () -> [Update.Item]) {
        let waiter: CheckedContinuation<Update?, Never>? = state.withLock { s in
            guard !s.finished else { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            if let count = update.changeCount {
                s.changes += count
                if s.changes > EventObservation.maxBacklog {
                    s.updates = [.reload(window())]
                    s.changes = 0
                    return nil
                }
            } else {
                // A whole window: what waited before it is superseded.
                s.updates = []
                s.changes = 0
            }
            s.updates.append(update)
            return nil
        }
        waiter?.resume(returning: update)
        wake.withLock { $0 }?()
    }

    /// How many updates, and changes in them, wait.
    var depth: (updates: Int, changes: Int) { state.withLock { ($0.updates.count, $0.changes) } }

    /// How many changes wait, a reload counted as its window's items.
    @_spi(Benchmarks) public var depthForBenchmarks: Int { state.withLock { s in s.updates.reduce(0) { $0 + $1.size } } }

    func take() -> Update? { state.withLock { $0.popFirst() } }

    func finish() {
        let waiter = state.withLock { s in
            s.finished = true
            s.updates = []
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
        // The last call: the hook is let go (it may hold the observation).
        let last = wake.withLock { w in
            defer { w = nil }
            return w
        }
        last?()
    }

    func next() async -> Update? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Update?, Never>) in
                let now: Update?? = state.withLock { s in
                    if let first = s.popFirst() { return .some(first) }
                    if s.finished || Task.isCancelled { return .some(nil) }
                    s.waiter = c
                    return nil
                }
                if let now { c.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { s in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
