#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Non-blocking sockets for the event-driven driver: addresses, resolution, connect, send and
// receive. Nothing here waits: every call returns at once with what the kernel could do.

/// One resolved socket address, as the bytes of its `sockaddr` (Sendable, so a resolution
/// done on another thread can be posted back to the driver thread).
struct SocketAddress: Sendable, Hashable {
    let family: Int32
    let bytes: [UInt8]

    init(family: Int32, address: UnsafePointer<sockaddr>, length: socklen_t) {
        self.family = family
        bytes = Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(address), count: Int(length)))
    }

    /// Whether this is an address of this machine or of a private network, which an app dialling
    /// relay URLs from other people's events must not be made to reach
    /// (`ConnectionOptions.allowsPrivateAddresses`).
    var isPrivate: Bool { Self.isPrivate(family: family, bytes) }

    /// IPv4: 0/8, 10/8, 100.64/10 (shared), 127/8, 169.254/16, 172.16/12, 192.168/16,
    /// 198.18/15 (benchmarking, and local proxies' fake addresses), 224/4 and above (multicast,
    /// reserved, broadcast). IPv6: `::`, `::1`, fc00::/7, fe80::/10, fec0::/10, ff00::/8, and by
    /// their IPv4 part the IPv4-mapped and -compatible forms, NAT64 (64:ff9b::/96) and 6to4
    /// (2002::/16). Read from a `sockaddr_in`
    /// (address at byte 4) or `sockaddr_in6` (address at byte 8), however the name was spelled
    /// (`0x7f.1` resolves to 127.0.0.1 and is private here).
    static func isPrivate(family: Int32, _ bytes: [UInt8]) -> Bool {
        if family == AF_INET, bytes.count >= 8 { return isPrivateIPv4(Array(bytes[4..<8])) }
        guard family == AF_INET6, bytes.count >= 24 else { return false }
        let a = Array(bytes[8..<24])
        if a[0..<10].allSatisfy({ $0 == 0 }) && ((a[10] == 0xFF && a[11] == 0xFF) || (a[10] == 0 && a[11] == 0)) {
            // ::ffff:a.b.c.d and ::a.b.c.d (:: and ::1 among them).
            return isPrivateIPv4(Array(a[12..<16])) || a[0..<15].allSatisfy({ $0 == 0 })
        }
        if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xFF && a[3] == 0x9B && a[4..<12].allSatisfy({ $0 == 0 }) {
            return isPrivateIPv4(Array(a[12..<16]))  // NAT64
        }
        if a[0] == 0x20 && a[1] == 0x02 { return isPrivateIPv4(Array(a[2..<6])) }  // 6to4
        return a[0] & 0xFE == 0xFC || (a[0] == 0xFE && a[1] & 0x80 == 0x80) || a[0] == 0xFF
    }

    /// Why `host` was not dialled when `ConnectionOptions.allowsPrivateAddresses` is false.
    static func privateRefusal(_ host: String) -> String {
        "\(host) resolves only to addresses of this machine or a private network, "
            + "which this app's ConnectionOptions.allowsPrivateAddresses refuses"
    }

    static func isPrivateIPv4(_ a: [UInt8]) -> Bool {
        switch (a[0], a[1]) {
        case (0, _), (10, _), (127, _): true
        case (100, 64...127): true
        case (169, 254): true
        case (172, 16...31): true
        case (192, 168): true
        case (198, 18...19): true
        case (224..., _): true
        default: false
        }
    }

    /// Every address of `host:port` for a TCP connection. With `numericOnly` only IP
    /// literals are accepted and nothing is looked up (safe on the driver thread); nil then
    /// means "a name: resolve it elsewhere".
    static func resolve(host: String, port: Int, numericOnly: Bool) -> Result<[SocketAddress], TransportError>? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocketType
        if numericOnly { hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }
        var result: UnsafeMutablePointer<addrinfo>?
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(bareHost, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            if numericOnly { return nil }
            return .failure(TransportError(.resolve, "cannot resolve \(host): \(String(cString: gai_strerror(rc)))"))
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let ai = cursor {
            cursor = ai.pointee.ai_next
            guard let address = ai.pointee.ai_addr else { continue }
            addresses.append(SocketAddress(family: ai.pointee.ai_family, address: address, length: ai.pointee.ai_addrlen))
        }
        guard !addresses.isEmpty else { return .failure(TransportError(.resolve, "no address for \(host)")) }
        return .success(addresses)
    }
}

/// What a non-blocking socket call achieved.
enum SocketProgress {
    /// This many bytes moved (for a read, 0 is end of stream).
    case bytes(Int)
    /// Nothing now; poll for readiness.
    case wouldBlock
    /// The connection failed (errno text in the error).
    case failed(TransportError)
}

