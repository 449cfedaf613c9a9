import Foundation
import SoftchatClient
import SoftchatCore
import SoftchatStorage
import SoftchatSync
import SoftchatTestRelay
import Synchronization
import Testing

@testable import SoftchatTransport

/// Waits up to `seconds` for `condition`, polling every 20 ms.
func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

final class Scratch {
    let dir = NSTemporaryDirectory() + "softchat-transport-" + UUID().uuidString
    init() { try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
    func account(_ name: String) throws -> SoftchatAccount { try SoftchatAccount.open(path: "\(dir)/\(name).db") }
    deinit { try? FileManager.default.removeItem(atPath: dir) }
}

/// Chat messages written just now, one second apart, as an app sends them (events dated far in
/// the past that reach a relay late are a sync horizon's business: see SyncEngineTests).
func chatEvents(_ identity: SoftchatIdentity, to recipient: String, count: Int, base: Int64? = nil) throws -> [VerifiedEvent] {
    let base = base ?? Int64(time(nil)) - Int64(count)
    return try (0..<count).map { i in
        try identity.sign(UnsignedEvent(createdAt: base + Int64(i), kind: 14, tags: [["p", recipient]], content: "message \(i)"))
    }
}

func quickPolicy(_ mode: EventsBatching = .auto) -> ManagedTransportPolicy {
    var p = ManagedTransportPolicy()
    p.eventsBatch = mode
    p.session.reconnectBaseDelaySeconds = 1
    p.session.jitterSeed = 3
    p.connection.connectTimeoutMilliseconds = 2000
    return p
}

@Suite struct ManagedTransportTests {
    @Test(arguments: [EventsBatching.auto, .never])
    func publishedIntentsAreAcceptedOnceAndSyncedAcrossAConnectionDrop(mode: EventsBatching) throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let bob = SoftchatIdentity.generate()
        let sender = try scratch.account("alice")
        let receiver = try scratch.account("bob")
        defer {
            sender.close()
            receiver.close()
        }
        let events = try chatEvents(alice, to: bob.publicKeyHex, count: 300)
        for (k, chunk) in stride(from: 0, to: 300, by: 100).enumerated() {
            _ = try sender.outgoing.enqueueSigned(operationID: "op\(k)", events: Array(events[chunk..<chunk + 100]), relayURLs: [relay.url], now: 1)
        }
        try receiver.setSubscription(id: "chat", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"]}"])
        let publishing = try sender.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy(mode))
        let log = EventLog()
        var receiverPolicy = quickPolicy(mode)
        receiverPolicy.observer = { event in
            switch event {
            case .ingested(_, let r): log.add("ingested \(r.accepted.count)/\(r.alreadyPresent.count)")
            case .synced(_, let s, let n, _): log.add("synced \(s) \(n)")
            case .state(let s): log.add("\(s)")
            case .notice(_, let t): log.add("notice \(t)")
            default: break
            }
        }
        let syncing = try receiver.startManagedTransport(relayURL: relay.url, identity: bob, policy: receiverPolicy)
        #expect(try eventually { (try sender.delivery.stateCounts()[.accepted] ?? 0) >= 50 })
        relay.dropConnections()
        let chat = try RelayFilter.fromJSON("{\"kinds\":[14]}")
        let done = try eventually(30) {
            try sender.delivery.stateCounts()[.accepted] == 300 && receiver.events(matching: [chat], now: 2_000_000_000).count == 300
        }
        publishing.stop()
        syncing.stop()
        let counts = try sender.delivery.stateCounts()
        let received = try receiver.events(matching: [chat], now: 2_000_000_000).count
        #expect(done, "accepted \(counts), received \(received), relay \(relay.storedEventCount), \(log.lines)")
        #expect(relay.storedEventCount == 300)
        #expect(try sender.delivery.stateCounts()[.accepted] == 300)
        #expect(Set(try receiver.events(matching: [chat], now: 2_000_000_000).map(\.id)) == Set(events.map(\.id)))
        #expect(try sender.check(now: 10).ok)
        #expect(try receiver.check(now: 10).ok)
    }

    @Test func stopReleasesLeasesAndEndsTheStateStream() async throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let account = try scratch.account("alice")
        defer { account.close() }
        let transport = try account.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy())
        #expect(eventually { transport.state == .ready })
        await transport.stop()
        var seen: [String] = []
        for await state in transport.states { seen.append(state.description) }
        #expect(seen.first == "connecting")
        #expect(seen.contains("ready"))
        #expect(seen.last?.hasPrefix("stopped") == true)
        #expect(try account.check(now: Int64(Date().timeIntervalSince1970)).liveLeases == 0)
    }

    @Test func nip42IsAnsweredWithTheIdentityForPublishingAndReading() throws {
        var options = TestRelayOptions()
        options.requireAuth = true
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let account = try scratch.account("alice")
        let reader = try scratch.account("reader")
        defer {
            account.close()
            reader.close()
        }
        let events = try chatEvents(alice, to: alice.publicKeyHex, count: 10)
        _ = try account.outgoing.enqueueSigned(operationID: "op", events: events, relayURLs: [relay.url], now: 1)
        let transport = try account.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy())
        defer { transport.stop() }
        #expect(try eventually { try account.delivery.stateCounts()[.accepted] == 10 })
        try reader.setSubscription(id: "mine", filtersJSON: ["{\"authors\":[\"\(alice.publicKeyHex)\"]}"])
        let readerTransport = try reader.startManagedTransport(relayURL: relay.url, identity: SoftchatIdentity.generate(), policy: quickPolicy())
        defer { readerTransport.stop() }
        let all = try RelayFilter.fromJSON("{\"kinds\":[14]}")
        #expect(try eventually { try reader.events(matching: [all], now: 2_000_000_000).count == 10 })
    }

    @Test func withoutAnIdentityAnAuthRequiringRelayLeavesIntentsRetryableNotAccepted() throws {
        var options = TestRelayOptions()
        options.requireAuth = true
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let account = try scratch.account("alice")
        defer { account.close() }
        _ = try account.outgoing.enqueueSigned(
            operationID: "op", events: try chatEvents(alice, to: alice.publicKeyHex, count: 3),
            relayURLs: [relay.url], now: 1)
        let transport = try account.startManagedTransport(relayURL: relay.url, identity: nil, policy: quickPolicy())
        #expect(try eventually(10) { try account.delivery.stateCounts()[.retryable] == 3 })
        usleep(1_500_000)
        transport.stop()
        let counts = try account.delivery.stateCounts()
        #expect(counts[.accepted] == nil)
        // The pause between retries keeps a refusing relay from exhausting the budget at once.
        #expect(counts[.rejected] == nil)
        #expect(relay.storedEventCount == 0)
    }

    @Test func backfillPagesPastARelaysSilentCapOnResults() throws {
        var options = TestRelayOptions()
        options.reqCap = 40
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let sender = try scratch.account("alice")
        let receiver = try scratch.account("bob")
        defer {
            sender.close()
            receiver.close()
        }
        _ = try sender.outgoing.enqueueSigned(
            operationID: "op", events: try chatEvents(alice, to: alice.publicKeyHex, count: 130),
            relayURLs: [relay.url], now: 1)
        let publishing = try sender.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy())
        #expect(try eventually { try sender.delivery.stateCounts()[.accepted] == 130 })
        publishing.stop()
        try receiver.setSubscription(id: "all", filtersJSON: ["{\"kinds\":[14]}"])
        let synced = SyncedFlag()
        var policy = quickPolicy()
        policy.observer = { if case .synced = $0 { synced.set() } }
        let syncing = try receiver.startManagedTransport(relayURL: relay.url, identity: nil, policy: policy)
        defer { syncing.stop() }
        #expect(eventually { synced.value })
        #expect(try receiver.events(matching: [try RelayFilter.fromJSON("{\"kinds\":[14]}")], now: 2_000_000_000).count == 130)
    }

    /// A run of one `created_at` longer than the relay's cap cannot be paged past: the window is
    /// synced except in that second, and the engine's outcome says so. The managed transport
    /// dropped `incompleteSeconds` and reported a plain `synced`; the report now carries the
    /// engine's outcome.
    @Test func aSyncedReportNamesTheSecondsPagingCouldNotReachPast() throws {
        var options = TestRelayOptions()
        options.reqCap = 5
        options.negentropy = .notice
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let sender = try scratch.account("alice")
        let receiver = try scratch.account("bob")
        defer {
            sender.close()
            receiver.close()
        }
        let second: Int64 = 1_700_000_000
        let crowded = try (0..<12).map { try alice.sign(UnsignedEvent(createdAt: second, kind: 1, content: "same second \($0)")) }
        let spread = try (0..<8).map { try alice.sign(UnsignedEvent(createdAt: second - 100 + Int64($0), kind: 1, content: "spread \($0)")) }
        _ = try sender.outgoing.enqueueSigned(operationID: "op", events: crowded + spread, relayURLs: [relay.url], now: 1)
        let publishing = try sender.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy())
        #expect(try eventually { try sender.delivery.stateCounts()[.accepted] == 20 })
        publishing.stop()
        try receiver.setSubscription(id: "notes", filtersJSON: [#"{"kinds":[1]}"#])
        let outcomes = Mutex<[SyncOutcome]>([])
        var policy = quickPolicy()
        policy.observer = { event in
            if case .synced(_, "notes", _, let outcome) = event { outcomes.withLock { $0.append(outcome) } }
        }
        let syncing = try receiver.startManagedTransport(relayURL: relay.url, identity: nil, policy: policy)
        defer { syncing.stop() }
        #expect(eventually { !outcomes.withLock { $0 }.isEmpty })
        let first = try #require(outcomes.withLock { $0.first })
        #expect(first.method == .paging)
        #expect(first.incompleteSeconds == [second])
    }

    @Test func theManagedTransportsAcknowledgementDeadlineIsTheContractsDefault() {
        #expect(ManagedTransportPolicy().acknowledgementTimeoutSeconds == Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value))
    }

    @Test func relayInformationIsFetchedWithTheNostrJSONAcceptHeader() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let info = try RelayInformation.fetch(try RelayEndpoint(relay.url))
        #expect(info.name == "softchat test relay")
        #expect(info.supportedNIPs.contains(42))
        #expect(info.maxMessageLength == RelayWireContract.maxFrameBytes.value)
        #expect(info.acceptsEventsBatch)
    }

    @Test func aRelayThatIsDownLeadsToBackoffNotAFailure() throws {
        let listener = try TCPListener()
        let port = listener.port
        listener.close()
        let scratch = Scratch()
        let account = try scratch.account("alice")
        defer { account.close() }
        var policy = quickPolicy()
        policy.fetchRelayInformation = false
        let transport = try account.startManagedTransport(relayURL: "ws://127.0.0.1:\(port)", identity: nil, policy: policy)
        #expect(eventually(5) { if case .backingOff = transport.state { true } else { false } })
        transport.stop()
        if case .stopped = transport.state {} else { Issue.record("not stopped: \(transport.state)") }
    }
}

