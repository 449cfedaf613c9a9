import COpenSSL
import Dispatch
import SoftchatCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A single-threaded, event-driven I/O driver: one thread carries any number of relay
/// connections (ws, wss, noise; WebSocket or NIP-11) on non-blocking sockets and `poll(2)`.
/// The thread blocks in poll until a socket is ready, `wake()` is called, or a deadline is
/// due — the handler's (from `driverService`) or the driver's own (connect timeouts, the
/// bounded linger of a closing connection). There are no sleeps and no polling timeouts: an
/// idle connection costs no wakeups at all.
///
/// Threading: `open`, `send`, `ping` and `close` are for the handler, on the driver thread
/// (inside `driver(_:handle:)` or `driverService`). `wake`, `stop` and `statistics` are for
/// any thread. Events are queued and delivered after the current call returns, so the
/// handler is never re-entered.
///
/// Host names are resolved off the driver thread (getaddrinfo on a global queue), the
/// result posted back through the wake pipe; IP literals need no resolution.
///
/// The driver holds its handler strongly until the thread ends (`stop()`), so a handler
/// that owns its driver forms no lasting cycle.
public final class IODriver: @unchecked Sendable {
    // @unchecked: the fields marked "driver thread" are touched only by the driver thread
    // (after `start`, which publishes them); the rest sit behind `lock`.
    private let name: String
    private let lock = Lock()
    private let stopLock = Lock()

    // Behind `lock`:
    private var started = false
    private var stopRequested = false
    /// The thread was joined (or detached): `stop()` has nothing left to wait for.
    private var joined = false
    /// Signalled once when the thread has finished (every connection closed, statistics
    /// published), for a stop() from another thread after the handler's own stop detached it.
    private let ended = DispatchSemaphore(value: 0)
    private var thread: pthread_t?
    private var wakePending = false
    private var serviceRequested = false
    private var inbox: [(serial: UInt64, result: Result<[SocketAddress], TransportError>)] = []
    private var published = IODriverStatistics()

    /// The wake pipe: [0] the driver thread polls, [1] any thread writes a byte to.
    private let wakeRead: Int32
    private let wakeWrite: Int32

    // Driver thread:
    private var handler: (any IODriverHandler)?
    private var connections: [ConnectionID: DriverConnection] = [:]
    private var live: [UInt64: DriverConnection] = [:]
    private var dirty: [DriverConnection] = []
    private var pending: [(DriverConnection, IOEvent)] = []
    private var nextSerial: UInt64 = 0
    private var handlerDeadline: Int64?
    /// When `poll(2)` last returned (monotonic ms): the age of what the sockets have told us.
    private var polledAt: Int64 = 0
    /// A round of handler calls that has run this long since the sockets were last read stops,
    /// so they are read before the handler is called again (it judges deadlines).
    static let staleInputMilliseconds: Int64 = 10
    private var tlsContexts: [TLSOptions: OpaquePointer] = [:]
    private var counters = IODriverStatistics()
    private var scratch = [UInt8](repeating: 0, count: 65536)
    private var deliveringEvents = false

    /// Creates a driver for `handler`; no thread runs until ``IODriver/start()``. The process
    /// stops if the wake pipe cannot be created.
    /// - Parameters:
    ///   - handler: The owner of the connections, held strongly until the thread ends.
    ///   - name: The driver thread's name (Linux keeps its first 15 bytes).
    public init(handler: any IODriverHandler, name: String = "softchat.io") {
        self.handler = handler
        self.name = name
        var fds: [Int32] = [-1, -1]
        // Without its wake pipe the driver could never be woken or stopped.
        let rc = pipe(&fds)
        precondition(rc == 0, "IODriver: pipe failed: \(errnoText())")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        // The thread holds the driver, so it has ended (or never ran) by now.
        for ctx in tlsContexts.values { SSL_CTX_free(ctx) }
        if wakeRead >= 0 { posixClose(wakeRead) }
        if wakeWrite >= 0 { posixClose(wakeWrite) }
    }

    // MARK: Any thread

