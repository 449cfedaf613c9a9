import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP connection on a POSIX socket: non-blocking connect with a timeout, poll-based reads
/// with a timeout, TCP_NODELAY (relay frames are small and latency matters), no SIGPIPE.
public final class TCPStream: ByteStream, @unchecked Sendable {
    // @unchecked: one owner drives a stream at a time (the managed transport's loop).
    /// The socket's file descriptor, owned by the stream and released when the stream is.
    public let fd: Int32
    /// Set by the first close(), which may come from another thread than a blocked read's.
    private let closed = Atomic(false)

    /// Adopts a connected socket, turning on TCP_NODELAY (and SO_NOSIGPIPE on Darwin). The
    /// stream owns `fd` from now on; reads and writes expect it to be non-blocking.
    /// - Parameter fd: A connected, non-blocking TCP socket.
    public init(fd: Int32) {
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    deinit {
        close()
        // The descriptor is released only here, when no thread can still be inside read or
        // write: closing it in close() would let a blocked reader on another thread poll a
        // descriptor number the process may already have reused.
        posixClose(fd)
    }

    /// Connects to `host:port`, trying each resolved address until one answers within the timeout.
    /// - Parameters:
    ///   - host: A host name or IP literal; an IPv6 literal may be in brackets.
    ///   - port: The TCP port.
    ///   - timeoutMilliseconds: The longest wait for each address to accept the connection.
    /// - Returns: The connected stream.
    /// - Throws: ``TransportError``: `.resolve` when the host does not resolve; otherwise the
    ///   last address's failure, `.connect` or `.timeout`.
    public static func connect(host: String, port: Int, timeoutMilliseconds: Int32) throws(TransportError) -> TCPStream {
        try connect(host: host, port: port, timeoutMilliseconds: timeoutMilliseconds, allowsPrivateAddresses: true)
    }

    /// Connects as ``connect(host:port:timeoutMilliseconds:)``, skipping the addresses of this
    /// machine and of private networks unless `allowsPrivateAddresses`
    /// (`ConnectionOptions.allowsPrivateAddresses`); `.connect` when only such addresses remain.
    static func connect(host: String, port: Int, timeoutMilliseconds: Int32, allowsPrivateAddresses: Bool) throws(TransportError) -> TCPStream {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocketType
        var result: UnsafeMutablePointer<addrinfo>?
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(bareHost, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw TransportError(.resolve, "cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(first) }
        var lastError = TransportError(.connect, "no address for \(host)")
        // One deadline for every address together: a name with many silent addresses must not
        // get the whole timeout once for each.
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let ai = cursor {
            cursor = ai.pointee.ai_next
            if !allowsPrivateAddresses, let sa = ai.pointee.ai_addr {
                let address = SocketAddress(family: ai.pointee.ai_family, address: sa, length: ai.pointee.ai_addrlen)
                if address.isPrivate {
                    lastError = TransportError(.connect, SocketAddress.privateRefusal(host))
                    continue
                }
            }
            let fd = socket(ai.pointee.ai_family, ai.pointee.ai_socktype, ai.pointee.ai_protocol)
            if fd < 0 { continue }
            let flags = fcntl(fd, F_GETFL, 0)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            let c = posixConnect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen)
            if c != 0 && errno != EINPROGRESS {
                lastError = TransportError(.connect, "connect to \(host):\(port): \(String(cString: strerror(errno)))")
                posixClose(fd)
                continue
            }
            if c != 0 {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = deadline.hasPassed ? 0 : poll(&p, 1, deadline.remaining)
                if ready == 0 {
                    lastError = TransportError(.timeout, "connect to \(host):\(port) timed out after \(timeoutMilliseconds) ms")
                    posixClose(fd)
                    continue
                }
                var soError: Int32 = 0
                var len = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
                if ready < 0 || soError != 0 {
                    lastError = TransportError(.connect, "connect to \(host):\(port): \(String(cString: strerror(soError != 0 ? soError : errno)))")
                    posixClose(fd)
                    continue
                }
            }
            return TCPStream(fd: fd)
        }
        throw lastError
    }

    /// Reads what the socket has, up to `buffer.count` bytes, waiting at most
    /// `timeoutMilliseconds` for data to arrive.
    /// - Parameters:
    ///   - buffer: Where the bytes go.
    ///   - timeoutMilliseconds: The longest wait for data, or -1 to wait without limit.
    /// - Returns: The number of bytes read, or 0 at end of stream (including after a
    ///   ``TCPStream/close()`` from another thread during the wait).
    /// - Throws: ``TransportError``: `.closed` once the stream is closed, `.timeout` when
    ///   nothing arrived in time, `.io` when the socket fails.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int {
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else {
                throw TransportError(.io, "read: \(String(cString: strerror(errno)))")
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, timeoutMilliseconds)
            if ready == 0 { throw TransportError(.timeout, "no data within \(timeoutMilliseconds) ms") }
            if ready < 0 && errno != EINTR { throw TransportError(.io, "poll: \(String(cString: strerror(errno)))") }
        }
    }

