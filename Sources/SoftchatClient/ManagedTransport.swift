import Dispatch
public import SoftchatCore
import SoftchatJSON
public import SoftchatStorage
public import SoftchatSync
public import SoftchatTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension SoftchatAccount {
    /// Keeps this account in sync with `relays` and delivers its publish intents to each, on
    /// ONE I/O thread for all of them (non-blocking sockets and `poll(2)`; an idle transport
    /// sleeps until a socket or a keepalive is due). A `SyncEngine` decides everything: it
    /// commits received events with the sync state that counted them in one transaction,
    /// moves a subscription's cursor only once its whole window is synced, marks an intent
    /// in flight only after its frame was written and terminal only on the relay's `OK`,
    /// answers NIP-42 with `identity`, reconnects on the session's schedule and resubscribes
    /// from the account's subscription policy. New intents committed to this account are
    /// picked up at once. For noise:// relays the client's Noise static key defaults to
    /// `<account database>.noise-key`.
    /// - Parameters:
    ///   - relays: The relay URLs (`ws://`, `wss://`, `noise://`), each once.
    ///   - identity: Signs NIP-42 challenges; nil makes a relay's `auth-required` final.
    ///   - policy: How to connect, publish and sync.
    /// - Returns: The running transport; call its `stop()` to end it.
    /// - Throws: `TransportError` with kind `.connect` when `relays` is empty, names a URL
    ///   twice, or holds a URL that is not a valid relay URL.
    public func startManagedTransport(
        relays: [String], identity: SoftchatIdentity?,
        policy: ManagedTransportPolicy = ManagedTransportPolicy()
    ) throws(TransportError) -> ManagedTransport {
        guard !relays.isEmpty else { throw TransportError(.connect, "startManagedTransport: no relay URL given") }
        guard Set(relays).count == relays.count else { throw TransportError(.connect, "startManagedTransport: a relay URL appears twice") }
        var endpoints: [RelayEndpoint] = []
        for url in relays { endpoints.append(try RelayEndpoint(url)) }  // RelayURL's checks, as TransportError .connect
        var policy = policy
        if endpoints.contains(where: { $0.noise != nil }) && policy.connection.noiseStaticKeyFile == nil && !path.isEmpty && path != ":memory:" {
            policy.connection.noiseStaticKeyFile = path + ".noise-key"
        }
        return ManagedTransport(account: self, endpoints: endpoints, identity: identity, policy: policy)
    }

    /// `startManagedTransport(relays: [relayURL], …)`: the managed transport for one relay.
    /// - Parameters:
    ///   - relayURL: The relay's URL (`ws://`, `wss://` or `noise://`).
    ///   - identity: Signs NIP-42 challenges; nil makes the relay's `auth-required` final.
    ///   - policy: How to connect, publish and sync.
    /// - Returns: The running transport; call its `stop()` to end it.
    /// - Throws: `TransportError` with kind `.connect` when `relayURL` is not a valid relay URL.
    public func startManagedTransport(
        relayURL: String, identity: SoftchatIdentity?,
        policy: ManagedTransportPolicy = ManagedTransportPolicy()
    ) throws(TransportError) -> ManagedTransport {
        try startManagedTransport(relays: [relayURL], identity: identity, policy: policy)
    }
}

/// A running managed transport over one or more relays. `states` reports the overall
/// lifecycle, `events` what happened (per relay), `relays` each relay's state and statistics;
/// `stop()` ends it cleanly (cancel, close, every lease released). Releasing it without
/// `stop()` does not end it: the I/O thread keeps running.
public final class ManagedTransport: Sendable {
    /// The overall state as it changes, starting with `.connecting` and finishing after
    /// `.stopped`; a reader that falls behind loses all but the newest 1,024 states.
    public let states: AsyncStream<ManagedTransportState>
    /// What happened, per relay, finishing when the transport stops; a reader that falls
    /// behind loses all but the newest `ManagedTransportPolicy.eventBufferLimit` events (16,384
    /// by default; none are kept when it is 0).
    public let events: AsyncStream<ManagedTransportEvent>
    let shared: Shared
    private let driver: IODriver
    private let client: ManagedClient

    /// What the I/O thread publishes and other threads read.
    final class Shared: Sendable {
        struct State {
            var overall = ManagedTransportState.connecting
            var relays: [ManagedRelayStatus] = []
            var commands: [Command] = []
            var stopped = false
            var stopCalled = false
        }
        enum Command {
            case stop
            case drop(String?)
            case workAvailable
        }
        let state = Mutex(State())
        let stateContinuation: AsyncStream<ManagedTransportState>.Continuation
        let eventContinuation: AsyncStream<ManagedTransportEvent>.Continuation
        let finished = DispatchSemaphore(value: 0)

