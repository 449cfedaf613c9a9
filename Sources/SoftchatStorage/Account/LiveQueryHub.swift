import Dispatch
import SoftchatCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The machinery behind live queries (LiveQueries.swift): the hub whose
// worker keeps every window.

/// The account's observations, the index that finds them by kind, and their windows. Every
/// window changes on one serial worker, with a read-only connection of its own, in commit order:
/// the writer only hands each commit's touched rows over (``committed(_:)``) and goes on, so
/// observers cost the writer a hand-over, not the work of finding their changes. Commits that
/// come while the worker is busy are merged into one hand-over (bounded: past
/// `RowChangeLog.maxRows` rows, every window is read again instead).
final class LiveQueryHub: Sendable {
    /// How often the writer's `PRAGMA data_version` is checked for another process's commit.
    static let pollMilliseconds = 200

    struct WindowEvent {
        var seq: Int64
        var event: VerifiedEvent
        var expiresAt: Int64?
    }

    /// Where a window is filed, so a changed row finds only the windows that can hold it: by
    /// author when every filter names authors, else by one tag value per filter when every
    /// filter has a tag condition, else by kind when every filter names kinds, else with every row.
    enum IndexKey: Hashable {
        case author(String)
        case tag(String, String)
        case kind(Int)
        case any

        static func keys(for filters: [RelayFilter]) -> Set<IndexKey> {
            if filters.allSatisfy({ $0.authors != nil }) { return Set(filters.flatMap { $0.authors! }.map(IndexKey.author)) }
            if filters.allSatisfy({ !$0.tagConditions.isEmpty }) {
                return Set(filters.flatMap { f in f.tagConditions[0].values.map { IndexKey.tag(String(f.tagConditions[0].letter), $0) } })
            }
            if filters.allSatisfy({ $0.kinds != nil }) { return Set(filters.flatMap { $0.kinds! }.map(IndexKey.kind)) }
            return [.any]
        }

        /// Every key under which a window that can match `event` is filed.
        static func keys(of event: VerifiedEvent) -> [IndexKey] {
            var keys: [IndexKey] = [.any, .kind(event.kind), .author(event.pubkey)]
            for tag in event.tags where tag.count >= 2 && tag[0].utf8.count == 1 { keys.append(.tag(tag[0], tag[1])) }
            return keys
        }
    }

    /// Observations of the same filters and limit on the wall clock share one window: it is
    /// kept once, and each of them gets its updates.
    struct SharedKey: Hashable {
        let filters: [RelayFilter]
        let limit: Int
    }

    /// One window and the observations reading it.
    struct Entry {
        let filters: [RelayFilter]
        let limit: Int
        /// The kinds its filters can match, or nil when a filter names none (any kind).
        let kinds: Set<Int>?
        let keys: Set<IndexKey>
        let clock: @Sendable () -> Int64
        /// Set when it is shared (on the wall clock).
        let shared: SharedKey?
        /// Each observation reading it, by observation id.
        var queues: [Int: UpdateQueue]
        var window: [WindowEvent]
        var seqs: Set<Int64>
        /// When time next changes the window (an expiry in it, a matching future-dated event
        /// coming into range); nil when nothing is due.
        var wakeAt: Int64?

        /// Whether the time it waits for has come.
        var isDue: Bool { wakeAt.map { $0 <= clock() } ?? false }
    }

    struct State {
        var next = 0
        /// The windows, by window id.
        var entries: [Int: Entry] = [:]
        /// The window each observation reads.
        var windowOf: [Int: Int] = [:]
        /// The shared windows.
        var shared: [SharedKey: Int] = [:]
        /// The windows filed under each key.
        var index: [IndexKey: Set<Int>] = [:]
        var dataVersion: Int64?
        /// The worker could not read a hand-over's rows: every window is read again at the next tick.
        var rereadAll = false
        /// The live-rows observations, by observation id, and the index that finds them.
        var rowEntries: [Int: RowsEntry] = [:]
        var rowIndex: [LiveRowsKey: Set<Int>] = [:]

        var isEmpty: Bool { entries.isEmpty && rowEntries.isEmpty }
    }

    /// One live-rows observation (LiveRows.swift): the keys it is filed under, its clock, its
    /// read (which queues its changes) and when time next changes it.
    struct RowsEntry {
        let keys: [LiveRowsKey]
        let clock: @Sendable () -> Int64
        let refresh: @Sendable (SQLiteConnection, Int64, Bool) throws -> Int64?
        var wakeAt: Int64?