    /// Sends all of `bytes`, waiting up to 30 seconds each time the kernel's buffer is full.
    /// A peer that is gone makes it fail with `.io` (EPIPE), never raise SIGPIPE.
    /// - Parameter bytes: The bytes to send.
    /// - Throws: ``TransportError``: `.closed` once the stream is closed, `.timeout` when the
    ///   socket stayed full for 30 seconds, `.io` when the socket fails.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        var offset = 0
        while offset < bytes.count {
            #if canImport(Glibc)
                let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            #else
                let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, 0)
            #endif
            if n > 0 {
                offset += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                if poll(&p, 1, 30_000) <= 0 { throw TransportError(.timeout, "write stalled for 30 s") }
                continue
            }
            throw TransportError(.io, "write: \(String(cString: strerror(errno)))")
        }
    }

    /// Whether the socket is readable now (data, end of stream or an error), checked without
    /// waiting.
    /// - Returns: `true` when a read would not block.
    public func hasBufferedInput() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0
    }

    /// Shuts the connection down (a read blocked on another thread returns at once); the
    /// descriptor itself is released when the stream is.
    public func close() {
        guard closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        #if canImport(Glibc)
            shutdown(fd, Int32(SHUT_RDWR))
        #else
            shutdown(fd, SHUT_RDWR)
        #endif
    }
}

/// A listening TCP socket on a loopback address, for the embedded test relay.
public final class TCPListener: @unchecked Sendable {
    /// The listening socket's file descriptor.
    public let fd: Int32
    /// The port actually bound: the one asked for, or the one the system chose for port 0.
    public let port: Int

    /// Binds and listens on `host:port` (IPv4 only, with SO_REUSEADDR).
    /// - Parameters:
    ///   - host: The IPv4 address to listen on, in dotted-decimal form.
    ///   - port: The port to bind, or 0 for one the system chooses (read it from ``TCPListener/port``).
    /// - Throws: ``TransportError`` with kind `.io` when `host` is not a dotted-decimal IPv4
    ///   address (nothing is bound), or when the socket cannot be created, bound or put into
    ///   listening mode.
    public init(host: String = "127.0.0.1", port: Int = 0) throws(TransportError) {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        // An address that does not parse must not leave sin_addr zeroed: that is 0.0.0.0, every
        // interface, where the caller asked for one.
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            throw TransportError(.io, "listen on \(host):\(port): not an IPv4 address")
        }
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw TransportError(.io, "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let b = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard b == 0, listen(fd, 64) == 0 else {
            let message = String(cString: strerror(errno))
            posixClose(fd)
            throw TransportError(.io, "listen on \(host):\(port): \(message)")
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: bound.sin_port))
    }

    /// Waits up to `timeoutMilliseconds` for a connection; nil on timeout.
    /// - Parameter timeoutMilliseconds: The longest wait, or -1 to wait without limit.
    /// - Returns: The accepted connection as a non-blocking ``TCPStream``, or nil when none
    ///   arrived in time or the wait or accept was interrupted (EINTR, EAGAIN, ECONNABORTED).
    /// - Throws: ``TransportError`` with kind `.io` when `accept(2)` fails otherwise.
    public func accept(timeoutMilliseconds: Int32) throws(TransportError) -> TCPStream? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&p, 1, timeoutMilliseconds)
        if ready <= 0 { return nil }
        let client = posixAccept(fd)
        guard client >= 0 else {
            if errno == EINTR || errno == EAGAIN || errno == ECONNABORTED { return nil }
            throw TransportError(.io, "accept: \(String(cString: strerror(errno)))")
        }
        let flags = fcntl(client, F_GETFL, 0)
        _ = fcntl(client, F_SETFL, flags | O_NONBLOCK)
        return TCPStream(fd: client)
    }

    /// Closes the listening socket. Call it once: a second call would close whatever
    /// descriptor has since reused the number.
    public func close() { posixClose(fd) }
}
