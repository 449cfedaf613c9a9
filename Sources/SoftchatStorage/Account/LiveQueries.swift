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
// inserts, updates or deletes (SQLite's update hook); after the commit, on the committing thread
// and still under the writer's lock, only those rows are read back, and each is tested only
// against the observations whose kinds it can match. A commit by another process (or another
// connection) is found through `PRAGMA data_version`, checked on the writer every
// `LiveQueryHub.pollMilliseconds`; then every window is read again and compared. Time moves
// windows too (a NIP-40 expiry, a future-dated event coming into range): each observation knows
// the next such moment and is read again at it.

extension SoftchatAccount {
    /// CLOCK_MONOTONIC in nanoseconds when this account's last commit with observations open
    /// returned from SQLite, before its changes were found (0 before any).
    @_spi(Benchmarks) public var lastObservedCommitNanoseconds: Int64 { store.live.lastCommitNanoseconds.load(ordering: .acquiring) }

    /// Observes a window of the account: the newest events matching any of `filters` (as
    /// ``events(matching:limit:now:)`` reads them: deleted, replaced and expired events are
    /// never in it), at most `limit`. It yields the window, then the changes each commit makes to
    /// it (this process's at once, before the writing call returns; another process's within
    /// about `LiveQueryHub.pollMilliseconds`), and the changes time makes (an expiry).
    ///
    /// - Parameters:
    ///   - filters: The window's filters. A filter's own `limit` does not apply to a window:
    ///     give the window's `limit`.
    ///   - limit: The most events in the window, 1 to ``EventObservation/maxLimit`` (default
    ///     ``EventObservation/defaultLimit``).
    ///   - clock: The current Unix time in seconds, which decides expiry as a read's `now` does.
    /// - Returns: The observation; keep it while the screen shows the window.
    /// - Throws: `invalid_relay_filter` for no filter, a filter with its own limit or a `limit`
    ///   out of range; `account_storage_failed` when SQLite fails.
    public func observe(
        _ filters: [RelayFilter], limit: Int = EventObservation.defaultLimit,
        clock: @escaping @Sendable () -> Int64 = EventObservation.wallClock
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
}

/// One change to an observed window. Applied in order, each to the window as the changes before
/// it left it (``EventWindowChange/apply(_:to:)``), a batch turns the previous window into the
/// new one.
public enum EventWindowChange: Sendable, Hashable {
    /// `event` entered the window at `index` (newest first, ties by lowest id).
    case inserted(VerifiedEvent, at: Int)
    /// The event with id `id` left the window from `index`: deleted (NIP-09), replaced, expired
    /// (NIP-40), or pushed past the window's limit by newer events.
    case removed(id: String, at: Int)

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

/// What an observation yields: first the window, then what changed.
public enum EventWindowUpdate: Sendable, Hashable {
    /// The window when the observation began.
    case snapshot([VerifiedEvent])
    /// Changes to the previous window (see ``EventWindowChange``), from one commit or one reread.
    case changes([EventWindowChange])
    /// The whole window again, in place of changes the reader did not take in time (more than
    /// ``EventObservation/maxBacklog`` waited): nothing is lost silently, the reader starts over
    /// from this window.
    case reload([VerifiedEvent])
}

/// A live window over the account: ``SoftchatAccount/observe(_:limit:clock:)`` makes one. Read
/// it as an `AsyncSequence` (one reader) or with ``poll()``; ``cancel()`` (or letting it go)
/// ends it.
///
/// Memory: the window itself (at most `limit` events, 500 at most), the changes waiting for the
/// reader (at most ``maxBacklog``; past that they coalesce into one ``EventWindowUpdate/reload(_:)``
/// carrying the window), and the index entries that find it (one per kind it names).
public final class EventObservation: AsyncSequence, Sendable {
    /// The most changes that wait for a slow reader before they coalesce into a reload.
    public static let maxBacklog = 256
    /// The default window: the 100 newest matching events.
    public static let defaultLimit = 100
    /// The largest window an observation keeps.
    public static let maxLimit = 500
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
}

/// The updates waiting for an observation's reader, bounded by ``EventObservation/maxBacklog``
/// changes.
@_spi(Benchmarks) public final class UpdateQueue: Sendable {
    struct State {
        var updates: [EventWindowUpdate] = []
        var changes = 0
        var waiter: CheckedContinuation<EventWindowUpdate?, Never>?
        var finished = false