        /// Whether the time it waits for has come.
        var isDue: Bool { wakeAt.map { $0 <= clock() } ?? false }
    }

    /// What waits for the worker: the rows commits touched since it last took them, and the
    /// rereads asked for.
    struct Pending {
        var rows: [Int64] = []
        var inserted: [Int64: VerifiedEvent] = [:]
        /// More rows than `RowChangeLog.maxRows` waited (or a commit listed more): every window
        /// is read again instead.
        var overflowed = false
        /// Another connection committed (or a hand-over failed): every window is read again.
        var rereadAll = false
        /// A tick: windows whose due time has come are read again.
        var due = false
        /// What commits changed for the live-rows observations.
        var rowChanges = RowChanges()
        /// Whether a drain is queued or running on the worker.
        var scheduled = false

        var isEmpty: Bool { rows.isEmpty && rowChanges.isEmpty && !overflowed && !rereadAll && !due }

        init(scheduled: Bool = false) { self.scheduled = scheduled }
    }

    /// The worker's connection: opened on the worker at the first observation, closed with the
    /// account; touched only on `worker`.
    final class WorkerConnection: @unchecked Sendable {
        // @unchecked: read and written only by blocks running on the serial `worker` queue.
        var db: SQLiteConnection?
        var closed = false
    }

    let state = Mutex(State())
    let pending = Mutex(Pending())
    let isEmpty = Atomic<Bool>(true)
    /// CLOCK_MONOTONIC, in nanoseconds, when the last commit with observations open came back
    /// from SQLite (for `softchat-dev bench observe`'s commit-to-delivery latency).
    let lastCommitNanoseconds = Atomic<Int64>(0)
    let worker = DispatchQueue(label: "softchat.live-queries")
    private let connection = WorkerConnection()
    private let open: @Sendable () throws -> SQLiteConnection

    /// - Parameter open: Opens the worker's read-only connection to the account.
    init(open: @escaping @Sendable () throws -> SQLiteConnection) { self.open = open }

    /// The window observation `id` reads.
    func window(_ id: Int) -> [VerifiedEvent] {
        state.withLock { s in s.windowOf[id].flatMap { s.entries[$0] }?.window.map(\.event) ?? [] }
    }

    /// Reads the first window of an observation on the worker, in one read transaction, and
    /// files it (or joins the shared window it equals, whose window is current on the worker):
    /// every hand-over after this one is applied to it (a commit it already holds changes
    /// nothing: rows are read as they are now). `clock` nil: the wall clock, and sharing.
    func register(
        _ filters: [RelayFilter], limit: Int, kinds: Set<Int>?, clock: (@Sendable () -> Int64)?, queue: UpdateQueue
    ) throws -> Int {
        let result: Result<Int, any Error> = worker.sync {
            Result {
                let shared = clock == nil ? SharedKey(filters: filters, limit: limit) : nil
                if let shared, let id = join(shared, queue) { return id }
                let db = try workerConnection()
                let clock = clock ?? EventObservation.wallClock
                let now = clock()
                let (window, futureWake) = try db.snapshot { try Self.read(db, filters, kinds: kinds, limit: limit, now: now) }
                let wakes = window.compactMap(\.expiresAt).filter { $0 > now } + (futureWake.map { [$0] } ?? [])
                queue.push(.snapshot(events: window.map(\.event)), window: [])
                let keys = IndexKey.keys(for: filters)
                return state.withLock { s in
                    let windowID = s.next
                    let id = s.next + 1
                    s.next += 2
                    s.entries[windowID] = Entry(
                        filters: filters, limit: limit, kinds: kinds, keys: keys, clock: clock, shared: shared,
                        queues: [id: queue], window: window, seqs: Set(window.map(\.seq)), wakeAt: wakes.min())
                    s.windowOf[id] = windowID
                    if let shared { s.shared[shared] = windowID }
                    for key in keys { s.index[key, default: []].insert(windowID) }
                    isEmpty.store(false, ordering: .releasing)
                    return id
                }
            }
        }
        return try result.get()
    }

    /// Adds `queue` to the shared window `key` names, if one is open, and gives it that window.
    private func join(_ key: SharedKey, _ queue: UpdateQueue) -> Int? {
        state.withLock { s in
            guard let windowID = s.shared[key], s.entries[windowID] != nil else { return nil }
            let id = s.next
            s.next += 1
            s.entries[windowID]!.queues[id] = queue
            s.windowOf[id] = windowID
            queue.push(.snapshot(events: s.entries[windowID]!.window.map(\.event)), window: [])
            return id
        }
    }