    /// CLOCK_MONOTONIC in milliseconds: the clock of every deadline.
    /// - Returns: Milliseconds since an arbitrary, fixed point (not the Unix epoch).
    public static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Spawns the driver thread (once; later calls do nothing). Its first act is a
    /// `driverService` call, where the handler can open its connections.
    public func start() {
        let go: Bool = lock.with {
            guard !started, !stopRequested else { return false }
            started = true
            return true
        }
        guard go else { return }
        let context = Unmanaged.passRetained(self).toOpaque()
        #if canImport(Glibc)
            var tid = pthread_t()
            let rc = pthread_create(
                &tid, nil,
                { arg in
                    Unmanaged<IODriver>.fromOpaque(arg!).takeRetainedValue().run()
                    return nil
                }, context)
        #else
            var tid: pthread_t?
            let rc = pthread_create(
                &tid, nil,
                { arg in
                    Unmanaged<IODriver>.fromOpaque(arg).takeRetainedValue().run()
                    return nil
                }, context)
        #endif
        guard rc == 0 else {
            Unmanaged<IODriver>.fromOpaque(context).release()
            preconditionFailure("IODriver: pthread_create failed: \(errnoText(rc))")
        }
        lock.with { thread = tid }
    }

    /// Makes the thread call `driverService` soon. Coalesced: many wakes before the thread
    /// runs cost one.
    public func wake() { signal(service: true) }

    /// Closes every connection (an open WebSocket gets a 1001 close frame, sent if the kernel
    /// takes it at once) and ends the thread; returns when it has ended. No events are
    /// delivered for these connections and the handler is released. Idempotent. From the
    /// driver thread itself (the handler) it only requests the stop, which happens when the
    /// current round ends: a thread cannot wait for itself.
    public func stop() {
        let (wasStarted, tid): (Bool, pthread_t?) = lock.with {
            stopRequested = true
            return (started, thread)
        }
        guard wasStarted, let tid else {
            lock.with { handler = nil }
            return
        }
        if pthread_equal(pthread_self(), tid) != 0 {
            // The loop ends after this round; nobody will join the thread, so detach it.
            let detach: Bool = lock.with {
                defer { joined = true }
                return !joined
            }
            if detach { pthread_detach(tid) }
            return
        }
        signal(service: false)
        stopLock.with {
            guard !lock.with({ joined }) else {
                // Detached by the handler's stop: nobody joins it, so wait for its end instead.
                ended.wait()
                ended.signal()
                return
            }
            pthread_join(tid, nil)
            lock.with { joined = true }
        }
    }

    /// A snapshot, updated after every round of the loop.
    public var statistics: IODriverStatistics { lock.with { published } }