        init(_ s: AsyncStream<ManagedTransportState>.Continuation, _ e: AsyncStream<ManagedTransportEvent>.Continuation) {
            stateContinuation = s
            eventContinuation = e
        }
    }

    init(account: SoftchatAccount, endpoints: [RelayEndpoint], identity: SoftchatIdentity?, policy: ManagedTransportPolicy) {
        let (states, s) = AsyncStream<ManagedTransportState>.makeStream(bufferingPolicy: .bufferingNewest(1_024))
        let (events, e) = AsyncStream<ManagedTransportEvent>.makeStream(bufferingPolicy: .bufferingNewest(max(0, policy.eventBufferLimit)))
        self.states = states
        self.events = events
        let shared = Shared(s, e)
        self.shared = shared
        client = ManagedClient(account: account, endpoints: endpoints, identity: identity, policy: policy, shared: shared)
        driver = IODriver(handler: client, name: "softchat.io")
        client.driver = driver
        s.yield(.connecting)
        let token = account.addOutgoingObserver { [weak shared, driver] in
            shared?.state.withLock { $0.commands.append(.workAvailable) }
            driver.wake()
        }
        client.observerToken = token
        driver.start()
    }

    /// The most recent overall state.
    public var state: ManagedTransportState { shared.state.withLock { $0.overall } }

    /// Each relay's state and statistics, in the order given at start.
    public var relays: [ManagedRelayStatus] { shared.state.withLock { $0.relays } }

    /// The I/O thread's counters (wakeups, connections, bytes).
    public var driverStatistics: IODriverStatistics { driver.statistics }

    /// Ends the transport: cancels every session, closes every socket, releases every lease,
    /// then the I/O thread ends. Blocks until it has; idempotent. Never call it on the I/O
    /// thread (from `ManagedTransportPolicy.observer`): it would wait for itself.
    public func stop() {
        let first: Bool = shared.state.withLock { s in
            defer { s.stopCalled = true }
            if !s.stopCalled { s.commands.append(.stop) }
            return !s.stopCalled
        }
        guard first else {
            shared.finished.wait()
            shared.finished.signal()
            return
        }
        driver.wake()
        shared.finished.wait()
        driver.stop()
        client.account.removeOutgoingObserver(client.observerToken)
        shared.finished.signal()
    }

    /// `stop()`, without blocking the caller's thread.
    public func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.stop()
                continuation.resume()
            }
        }
    }

    /// Cuts the connection to `relayURL` (every relay when nil), as a network failure would.
    /// - Parameter relayURL: The URL of a relay, as given at start; nil for every relay. A URL
    ///   that names no relay of the transport cuts nothing.
    public func dropConnection(relayURL: String? = nil) {
        shared.state.withLock { $0.commands.append(.drop(relayURL)) }
        driver.wake()
    }
}

/// The driver's handler: feeds I/O to the engine, executes its actions (socket work on the
/// driver, account work on the account), publishes states and events. Confined to the I/O
/// thread, except the fields set once before the thread starts.
final class ManagedClient: IODriverHandler, @unchecked Sendable {
    let account: SoftchatAccount
    let endpoints: [RelayEndpoint]
    let policy: ManagedTransportPolicy
    let shared: ManagedTransport.Shared
    let engine: SyncEngine
    weak var driver: IODriver?
    var observerToken = 0
    /// The connection each relay uses now, and which relay a connection is for.
    var current: [ConnectionID?]
    var owner: [ConnectionID: Int] = [:]
    var nextConnection = 0
    /// This run's live ownership of its delivery leases (see `DeliveryOwner`).
    let deliveryOwner: DeliveryOwner?

