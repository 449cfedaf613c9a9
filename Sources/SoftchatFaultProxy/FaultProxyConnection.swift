import SoftchatCore
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bytes waiting to be written in one direction, each not before its due time. Due times
/// never decrease along the queue, so a delayed message holds back the ones behind it: the
/// order of a direction is the order its messages arrived in.
struct ProxyOutbound {
    struct Item {
        var due: Int64
        var bytes: [UInt8]
        var offset = 0
        /// Cut both sockets once this item is written.
        var cutAfter = false
    }

    var items: [Item] = []
    var head = 0
    var lastDue: Int64 = 0

    mutating func append(_ bytes: [UInt8], due: Int64, cutAfter: Bool = false) {
        lastDue = max(lastDue, due)
        items.append(Item(due: lastDue, bytes: bytes, cutAfter: cutAfter))
    }

    var next: Item? { head < items.count ? items[head] : nil }

    mutating func removeAll() {
        items.removeAll()
        head = 0
    }

    mutating func popHead() {
        head += 1
        if head > 256 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}

/// One WebSocket frame's layout at the start of a buffer.
struct ProxyFrame {
    let fin: Bool
    let opcode: UInt8
    let maskKey: [UInt8]?
    let headerLength: Int
    let payloadLength: Int
    var total: Int { headerLength + payloadLength }

    /// The frame starting at `start`, nil while it is incomplete.
    static func parse(_ b: [UInt8], at start: Int) -> ProxyFrame? {
        guard let h = WebSocketFrameHeader.parse(b, at: start) else { return nil }
        let length = Int(clamping: h.payloadLength)
        guard b.count - start >= h.length + length else { return nil }
        let key = h.masked ? Array(b[(start + h.lengthFieldEnd)..<(start + h.length)]) : nil
        return ProxyFrame(fin: h.fin, opcode: h.opcode, maskKey: key, headerLength: h.length, payloadLength: length)
    }

    /// An unmasked (server-to-client) frame.
    static func serverFrame(opcode: UInt8, fin: Bool, _ payload: ArraySlice<UInt8>) -> [UInt8] {
        WebSocketFrameHeader.bytes(fin: fin, opcode: opcode, masked: false, payloadLength: payload.count) + payload
    }
}

/// One proxied connection, confined to its thread: the HTTP upgrade passed through, then
/// frames parsed in both directions and faults applied per `FaultPlan`, all choices drawn from
/// this connection's one generator.
struct ProxyConnection {
    let proxy: FaultProxy
    let client: TCPStream
    var upstream: TCPStream?
    var rng: SplitMix64
    var toClient = ProxyOutbound()
    var toRelay = ProxyOutbound()
    var fromClient: [UInt8] = []
    var fromRelay: [UInt8] = []
    var blackHoled = false
    /// Subscriptions whose EOSE passed on this connection (EVENTs for them are live).
    var endedStored: Set<String> = []
    /// Per subscription in its stored-events burst: events so far and where to cut, if at all.
    var bursts: [String: (count: Int, cutAt: Int?)] = [:]
    var pings = 0
    static let pingMarker = Array("softchat-fault-proxy".utf8)

    init(proxy: FaultProxy, client: TCPStream, ordinal: UInt64) {
        self.proxy = proxy
        self.client = client
        // One generator per connection, from the run seed and the connection's ordinal.
        var mix = SplitMix64(seed: proxy.plan.seed ^ (ordinal &* 0xD1B5_4A32_D192_ED03))
        rng = SplitMix64(seed: mix.next())
    }

    var plan: FaultPlan { proxy.plan }

    mutating func run() {
        defer {
            client.close()
            upstream?.close()
        }
        guard let (request, early) = Self.readHeader(client.fd) else { return }
        guard let up = try? TCPStream.connect(host: proxy.upstream.host, port: proxy.upstream.port, timeoutMilliseconds: 2000)
        else { return }
        upstream = up
        guard (try? up.write(request + early)) != nil, let (response, after) = Self.readHeader(up.fd),
            (try? client.write(response)) != nil
        else { return }
        guard response.starts(with: Array("HTTP/1.1 101".utf8)) else {
            // NIP-11 (or any plain HTTP): unmodified, both ways, until either side closes.
            proxy.count { $0.informationRequests += 1 }
            pipe(after)
            return
        }
        proxy.count { $0.connections += 1 }
        fromRelay = after
        if !fromRelay.isEmpty { processFromRelay(now: proxyNow()) }
        loop()
    }

    // MARK: The loop

