import CSQLite

/// An SQLite failure with everything needed to act on it: the primary and extended result
/// codes, SQLite's message, and the operation (a name or the statement) that failed.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite's primary result code (`SQLITE_BUSY`, `SQLITE_FULL`, …): the low byte of the extended
    /// code.
    public let code: Int32
    /// SQLite's extended result code, which refines `code` (`SQLITE_IOERR_WRITE`,
    /// `SQLITE_BUSY_SNAPSHOT`, …).
    public let extendedCode: Int32
    /// SQLite's own message for the failure (`sqlite3_errmsg`).
    public let message: String
    /// What failed: an operation such as `open <path>` or `commit ingest`, or the statement's SQL.
    public let operation: String

    /// SQLite's English name for the extended code (`sqlite3_errstr`), such as `database is locked`.
    public var codeName: String { String(cString: sqlite3_errstr(extendedCode)) }
    /// True when the database could not grow: `SQLITE_FULL` (a full disk, or SQLite's size limit).
    public var isDiskFull: Bool { code == SQLITE_FULL }
    /// True when a lock held elsewhere outlasted the busy timeout (`SQLITE_BUSY`) or a conflicting
    /// statement held the table (`SQLITE_LOCKED`): the same call may succeed later.
    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }

    /// The codes, the code's name, the operation and SQLite's message, on one line.
    public var description: String {
        "SQLite error \(code)/\(extendedCode) (\(codeName)) in \(operation): \(message)"
    }
}

/// SQLite's update hook for ``SQLiteConnection/watchEventRows()``: records each changed rowid of
/// the `events` table in the connection's log, and of the `private_messages` and
/// `publish_intents` tables (the live-rows observations').
private let eventRowChanged: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, sqlite3_int64) -> Void = {
    context, _, _, table, rowid in
    guard let context, let table else { return }
    let log = Unmanaged<RowChangeLog>.fromOpaque(context).takeUnretainedValue()
    // Compared byte by byte, without a C library call: the hook runs for every row written.
    func named(_ name: StaticString) -> Bool {
        let bytes = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        for (i, byte) in bytes.enumerated() where UInt8(bitPattern: table[i]) != byte { return false }
        return table[bytes.count] == 0
    }
    if named("events") {
        log.record(rowid)
    } else if named("private_messages") {
        log.recordMessage(rowid)
    } else if named("publish_intents") {
        log.recordIntent(rowid)
    }
}