    private func signal(service: Bool) {
        let needsByte: Bool = lock.with {
            if service { serviceRequested = true }
            guard !wakePending else { return false }
            wakePending = true
            return true
        }
        guard needsByte else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// A name resolution finished (on a global queue): hand it to the driver thread.
    private func post(_ serial: UInt64, _ result: Result<[SocketAddress], TransportError>) {
        lock.with { inbox.append((serial, result)) }
        signal(service: false)
    }

    // MARK: Driver thread: the handler's calls

    private func assertOnDriverThread(_ function: StaticString = #function) {
        assert(
            lock.with { thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false },
            "IODriver.\(function) must be called on the driver thread (from the handler)")
    }

    /// Opens connection `id` (not in use) to `endpoint`. The outcome arrives as events:
    /// `.opened` (then `.text`, `.pong`, `.written`…, until `.closed`) for `.webSocket`,
    /// one `.information` for `.relayInformation`. The whole open — resolution, connect,
    /// TLS or Noise, the HTTP exchange (for NIP-11, the document too) — must finish within
    /// `options.connectTimeoutMilliseconds`.
    /// - Parameters:
    ///   - id: The connection's id, chosen by the handler; it must not be in use.
    ///   - endpoint: The relay to connect to.
    ///   - options: TLS, Noise, timeout and message-size settings.
    ///   - purpose: A WebSocket connection, or a NIP-11 document fetch.
    public func open(_ id: ConnectionID, endpoint: RelayEndpoint, options: ConnectionOptions, purpose: ConnectionPurpose = .webSocket) {
        assertOnDriverThread()
        precondition(connections[id] == nil, "IODriver.open: connection \(id) is already in use")
        nextSerial += 1
        let now = Self.monotonicMilliseconds()
        let connection = DriverConnection(
            driver: self, id: id, serial: nextSerial, endpoint: endpoint, options: options,
            purpose: purpose, now: now)
        connections[id] = connection
        live[connection.serial] = connection
        if let numeric = SocketAddress.resolve(host: endpoint.host, port: endpoint.port, numericOnly: true) {
            connection.resolved(numeric)
        } else {
            let serial = connection.serial
            let host = endpoint.host
            let port = endpoint.port
            DispatchQueue.global().async { [self] in
                post(serial, SocketAddress.resolve(host: host, port: port, numericOnly: false)!)
            }
        }
    }

    /// Queues one text message; `.written(token)` follows once the kernel took all of it.
    /// Before `.opened` it is kept and sent on open; for an id not in use it is dropped (its
    /// `.closed` is on the way). It is also dropped for a `.relayInformation` connection.
    /// - Parameters:
    ///   - id: The connection to send on.
    ///   - text: The message, sent as one text frame.
    ///   - token: A number the handler chooses, reported back in `.written`.
    public func send(_ id: ConnectionID, text: String, token: Int) {
        assertOnDriverThread()
        connections[id]?.send(text: text, token: token)
    }

    /// Sends a ping; the pong arrives as `.pong`. Ignored unless the WebSocket is open.
    /// - Parameter id: The connection to ping.
    public func ping(_ id: ConnectionID) {
        assertOnDriverThread()
        connections[id]?.ping()
    }

    /// Sends a close frame with `code` after what is queued, flushes (bounded by about a
    /// second), then closes the fd. No event follows, and the id is free at once.
    /// - Parameters:
    ///   - id: The connection to close; an id not in use is ignored.
    ///   - code: The WebSocket close status code (1000: normal closure).
    public func close(_ id: ConnectionID, code: UInt16 = 1000) {
        assertOnDriverThread()
        guard let connection = connections.removeValue(forKey: id) else { return }
        connection.closeByHandler(code: code)
    }

    // MARK: Driver thread: what connections call

    func enqueue(_ connection: DriverConnection, _ event: IOEvent) {
        pending.append((connection, event))
    }

    func markDirty(_ connection: DriverConnection) {
        dirty.append(connection)
    }

    /// The connection's fd is closed: it leaves the poll set.
    func retire(_ connection: DriverConnection) {
        live[connection.serial] = nil
    }

    func countRead(_ n: Int) { counters.bytesRead += UInt64(n) }
    func countWritten(_ n: Int) { counters.bytesWritten += UInt64(n) }

    /// One client context per TLS configuration, kept for the driver's life (loading the
    /// trusted roots is the expensive part).
    func tlsContext(_ options: TLSOptions) throws(TransportError) -> OpaquePointer {
        if let ctx = tlsContexts[options] { return ctx }
        let ctx = try TLSStream.makeClientContext(options)
        tlsContexts[options] = ctx
        return ctx
    }

    // MARK: Driver thread: the loop

    private var isStopRequested: Bool { lock.with { stopRequested } }

    private func run() {
        lock.with { thread = pthread_self() }
        setThreadName()
        defer { finish() }
        polledAt = Self.monotonicMilliseconds()
        settle(serviceDue: true)
        var fds: [pollfd] = []
        var polled: [DriverConnection] = []
        while !isStopRequested {
            fds.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            var nextDeadline = handlerDeadline
            for connection in live.values {
                if let d = connection.deadline { nextDeadline = min(nextDeadline ?? d, d) }
                let events = connection.pollEvents
                guard events != 0 else { continue }
                fds.append(pollfd(fd: connection.fd, events: events, revents: 0))
                polled.append(connection)
            }
            var timeout: Int32 = -1
            if !pending.isEmpty {
                timeout = 0  // settle stopped early with events waiting: carry on after a look at the sockets
            } else if let nextDeadline {
                timeout = Int32(clamping: max(0, nextDeadline - Self.monotonicMilliseconds()))
            }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            polledAt = Self.monotonicMilliseconds()
            counters.wakeups += 1
            var serviceDue = false
            if ready < 0 && errno != EINTR {
                preconditionFailure("IODriver: poll failed: \(errnoText())")
            }
            if ready > 0 {
                if fds[0].revents != 0 { serviceDue = drainWakes() }
                scratch.withUnsafeMutableBytes { buffer in
                    for (i, connection) in polled.enumerated() where fds[i + 1].revents != 0 {
                        connection.handle(revents: fds[i + 1].revents, scratch: buffer)
                    }
                }
            }
            let now = Self.monotonicMilliseconds()
            for connection in Array(live.values) { connection.expire(now: now) }
            if let d = handlerDeadline, d <= now { serviceDue = true }
            settle(serviceDue: serviceDue)
        }
    }

    /// Empties the wake pipe and takes what was posted; true when `wake()` was called.
    private func drainWakes() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
        let (service, posted) = lock.with { () -> (Bool, [(serial: UInt64, result: Result<[SocketAddress], TransportError>)]) in
            wakePending = false
            defer {
                serviceRequested = false
                inbox = []
            }
            return (serviceRequested, inbox)
        }
        for item in posted { live[item.serial]?.resolved(item.result) }
        return service
    }

