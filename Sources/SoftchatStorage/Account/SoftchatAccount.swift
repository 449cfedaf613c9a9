import Dispatch
public import SoftchatCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Account settings that bound durable work.
public struct AccountPolicy: Sendable, Hashable {
    /// How long a delivery claim's lease lasts before another claim may take its work.
    public var leaseSeconds: Int64
    /// Failures the relay reports (`error:`, an unknown prefix) per intent before it ends
    /// `rejected` / `exhausted`; rate limits, timeouts and lost connections do not count.
    public var retryBudget: Int
    /// SQLite's busy timeout for both connections, in milliseconds: how long a statement waits
    /// for a lock held by another connection before it fails.
    public var busyTimeoutMilliseconds: Int
    /// SQLite's page cache per connection (writer and reader), in MiB, at least 1: SQLite's
    /// default (2 MiB) makes every insert into a large account's random-id indexes a read from
    /// the OS.
    public var cacheMebibytes: Int
    /// How much the WAL grows before SQLite copies it back into the file, in MiB, at least 1:
    /// a page written by many commits in between is copied back once. The WAL file is cut back
    /// to twice this after a checkpoint.
    public var checkpointMebibytes: Int

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - leaseSeconds: How long a delivery claim's lease lasts, in seconds.
    ///   - retryBudget: Failures the relay reports (`error:`, an unknown prefix) per intent before
    ///     it ends `rejected` / `exhausted`; rate limits, timeouts and lost connections do not count.
    ///   - busyTimeoutMilliseconds: How long a statement waits for another connection's lock, in
    ///     milliseconds.
    ///   - cacheMebibytes: SQLite's page cache per connection, in MiB (values below 1 count as 1).
    ///   - checkpointMebibytes: The WAL's size that starts a checkpoint, in MiB (values below 1
    ///     count as 1).
    public init(
        leaseSeconds: Int64 = 60, retryBudget: Int = 10, busyTimeoutMilliseconds: Int = 5_000, cacheMebibytes: Int = 32,
        checkpointMebibytes: Int = 32
    ) {
        self.leaseSeconds = leaseSeconds
        self.retryBudget = retryBudget
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.cacheMebibytes = cacheMebibytes
        self.checkpointMebibytes = checkpointMebibytes
    }
}

/// The durable account: verified incoming events, publish intents, delivery leases, sync
/// cursors and the subscription policy, in one SQLite file.
///
/// WAL with `synchronous=FULL`, so a commit is durable when the call returns. One serialized
/// writer connection (every mutation is one IMMEDIATE transaction: all or nothing) and a
/// separate reader connection, so queries run beside writes. Every SQLite failure surfaces as
/// `account_storage_failed` carrying the SQLite code and the operation.
public final class SoftchatAccount: Sendable {
    let store: AccountStore
    /// Incoming events: ingestion of verified events and raw lines, and commits with sync states.
    public let incoming: AccountIncoming
    /// Outgoing events: durable publish intents, one per (event, relay).
    public let outgoing: AccountOutgoing
    /// Delivery of publish intents: claims and leases, socket writes, relay results.
    public let delivery: AccountDelivery
    /// NIP-17 private messages: unwrapped in the ingest transaction, sent as durable wraps, read
    /// by room.
    public let messages: AccountMessages

    private init(store: AccountStore) {
        self.store = store
        incoming = AccountIncoming(store: store)
        outgoing = AccountOutgoing(store: store)
        delivery = AccountDelivery(store: store)
        messages = AccountMessages(store: store)
    }

    /// Opens (creating if needed) and migrates the account database at `path`.
    ///
    /// - Parameters:
    ///   - path: The SQLite database file; created when missing (its directory must exist).
    ///   - policy: Bounds for leases, retries, lock waits and the page cache.
    /// - Returns: The open account, its schema at ``SoftchatAccount/latestSchemaVersion``.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite cannot open,
    ///   configure or migrate the file, or `invalid_persistence_result` when the file's schema is
    ///   newer than this build understands.
    public static func open(path: String, policy: AccountPolicy = AccountPolicy()) throws(SoftchatError) -> SoftchatAccount {
        SoftchatAccount(store: try AccountStore(path: path, policy: policy, migrateTo: Migrations.latestVersion))
    }

