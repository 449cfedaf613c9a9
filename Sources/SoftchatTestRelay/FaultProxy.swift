import Dispatch
public import SoftchatTransport
import SoftchatCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How often the proxy misbehaves, per relayed WebSocket message (probabilities 0…1).
public struct FaultPlan: Sendable {
    public var drop = 0.0
    public var duplicate = 0.0
    /// Hold the message and send it after the next one (a reordering).
    public var reorder = 0.0
    /// Hold the message for up to `maxDelayMilliseconds` before sending it.
    public var delay = 0.0
    public var maxDelayMilliseconds: Int32 = 50
    /// Cut both connections at this message (after writing half of a frame: a truncation).
    public var cut = 0.0
    public var seed: UInt64 = 1

    public init() {}
}

/// What the proxy did, for the test's report.
public struct FaultCounts: Sendable, Equatable {
    public var relayed = 0, dropped = 0, duplicated = 0, reordered = 0, delayed = 0, cuts = 0
}

/// A loopback WebSocket proxy between a client and a relay that drops, duplicates, reorders,
/// delays and truncates messages and cuts connections at random points, deterministically for
/// a seed. For fault-injection tests only.
public final class FaultProxy: @unchecked Sendable {
    // @unchecked: mutable state is behind `lock`.
    public let port: Int
    public var url: String { "ws://127.0.0.1:\(port)" }
    private let upstream: String
    private let plan: FaultPlan
    private let listener: TCPListener
    private let lock = Lock()
    private var running = true
    private var counts = FaultCounts()
    private var rng: SplitMix64
    private let group = DispatchGroup()

    public init(upstream: String, plan: FaultPlan) throws(TransportError) {
        self.upstream = upstream
        self.plan = plan
        rng = SplitMix64(seed: plan.seed)
        listener = try TCPListener()
        port = listener.port
        group.enter()
        DispatchQueue(label: "softchat.test-relay").async { [self] in  // own thread: the loop blocks
            acceptLoop()
            group.leave()
        }
    }

    public var faults: FaultCounts { lock.with { counts } }

    public func stop() {
        lock.with { running = false }
        group.wait()
        listener.close()
    }

    private var isRunning: Bool { lock.with { running } }

    private func random() -> Double {
        lock.with { rng.unitInterval() }
    }

    private func acceptLoop() {
        while isRunning {
            guard let tcp = try? listener.accept(timeoutMilliseconds: 50) else { continue }
            group.enter()
            DispatchQueue(label: "softchat.test-relay").async { [self] in  // own thread: the loop blocks
                relay(tcp)
                group.leave()
            }
        }
    }

    /// One client connection: both directions pumped on this thread, faults applied per message.
    private func relay(_ tcp: TCPStream) {
        guard case .websocket(let client)? = try? ServerHandshake.accept(tcp, timeoutMilliseconds: 2000),
            let endpoint = try? RelayEndpoint(upstream),
            let server = try? WebSocketClient.connect(endpoint, options: ConnectionOptions(connectTimeoutMilliseconds: 2000))
        else {
            tcp.close()
            return
        }
        var held: [(WebSocket, String)] = []  // reordered messages waiting for the next one
        defer {
            client.stream.close()
            server.stream.close()
        }
        while isRunning {
            var idle = true
            for (from, to) in [(client, server), (server, client)] {
                let received: WebSocket.Message?
                do {
                    received = try receiveOrNil(from)
                } catch {
                    return
                }
                guard let message = received else { continue }
                idle = false
                guard case .text(let text) = message else { return }
                if !apply(text, to: to, held: &held) { return }
            }
            if idle { usleep(1000) }
        }
    }

    private func receiveOrNil(_ ws: WebSocket) throws(TransportError) -> WebSocket.Message? {
        do {
            return try ws.receive(timeoutMilliseconds: 2)
        } catch {
            if error.kind == .timeout { return nil }
            throw error
        }
    }

    /// Sends `text` to `to` with faults applied; false when the connection was cut.
    private func apply(_ text: String, to: WebSocket, held: inout [(WebSocket, String)]) -> Bool {
        let r = random()
        var p = plan.cut
        if r < p {
            lock.with { counts.cuts += 1 }
            // Half a frame, then nothing: the peer sees a truncated message and a dead socket.
            let bytes = Array(text.utf8)
            var frame: [UInt8] = [0x81, bytes.count < 126 ? UInt8(bytes.count) : 126]
            if bytes.count >= 126 { frame += [UInt8((bytes.count >> 8) & 0xFF), UInt8(bytes.count & 0xFF)] }
            frame += bytes.prefix(bytes.count / 2)
            try? to.stream.write(frame)
            return false
        }
        p += plan.drop
        if r < p {
            lock.with { counts.dropped += 1 }
            return true
        }
        p += plan.reorder
        if r < p {
            lock.with { counts.reordered += 1 }
            held.append((to, text))
            return true
        }
        p += plan.delay
        if r < p {
            lock.with { counts.delayed += 1 }
            usleep(UInt32(Int32.random(in: 1...max(1, plan.maxDelayMilliseconds))) * 1000)
        }
        do {
            try to.send(text: text)
            p += plan.duplicate
            if r < p {
                lock.with { counts.duplicated += 1 }
                try to.send(text: text)
            }
            // Anything held for reordering goes out after this message.
            let waiting = held
            held.removeAll()
            for (ws, t) in waiting { try ws.send(text: t) }
            lock.with { counts.relayed += 1 }
            return true
        } catch {
            return false
        }
    }
}
