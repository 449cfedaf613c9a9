import Dispatch
import SoftchatCore
public import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the fault proxy does to a connection, as probabilities (0…1) per relayed WebSocket
/// message. Only faults a real network (or a real relay) produces: TCP never drops or
/// duplicates a single message, so neither does this proxy; it stalls, splits, delays and cuts.
public struct FaultPlan: Sendable, Hashable {
    /// The run seed: connection n draws every choice from one `SplitMix64` seeded with
    /// (seed, n), so the same seed and the same message sequence replay the same faults.
    public var seed: UInt64 = 1
    /// Per message (either direction): from here on forward nothing either way but keep both
    /// sockets open (a half-open path: only a keepalive ping and a read deadline find it).
    public var blackHole = 0.0
    /// Per relay→client text message: re-frame it as 2…`maxFragments` WebSocket fragments
    /// written with gaps in `fragmentGapMilliseconds` between them (longer than any socket
    /// read timeout, so a reader must keep partial messages across reads).
    public var fragment = 0.0
    public var maxFragments = 3
    public var fragmentGapMilliseconds: ClosedRange<Int> = 200...1_500
    /// Per gap of a fragmented message: send a ping frame from the proxy inside it.
    public var pingBetweenFragments = 0.3
    /// Per message (either direction): write half of its frame (a truncation), then cut both sockets.
    public var cut = 0.0
    /// Per EOSE relay→client: cut both sockets right after it passed (a page boundary).
    public var cutAfterEndOfStoredEvents = 0.0
    /// Per stored-events burst (the EVENTs of a subscription before its EOSE): cut inside it,
    /// truncating one of its first 300 events.
    public var cutMidSync = 0.0
    /// Per message: hold it 1…`maxDelayMilliseconds` (later messages of that direction wait
    /// behind it: order is kept per direction).
    public var delay = 0.0
    public var maxDelayMilliseconds = 300

    public init() {}

    /// No faults at all: a transparent WebSocket-aware proxy.
    public static let none = FaultPlan()
}

/// What the proxy did, per kind, for a run's report.
public struct FaultCounts: Sendable, Hashable {
    /// WebSocket connections and NIP-11 HTTP requests (passed through unmodified).
    public var connections = 0, informationRequests = 0
    /// Data messages relayed (both directions).
    public var relayed = 0
    public var blackHoles = 0, fragmented = 0, pingsInjected = 0, cuts = 0, cutsAfterEndOfStoredEvents = 0, cutsMidSync = 0
    public var delayed = 0

    public init() {}

    /// Faults injected, all kinds.
    public var total: Int { blackHoles + fragmented + cuts + cutsAfterEndOfStoredEvents + cutsMidSync + delayed }

    public static func + (a: FaultCounts, b: FaultCounts) -> FaultCounts {
        var c = FaultCounts()
        c.connections = a.connections + b.connections
        c.informationRequests = a.informationRequests + b.informationRequests
        c.relayed = a.relayed + b.relayed
        c.blackHoles = a.blackHoles + b.blackHoles
        c.fragmented = a.fragmented + b.fragmented
        c.pingsInjected = a.pingsInjected + b.pingsInjected
        c.cuts = a.cuts + b.cuts
        c.cutsAfterEndOfStoredEvents = a.cutsAfterEndOfStoredEvents + b.cutsAfterEndOfStoredEvents
        c.cutsMidSync = a.cutsMidSync + b.cutsMidSync
        c.delayed = a.delayed + b.delayed
        return c
    }

    /// `blackHoles=… fragmented=… …` for logs.
    public var summary: String {
        "blackHoles=\(blackHoles) fragmented=\(fragmented) pings=\(pingsInjected) cuts=\(cuts) "
            + "eoseCuts=\(cutsAfterEndOfStoredEvents) midSyncCuts=\(cutsMidSync) delayed=\(delayed) "
            + "connections=\(connections) nip11=\(informationRequests) relayed=\(relayed)"
    }
}

/// A loopback proxy between WebSocket clients and a relay that injects the faults of a
/// `FaultPlan`. It parses WebSocket frames in both directions (so it can cut inside a frame,
/// split a relay message into continuation frames, slip a ping between them and recognise
/// EVENT and EOSE) but otherwise forwards bytes as they are; NIP-11 HTTP requests pass through
/// unmodified. One thread per connection, sleeping in `poll(2)` until a socket or a held
/// message is due. For fault-injection tests and the `softchat-dev faults` harness only.
public final class FaultProxy: @unchecked Sendable {
    // @unchecked: mutable state is behind `lock`; each connection's state is its thread's.
    public let port: Int
    public var url: String { "ws://127.0.0.1:\(port)" }
    let upstream: RelayEndpoint
    let plan: FaultPlan
    private let listener: TCPListener
    private let lock = Lock()
    private var running = true
    private var injecting = true
    private var counts = FaultCounts()
    private var ordinal: UInt64 = 0
    private let group = DispatchGroup()

    /// Listens on a free loopback port and forwards to `upstream` (a ws:// URL).
    public init(upstream: String, plan: FaultPlan) throws(TransportError) {
        self.upstream = try RelayEndpoint(upstream)
        self.plan = plan
        listener = try TCPListener()
        port = listener.port
        group.enter()
        DispatchQueue(label: "softchat.fault-proxy").async { [self] in  // own thread: the loop blocks
            acceptLoop()
            group.leave()
        }
    }

    /// What was injected so far.
    public var faults: FaultCounts { lock.with { counts } }

    /// False: inject nothing new from now on (connections already black-holed stay so until
    /// their client gives up on them). For a run's quiet period.
    public var injectsFaults: Bool {
        get { lock.with { injecting } }
        set { lock.with { injecting = newValue } }
    }

    /// Stops accepting, cuts every connection and waits for their threads.
    public func stop() {
        lock.with { running = false }
        group.wait()
        listener.close()
    }

    var isRunning: Bool { lock.with { running } }

    func count(_ change: (inout FaultCounts) -> Void) { lock.with { change(&counts) } }

    private func acceptLoop() {
        while isRunning {
            guard let tcp = try? listener.accept(timeoutMilliseconds: 100) else { continue }
            let n: UInt64 = lock.with {
                ordinal += 1
                return ordinal
            }
            group.enter()
            DispatchQueue(label: "softchat.fault-proxy").async { [self] in  // own thread: the loop blocks
                var connection = ProxyConnection(proxy: self, client: tcp, ordinal: n)
                connection.run()
                group.leave()
            }
        }
    }

    /// A plan choice made now: false while injection is off.
    func allowed() -> Bool { lock.with { injecting && running } }
}

/// Monotonic milliseconds.
func proxyNow() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