    init(
        account: SoftchatAccount, endpoints: [RelayEndpoint], identity: SoftchatIdentity?, policy: ManagedTransportPolicy,
        shared: ManagedTransport.Shared
    ) {
        self.account = account
        self.endpoints = endpoints
        self.policy = policy
        self.shared = shared
        current = Array(repeating: nil, count: endpoints.count)
        let leasePrefix = "\(getpid())-\(Self.unixMilliseconds())"
        // This run's hold on its leases: when the process dies, the next run (or another process)
        // claims the work at once. Without it (no lock file could be made), leases end with time.
        deliveryOwner = try? account.delivery.registerOwner(id: leasePrefix)
        var config = SyncEngineConfiguration(relayURLs: endpoints.map(\.url), identity: identity, leasePrefix: leasePrefix)
        config.session = policy.session
        // Reconnect jitter drawn per client run unless the policy fixes a seed (a replay): with
        // one seed for every client, all clients of a relay that went down came back together.
        if config.session.jitterSeed == 0 { config.session.jitterSeed = Int64.random(in: Int64.min...Int64.max) }
        config.eventsBatching = policy.eventsBatch
        config.acknowledgementTimeoutSeconds = policy.acknowledgementTimeoutSeconds
        config.claimBatch = policy.claimBatch
        config.retryDelaySeconds = policy.retryDelaySeconds
        config.fetchRelayInformation = policy.fetchRelayInformation
        config.paging = policy.paging
        config.relayPaging = policy.relayPaging
        config.horizons = policy.horizons
        config.negentropy = policy.negentropy
        config.leaseSeconds = account.policy.leaseSeconds
        config.keepaliveIntervalMilliseconds = policy.keepaliveIntervalMilliseconds
        config.readDeadlineMilliseconds = policy.readDeadlineMilliseconds
        config.publishes = policy.publishes
        config.authenticatesOverCleartext = policy.authenticatesOverCleartext
        engine = SyncEngine(configuration: config, now: Self.now())
        shared.state.withLock { s in
            s.relays = endpoints.map { ManagedRelayStatus(relayURL: $0.url, state: .connecting, statistics: RelayStatistics()) }
        }
    }

    static func unixMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    static func now() -> EngineTime {
        EngineTime(monotonicMilliseconds: IODriver.monotonicMilliseconds(), unixSeconds: Int64(time(nil)))
    }

    // MARK: IODriverHandler

    func driver(_ driver: IODriver, handle event: IOEvent) {
        guard let relay = owner[event.connection] else { return }
        switch event {
        case .opened(let id):
            guard current[relay] == id else { return }
            engine.handle(.opened(relay: relay), now: Self.now())
        case .text(let id, let text):
            guard current[relay] == id else { return }
            engine.handle(.received(relay: relay, text: text), now: Self.now())
        case .oversized(let id, let head, let bytes):
            guard current[relay] == id else { return }
            engine.handle(.oversized(relay: relay, head: head, bytes: bytes), now: Self.now())
        case .pong(let id):
            guard current[relay] == id else { return }
            engine.handle(.alive(relay: relay), now: Self.now())
        case .bytesArrived(let id):
            guard current[relay] == id else { return }
            engine.handle(.bytesArrived(relay: relay), now: Self.now())
        case .written(let id, let token):
            guard current[relay] == id else { return }
            engine.handle(.written(relay: relay, token: token), now: Self.now())
        case .information(let id, let information):
            owner[id] = nil
            engine.handle(.relayInformation(relay: relay, information.map(Self.limits)), now: Self.now())
        case .closed(let id, let error):
            owner[id] = nil
            guard current[relay] == id else { return }
            current[relay] = nil
            engine.handle(.lost(relay: relay, reason: error.description), now: Self.now())
        }
        // Actions run at the end of the driver's round (`driverService`), so the events of one
        // round are committed together; sooner only when many wait.
        if engine.wantsFlush { pump() }
    }

    func driverService(_ driver: IODriver, now: Int64) -> Int64? {
        let commands: [ManagedTransport.Shared.Command] = shared.state.withLock { s in
            defer { s.commands.removeAll() }
            return s.commands
        }
        let time = Self.now()
        for command in commands {
            switch command {
            case .stop:
                engine.handle(.stop, now: time)
            case .workAvailable:
                engine.handle(.workAvailable, now: time)
            case .drop(let url):
                for r in endpoints.indices where url == nil || endpoints[r].url == url {
                    engine.handle(.drop(relay: r), now: time)
                }
            }
        }
        if let due = engine.pollTimeout(), due <= now { engine.handle(.timer, now: time) }
        pump()
        return engine.pollTimeout()
    }

    static func limits(_ info: RelayInformation) -> RelayLimits { RelayLimits(information: info) }

    // MARK: Actions

