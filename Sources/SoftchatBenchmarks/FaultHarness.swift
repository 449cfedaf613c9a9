import SoftchatClient
import SoftchatCore
import SoftchatFaultProxy
import SoftchatStorage
import SoftchatSync
import SoftchatTestRelay
import SoftchatTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev faults`: end-to-end runs of two managed transports through fault proxies, each
/// checked for what a user would notice — a message lost, a message rejected that the relay
/// accepted, an intent that never settles, a lease left held, a message held twice.
///
/// One run: a TestRelay with LocalRelay's 500-event cap behind two `FaultProxy`s (one for the
/// sender, one for the receiver, so each client's connection ordinals — and with them the
/// faults — follow from the seed); the sender publishes part of the events before the
/// receiver starts (its first sync pages past the cap under faults) and the rest in batches
/// while the receiver runs; the receiver keeps ONE subscription on ONE account file for the
/// whole run (restarted once like a process). Then the faults stop, both must converge
/// within the deadline, stay so for a quiet period, stop, and the checks run.
public enum FaultHarness {
    /// Runs one seeded run; `progress` hears what phase it is in.
    public static func run(_ options: FaultRunOptions, progress: (@Sendable (String) -> Void)? = nil) -> FaultRunResult {
        var result = FaultRunResult(seed: options.seed, events: options.events)
        let started = monotonicSeconds()
        do {
            try execute(options, into: &result, progress: progress)
        } catch {
            result.problems.append("harness: \(error)")
        }
        result.seconds = monotonicSeconds() - started
        return result
    }

    /// A deterministic identity per run and role.
    static func identity(_ role: String, seed: UInt64) throws(SoftchatError) -> SoftchatIdentity {
        try SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat-dev faults \(role) \(seed)".utf8))))
    }

    static func policy(_ options: FaultRunOptions, publishes: Bool, observer: @escaping @Sendable (ManagedTransportEvent) -> Void)
        -> ManagedTransportPolicy
    {
        var p = ManagedTransportPolicy()
        p.keepaliveIntervalMilliseconds = options.keepaliveIntervalMilliseconds
        p.readDeadlineMilliseconds = options.readDeadlineMilliseconds
        p.acknowledgementTimeoutSeconds = options.acknowledgementTimeoutSeconds
        p.retryDelaySeconds = 1
        // Cuts come every few seconds: with the production schedule the backoff would climb to
        // minutes. The schedule itself is tested elsewhere.
        p.session.reconnectBaseDelaySeconds = 1
        p.session.reconnectMaxDelaySeconds = 2
        p.session.reconnectResetAfterSeconds = 2
        p.session.jitterSeed = Int64(bitPattern: options.seed)
        p.connection.connectTimeoutMilliseconds = 2000
        p.publishes = publishes
        p.observer = observer
        return p
    }

    static func execute(
        _ options: FaultRunOptions, into result: inout FaultRunResult,
        progress: (@Sendable (String) -> Void)?
    ) throws {
        let say = progress ?? { _ in }
        let seed = options.seed
        var relayOptions = TestRelayOptions()
        relayOptions.reqCap = 500
        let relay = try TestRelay(options: relayOptions)
        defer { relay.stop() }
        var senderPlan = options.plan
        var receiverPlan = options.plan
        senderPlan.seed = seed &* 2 &+ 1
        receiverPlan.seed = seed &* 2 &+ 2
        let senderProxy = try FaultProxy(upstream: relay.url, plan: senderPlan)
        defer { senderProxy.stop() }
        let receiverProxy = try FaultProxy(upstream: relay.url, plan: receiverPlan)
        defer { receiverProxy.stop() }

        let alice = try identity("sender", seed: seed)
        let bob = try identity("receiver", seed: seed)
        let base = "\(options.directory)/faults-\(seed)-\(getpid())"
        for suffix in ["sender.db", "receiver.db"] { removeDatabase("\(base)-\(suffix)") }
        defer { for suffix in ["sender.db", "receiver.db"] { removeDatabase("\(base)-\(suffix)") } }
        let sender = try SoftchatAccount.open(path: "\(base)-sender.db")
        defer { sender.close() }
        let receiverPath = "\(base)-receiver.db"
        var receiver = try SoftchatAccount.open(path: receiverPath)
        defer { receiver.close() }
        try receiver.setSubscription(id: "chat", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"]}"])

        let counters = RunCounters()
        let observe: @Sendable (ManagedTransportEvent) -> Void = { event in
            if case .notice(_, let text) = event, text.contains("no answer to a keepalive ping") { counters.keepaliveTimeout() }
        }
        let senderPolicy = policy(options, publishes: true, observer: observe)
        let receiverPolicy = policy(options, publishes: false, observer: observe)

        // Phase 1: the preloaded part, through the sender's proxy, before the receiver exists.
        let preload = options.preloadCount
        say("seed \(seed): publishing \(preload) events before the receiver starts")
        let publishing = try sender.startManagedTransport(relayURL: senderProxy.url, identity: alice, policy: senderPolicy)
        var stopped = false
        defer { if !stopped { publishing.stop() } }
        var intents: [String] = []
        var published: [String] = []
        let now = Int64(time(nil))
        var chunkStart = 0
        while chunkStart < preload {
            let end = min(preload, chunkStart + 250)
            // About four a second, the newest now: a backlog a phone finds on opening.
            let events = try (chunkStart..<end).map { i in
                try alice.sign(
                    UnsignedEvent(
                        createdAt: now - Int64((preload - i) / 4), kind: 14, tags: [["p", bob.publicKeyHex]],
                        content: "fault run \(seed) message \(i)"))
            }
            intents += try sender.outgoing.enqueueSigned(
                operationID: "preload-\(chunkStart)", events: events,
                relayURLs: [senderProxy.url], now: now)
            published += events.map(\.id)
            chunkStart = end
        }
        let preloadIDs = Set(published)
        if !waitUntil(options.deadlineSeconds, { relay.storedEventIDs.isSuperset(of: preloadIDs) }) {
            result.problems.append("the preloaded events were not all on the relay within \(Int(options.deadlineSeconds)) s")
        }

        // Phase 2: the receiver syncs the backlog while the rest is published, live.
        say("seed \(seed): receiver starts; publishing \(options.events - preload) more in batches")
        var syncing = try receiver.startManagedTransport(relayURL: receiverProxy.url, identity: bob, policy: receiverPolicy)
        var syncingStopped = false
        defer { if !syncingStopped { syncing.stop() } }
        var receiverReconnects = 0
        let restartAt = preload + (options.events - preload) / 2
        var next = preload
        var restarted = !options.restartReceiver
        while next < options.events {
            if !restarted && next >= restartAt {
                // A process restart: the same account file, the same subscription.
                say("seed \(seed): restarting the receiver")
                receiverReconnects += syncing.relays.reduce(0) { $0 + $1.reconnects }
                syncing.stop()
                receiver.close()
                receiver = try SoftchatAccount.open(path: receiverPath)
                syncing = try receiver.startManagedTransport(relayURL: receiverProxy.url, identity: bob, policy: receiverPolicy)
                restarted = true
            }
            let end = min(options.events, next + max(1, options.batchSize))
            let t = Int64(time(nil))
            let events = try (next..<end).map { i in
                try alice.sign(UnsignedEvent(createdAt: t, kind: 14, tags: [["p", bob.publicKeyHex]], content: "fault run \(seed) message \(i)"))
            }
            intents += try sender.outgoing.enqueueSigned(operationID: "live-\(next)", events: events, relayURLs: [senderProxy.url], now: t)
            published += events.map(\.id)
            next = end
            usleep(UInt32(max(0, options.batchIntervalMilliseconds)) * 1000)
        }

        // Phase 3: no more faults; everything must settle.
        say("seed \(seed): faults off; waiting for convergence")
        senderProxy.injectsFaults = false
        receiverProxy.injectsFaults = false
        let chat = try RelayFilter.fromJSON("{\"kinds\":[14]}")
        let all = Set(published)
        func converged() -> Bool {
            guard let counts = try? sender.delivery.stateCounts(intentIDs: intents),
                (counts[.pending] ?? 0) + (counts[.inFlight] ?? 0) + (counts[.retryable] ?? 0) == 0
            else { return false }
            let stored = relay.storedEventIDs
            guard let held = try? receiver.events(matching: [chat], now: Int64(time(nil)) + 86_400) else { return false }
            return Set(held.map(\.id)).isSuperset(of: stored.intersection(all))
        }
        result.timedOut = !waitUntil(options.deadlineSeconds, converged, every: 250_000)
        if !result.timedOut && options.quietSeconds > 0 { usleep(UInt32(options.quietSeconds * 1_000_000)) }

        receiverReconnects += syncing.relays.reduce(0) { $0 + $1.reconnects }
        let senderReconnects = publishing.relays.reduce(0) { $0 + $1.reconnects }
        publishing.stop()
        stopped = true
        syncing.stop()
        syncingStopped = true

        // The checks, on the accounts' own records.
        let stored = relay.storedEventIDs.intersection(all)
        let held = try receiver.events(matching: [chat], now: Int64(time(nil)) + 86_400).map(\.id)
        let heldSet = Set(held)
        let counts = try sender.delivery.stateCounts(intentIDs: intents)
        let total = try sender.delivery.stateCounts()
        result.faults = senderProxy.faults + receiverProxy.faults
        result.reconnects = senderReconnects + receiverReconnects
        result.keepaliveTimeouts = counters.keepaliveTimeouts
        result.relayStored = stored.count
        result.lost = stored.subtracting(heldSet).count
        result.receiverHeld = heldSet.count
        result.receiverDuplicates = held.count - heldSet.count
        result.rejected = total[.rejected] ?? 0
        result.notTerminal = (counts[.pending] ?? 0) + (counts[.inFlight] ?? 0) + (counts[.retryable] ?? 0)
        result.accepted = counts[.accepted] ?? 0
        result.acceptedTotal = total[.accepted] ?? 0
        if intents.count != options.events { result.problems.append("\(intents.count) intents for \(options.events) events") }
        if heldSet.count > all.count || !heldSet.isSubset(of: all) { result.problems.append("the receiver holds events nobody sent") }
        let checkedAt = Int64(time(nil))
        for (name, account) in [("sender", sender), ("receiver", receiver)] {
            let report = try account.check(now: checkedAt)
            result.liveLeases += report.liveLeases
            result.problems += report.problems.map { "\(name) check: \($0)" }
        }
        say("seed \(seed): \(result.passed ? "pass" : "FAIL")")
    }

    /// Polls `condition` every `every` µs until it holds or `seconds` pass.
    static func waitUntil(_ seconds: Double, _ condition: () -> Bool, every: UInt32 = 100_000) -> Bool {
        let deadline = monotonicSeconds() + seconds
        while monotonicSeconds() < deadline {
            if condition() { return true }
            usleep(every)
        }
        return condition()
    }

    static func removeDatabase(_ path: String) {
        for suffix in ["", "-wal", "-shm", ".noise-key"] { unlink(path + suffix) }
    }
}

/// Counters the transports' observers bump on their I/O threads.
final class RunCounters: Sendable {
    private let timeouts = Mutex(0)

    func keepaliveTimeout() { timeouts.withLock { $0 += 1 } }
    var keepaliveTimeouts: Int { timeouts.withLock { $0 } }
}