enum DriverSocket {
    /// Starts a non-blocking TCP connect. Returns the socket and whether it is already
    /// connected (loopback can be immediate), or the reason it failed at once.
    static func startConnect(_ address: SocketAddress, describing target: String) -> Result<(fd: Int32, connected: Bool), TransportError> {
        #if canImport(Glibc)
            let fd = socket(address.family, streamSocketType | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(address.family, streamSocketType, 0)
        #endif
        guard fd >= 0 else { return .failure(TransportError(.connect, "socket for \(target): \(errnoText())")) }
        #if canImport(Darwin)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        // Relay frames are small and latency matters.
        var nodelay: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &nodelay, socklen_t(MemoryLayout<Int32>.size))
        let rc = address.bytes.withUnsafeBytes { raw in
            posixConnect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if rc == 0 { return .success((fd, true)) }
        let code = errno
        if code == EINPROGRESS || code == EINTR { return .success((fd, false)) }
        posixClose(fd)
        return .failure(TransportError(.connect, "connect to \(target): \(errnoText(code))"))
    }

    /// After a connecting socket polled writable (or in error): nil when connected, else why not.
    static func connectResult(_ fd: Int32, describing target: String) -> TransportError? {
        var soError: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len) == 0 else {
            return TransportError(.connect, "connect to \(target): \(errnoText())")
        }
        return soError == 0 ? nil : TransportError(.connect, "connect to \(target): \(errnoText(soError))")
    }

    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> SocketProgress {
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n >= 0 { return .bytes(n) }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
            return .failed(TransportError(.io, "read: \(errnoText(code))"))
        }
    }

    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> SocketProgress {
        while true {
            #if canImport(Glibc)
                let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            #else
                let n = Darwin.send(fd, bytes.baseAddress, bytes.count, 0)
            #endif
            if n >= 0 { return .bytes(n) }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
            return .failed(TransportError(.io, "write: \(errnoText(code))"))
        }
    }

    /// Ends our sending direction (the peer reads end of stream) but keeps reading.
    static func shutdownWrite(_ fd: Int32) {
        #if canImport(Glibc)
            shutdown(fd, Int32(SHUT_WR))
        #else
            shutdown(fd, SHUT_WR)
        #endif
    }
}

/// The bytes waiting for the kernel, in order, with the send tokens they complete. Offsets
/// are absolute (bytes ever queued), so a token is done once that many bytes were sent.
struct WireQueue {
    private var bytes: [UInt8] = []
    private var start = 0
    private var markers: [(end: UInt64, token: Int)] = []
    private var markerStart = 0
    private(set) var queuedTotal: UInt64 = 0
    private(set) var sentTotal: UInt64 = 0

    var isEmpty: Bool { start == bytes.count }
    var count: Int { bytes.count - start }

    mutating func append(_ more: [UInt8]) {
        bytes += more
        queuedTotal += UInt64(more.count)
    }

    mutating func append(_ more: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: more)
        queuedTotal += UInt64(more.count)
    }

    /// `token` is done when everything queued so far is sent.
    mutating func mark(_ token: Int) {
        markers.append((queuedTotal, token))
    }

    /// Sends as much as the kernel takes; returns the bytes sent, or the failure.
    mutating func flush(_ fd: Int32) -> Result<Int, TransportError> {
        var sent = 0
        while start < bytes.count {
            let progress = bytes.withUnsafeBytes { raw in DriverSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[start...])) }
            switch progress {
            case .bytes(let n):
                start += n
                sent += n
                sentTotal += UInt64(n)
            case .wouldBlock:
                compact()
                return .success(sent)
            case .failed(let error):
                return .failure(error)
            }
        }
        bytes.removeAll(keepingCapacity: bytes.capacity <= 1 << 18)
        start = 0
        return .success(sent)
    }

    /// Tokens whose bytes have all been sent since the last call, in order.
    mutating func takeCompletedTokens() -> [Int] {
        var done: [Int] = []
        while markerStart < markers.count, markers[markerStart].end <= sentTotal {
            done.append(markers[markerStart].token)
            markerStart += 1
        }
        if markerStart == markers.count {
            markers.removeAll(keepingCapacity: true)
            markerStart = 0
        } else if markerStart > 1024 {
            markers.removeFirst(markerStart)
            markerStart = 0
        }
        return done
    }

    private mutating func compact() {
        if start > 65536 && start > bytes.count / 2 {
            bytes.removeFirst(start)
            start = 0
        }
    }
}