    /// Opens without migrating past `version`: for upgrade tests, and for `softchat-dev
    /// old-account`, which writes an account in an older layout for the migration harness.
    @_spi(OldLayouts) public static func open(path: String, version: Int, policy: AccountPolicy = AccountPolicy()) throws(SoftchatError)
        -> SoftchatAccount
    {
        SoftchatAccount(store: try AccountStore(path: path, policy: policy, migrateTo: version))
    }

    /// Closes both connections; later calls fail with `invalid_persistence_result`. Idempotent.
    public func close() { store.close() }

    /// The database file's path, as it was given to ``SoftchatAccount/open(path:policy:)``.
    public var path: String { store.path }
    /// The policy the account was opened with.
    public var policy: AccountPolicy { store.policy }

    /// The schema version of the open database (`PRAGMA user_version`).
    ///
    /// - Returns: The version, ``SoftchatAccount/latestSchemaVersion`` for an account opened with
    ///   ``SoftchatAccount/open(path:policy:)``.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func schemaVersion() throws(SoftchatError) -> Int {
        try store.read("schemaVersion") { db in Int(try db.scalarInt("PRAGMA user_version")) }
    }

    /// The schema version this build migrates every account to when it opens it.
    public static var latestSchemaVersion: Int { Migrations.latestVersion }

    /// Runs `body` with every write it makes on the calling thread (ingestion, delivery marks and
    /// results, releases, NIP-77 records) in one transaction, committed once when `body`
    /// returns: one fsync for an I/O round's writes instead of one each. Each write is a
    /// savepoint: one that fails throws to `body` and rolls back only itself. When the
    /// transaction cannot commit, nothing of `body` happened and this throws. So also when a
    /// write fails in a way SQLite answers by rolling the whole transaction back (SQLITE_FULL,
    /// IOERR, NOMEM, BUSY): every later write of the group then throws without running. Writes from other
    /// threads wait for the group to end; reads see what it wrote only once it has committed.
    ///
    /// - Parameters:
    ///   - call: What the group is, for errors.
    ///   - body: The writes.
    /// - Returns: What `body` returned.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when the group's transaction
    ///   cannot begin or commit; `invalid_persistence_result` once the account is closed.
    public func writeGroup<R>(_ call: String, _ body: () -> R) throws(SoftchatError) -> R {
        try store.group(call, body)
    }

    /// Calls `handler` after every successful
    /// ``AccountOutgoing/enqueueSigned(operationID:events:relayURLs:now:)`` (an idempotent
    /// repeat included), on the committing thread (keep it quick: a managed transport only wakes
    /// its I/O thread).
    ///
    /// - Parameter handler: Called with no arguments once the intents are committed.
    /// - Returns: A token for `removeOutgoingObserver(_:)`.
    public func addOutgoingObserver(_ handler: @escaping @Sendable () -> Void) -> Int {
        store.observers.withLock { o in
            o.next += 1
            o.handlers[o.next] = handler
            return o.next
        }
    }

    /// Stops calling the handler a token names; an unknown or already removed token is ignored.
    ///
    /// - Parameter token: What `addOutgoingObserver(_:)` returned.
    public func removeOutgoingObserver(_ token: Int) {
        store.observers.withLock { o in _ = o.handlers.removeValue(forKey: token) }
    }
}

/// The connections and the serialization around them, shared by the account's facets.
final class AccountStore: Sendable {
    struct Observers {
        var next = 0
        var handlers: [Int: @Sendable () -> Void] = [:]
    }
    let observers = Mutex(Observers())
    /// The signer gift wraps are unwrapped for (``AccountMessages/unlock(_:now:)``), if any.
    let signer = Mutex<(any SoftchatSigner)?>(nil)
    /// Gift wraps handed to a signer to unwrap since this account was opened.
    let decryptions = Atomic<Int>(0)
    let path: String
    /// The schema version this store runs at (below the latest only in upgrade tests).
    let version: Int
    /// The event layout of that version.
    var layout: EventLayout { EventLayout(version: version) }
    let policy: AccountPolicy
    let writer: SerialConnection
    private let reader: SerialConnection
    /// Senders' writes waiting for the writer (GroupCommit.swift).
    let commitQueue = Mutex(CommitQueue())
    /// How many transactions the writer has committed (tests: a group is one), and how many of
    /// them without an `fdatasync` of their own.
    let commits = Atomic<Int>(0)
    let unsyncedCommits = Atomic<Int>(0)
    /// The account's live queries (``SoftchatAccount/observe(_:limit:clock:)``).
    let live: LiveQueryHub
    /// The `events` rows the writer's current transaction touched; nil below schema 9, whose
    /// `events` table has no rowid for SQLite's update hook to report.
    private let rowLog: RowChangeLog?
    /// Whether the timer that checks for other processes' commits and due times is running.
    private let ticking = Atomic<Bool>(false)
    /// The thread running a write group (``group(_:_:)``), 0 when none: its writes join the
    /// group's transaction as savepoints instead of taking the writer's lock again.
    let groupThread = Atomic<UInt>(0)
    /// When (Unix seconds) this process last pruned leases; `Int64.min` before its first claim.
    private let leasesPrunedAt = Atomic<Int64>(.min)