    /// The worker's connection, opened now if this is the first use. Runs on `worker`.
    func workerConnection() throws -> SQLiteConnection {
        if let db = connection.db { return db }
        guard !connection.closed else { throw SoftchatError.invalidPersistenceResult("observe: the account is closed", operation: .relayIngestion) }
        let db = try open()
        connection.db = db
        return db
    }

    /// Ends observation `id`; its window goes with the last observation reading it.
    func remove(_ id: Int) {
        state.withLock { s in
            guard let windowID = s.windowOf.removeValue(forKey: id) else { return }
            s.entries[windowID]?.queues[id] = nil
            guard let entry = s.entries[windowID], entry.queues.isEmpty else { return }
            s.entries[windowID] = nil
            if let shared = entry.shared, s.shared[shared] == windowID { s.shared[shared] = nil }
            for key in entry.keys {
                s.index[key]?.remove(windowID)
                if s.index[key]?.isEmpty == true { s.index[key] = nil }
            }
            isEmpty.store(s.isEmpty, ordering: .releasing)
        }
    }

    /// Waits until the worker has applied everything handed over before this call. With no
    /// observation open nothing was handed over (``committed(_:)`` hands over only then), and
    /// there is nothing to wait for: a send then costs no hop to the worker and back.
    func settle() {
        guard !isEmpty.load(ordering: .acquiring) else { return }
        worker.sync {}
    }

    /// Closes the worker's connection once what it is doing is done; later hand-overs are dropped.
    func close() {
        worker.sync {
            connection.closed = true
            connection.db = nil
        }
    }

    /// Queues work for the worker and starts a drain unless one is queued or running.
    private func post(_ change: (inout Pending) -> Void) {
        let start: Bool = pending.withLock { p in
            change(&p)
            if p.rows.count > RowChangeLog.maxRows || p.rowChanges.count > RowChangeLog.maxRows {
                p.overflowed = true
                p.rows = []
                p.inserted = [:]
                p.rowChanges = RowChanges()
            }
            guard !p.scheduled, !p.isEmpty else { return false }
            p.scheduled = true
            return true
        }
        if start { worker.async { self.drain() } }
    }

