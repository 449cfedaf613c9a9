#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One SQLite connection behind a mutex: every use is serialized, so the connection (which is
/// opened with SQLITE_OPEN_NOMUTEX) is never touched by two threads at once.
final class SerialConnection: @unchecked Sendable {
    // @unchecked: `connection` is only read or written while `mutex` is held.
    private var mutex = pthread_mutex_t()
    private var connection: SQLiteConnection?

    init(_ connection: SQLiteConnection) {
        self.connection = connection
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    func with<R>(_ body: (SQLiteConnection?) throws -> R) rethrows -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body(connection)
    }

    func close() {
        pthread_mutex_lock(&mutex)
        connection = nil
        pthread_mutex_unlock(&mutex)
    }
}