    /// Whether a claim at `now` prunes leases (``AccountDelivery/pruneLeases(_:now:)``): the
    /// first claim of the process, then at most once per `leasePruneSeconds` of `now`, or when
    /// `now` went back.
    func leasePruneDue(now: Int64) -> Bool {
        let last = leasesPrunedAt.load(ordering: .relaxed)
        guard last == .min || now >= last &+ AccountDelivery.leasePruneSeconds || now < last else { return false }
        leasesPrunedAt.store(now, ordering: .relaxed)
        return true
    }
    /// The group's connection, written and read only by the thread in `groupThread`.
    let groupSlot = GroupSlot()

    final class GroupSlot: @unchecked Sendable {
        // @unchecked: `db` is set, read and cleared only by the thread that holds the writer's
        // lock for the group, the one `groupThread` names.
        var db: SQLiteConnection?
        /// The error after which SQLite ended the group's transaction itself (its automatic
        /// rollback on SQLITE_FULL, IOERR, NOMEM or BUSY): nothing more runs in the group.
        var ended: SoftchatError?
    }

    static var currentThread: UInt { UInt(pthread_self()) }

    init(path: String, policy: AccountPolicy, migrateTo version: Int) throws(SoftchatError) {
        self.path = path
        self.version = version
        self.policy = policy
        do {
            Self.createFile(path)
            try Self.requireOneName(path)
            let w = try SQLiteConnection(path: path)
            // First: every later statement, the identity check included, waits for a lock another
            // process holds (a reader recovering the WAL after a crash, a writer) instead of
            // failing at once with SQLITE_BUSY, which made an app restarted after a crash fail
            // to open its account now and then.
            try w.execute("PRAGMA busy_timeout = \(policy.busyTimeoutMilliseconds)")
            try Migrations.checkIdentity(w)
            w.resetStatements()  // no read transaction may stay open across the journal mode change
            try Self.tightenModes(path)
            try w.execute("PRAGMA journal_mode = WAL")
            try w.execute("PRAGMA synchronous = FULL")
            try w.execute("PRAGMA foreign_keys = ON")
            try w.execute("PRAGMA cache_size = -\(max(1, policy.cacheMebibytes) * 1024)")
            // Checkpoint when the WAL holds `checkpointMebibytes` (SQLite counts pages): a page
            // dirtied by many commits is then written back to the file once. The WAL is cut back
            // to twice that after a checkpoint.
            let pageSize = max(512, try w.scalarInt("PRAGMA page_size"))
            let walBytes = Int64(max(1, policy.checkpointMebibytes)) * 1_048_576
            try w.execute("PRAGMA wal_autocheckpoint = \(walBytes / pageSize)")
            try w.execute("PRAGMA journal_size_limit = \(2 * walBytes)")
            try Migrations.migrate(w, upTo: version)
            // A migration's statements (a re-index's scan of every event) run once: not kept.
            w.finalizeStatements()
            // From here (a migration's index builds and copies sort and journal on disk): a
            // statement journal (what rolls one statement back inside a savepoint) and the
            // writer's small sorts kept in memory. On disk each was a temp file opened, written
            // and closed per statement, 0.2 ms of an enqueue's 0.55. The writer's statements
            // touch a bounded number of rows (the delivery-growth test pins the outbox's).
            try w.execute("PRAGMA temp_store = MEMORY")
            let r = try Self.openReader(path, policy)
            rowLog = EventLayout(version: version) == .byArrival ? w.watchEventRows() : nil
            live = LiveQueryHub { try Self.openReader(path, policy) }
            writer = SerialConnection(w)
            reader = SerialConnection(r)
        } catch let error as SQLiteError {
            throw Self.storageError(error, "open")
        } catch let error as SoftchatError {
            throw error
        } catch {
            throw .invalidPersistenceResult("open \(path): \(error)", operation: .relayIngestion)
        }
    }

