import SoftchatCore

/// One SQLite connection behind a mutex: every use is serialized, so the connection (which is
/// opened with SQLITE_OPEN_NOMUTEX) is never touched by two threads at once.
final class SerialConnection: @unchecked Sendable {
    // @unchecked: `connection` is only read or written while `lock` is held.
    private let lock = Lock()
    private var connection: SQLiteConnection?

    init(_ connection: SQLiteConnection) { self.connection = connection }

    func with<R>(_ body: (SQLiteConnection?) throws -> R) rethrows -> R {
        try lock.with { try body(connection) }
    }

    func close() { lock.with { connection = nil } }
}