    mutating func loop() {
        guard let up = upstream else { return }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while proxy.isRunning {
            let now = proxyNow()
            var fds = [pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: up.fd, events: Int16(POLLIN), revents: 0)]
            var timeout: Int64 = 200  // the stop flag is looked at this often
            for (i, queue) in [toClient, toRelay].enumerated() {
                guard let item = queue.next else { continue }
                if item.due <= now { fds[i].events |= Int16(POLLOUT) } else { timeout = min(timeout, item.due - now) }
            }
            let ready = poll(&fds, 2, Int32(max(1, timeout)))
            if ready < 0 && errno != EINTR { return }
            let readable = Int16(POLLIN | POLLHUP | POLLERR)
            if fds[0].revents & readable != 0 {
                guard let n = Self.receive(client.fd, &buffer) else { return }  // the client left
                fromClient += buffer[0..<n]
                processFromClient(now: proxyNow())
            }
            if fds[1].revents & readable != 0 {
                guard let n = Self.receive(up.fd, &buffer) else { return }
                fromRelay += buffer[0..<n]
                processFromRelay(now: proxyNow())
            }
            if !Self.flush(&toClient, to: client.fd) || !Self.flush(&toRelay, to: up.fd) { return }
        }
    }

    /// Writes what is due; false when the connection ends (a cut, or a peer gone).
    static func flush(_ queue: inout ProxyOutbound, to fd: Int32) -> Bool {
        while let item = queue.next, item.due <= proxyNow() {
            let n = item.bytes.withUnsafeBytes { raw in
                Self.sendNow(fd, raw.baseAddress! + item.offset, raw.count - item.offset)
            }
            if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            queue.items[queue.head].offset += n
            guard queue.items[queue.head].offset >= item.bytes.count else { return true }
            queue.popHead()
            if item.cutAfter { return false }
        }
        return true
    }

    // MARK: Relay → client

    mutating func processFromRelay(now: Int64) {
        var start = 0
        while let frame = ProxyFrame.parse(fromRelay, at: start) {
            let raw = Array(fromRelay[start..<(start + frame.total)])
            let payload = fromRelay[(start + frame.headerLength)..<(start + frame.total)]
            start += frame.total
            guard !blackHoled else { continue }
            if frame.opcode >= 0x8 || !frame.fin || frame.maskKey != nil {
                toClient.append(raw, due: now)
                continue
            }
            proxy.count { $0.relayed += 1 }
            let (verb, subscription) = Self.verbAndSubscription(payload)
            var burstCut = false
            if verb == "EVENT", let sub = subscription, !endedStored.contains(sub) {
                var burst = bursts[sub] ?? (0, nil)
                burst.count += 1
                if burst.count == 1, proxy.allowed(), draw(plan.cutMidSync) { burst.cutAt = 2 + rng.below(299) }
                burstCut = burst.cutAt == burst.count
                bursts[sub] = burst
            }
            if verb == "EOSE", let sub = subscription {
                endedStored.insert(sub)
                bursts[sub] = nil
            }
            guard proxy.allowed() else {
                toClient.append(raw, due: now)
                continue
            }
            if draw(plan.blackHole) {
                startBlackHole()
                continue
            }
            if draw(plan.cut) || burstCut {
                proxy.count { if burstCut { $0.cutsMidSync += 1 } else { $0.cuts += 1 } }
                toClient.append(Array(raw.prefix(raw.count / 2)), due: now, cutAfter: true)
                continue
            }
            var due = now
            if draw(plan.delay) {
                due += 1 + Int64(rng.below(max(1, plan.maxDelayMilliseconds)))
                proxy.count { $0.delayed += 1 }
            }
            if verb == "EOSE" && draw(plan.cutAfterEndOfStoredEvents) {
                proxy.count { $0.cutsAfterEndOfStoredEvents += 1 }
                toClient.append(raw, due: due, cutAfter: true)
                continue
            }
            if payload.count >= 2 && draw(plan.fragment) {
                fragment(payload, opcode: frame.opcode, due: due)
            } else {
                toClient.append(raw, due: due)
            }
        }
        fromRelay.removeFirst(start)
    }

    /// Re-frames one message as 2…maxFragments continuation frames with gaps, sometimes a
    /// ping from the proxy inside a gap.
    mutating func fragment(_ payload: ArraySlice<UInt8>, opcode: UInt8, due: Int64) {
        proxy.count { $0.fragmented += 1 }
        let pieces = min(payload.count, 2 + rng.below(max(1, plan.maxFragments - 1)))
        var cuts = Set<Int>()
        while cuts.count < pieces - 1 { cuts.insert(payload.startIndex + 1 + rng.below(payload.count - 1)) }
        let bounds = [payload.startIndex] + cuts.sorted() + [payload.endIndex]
        var at = due
        for i in 0..<(bounds.count - 1) {
            if i > 0 {
                let gap = Int64(
                    plan.fragmentGapMilliseconds.lowerBound
                        + rng.below(plan.fragmentGapMilliseconds.count))
                if draw(plan.pingBetweenFragments) {
                    pings += 1
                    proxy.count { $0.pingsInjected += 1 }
                    let ping = ProxyFrame.serverFrame(opcode: 0x9, fin: true, ArraySlice(Self.pingMarker + Array("-\(pings)".utf8)))
                    toClient.append(ping, due: at + gap / 2)
                }
                at += gap
            }
            let last = i == bounds.count - 2
            toClient.append(ProxyFrame.serverFrame(opcode: i == 0 ? opcode : 0x0, fin: last, payload[bounds[i]..<bounds[i + 1]]), due: at)
        }
    }