/// One SQLite connection with cached prepared statements. Not thread-safe by itself: the
/// account serializes every use (one writer connection, one reader connection).
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var cache: [String: Statement] = [:]

    init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc & 0xFF, extendedCode: rc, message: message, operation: "open \(path)")
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        // The file is untrusted input too: no schema-table writes, no functions run from the
        // schema (views, triggers, defaults) with side effects.
        let defensive = softchat_sqlite3_enable_defensive(db)
        guard defensive == SQLITE_OK else { throw error(defensive, "enable SQLITE_DBCONFIG_DEFENSIVE on \(path)") }
        try execute("PRAGMA trusted_schema = OFF")
    }

    deinit {
        if rowLog != nil { sqlite3_update_hook(handle, nil, nil) }
        cache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// The rowids of the `events` rows this connection's statements insert, update or delete,
    /// once ``watchEventRows()`` installed SQLite's update hook (the writer's live queries).
    private(set) var rowLog: RowChangeLog?

    /// Installs the update hook that fills ``rowLog`` (only for rowid tables; `events` is one
    /// from schema 9 on).
    func watchEventRows() -> RowChangeLog {
        if let rowLog { return rowLog }
        let log = RowChangeLog()
        rowLog = log
        sqlite3_update_hook(handle, eventRowChanged, Unmanaged.passUnretained(log).toOpaque())
        return log
    }

    func error(_ rc: Int32, _ operation: String) -> SQLiteError {
        SQLiteError(
            code: rc & 0xFF, extendedCode: sqlite3_extended_errcode(handle),
            message: String(cString: sqlite3_errmsg(handle)), operation: operation)
    }

    /// Runs one or more statements that return no rows (DDL, PRAGMA setters).
    func execute(_ sql: String) throws(SQLiteError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if let errorMessage { sqlite3_free(errorMessage) }
        guard rc == SQLITE_OK else { throw error(rc, sql) }
    }

    /// A prepared statement for `sql`, reused across calls (reset before it is handed out).
    func statement(_ sql: String) throws(SQLiteError) -> Statement {
        if let cached = cache[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw error(rc, "prepare \(sql)") }
        let statement = Statement(raw, connection: self, sql: sql)
        cache[sql] = statement
        return statement
    }

    /// The SQL of every statement this connection has prepared and cached (for query-plan tests).
    var preparedSQL: [String] { Array(cache.keys) }

    /// Per cached statement, the virtual-machine steps it ran since the last reset (SQLite's
    /// `SQLITE_STMTSTATUS_VM_STEP`): the work a statement does, counted exactly, for tests that
    /// pin that it does not grow with a table.
    func vmSteps(reset: Bool) -> [String: Int] {
        cache.mapValues { Int(sqlite3_stmt_status($0.raw, SQLITE_STMTSTATUS_VM_STEP, reset ? 1 : 0)) }
    }

    /// Finalizes every cached statement: the next `statement(_:)` of each SQL prepares it again.
    func finalizeStatements() {
        cache.removeAll()
    }

    /// Resets every statement of this connection that is still mid-result (stepped to a row and
    /// left there, as `step()`-then-return and `scalarInt` do). Such a statement keeps a read
    /// transaction open after the call: the connection would keep reading an old snapshot, a
    /// later `BEGIN IMMEDIATE` would fail with SQLITE_BUSY_SNAPSHOT once another connection
    /// wrote, and the WAL could not be checkpointed past it.
    func resetStatements() {
        var next = sqlite3_next_stmt(handle, nil)
        while let s = next {
            if sqlite3_stmt_busy(s) != 0 { sqlite3_reset(s) }
            next = sqlite3_next_stmt(handle, s)
        }
    }

    /// Runs `body` in one read transaction: every statement in it reads the same snapshot, the
    /// newest commit when it began.
    func snapshot<R>(_ body: () throws -> R) throws -> R {
        resetStatements()
        try execute("BEGIN")
        defer {
            resetStatements()
            try? execute("COMMIT")
        }
        return try body()
    }

    /// Whether the connection runs at `PRAGMA synchronous = NORMAL` after a transaction that
    /// asked for it could not set `FULL` back: the next synced transaction sets it first.
    private var syncRelaxed = false

    /// Runs `body` in one IMMEDIATE transaction: committed if it returns, rolled back if it
    /// throws, so nothing is ever half-applied.
    ///
    /// - Parameter synced: false commits without an `fdatasync` of its own (`synchronous =
    ///   NORMAL` for this transaction only): a process crash keeps it (it is in the WAL), a power
    ///   loss may lose it and any later unsynced one, never an earlier synced one, and the next
    ///   synced commit makes it durable too (the WAL is synced up to its end). Only for writes
    ///   whose loss redoes work (a claim, a socket-written mark), never for one a caller reports.
    func transaction<R>(_ operation: String, synced: Bool = true, _ body: () throws -> R) throws -> R {
        resetStatements()
        if !synced {
            try execute("PRAGMA synchronous = NORMAL")
            syncRelaxed = true
        } else if syncRelaxed {
            try execute("PRAGMA synchronous = FULL")
            syncRelaxed = false
        }
        defer {
            if !synced, (try? execute("PRAGMA synchronous = FULL")) != nil { syncRelaxed = false }
        }
        try execute("BEGIN IMMEDIATE")
        defer { resetStatements() }
        do {
            let result = try body()
            resetStatements()  // a statement still in progress would make COMMIT fail
            do {
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw SQLiteError(code: error.code, extendedCode: error.extendedCode, message: error.message, operation: "commit \(operation)")
            }
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `body` as a savepoint inside the open transaction: released if it returns, rolled
    /// back to where it began if it throws (the rest of the transaction stays).
    func savepoint<R>(_ body: () throws -> R) throws -> R {
        try execute("SAVEPOINT member")
        do {
            let result = try body()
            resetStatements()
            try execute("RELEASE member")
            return result
        } catch {
            resetStatements()
            try? execute("ROLLBACK TO member")
            try? execute("RELEASE member")
            throw error
        }
    }

    /// Whether a transaction is open (SQLite's autocommit is off): false after SQLite rolled a
    /// transaction back by itself.
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last row this connection inserted.
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    func scalarInt(_ sql: String) throws(SQLiteError) -> Int64 {
        let s = try statement(sql)
        guard try s.step() else { return 0 }
        return s.int64(0)
    }
}

/// A prepared statement: bind by position (1-based), step, read columns (0-based).
final class Statement {
    let raw: OpaquePointer
    unowned let connection: SQLiteConnection
    let sql: String

    init(_ raw: OpaquePointer, connection: SQLiteConnection, sql: String) {
        self.raw = raw
        self.connection = connection
        self.sql = sql
    }

    deinit { sqlite3_finalize(raw) }

    func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    // SQLITE_TRANSIENT: SQLite copies the bytes, so Swift strings need not outlive the call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    @discardableResult
    func bind(_ values: SQLValue...) throws(SQLiteError) -> Statement {
        try bind(values)
    }

    @discardableResult
    func bind(_ values: [SQLValue]) throws(SQLiteError) -> Statement {
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch v {
            case .null: rc = sqlite3_bind_null(raw, index)
            case .int(let n): rc = sqlite3_bind_int64(raw, index, n)
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { raw in
                    // A nil pointer would bind NULL; an empty blob needs zeroblob.
                    guard let base = raw.baseAddress else { return sqlite3_bind_zeroblob(self.raw, index, 0) }
                    return sqlite3_bind_blob(self.raw, index, base, Int32(raw.count), Self.transient)
                }
            case .text(let s):
                // Explicit byte length: event content may hold U+0000, which -1 would cut off.
                var s = s
                rc = s.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) { chars in
                        // A nil pointer would bind NULL; an empty string needs a real one.
                        guard let base = chars.baseAddress else { return sqlite3_bind_text(raw, index, "", 0, Self.transient) }
                        return sqlite3_bind_text(raw, index, base, Int32(chars.count), Self.transient)
                    }
                }
            }
            guard rc == SQLITE_OK else { throw connection.error(rc, "bind \(sql)") }
        }
        return self
    }

    /// Advances to the next row; false when done.
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(raw)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let e = connection.error(rc, sql)
        sqlite3_reset(raw)
        throw e
    }

    /// Runs a statement that returns no rows.
    func run() throws(SQLiteError) {
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String {
        guard let p = sqlite3_column_text(raw, column) else { return "" }
        let count = Int(sqlite3_column_bytes(raw, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    /// The column's text as UTF-8 bytes, valid only inside `body` (no string is made of it).
    func withText<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let start = sqlite3_column_text(raw, column)
        let count = Int(sqlite3_column_bytes(raw, column))
        return body(UnsafeRawBufferPointer(start: start, count: start == nil ? 0 : count))
    }
    /// A blob column's bytes, read in place by `body` (valid only during the call).
    func withBlob<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let count = Int(sqlite3_column_bytes(raw, column))
        return body(UnsafeRawBufferPointer(start: sqlite3_column_blob(raw, column), count: count))
    }
}

enum SQLValue {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])

    static func optional(_ s: String?) -> SQLValue { s.map(SQLValue.text) ?? .null }
    static func optional(_ n: Int64?) -> SQLValue { n.map(SQLValue.int) ?? .null }
}