        /// The oldest waiting update, its changes no longer counted as waiting.
        mutating func popFirst() -> EventWindowUpdate? {
            guard !updates.isEmpty else { return nil }
            let first = updates.removeFirst()
            if case .changes(let list) = first { changes -= list.count }
            return first
        }
    }
    private let state = Mutex(State())

    /// Queues `update`; when more than `maxBacklog` changes would wait, they are replaced by one
    /// reload of `window`.
    func push(_ update: EventWindowUpdate, window: @autoclosure () -> [VerifiedEvent]) {
        let waiter: CheckedContinuation<EventWindowUpdate?, Never>? = state.withLock { s in
            guard !s.finished else { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            if case .changes(let list) = update {
                s.changes += list.count
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
    }

    /// How many updates, and changes in them, wait.
    var depth: (updates: Int, changes: Int) { state.withLock { ($0.updates.count, $0.changes) } }

    /// How many changes wait, a reload counted as its window's events.
    @_spi(Benchmarks) public var depthForBenchmarks: Int {
        state.withLock { s in
            s.updates.reduce(0) { total, u in
                switch u {
                case .changes(let c): total + c.count
                case .snapshot(let w), .reload(let w): total + w.count
                }
            }
        }
    }

    func take() -> EventWindowUpdate? { state.withLock { $0.popFirst() } }

    func finish() {
        let waiter = state.withLock { s in
            s.finished = true
            s.updates = []
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    func next() async -> EventWindowUpdate? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<EventWindowUpdate?, Never>) in
                let now: EventWindowUpdate?? = state.withLock { s in
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

/// The rowids of the `events` rows the writer's current transaction touched (the update hook
/// fills it; the commit empties it). Bounded: past `maxRows` it stops listing and says so, and
/// the observations are read again instead.
final class RowChangeLog: @unchecked Sendable {
    // @unchecked: used only by the thread that holds the writer connection.
    static let maxRows = 65_536
    var enabled = false
    var rows: [Int64] = []
    var overflowed = false
    /// The events this transaction inserted, by rowid: verified before they were written, so
    /// the live queries need not read and decode their rows again.
    var inserted: [Int64: VerifiedEvent] = [:]

    func record(_ rowid: Int64) {
        guard enabled else { return }
        if rows.count < Self.maxRows { rows.append(rowid) } else { overflowed = true }
    }

    func noteInserted(_ rowid: Int64, _ event: VerifiedEvent) {
        guard enabled, !overflowed, inserted.count < Self.maxRows else { return }
        inserted[rowid] = event
    }

    func take() -> (rows: [Int64], overflowed: Bool, inserted: [Int64: VerifiedEvent]) {
        defer {
            rows = []
            overflowed = false
            inserted = [:]
        }
        return (rows, overflowed, inserted)
    }
}

/// The account's observations, the index that finds them by kind, and their windows. Every
/// change to a window happens under the writer's lock (the commit's, the registration's, the
/// reread's), so windows follow the commits in order.
final class LiveQueryHub: Sendable {
    /// How often the writer's `PRAGMA data_version` is checked for another process's commit.
    static let pollMilliseconds = 200

    struct WindowEvent {
        var seq: Int64
        var event: VerifiedEvent
        var expiresAt: Int64?
    }

    /// Where an observation is filed, so a changed row finds only the observations that can
    /// hold it: by author when every filter names authors, else by one tag value per filter when
    /// every filter has a tag condition, else by kind when every filter names kinds, else with
    /// every row.
    enum IndexKey: Hashable {
        case author(String)
        case tag(String)
        case kind(Int)
        case any

        static func keys(for filters: [RelayFilter]) -> Set<IndexKey> {
            if filters.allSatisfy({ $0.authors != nil }) { return Set(filters.flatMap { $0.authors! }.map(IndexKey.author)) }
            if filters.allSatisfy({ !$0.tagConditions.isEmpty }) {
                return Set(filters.flatMap { f in f.tagConditions[0].values.map { IndexKey.tag("\(f.tagConditions[0].letter):\($0)") } })
            }
            if filters.allSatisfy({ $0.kinds != nil }) { return Set(filters.flatMap { $0.kinds! }.map(IndexKey.kind)) }
            return [.any]
        }

        /// Every key under which an observation that can match `event` is filed.
        static func keys(of event: VerifiedEvent) -> [IndexKey] {
            var keys: [IndexKey] = [.any, .kind(event.kind), .author(event.pubkey)]
            for tag in event.tags where tag.count >= 2 && tag[0].utf8.count == 1 { keys.append(.tag("\(tag[0]):\(tag[1])")) }
            return keys
        }
    }

    struct Entry {
        let filters: [RelayFilter]
        let limit: Int
        /// The kinds its filters can match, or nil when a filter names none (any kind).
        let kinds: Set<Int>?
        let keys: Set<IndexKey>
        let clock: @Sendable () -> Int64
        let queue: UpdateQueue
        var window: [WindowEvent]
        var seqs: Set<Int64>
        /// When time next changes the window (an expiry in it, a matching future-dated event
        /// coming into range); nil when nothing is due.
        var wakeAt: Int64?
    }

    struct State {
        var next = 0
        var entries: [Int: Entry] = [:]
        /// The observations filed under each key.
        var index: [IndexKey: Set<Int>] = [:]
        var dataVersion: Int64?
        /// A commit's rows could not be read back: every window is read again at the next tick.
        var rereadAll = false
    }

    let state = Mutex(State())
    let isEmpty = Atomic<Bool>(true)
    /// CLOCK_MONOTONIC, in nanoseconds, when the last commit with observations open came back
    /// from SQLite (for `softchat-dev bench observe`'s commit-to-delivery latency).
    let lastCommitNanoseconds = Atomic<Int64>(0)

    func window(_ id: Int) -> [VerifiedEvent] {
        state.withLock { $0.entries[id]?.window.map(\.event) ?? [] }
    }

    func add(_ entry: Entry) -> Int {
        state.withLock { s in
            let id = s.next
            s.next += 1
            s.entries[id] = entry
            for key in entry.keys { s.index[key, default: []].insert(id) }
            isEmpty.store(false, ordering: .releasing)
            return id
        }
    }

    func remove(_ id: Int) {
        state.withLock { s in
            guard let entry = s.entries.removeValue(forKey: id) else { return }
            for key in entry.keys {
                s.index[key]?.remove(id)
                if s.index[key]?.isEmpty == true { s.index[key] = nil }
            }
            isEmpty.store(s.entries.isEmpty, ordering: .releasing)
        }
    }

    // MARK: Commits

    /// A row as the commit left it.
    struct Row {
        let seq: Int64
        let kind: Int
        let createdAt: Int64
        let expiresAt: Int64?
        let deleted: Bool
    }

    /// After the writer committed: ``apply(_:_:)``; a failure to read the rows back (the commit
    /// stands) makes the next tick read every window again.
    func committed(_ db: SQLiteConnection, _ log: RowChangeLog) {
        if !isEmpty.load(ordering: .acquiring) {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            lastCommitNanoseconds.store(Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec), ordering: .releasing)
        }
        do {
            try apply(db, log)
        } catch {
            db.resetStatements()
            state.withLock { $0.rereadAll = true }
        }
    }

    /// The rows `log` lists, read back on the writer, applied to every observation that can hold
    /// them. Called with the writer's lock held, after the commit.
    func apply(_ db: SQLiteConnection, _ log: RowChangeLog) throws {
        let (rowids, overflowed, inserted) = log.take()
        guard !isEmpty.load(ordering: .acquiring), overflowed || !rowids.isEmpty else { return }
        defer { db.resetStatements() }
        // The data version moves only for other connections' commits; this one's is known.
        if overflowed {
            try reread(db, all: true)
            return
        }
        var rows: [Int64: Row?] = [:]
        let statement = try db.statement("SELECT kind, created_at, expires_at, deleted FROM events WHERE seq = ?")
        for rowid in rowids where rows[rowid] == nil {
            _ = try statement.bind([.int(rowid)])
            rows[rowid] =
                try statement.step()
                ? Row(
                    seq: rowid, kind: Int(statement.int64(0)), createdAt: statement.int64(1),
                    expiresAt: statement.isNull(2) ? nil : statement.int64(2), deleted: statement.int64(3) != 0)
                : .some(nil)
            statement.reset()
        }
        // Each row's event, once for every observation that reads it: as this transaction wrote
        // it, or read back from the row (one it updated but did not insert).
        var decoded: [Int64: VerifiedEvent] = [:]
        let json = try db.statement("SELECT json FROM events WHERE seq = ?")
        for case let row? in rows.values where !row.deleted {
            if let event = inserted[row.seq] {
                decoded[row.seq] = event
                continue
            }
            _ = try json.bind([.int(row.seq)])
            defer { json.reset() }
            guard try json.step() else { continue }
            decoded[row.seq] = try VerifiedEvent(storedJSON: json.text(0))
        }
        // The rows each observation must look at: those filed under its keys, and those in its window.
        let work: [Int: [Int64]] = state.withLock { s in
            var work: [Int: [Int64]] = [:]
            for (seq, event) in decoded {
                var ids: Set<Int> = []
                for key in IndexKey.keys(of: event) { ids.formUnion(s.index[key] ?? []) }
                for id in ids { work[id, default: []].append(seq) }
            }
            // A row this transaction did not insert (deleted, replaced, updated) may be in any
            // window: each is looked up in every window's rows, one hash each.
            let earlier = rows.keys.filter { inserted[$0] == nil }
            if !earlier.isEmpty {
                for (id, entry) in s.entries {
                    for seq in earlier where entry.seqs.contains(seq) { work[id, default: []].append(seq) }
                }
            }
            return work
        }
        // Every changed row's place in NIP-01's order, found once: each observation then takes
        // its rows in that order and stops at its limit, with no sorting of its own.
        let rank = Dictionary(
            uniqueKeysWithValues: decoded.sorted { Self.precedes($0.value, $1.value) }.enumerated().map { ($1.key, $0) })
        for (id, seqs) in work {
            guard var entry = state.withLock({ $0.entries[id] }) else { continue }
            let now = entry.clock()
            let before = entry.window
            var removed: Set<Int64> = []
            var incoming: [WindowEvent] = []
            var changed = false
            let ordered = Set(seqs).map { (rank: rank[$0] ?? Int.max, seq: $0) }.sorted { $0.rank < $1.rank }
            for (_, rowid) in ordered {
                let row = rows[rowid] ?? nil
                if entry.seqs.contains(rowid) {
                    if let row, Self.served(row, now: now) { continue }
                    removed.insert(rowid)
                    changed = true
                    continue
                }
                guard let row, let e = decoded[rowid], entry.kinds?.contains(row.kind) ?? true else { continue }
                // Rows come newest first: once a window's worth has come, or past the end of a
                // full window, no later row can enter (the cheap tests before the filter's).
                if incoming.count == entry.limit { continue }
                let entering = before.count < entry.limit || before.last.map { Self.precedes(e, $0.event) } ?? true
                guard entering || !Self.served(row, now: now) else { continue }
                guard entry.filters.contains(where: { $0.matches(e) }) else { continue }
                if !Self.served(row, now: now) {
                    // Stored, not yet served: dated too far ahead. It comes into range later.
                    if row.expiresAt.map({ $0 > now }) ?? true, row.createdAt > SoftchatAccount.servedUntil(now) {
                        let due = row.createdAt - Int64(RelayIngestionContract.futureAllowanceSeconds.value)
                        entry.wakeAt = min(entry.wakeAt ?? due, due)
                        changed = true
                    }
                    continue
                }
                guard entering else { continue }
                incoming.append(WindowEvent(seq: rowid, event: e, expiresAt: row.expiresAt))
                changed = true
            }
            guard changed else { continue }
            // The window: what stays, merged with what comes (in order already), cut to the limit.
            let staying = removed.isEmpty ? before : before.filter { !removed.contains($0.seq) }
            var window: [WindowEvent] = []
            window.reserveCapacity(min(entry.limit, staying.count + incoming.count))
            var (i, j) = (0, 0)
            while window.count < entry.limit && (i < staying.count || j < incoming.count) {
                if j == incoming.count || (i < staying.count && Self.precedes(staying[i].event, incoming[j].event)) {
                    window.append(staying[i])
                    i += 1
                } else {
                    window.append(incoming[j])
                    j += 1
                }
            }
            // A full window that lost an event may have more beyond it: read it again.
            if !removed.isEmpty && before.count == entry.limit {
                let fresh = try Self.read(db, entry.filters, kinds: entry.kinds, limit: entry.limit, now: now)
                window = fresh.window
                if let due = fresh.futureWake { entry.wakeAt = min(entry.wakeAt ?? due, due) }
            }
            try publish(id, &entry, window, now: now)
        }
    }

    /// Whether a read at `now` serves the row.
    static func served(_ row: Row, now: Int64) -> Bool {
        !row.deleted && (row.expiresAt.map { $0 > now } ?? true) && row.createdAt <= SoftchatAccount.servedUntil(now)
    }

    /// NIP-01's order: newer first, ties by lowest id.
    static func precedes(_ a: VerifiedEvent, _ b: VerifiedEvent) -> Bool {
        a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.id < b.id
    }

    /// Sets `id`'s window to `window` and queues the changes from the old one, if any: as
    /// changes, or as the window itself when more changed than it holds (a burst into a busy
    /// window, where the window is the smaller message).
    func publish(_ id: Int, _ entry: inout Entry, _ window: [WindowEvent], now: Int64) throws {
        let oldSeqs = entry.seqs
        let newSeqs = Set(window.map(\.seq))
        let removed = entry.window.reduce(0) { $0 + (newSeqs.contains($1.seq) ? 0 : 1) }
        let inserted = window.count - (entry.window.count - removed)
        let update: EventWindowUpdate? =
            removed + inserted == 0
            ? nil
            : removed + inserted > max(window.count, 1)
                ? .reload(window.map(\.event)) : .changes(Self.changes(from: entry.window, to: window, kept: newSeqs, had: oldSeqs))
        entry.window = window
        entry.seqs = newSeqs
        let expiry = window.lazy.compactMap(\.expiresAt).filter { $0 > now }.min()
        if let due = entry.wakeAt, due <= now { entry.wakeAt = nil }
        if let expiry { entry.wakeAt = min(entry.wakeAt ?? expiry, expiry) }
        let stored = entry
        state.withLock { s in
            if s.entries[id] != nil { s.entries[id] = stored }
        }
        if let update { entry.queue.push(update, window: window.map(\.event)) }
    }

    /// The changes that turn `old` into `new` (both in NIP-01 order; `kept` and `had` their row
    /// sets): removals first, then insertions, each index into the window as the changes before
    /// it left it. One pass over each: what stays keeps its order, so a removal's index is its
    /// old one less those removed before it, and an insertion's (in order) its final one.
    static func changes(from old: [WindowEvent], to new: [WindowEvent], kept: Set<Int64>, had: Set<Int64>) -> [EventWindowChange] {
        var out: [EventWindowChange] = []
        var removedSoFar = 0
        for (index, item) in old.enumerated() where !kept.contains(item.seq) {
            out.append(.removed(id: item.event.id, at: index - removedSoFar))
            removedSoFar += 1
        }
        for (index, item) in new.enumerated() where !had.contains(item.seq) { out.append(.inserted(item.event, at: index)) }
        return out
    }

    /// The window a fresh read gives, with each event's row and expiry, and when a stored event
    /// of its kinds dated too far ahead comes into range (it would enter at the top); waking
    /// early only reads the window again.
    static func read(_ db: SQLiteConnection, _ filters: [RelayFilter], kinds: Set<Int>?, limit: Int, now: Int64) throws -> (
        window: [WindowEvent], futureWake: Int64?
    ) {
        // Each filter limited to the window: the newest `limit` of the union are among the newest
        // `limit` of each, and the read stops there instead of decoding every match.
        let events = try SoftchatAccount.events(db, matching: filters.map { $0.withLimit(Int64(limit)) }, limit: limit, now: now)
        let statement = try db.statement("SELECT seq, expires_at FROM events WHERE \(EventLayout.byArrival.idCondition)")
        let window = try events.map { e in
            _ = try statement.bind([.int(EventLayout.idKey(e.id)), .text(e.id)])
            defer { statement.reset() }
            guard try statement.step() else {
                throw SoftchatError.invalidPersistenceResult("observe: event \(e.id) has no row", operation: .relayIngestion)
            }
            return WindowEvent(seq: statement.int64(0), event: e, expiresAt: statement.isNull(1) ? nil : statement.int64(1))
        }
        let kindCondition = kinds.map { " AND kind IN (\($0.sorted().map(String.init).joined(separator: ",")))" } ?? ""
        let future = try db.statement("SELECT MIN(created_at) FROM events WHERE deleted = 0 AND created_at > ?\(kindCondition)")
        _ = try future.bind([.int(SoftchatAccount.servedUntil(now))])
        defer { future.reset() }
        let earliest = try future.step() && !future.isNull(0) ? future.int64(0) : nil
        return (window, earliest.map { $0 - Int64(RelayIngestionContract.futureAllowanceSeconds.value) })
    }

    // MARK: Other processes and time

    /// Checks the writer's data version (another connection's commit) and each observation's due
    /// time; rereads what moved. Called with the writer's lock held, outside any transaction.
    func tick(_ db: SQLiteConnection) throws {
        guard !isEmpty.load(ordering: .acquiring) else { return }
        let version = try dataVersion(db)
        let moved: Bool = state.withLock { s in
            defer {
                s.dataVersion = version
                s.rereadAll = false
            }
            return s.rereadAll || s.dataVersion.map { $0 != version } ?? false
        }
        try reread(db, all: moved)
    }

    /// Notes the writer's data version before the first observation's window is read, so a
    /// commit by another connection after it is found by the first tick.
    func baseline(_ db: SQLiteConnection) throws {
        let version = try dataVersion(db)
        state.withLock { s in
            if s.entries.isEmpty { s.dataVersion = version }
        }
    }

    private func dataVersion(_ db: SQLiteConnection) throws -> Int64 {
        defer { db.resetStatements() }
        return try db.scalarInt("PRAGMA data_version")
    }

    /// Reads again every observation (`all`), or those whose due time has come.
    func reread(_ db: SQLiteConnection, all: Bool) throws {
        let due: [(Int, Entry)] = state.withLock { s in
            s.entries.filter { _, e in all || (e.wakeAt.map { $0 <= e.clock() } ?? false) }.map { ($0.key, $0.value) }
        }
        for (id, var entry) in due {
            let now = entry.clock()
            let fresh = try Self.read(db, entry.filters, kinds: entry.kinds, limit: entry.limit, now: now)
            entry.wakeAt = fresh.futureWake
            try publish(id, &entry, fresh.window, now: now)
        }
    }
}
