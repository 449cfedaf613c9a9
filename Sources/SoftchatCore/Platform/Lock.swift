#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread mutex with a closure API, for the classes that guard their own state (the
/// managed transport, the test relay, the SQLite connections, the CLI's printers). The lock
/// is held only for the closure, which must not call back into the same lock.
package final class Lock: @unchecked Sendable {
    // @unchecked: the mutex is the synchronization. It lives in its own allocation because a
    // pthread mutex must not move, and `&` on a stored property promises no stable address.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func with<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