    /// A read-only connection to the account with the policy's busy timeout and cache: the
    /// reader's, and the live-query worker's.
    static func openReader(_ path: String, _ policy: AccountPolicy) throws(SQLiteError) -> SQLiteConnection {
        let db = try SQLiteConnection(path: path, readOnly: true)
        try db.execute("PRAGMA busy_timeout = \(policy.busyTimeoutMilliseconds)")
        try db.execute("PRAGMA cache_size = -\(max(1, policy.cacheMebibytes) * 1024)")
        return db
    }

    /// `PRAGMA application_id` of every Softchat account: "SCHT". A file with another id is
    /// another program's and is never migrated into an account.
    static let applicationID: Int32 = 0x5343_4854

    /// An account file is reached by one name: with a second hard link, two processes opening it
    /// by its two names use two journals (SQLite finds them by name: one process's crash is not
    /// recovered by the other, "How To Corrupt An SQLite Database File", 2.4) and two owner
    /// folders (one finds the other's live owner dead and delivers its work twice). Symlinks are
    /// resolved by both, so they are fine.
    static func requireOneName(_ path: String) throws(SoftchatError) {
        guard isFile(path) else { return }
        var info = stat()
        guard stat(path, &info) == 0, info.st_nlink > 1 else { return }
        throw SoftchatError(
            .accountStorageFailed,
            "open \(path): the account file has \(info.st_nlink) hard links; SQLite finds its journal by name, so a second name could lose a crashed writer's transaction and hide a live delivery owner. Keep one name (a symlink is fine).",
            operation: .relayIngestion)
    }

    /// Whether `path` names a file (not an in-memory, temporary or URI database).
    static func isFile(_ path: String) -> Bool { !path.isEmpty && path != ":memory:" && !path.hasPrefix("file:") }

    /// The account is the user's history: it and its WAL and SHM are the owner's alone (0600).
    /// A new file is created 0600 before SQLite opens it (SQLite gives its WAL and SHM the
    /// database file's mode).
    static func createFile(_ path: String) {
        guard isFile(path) else { return }
        // A failure other than "exists" (a missing folder, no permission) is left for SQLite's
        // open to report with its own code.
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// An account readable by others, as older builds left them, is tightened to 0600 (once it is
    /// known to be an account).
    static func tightenModes(_ path: String) throws(SoftchatError) {
        guard isFile(path) else { return }
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
            guard chmod(file, 0o600) == 0 else {
                throw SoftchatError(
                    .accountStorageFailed, "open \(file): it is readable by other users and its mode cannot be set to 0600 (errno \(errno))",
                    operation: .relayIngestion)
            }
        }
    }

    static func storageError(_ e: SQLiteError, _ call: String) -> SoftchatError {
        SoftchatError(.accountStorageFailed, "\(call): \(e)", operation: .relayIngestion)
    }

    func notifyOutgoing() {
        for handler in observers.withLock({ Array($0.handlers.values) }) { handler() }
    }

    /// An account let go without ``close()`` closes the same way (stored properties would go in
    /// declaration order, the writer first).
    deinit { close() }

    /// Closes the reader, then the writer. The order matters: the last connection to close
    /// checkpoints the write-ahead log into the database and deletes it, and the reader is
    /// read-only, so it cannot. Closed last, it left the log beside the file, and the file alone
    /// (a copy, a backup) lacked the newest commits.
    func close() {
        live.close()
        reader.close()
        writer.close()
    }

    /// The SQL each connection has prepared so far, writer's then reader's (for query-plan tests).
    func preparedSQL() -> (writer: [String], reader: [String]) {
        (writer.with { $0?.preparedSQL ?? [] }, reader.with { $0?.preparedSQL ?? [] })
    }

    /// The work each prepared statement did since the last reset, writer's and reader's summed
    /// by SQL (``SQLiteConnection/vmSteps(reset:)``; tests).
    func vmSteps(reset: Bool) -> [String: Int] {
        let w = writer.with { $0?.vmSteps(reset: reset) ?? [:] }
        return w.merging(reader.with { $0?.vmSteps(reset: reset) ?? [:] }, uniquingKeysWith: +)
    }