    /// Delivers queued events, asks the handler for its due work after each round of them
    /// (and when `serviceDue`), and flushes what was queued to send — until nothing is left
    /// to do, or a bounded number of rounds ran (then the loop polls without waiting, so a
    /// handler that keeps itself busy cannot starve the sockets).
    private func settle(serviceDue: Bool) {
        var due = serviceDue
        for _ in 0..<64 {
            let delivered = deliverEvents()
            if delivered || due, let handler, !isStopRequested {
                handlerDeadline = handler.driverService(self, now: Self.monotonicMilliseconds())
            }
            due = false
            flushDirty()
            if pending.isEmpty { break }
            // A handler call that took long (an account write waiting for a lock, a host paused)
            // must not be followed by another before the sockets are read again: the next one
            // would judge its deadlines (a keepalive's, an acknowledgement's) without what
            // arrived meanwhile. The loop polls without waiting, then settles the rest.
            if Self.monotonicMilliseconds() - polledAt >= Self.staleInputMilliseconds { break }
        }
        publish()
    }

    /// Hands queued events to the handler in order; drops those of connections the handler
    /// closed. A connection's last event frees its id.
    private func deliverEvents() -> Bool {
        guard !pending.isEmpty, let handler else { return false }
        var delivered = false
        while !pending.isEmpty {
            let batch = pending
            pending = []
            for (connection, event) in batch where !connection.suppressed {
                switch event {
                case .closed, .information:
                    connection.suppressed = true
                    if connections[connection.id] === connection { connections[connection.id] = nil }
                default:
                    break
                }
                delivered = true
                handler.driver(self, handle: event)
            }
        }
        return delivered
    }

    private func flushDirty() {
        guard !dirty.isEmpty else { return }
        let batch = dirty
        dirty = []
        var seen = Set<UInt64>()
        for connection in batch where seen.insert(connection.serial).inserted && connection.needsFlush {
            connection.flush()
        }
    }

    private func publish() {
        counters.connectionsOpen = connections.count
        let snapshot = counters
        lock.with { published = snapshot }
    }

    /// The thread's end: every connection closed without events, the handler released.
    private func finish() {
        for connection in Array(live.values) { connection.abandon() }
        live = [:]
        connections = [:]
        pending = []
        dirty = []
        handler = nil
        publish()
        ended.signal()
    }

    private func setThreadName() {
        #if canImport(Glibc)
            // Linux keeps 15 bytes of a thread name.
            var cut = Array(name.utf8.prefix(15)).map { CChar(bitPattern: $0) }
            cut.append(0)
            _ = linuxSetThreadName(pthread_self(), cut)
        #else
            _ = pthread_setname_np(name)
        #endif
    }
}

#if canImport(Glibc)
    /// glibc's pthread_setname_np, which the Glibc module hides behind _GNU_SOURCE.
    @_silgen_name("pthread_setname_np")
    private func linuxSetThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
#endif