final class SyncedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() {
        lock.lock()
        flag = true
        lock.unlock()
    }
    var value: Bool {
        lock.lock()
        defer { lock.unlock() }
        return flag
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []
    func add(_ s: String) {
        lock.lock()
        entries.append(s)
        lock.unlock()
    }
    var lines: String {
        lock.lock()
        defer { lock.unlock() }
        return entries.suffix(40).joined(separator: " | ")
    }
}

/// Erase means erase: the managed transport answers NIP-42 with the same identity object the app
/// holds, so once the app erases it no new AUTH is signed, on this connection or the next.
@Suite struct IdentityEraseTests {
    @Test func anErasedIdentitySignsNoAuthenticationForARunningTransport() throws {
        var options = TestRelayOptions()
        options.requireAuth = true
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let account = try scratch.account("alice")
        defer { account.close() }
        _ = try account.outgoing.enqueueSigned(
            operationID: "before", events: try chatEvents(alice, to: alice.publicKeyHex, count: 3), relayURLs: [relay.url], now: 1)
        let transport = try account.startManagedTransport(relayURL: relay.url, identity: alice, policy: quickPolicy())
        defer { transport.stop() }
        #expect(try eventually { try account.delivery.stateCounts()[.accepted] == 3 })

        alice.erase()
        #expect(alice.isErased)
        #expect(throws: SoftchatError.self) { _ = try alice.sign(UnsignedEvent(createdAt: 1, kind: 1, tags: [], content: "x")) }
        // A new connection brings a new challenge; nothing may answer it with the erased key.
        let challengesBefore = relay.issuedChallenges.count
        transport.dropConnection(relayURL: relay.url)
        #expect(eventually(10) { relay.issuedChallenges.count > challengesBefore })
        let signer = SoftchatIdentity.generate()  // events signed elsewhere, so only AUTH needs alice
        _ = try account.outgoing.enqueueSigned(
            operationID: "after", events: try chatEvents(signer, to: signer.publicKeyHex, count: 2), relayURLs: [relay.url], now: 2)
        usleep(2_000_000)
        #expect(relay.storedEventCount == 3, "the relay stored events after the identity was erased: it was authenticated")
        #expect(try account.delivery.stateCounts()[.accepted] == 3)
    }
}