    /// Runs `body` on the writer inside one transaction; any failure rolls everything back.
    /// Inside a write group on this thread, the transaction is a savepoint of the group's.
    /// - Parameter observed: Whether the call returns only once the live queries hold what it
    ///   committed (the app's own writes: a message sent is in its room's window when `send`
    ///   returns). Ingestion does not wait: its changes reach windows from the worker.
    /// - Parameter synced: false for a write whose loss in a power cut only redoes work (a
    ///   claim, a socket-written mark): it commits without an `fdatasync` of its own
    ///   (``SQLiteConnection/transaction(_:synced:_:)``). Inside a write group it joins the
    ///   group's transaction, synced.
    func write<R>(_ call: String, observed: Bool = false, synced: Bool = true, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        if groupThread.load(ordering: .acquiring) == Self.currentThread, let db = groupSlot.db {
            // After SQLite rolled the whole transaction back, a member's `SAVEPOINT` would start
            // a transaction of its own and its `RELEASE` commit it: durable, and then reported
            // failed with the group. Nothing more runs; the group fails as a whole, as on disk.
            if let ended = groupSlot.ended { throw Self.notRun(call, after: ended) }
            let result = Self.mapped(call) { try db.savepoint { try body(db) } }
            if case .failure(let error) = result, !db.inTransaction { groupSlot.ended = error }
            return try result.get()
        }
        let (result, handedOver): (Result<R, SoftchatError>, Bool) = writer.with { db in
            guard let db else { return (.failure(.invalidPersistenceResult("\(call): the account is closed", operation: .relayIngestion)), false) }
            let result = Self.mapped(call) { try db.transaction(call, synced: synced) { try body(db) } }
            return (result, afterTransaction(db, committed: result.isSuccess, synced: synced))
        }
        // Outside the writer's lock: the worker never takes it, and other writers need not wait.
        if observed && handedOver { live.settle() }
        return try result.get()
    }

    /// The error of a write that did not run because an earlier write of its group (a write
    /// group's, a group commit's) failed in a way that made SQLite end the whole transaction.
    static func notRun(_ call: String, after ended: SoftchatError) -> SoftchatError {
        SoftchatError(
            ended.code, "\(call): not run, an earlier write of the group ended its transaction (\(ended.message))", operation: ended.operation)
    }

    /// After each writer transaction: a commit is counted (``commits``, and
    /// ``unsyncedCommits`` when `synced` is false) and its touched rows go to the live queries'
    /// worker (under the writer's lock still, so the worker gets commits in order); a rollback's
    /// are forgotten. Returns whether rows were handed over.
    @discardableResult
    func afterTransaction(_ db: SQLiteConnection, committed: Bool, synced: Bool = true) -> Bool {
        if committed {
            commits.add(1, ordering: .relaxed)
            if !synced { unsyncedCommits.add(1, ordering: .relaxed) }
        }
        guard let rowLog else { return false }
        if committed { return live.committed(rowLog) }
        _ = rowLog.take()
        return false
    }

