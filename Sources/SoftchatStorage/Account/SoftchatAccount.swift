import Synchronization
public import SoftchatCore

/// Account settings that bound durable work.
public struct AccountPolicy: Sendable, Hashable {
    /// How long a delivery claim's lease lasts before another claim may take its work.
    public var leaseSeconds: Int64
    /// Send attempts per intent before it ends `rejected` / `exhausted`.
    public var retryBudget: Int
    /// SQLite busy timeout for the writer, in milliseconds.
    public var busyTimeoutMilliseconds: Int
    /// SQLite's page cache per connection (writer and reader), in MiB: SQLite's default (2 MiB)
    /// makes every insert into a large account's random-id indexes a read from the OS.
    public var cacheMebibytes: Int

    public init(leaseSeconds: Int64 = 60, retryBudget: Int = 10, busyTimeoutMilliseconds: Int = 5_000, cacheMebibytes: Int = 32) {
        self.leaseSeconds = leaseSeconds
        self.retryBudget = retryBudget
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.cacheMebibytes = cacheMebibytes
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
    public let incoming: AccountIncoming
    public let outgoing: AccountOutgoing
    public let delivery: AccountDelivery

    private init(store: AccountStore) {
        self.store = store
        incoming = AccountIncoming(store: store)
        outgoing = AccountOutgoing(store: store)
        delivery = AccountDelivery(store: store)
    }

    /// Opens (creating if needed) and migrates the account database at `path`.
    public static func open(path: String, policy: AccountPolicy = AccountPolicy()) throws(SoftchatError) -> SoftchatAccount {
        SoftchatAccount(store: try AccountStore(path: path, policy: policy, migrateTo: Migrations.latestVersion))
    }

    /// Opens without migrating past `version`, for upgrade tests.
    static func open(path: String, version: Int) throws(SoftchatError) -> SoftchatAccount {
        SoftchatAccount(store: try AccountStore(path: path, policy: AccountPolicy(), migrateTo: version))
    }

    /// Closes both connections; later calls fail with `invalid_persistence_result`. Idempotent.
    public func close() { store.close() }

    public var path: String { store.path }
    public var policy: AccountPolicy { store.policy }

    /// The schema version of the open database (`PRAGMA user_version`).
    public func schemaVersion() throws(SoftchatError) -> Int {
        try store.read("schemaVersion") { db in Int(try db.scalarInt("PRAGMA user_version")) }
    }

    public static var latestSchemaVersion: Int { Migrations.latestVersion }

    /// Calls `handler` after every commit that adds publish intents, on the committing thread
    /// (keep it quick: a managed transport only wakes its I/O thread). Returns a token for
    /// `removeOutgoingObserver`.
    public func addOutgoingObserver(_ handler: @escaping @Sendable () -> Void) -> Int {
        store.observers.withLock { o in
            o.next += 1
            o.handlers[o.next] = handler
            return o.next
        }
    }

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
    let path: String
    /// The schema version this store runs at (below the latest only in upgrade tests).
    let version: Int
    let policy: AccountPolicy
    private let writer: SerialConnection
    private let reader: SerialConnection

    init(path: String, policy: AccountPolicy, migrateTo version: Int) throws(SoftchatError) {
        self.path = path
        self.version = version
        self.policy = policy
        do {
            let w = try SQLiteConnection(path: path)
            try w.execute("PRAGMA journal_mode = WAL")
            try w.execute("PRAGMA synchronous = FULL")
            try w.execute("PRAGMA foreign_keys = ON")
            try w.execute("PRAGMA busy_timeout = \(policy.busyTimeoutMilliseconds)")
            try w.execute("PRAGMA cache_size = -\(max(1, policy.cacheMebibytes) * 1024)")
            try Migrations.migrate(w, upTo: version)
            w.resetStatements()
            let r = try SQLiteConnection(path: path, readOnly: true)
            try r.execute("PRAGMA busy_timeout = \(policy.busyTimeoutMilliseconds)")
            try r.execute("PRAGMA cache_size = -\(max(1, policy.cacheMebibytes) * 1024)")
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

    static func storageError(_ e: SQLiteError, _ call: String) -> SoftchatError {
        SoftchatError(.accountStorageFailed, "\(call): \(e)", operation: .relayIngestion)
    }

    func notifyOutgoing() {
        for handler in observers.withLock({ Array($0.handlers.values) }) { handler() }
    }

    func close() {
        writer.close()
        reader.close()
    }

    /// Runs `body` on the writer inside one transaction; any failure rolls everything back.
    func write<R>(_ call: String, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        let result: Result<R, SoftchatError> = writer.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("\(call): the account is closed", operation: .relayIngestion)) }
            do {
                return .success(try db.transaction(call) { try body(db) })
            } catch let e as SoftchatError {
                return .failure(e)
            } catch let e as SQLiteError {
                return .failure(Self.storageError(e, call))
            } catch {
                return .failure(.invalidPersistenceResult("\(call): \(error)", operation: .relayIngestion))
            }
        }
        return try result.get()
    }

    /// Runs `body` on the reader connection inside one read transaction, so every statement
    /// sees the same WAL snapshot.
    func snapshot<R>(_ call: String, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        try read(call) { db in
            try db.execute("BEGIN")
            defer { db.resetStatements(); try? db.execute("COMMIT") }
            return try body(db)
        }
    }

    /// Runs `body` on the reader connection (a consistent WAL snapshot per statement).
    func read<R>(_ call: String, _ body: (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        let result: Result<R, SoftchatError> = reader.with { db in
            guard let db else { return .failure(.invalidPersistenceResult("\(call): the account is closed", operation: .relayIngestion)) }
            // End the read transaction with the call, so the next read sees the latest commit.
            defer { db.resetStatements() }
            do {
                return .success(try body(db))
            } catch let e as SoftchatError {
                return .failure(e)
            } catch let e as SQLiteError {
                return .failure(Self.storageError(e, call))
            } catch {
                return .failure(.invalidPersistenceResult("\(call): \(error)", operation: .relayIngestion))
            }
        }
        return try result.get()
    }
}