    func pump() {
        guard let driver else { return }
        while let action = engine.pollAction() {
            switch action {
            case .fetchInformation(let r, _):
                nextConnection += 1
                let id = ConnectionID(nextConnection)
                owner[id] = r
                driver.open(id, endpoint: endpoints[r], options: policy.connection, purpose: .relayInformation)
            case .open(let r, _):
                if let old = current[r] {
                    driver.close(old)
                    owner[old] = nil
                }
                nextConnection += 1
                let id = ConnectionID(nextConnection)
                owner[id] = r
                current[r] = id
                driver.open(id, endpoint: endpoints[r], options: policy.connection)
            case .write(let r, let text, let token):
                if let id = current[r] { driver.send(id, text: text, token: token) }
            case .ping(let r):
                if let id = current[r] { driver.ping(id) }
            case .close(let r):
                if let id = current[r] {
                    driver.close(id)
                    owner[id] = nil
                    current[r] = nil
                }
            case .account(let request):
                engine.handle(.account(execute(request)), now: Self.now())
            case .report(let event):
                report(event)
            case .stopped:
                for r in endpoints.indices { if let id = current[r] { driver.close(id) } }
                publishStatuses()
                shared.stateContinuation.finish()
                shared.eventContinuation.finish()
                shared.state.withLock { $0.stopped = true }
                shared.finished.signal()
                return
            }
        }
        publishStatuses()
    }

    /// Runs one account request as one transaction.
    func execute(_ request: AccountRequest) -> AccountReply {
        let now = Int64(time(nil))
        do throws(SoftchatError) {
            switch request {
            case .loadSubscriptions(let urls):
                var out: [String: [EngineSubscription]] = [:]
                for url in urls {
                    var entries: [EngineSubscription] = []
                    for entry in try account.subscriptions(for: url) {
                        let stored = try account.syncState(relayURL: url, subscriptionID: entry.subscriptionID)
                        entries.append(
                            EngineSubscription(
                                subscriptionID: entry.subscriptionID, filtersJSON: entry.filtersJSON,
                                storedFiltersJSON: stored?.filtersJSON, storedStateJSON: stored?.stateJSON,
                                cursor: try account.syncCursor(relayURL: url, subscriptionID: entry.subscriptionID)))
                    }
                    out[url] = entries
                }
                return .subscriptions(out)
            case .claim(let relayURL, let leaseID, let max):
                if let result = try account.delivery.claim(leaseID: leaseID, relayURL: relayURL, now: now, max: max, owner: deliveryOwner) {
                    return .claimed(result)
                }
                return try account.delivery.heldUntil(relayURL: relayURL, now: now).map(AccountReply.heldUntil) ?? .claimed(nil)
            case .renew(let claim):
                return .renewed(try account.delivery.renew(claim, now: now))
            case .markWritten(let claim, let intentIDs):
                try account.delivery.markSocketWritten(claim, intentIDs: intentIDs)
                return .done
            case .applyResults(let claim, let results):
                try account.delivery.applyResults(claim, results: results)
                return .done
            case .release(let claim):
                try account.delivery.release(claim)
                return .done
            case .commit(let events, let states, let receivedAt):
                let outcome = try account.incoming.commit(events, syncStates: states, receivedAt: receivedAt)
                return .committed(outcome.receipt.ingestionResult)
            case .loadNegentropySupport(let urls):
                return .negentropySupport(try account.negentropySupport(relayURLs: urls))
            case .reconciliationItems(_, _, let filtersJSON):
                var filters: [RelayFilter] = []
                for text in filtersJSON { filters.append(try RelayFilter.fromJSON(text)) }
                return .reconciliationItems(try account.reconciliationItems(matching: filters))
            case .recordNegentropySupport(let record):
                try account.recordNegentropySupport(record)
                return .done
            case .group(let requests):
                // One transaction: each member a savepoint answered as if alone, the whole
                // committed before any reply reaches the engine (which reports only after).
                return .group(try account.writeGroup("engine writes") { requests.map(execute) })
            }
        } catch {
            if case .group(let requests) = request { return .group(requests.map { _ in .failed(error) }) }
            return .failed(error)
        }
    }

    // MARK: Reporting

    /// Publishes the engine's report as it is: one vocabulary from the engine to the host.
    func report(_ event: ManagedTransportEvent) {
        switch event {
        case .relayState:
            publishStatuses()
        case .state(let state):
            let changed: Bool = shared.state.withLock { s in
                guard s.overall != state, !s.stopped else { return false }
                s.overall = state
                return true
            }
            guard changed else { return }
            shared.stateContinuation.yield(state)
        default:
            break
        }
        publish(event)
    }

    func publish(_ event: ManagedTransportEvent) {
        shared.eventContinuation.yield(event)
        policy.observer?(event)
    }

    func publishStatuses() {
        let statuses = engine.relayStates.map { ManagedRelayStatus(relayURL: $0.url, state: $0.state, statistics: $0.statistics) }
        shared.state.withLock { $0.relays = statuses }
    }
}