    /// Runs `body` so that every write it makes on this thread is a savepoint of one
    /// transaction, committed once when `body` returns: a write that fails rolls back only
    /// itself (and throws to `body` as it would alone); a commit that fails rolls back them all.
    /// A write after which SQLite rolled the whole transaction back (its automatic rollback on
    /// SQLITE_FULL, IOERR, NOMEM or BUSY) ends the group: later writes fail without running and
    /// the group fails, so what is reported is what is on disk: nothing of it.
    /// Other threads' writes wait for the group as for any write.
    func group<R>(_ call: String, _ body: () -> R) throws(SoftchatError) -> R {
        let result: Result<R, SoftchatError> = writer.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("\(call): the account is closed", operation: .relayIngestion)) }
            let result = Self.mapped(call) {
                try db.transaction(call) {
                    groupSlot.db = db
                    groupSlot.ended = nil
                    groupThread.store(Self.currentThread, ordering: .releasing)
                    defer {
                        groupThread.store(0, ordering: .releasing)
                        groupSlot.db = nil
                    }
                    let result = body()
                    // SQLite ended the transaction: every member is undone (or never ran).
                    if let ended = groupSlot.ended { throw ended }
                    return result
                }
            }
            afterTransaction(db, committed: result.isSuccess)
            return result
        }
        return try result.get()
    }

    /// Starts observing: notes the writer's data version and starts the row log (under the
    /// writer's lock), then reads the first window on the live-query worker, where every later
    /// hand-over is applied to it.
    func observe(_ filters: [RelayFilter], limit: Int, clock: (@Sendable () -> Int64)?) throws(SoftchatError) -> EventObservation {
        try startObserving()
        var kinds: Set<Int>? = []
        for f in filters {
            guard let k = f.kinds else {
                kinds = nil
                break
            }
            kinds?.formUnion(k.map { Int($0) })
        }
        let queue = UpdateQueue()
        let id = try Self.mapped("observe") { try live.register(filters, limit: limit, kinds: kinds, clock: clock, queue: queue) }.get()
        startTicking()
        return EventObservation(id: id, hub: live, queue: queue)
    }

    /// Starts a live-rows observation (LiveRows.swift): as ``observe(_:limit:clock:)`` does, its
    /// first list read on the worker and filed under `keys`.
    func observeRows<Row>(_ call: String, keys: [LiveRowsKey], clock: (@Sendable () -> Int64)?, read: @escaping LiveRows<Row>.Read)
        throws(SoftchatError) -> RowObservation<Row>
    {
        try startObserving()
        let rows = LiveRows(read: read)
        let id = try Self.mapped(call) { try live.registerRows(rows, keys: keys, clock: clock ?? EventObservation.wallClock) }.get()
        startTicking()
        return RowObservation(id: id, hub: live, rows: rows)
    }

    /// Under the writer's lock: starts the row log and notes the data version, so every commit
    /// from here on reaches the worker and another connection's is found by the next tick.
    private func startObserving() throws(SoftchatError) {
        let started: Result<Void, SoftchatError> = writer.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("observe: the account is closed", operation: .relayIngestion)) }
            guard let rowLog else {
                return .failure(.invalidPersistenceResult("observe: this account's schema predates live queries", operation: .relayIngestion))
            }
            return Self.mapped("observe") {
                rowLog.enabled = true
                try live.baseline(db)
            }
        }
        try started.get()
    }

    /// One tick now, and its work done (tests; the timer does the same every `pollMilliseconds`).
    func tickLiveQueries() throws(SoftchatError) {
        let result: Result<Void, SoftchatError> = writer.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("tick: the account is closed", operation: .relayIngestion)) }
            return Self.mapped("tick") { try live.tick(db) }
        }
        try result.get()
        live.settle()
    }

    /// Waits until the live queries hold every commit made so far (tests and benchmarks: the
    /// ingest path hands its rows over and returns).
    func settleLiveQueries() { live.settle() }

    /// Runs ``LiveQueryHub/tick(_:)`` every `pollMilliseconds` while any observation is open.
    private func startTicking() {
        guard !ticking.exchange(true, ordering: .acquiringAndReleasing) else { return }
        scheduleTick()
    }

    private func scheduleTick() {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(LiveQueryHub.pollMilliseconds)) { [weak self] in
            guard let self else { return }
            if self.live.isEmpty.load(ordering: .acquiring) {
                self.ticking.store(false, ordering: .releasing)
                // An observation added since the check finds the flag cleared and starts its own.
                guard !self.live.isEmpty.load(ordering: .acquiring), !self.ticking.exchange(true, ordering: .acquiringAndReleasing) else {
                    return
                }
            }
            let open: Bool = self.writer.with { db in
                guard let db else { return false }
                do { try self.live.tick(db) } catch { db.resetStatements() }
                return true
            }
            if open { self.scheduleTick() } else { self.ticking.store(false, ordering: .releasing) }
        }
    }

    /// `body`'s outcome with every failure as the `SoftchatError` the account reports.
    static func mapped<R>(_ call: String, _ body: () throws -> R) -> Result<R, SoftchatError> {
        do {
            return .success(try body())
        } catch let e as SoftchatError {
            return .failure(e)
        } catch let e as SQLiteError {
            return .failure(Self.storageError(e, call))
        } catch {
            return .failure(.invalidPersistenceResult("\(call): \(error)", operation: .relayIngestion))
        }
    }

    /// Runs `body` on the reader connection inside one read transaction, so every statement
    /// sees the same WAL snapshot.
    func snapshot<R>(_ call: String, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        try read(call) { db in
            try db.execute("BEGIN")
            defer {
                db.resetStatements()
                try? db.execute("COMMIT")
            }
            return try body(db)
        }
    }

    /// Runs `body` on the reader connection (a consistent WAL snapshot per statement).
    func read<R>(_ call: String, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        let result: Result<R, SoftchatError> = reader.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("\(call): the account is closed", operation: .relayIngestion)) }
            // End the read transaction with the call, so the next read sees the latest commit.
            defer { db.resetStatements() }
            return Self.mapped(call) { try body(db) }
        }
        return try result.get()
    }
}

extension Result {
    /// Whether it is a success.
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