    /// The worker's loop: takes everything waiting, applies it in one read transaction, and again
    /// until nothing waits. A failure leaves every window to be read again at the next tick.
    private func drain() {
        while true {
            let work: Pending? = pending.withLock { p in
                guard !p.isEmpty else {
                    p.scheduled = false
                    return nil
                }
                defer { p = Pending(scheduled: true) }
                return p
            }
            guard let work else { return }
            guard !isEmpty.load(ordering: .acquiring), !connection.closed else { continue }
            guard let db = try? workerConnection() else {
                // The connection could not be opened: the next tick asks for every window again.
                state.withLock { $0.rereadAll = true }
                continue
            }
            do {
                try db.snapshot {
                    if work.overflowed || work.rereadAll {
                        try reread(db, all: true)
                        try refreshRows(db, .all)
                        return
                    }
                    // Each kind of hand-over is read back only while an observation of its kind is open.
                    let (windows, lists) = state.withLock { (!$0.entries.isEmpty, !$0.rowEntries.isEmpty) }
                    if windows && !work.rows.isEmpty { try apply(db, rows: work.rows, inserted: work.inserted) }
                    if lists && !work.rowChanges.isEmpty { try refreshRows(db, .keys(try rowKeys(db, work.rowChanges))) }
                    if work.due {
                        try reread(db, all: false)
                        try refreshRows(db, .due)
                    }
                }
            } catch {
                state.withLock { $0.rereadAll = true }
            }
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

    /// After the writer committed (on the writer, under its lock): hands the rows the
    /// transaction touched to the worker. Returns whether it handed any over (whether a caller
    /// that must see its own change has something to ``settle()``).
    @discardableResult
    func committed(_ log: RowChangeLog) -> Bool {
        let (rowids, overflowed, inserted, rowChanges) = log.take()
        guard !isEmpty.load(ordering: .acquiring), overflowed || !rowids.isEmpty || !rowChanges.isEmpty else { return false }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        lastCommitNanoseconds.store(Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec), ordering: .releasing)
        post { p in
            if overflowed {
                p.overflowed = true
            } else if !p.overflowed {
                p.rows += rowids
                p.inserted.merge(inserted) { _, new in new }
                p.rowChanges.merge(rowChanges)
            }
        }
        return true
    }

    /// The rows `rowids` lists, read back on the worker's connection as they are now, applied to
    /// every observation that can hold them (`inserted`: those of them the commits inserted, as
    /// written). Rows are read as they are now, not as the commit left them, so a later commit's
    /// change may show early; its own hand-over then changes nothing more.
    func apply(_ db: SQLiteConnection, rows rowids: [Int64], inserted: [Int64: VerifiedEvent]) throws {
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
        // Each row's event, once for every window that reads it: as the commits wrote it, or
        // read back from the row (one they updated but did not insert).
        var changed: [(row: Row, event: VerifiedEvent)] = []
        let json = try db.statement("SELECT json FROM events WHERE seq = ?")
        for case let row? in rows.values where !row.deleted {
            if let event = inserted[row.seq] {
                changed.append((row, event))
                continue
            }
            _ = try json.bind([.int(row.seq)])
            defer { json.reset() }
            guard try json.step() else { continue }
            changed.append((row, try VerifiedEvent(storedJSON: json.text(0))))
        }
        // In NIP-01's order once: each window then takes its rows in that order and stops at its
        // limit, with no sorting of its own.
        changed.sort { Self.precedes($0.event, $1.event) }
        // Each window's rows: those filed under its keys (as indices into `changed`, in order),
        // and those of its window the commits did not insert (deleted, replaced, updated), which
        // may be in any window: each looked up in every window's rows, one hash each.
        let (candidates, held): ([Int: [Int]], [Int: [Int64]]) = state.withLock { s in
            var candidates: [Int: [Int]] = [:]
            for (i, item) in changed.enumerated() {
                for key in IndexKey.keys(of: item.event) {
                    guard let ids = s.index[key] else { continue }
                    for id in ids where candidates[id]?.last != i { candidates[id, default: []].append(i) }
                }
            }
            var held: [Int: [Int64]] = [:]
            let earlier = rows.keys.filter { inserted[$0] == nil }
            if !earlier.isEmpty {
                for (id, entry) in s.entries {
                    for seq in earlier where entry.seqs.contains(seq) { held[id, default: []].append(seq) }
                }
            }
            return (candidates, held)
        }
        for id in Set(candidates.keys).union(held.keys) {
            guard var entry = state.withLock({ $0.entries[id] }) else { continue }
            let now = entry.clock()
            var removed: Set<Int64> = []
            // Rows it holds that are no longer served leave it.
            for seq in held[id] ?? [] where !((rows[seq] ?? nil).map { Self.served($0, now: now) } ?? false) { removed.insert(seq) }
            var incoming: [WindowEvent] = []
            var changedWindow = !removed.isEmpty
            let before = entry.window
            for i in candidates[id] ?? [] {
                let (row, e) = changed[i]
                if entry.seqs.contains(row.seq) {
                    if !Self.served(row, now: now) {
                        removed.insert(row.seq)
                        changedWindow = true
                    }
                    continue
                }
                guard entry.kinds?.contains(row.kind) ?? true else { continue }
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
                        changedWindow = true
                    }
                    continue
                }
                guard entering else { continue }
                incoming.append(WindowEvent(seq: row.seq, event: e, expiresAt: row.expiresAt))
                changedWindow = true
            }
            guard changedWindow else { continue }
            // A full window that lost an event may have more beyond it: read it again.
            if !removed.isEmpty && before.count == entry.limit {
                let fresh = try Self.read(db, entry.filters, kinds: entry.kinds, limit: entry.limit, now: now)
                if let due = fresh.futureWake { entry.wakeAt = min(entry.wakeAt ?? due, due) }
                try publish(id, &entry, fresh.window, seqs: nil, now: now)
                continue
            }
            // The window: what stays, merged with what comes (in order already), cut to the
            // limit; its row set follows from the old one when few came.
            let staying = removed.isEmpty ? before : before.filter { !removed.contains($0.seq) }
            var window: [WindowEvent] = []
            window.reserveCapacity(min(entry.limit, staying.count + incoming.count))
            var (a, b) = (0, 0)
            while window.count < entry.limit && (a < staying.count || b < incoming.count) {
                if b == incoming.count || (a < staying.count && Self.precedes(staying[a].event, incoming[b].event)) {
                    window.append(staying[a])
                    a += 1
                } else {
                    window.append(incoming[b])
                    b += 1
                }
            }
            var seqs: Set<Int64>?
            if b * 4 < entry.limit {
                var kept = entry.seqs
                for seq in removed { kept.remove(seq) }
                for item in staying[a...] { kept.remove(item.seq) }
                for item in incoming[..<b] { kept.insert(item.seq) }
                seqs = kept
            }
            try publish(id, &entry, window, seqs: seqs, now: now)
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

    /// Sets window `id` to `window` (`seqs`: its rows, when the caller knows them) and queues
    /// the changes from the old one, if any, for each observation reading it: as changes, or as
    /// the window itself when more changed than it holds (a burst into a busy window, where the
    /// window is the smaller message).
    func publish(_ id: Int, _ entry: inout Entry, _ window: [WindowEvent], seqs: Set<Int64>?, now: Int64) throws {
        let oldSeqs = entry.seqs
        let newSeqs = seqs ?? Set(window.map(\.seq))
        let removed = entry.window.reduce(0) { $0 + (newSeqs.contains($1.seq) ? 0 : 1) }
        let inserted = window.count - (entry.window.count - removed)
        let update: EventWindowUpdate? =
            removed + inserted == 0
            ? nil
            : removed + inserted > max(window.count, 1)
                ? .reload(events: window.map(\.event)) : .changes(changes: Self.changes(from: entry.window, to: window, kept: newSeqs, had: oldSeqs))
        entry.window = window
        entry.seqs = newSeqs
        let expiry = window.lazy.compactMap(\.expiresAt).filter { $0 > now }.min()
        if let due = entry.wakeAt, due <= now { entry.wakeAt = nil }
        if let expiry { entry.wakeAt = min(entry.wakeAt ?? expiry, expiry) }
        let stored = entry
        // Only the window's own fields: an observation that joined or left meanwhile stays so.
        let queues: [UpdateQueue] = state.withLock { s in
            guard s.entries[id] != nil else { return [] }
            s.entries[id]!.window = stored.window
            s.entries[id]!.seqs = stored.seqs
            s.entries[id]!.wakeAt = stored.wakeAt
            return Array(s.entries[id]!.queues.values)
        }
        if let update { for queue in queues { queue.push(update, window: window.map(\.event)) } }
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
        for (index, item) in new.enumerated() where !had.contains(item.seq) { out.append(.inserted(event: item.event, at: index)) }
        return out
    }

    /// The window a fresh read gives, with each event's row and expiry, and when a stored event
    /// of its kinds dated too far ahead comes into range (it would enter at the top); waking
    /// early only reads the window again.
    static func read(_ db: SQLiteConnection, _ filters: [RelayFilter], kinds: Set<Int>?, limit: Int, now: Int64) throws -> (
        window: [WindowEvent], futureWake: Int64?
    ) {
        // The read bounds each filter by the window's limit and stops there (AccountQueries).
        let events = try SoftchatAccount.events(db, matching: filters, limit: limit, now: now)
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
    /// time, and hands the worker what moved: every window, or those whose time has come. Called
    /// with the writer's lock held, outside any transaction.
    func tick(_ db: SQLiteConnection) throws {
        guard !isEmpty.load(ordering: .acquiring) else { return }
        let version = try dataVersion(db)
        let (moved, due): (Bool, Bool) = state.withLock { s in
            defer {
                s.dataVersion = version
                s.rereadAll = false
            }
            let moved = s.rereadAll || s.dataVersion.map { $0 != version } ?? false
            return (moved, !moved && (s.entries.values.contains(where: \.isDue) || s.rowEntries.values.contains(where: \.isDue)))
        }
        if moved {
            post { $0.rereadAll = true }
        } else if due {
            post { $0.due = true }
        }
    }

    /// Notes the writer's data version before the first observation's window is read, so a
    /// commit by another connection after it is found by the first tick.
    func baseline(_ db: SQLiteConnection) throws {
        let version = try dataVersion(db)
        state.withLock { s in
            if s.isEmpty { s.dataVersion = version }
        }
    }

    private func dataVersion(_ db: SQLiteConnection) throws -> Int64 {
        defer { db.resetStatements() }
        return try db.scalarInt("PRAGMA data_version")
    }

    /// Reads again every observation (`all`), or those whose due time has come.
    func reread(_ db: SQLiteConnection, all: Bool) throws {
        let due: [(Int, Entry)] = state.withLock { s in
            s.entries.filter { _, e in all || e.isDue }.map { ($0.key, $0.value) }
        }
        for (id, var entry) in due {
            let now = entry.clock()
            let fresh = try Self.read(db, entry.filters, kinds: entry.kinds, limit: entry.limit, now: now)
            entry.wakeAt = fresh.futureWake
            try publish(id, &entry, fresh.window, seqs: nil, now: now)
        }
    }
}