    // MARK: Client → relay

    mutating func processFromClient(now: Int64) {
        var start = 0
        while let frame = ProxyFrame.parse(fromClient, at: start) {
            let raw = Array(fromClient[start..<(start + frame.total)])
            let payloadStart = start + frame.headerLength
            start += frame.total
            guard !blackHoled else { continue }
            if frame.opcode == 0xA, let key = frame.maskKey, frame.payloadLength >= Self.pingMarker.count {
                // The answer to one of our own pings is ours, not the relay's.
                let head = (0..<Self.pingMarker.count).map { fromClient[payloadStart + $0] ^ key[$0 % 4] }
                if head == Self.pingMarker { continue }
            }
            if frame.opcode >= 0x8 || !frame.fin {
                toRelay.append(raw, due: now)
                continue
            }
            proxy.count { $0.relayed += 1 }
            guard proxy.allowed() else {
                toRelay.append(raw, due: now)
                continue
            }
            if draw(plan.blackHole) {
                startBlackHole()
                continue
            }
            if draw(plan.cut) {
                proxy.count { $0.cuts += 1 }
                toRelay.append(Array(raw.prefix(raw.count / 2)), due: now, cutAfter: true)
                continue
            }
            var due = now
            if draw(plan.delay) {
                due += 1 + Int64(rng.below(max(1, plan.maxDelayMilliseconds)))
                proxy.count { $0.delayed += 1 }
            }
            toRelay.append(raw, due: due)
        }
        fromClient.removeFirst(start)
    }

    // MARK: Helpers

    /// From here on nothing is forwarded either way (what was held is lost with the path);
    /// both sockets stay open and are read so the proxy sees the client give up.
    mutating func startBlackHole() {
        blackHoled = true
        toClient.removeAll()
        toRelay.removeAll()
        proxy.count { $0.blackHoles += 1 }
    }

    mutating func draw(_ probability: Double) -> Bool {
        probability > 0 && rng.unitInterval() < probability
    }

    /// `["EVENT","sub",…]` → ("EVENT", "sub"); nil parts when the text is not of that shape.
    static func verbAndSubscription(_ p: ArraySlice<UInt8>) -> (String?, String?) {
        var i = p.startIndex
        func skipSpace() { while i < p.endIndex, p[i] == 0x20 || p[i] == 0x0A || p[i] == 0x0D || p[i] == 0x09 { i += 1 } }
        func string() -> String? {
            skipSpace()
            guard i < p.endIndex, p[i] == 0x22 else { return nil }
            i += 1
            let from = i
            while i < p.endIndex, p[i] != 0x22, p[i] != 0x5C { i += 1 }
            guard i < p.endIndex, p[i] == 0x22 else { return nil }
            defer { i += 1 }
            return String(decoding: p[from..<i], as: UTF8.self)
        }
        skipSpace()
        guard i < p.endIndex, p[i] == 0x5B else { return (nil, nil) }
        i += 1
        let verb = string()
        skipSpace()
        guard i < p.endIndex, p[i] == 0x2C else { return (verb, nil) }
        i += 1
        return (verb, string())
    }

    /// Plain HTTP both ways until either side closes.
    mutating func pipe(_ first: [UInt8]) {
        guard let up = upstream else { return }
        if !first.isEmpty, (try? client.write(first)) == nil { return }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while proxy.isRunning {
            var fds = [pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: up.fd, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, 200) < 0 && errno != EINTR { return }
            for (i, (from, to)) in [(client, up), (up, client)].enumerated() where fds[i].revents != 0 {
                guard let n = Self.receive(from.fd, &buffer), (try? to.write(Array(buffer[0..<n]))) != nil else { return }
            }
        }
    }

    /// Reads up to the end of an HTTP header (5 s at most); the header and what followed it.
    static func readHeader(_ fd: Int32) -> ([UInt8], [UInt8])? {
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = proxyNow() + 5000
        let end: [UInt8] = [13, 10, 13, 10]
        while got.count < 65_536 {
            if let r = got.firstRange(of: end) { return (Array(got[..<r.upperBound]), Array(got[r.upperBound...])) }
            let left = deadline - proxyNow()
            guard left > 0 else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32(left)) <= 0 { continue }
            guard let n = receive(fd, &buffer) else { return nil }
            got += buffer[0..<n]
        }
        return nil
    }

    /// One non-blocking read: its byte count (0 when nothing was there), nil at end of stream
    /// or on an error.
    static func receive(_ fd: Int32, _ buffer: inout [UInt8]) -> Int? {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n > 0 { return n }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return 0 }
        return nil
    }

    static func sendNow(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            send(fd, bytes, count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        #else
            send(fd, bytes, count, Int32(MSG_DONTWAIT))
        #endif
    }
}
