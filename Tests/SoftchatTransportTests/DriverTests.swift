import Foundation
import SoftchatClient
import SoftchatCore
import SoftchatSync
import SoftchatTestRelay
import Testing

@testable import SoftchatTransport

// MARK: Helpers: a handler that records events and runs the test's actions on the driver thread

/// An `IODriverHandler` for tests: records every event, and runs closures the test thread
/// hands it on the driver thread (through `wake`). The test thread waits for conditions on
/// the recorded events with a deadline (a condition variable, no sleeps).
final class DriverProbe: IODriverHandler, @unchecked Sendable {
    // @unchecked: `condition` guards `log`, `actions` and `serviceCalls`.
    private let condition = NSCondition()
    private var log: [IOEvent] = []
    private var actions: [@Sendable (IODriver) -> Void] = []
    private var serviceCalls = 0

    func driver(_ driver: IODriver, handle event: IOEvent) {
        condition.lock()
        log.append(event)
        condition.broadcast()
        condition.unlock()
    }

    func driverService(_ driver: IODriver, now: Int64) -> Int64? {
        condition.lock()
        let todo = actions
        actions = []
        serviceCalls += 1
        condition.unlock()
        for action in todo { action(driver) }
        return nil
    }

    /// Runs `action` on the driver thread soon.
    func run(on driver: IODriver, _ action: @escaping @Sendable (IODriver) -> Void) {
        condition.lock()
        actions.append(action)
        condition.unlock()
        driver.wake()
    }

    var events: [IOEvent] {
        condition.lock()
        defer { condition.unlock() }
        return log
    }

    /// Waits up to `seconds` for `predicate` over the events so far; its final value.
    @discardableResult
    func wait(_ seconds: Double = 8, until predicate: ([IOEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(log) {
            if !condition.wait(until: deadline) { return predicate(log) }
        }
        return true
    }
}

extension Array where Element == IOEvent {
    func opened(_ id: ConnectionID) -> Bool {
        contains { if case .opened(id) = $0 { true } else { false } }
    }
    func texts(_ id: ConnectionID) -> [String] {
        compactMap { if case .text(id, let t) = $0 { t } else { nil } }
    }
    func oversized(_ id: ConnectionID) -> [(head: String, bytes: Int)] {
        compactMap { if case .oversized(id, let head, let bytes) = $0 { (head, bytes) } else { nil } }
    }
    func written(_ id: ConnectionID) -> [Int] {
        compactMap { if case .written(id, let token) = $0 { token } else { nil } }
    }
    func pongs(_ id: ConnectionID) -> Int {
        filter { if case .pong(id) = $0 { true } else { false } }.count
    }
    func closed(_ id: ConnectionID) -> TransportError? {
        lazy.compactMap { if case .closed(id, let e) = $0 { e } else { nil } }.first
    }
    func closedCount(_ id: ConnectionID) -> Int {
        filter { if case .closed(id, _) = $0 { true } else { false } }.count
    }
    /// nil: no `.information` yet; `.some(nil)`: finished without a document.
    func information(_ id: ConnectionID) -> RelayInformation?? {
        for case .information(id, let info) in self { return .some(info) }
        return nil
    }
    func about(_ id: ConnectionID) -> [IOEvent] { filter { $0.connection == id } }
}

/// A started driver with a probe; stopped when the test ends.
final class DriverFixture: @unchecked Sendable {
    let probe = DriverProbe()
    let driver: IODriver

    init() {
        driver = IODriver(handler: probe, name: "softchat.io.test")
        driver.start()
    }

    deinit { driver.stop() }

    func open(
        _ id: Int, _ url: String, options: ConnectionOptions = ConnectionOptions(connectTimeoutMilliseconds: 5000),
        purpose: ConnectionPurpose = .webSocket
    ) throws {
        let endpoint = try RelayEndpoint(url)
        probe.run(on: driver) { $0.open(ConnectionID(id), endpoint: endpoint, options: options, purpose: purpose) }
    }

    func send(_ id: Int, _ text: String, token: Int) {
        probe.run(on: driver) { $0.send(ConnectionID(id), text: text, token: token) }
    }

    /// Opens `id` and waits for `.opened` (recording an issue with the events otherwise).
    func openAndWait(
        _ id: Int, _ url: String, options: ConnectionOptions = ConnectionOptions(connectTimeoutMilliseconds: 5000),
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try open(id, url, options: options)
        let ok = probe.wait { $0.opened(ConnectionID(id)) || $0.closed(ConnectionID(id)) != nil }
        #expect(ok && probe.events.opened(ConnectionID(id)), "\(probe.events.about(ConnectionID(id)))", sourceLocation: sourceLocation)
    }
}

/// A REQ, an EVENT and a second REQ on an open connection: the relay's EOSE, OK, the live
/// EVENT and the second EOSE come back, and the three written tokens arrive in order.
func exerciseRelay(_ f: DriverFixture, _ id: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let c = ConnectionID(id)
    let event = try SoftchatIdentity.generate().sign(UnsignedEvent(createdAt: 1_764_000_000, kind: 1, tags: [], content: "driver \(id)"))
    f.send(id, #"["REQ","live",{"kinds":[1],"authors":["\#(event.pubkey)"]}]"#, token: 10)
    f.send(id, ClientRelayFrame.event(event).toJSON(), token: 11)
    f.send(id, #"["REQ","again",{"ids":["\#(event.id)"]}]"#, token: 12)
    #expect(f.probe.wait { $0.texts(c).count >= 5 || $0.closed(c) != nil }, "\(f.probe.events.about(c))", sourceLocation: sourceLocation)
    let texts = f.probe.events.texts(c)
    #expect(texts.first == #"["EOSE","live"]"#, sourceLocation: sourceLocation)
    #expect(texts.contains(#"["OK","\#(event.id)",true,""]"#), "\(texts)", sourceLocation: sourceLocation)
    #expect(texts.contains { $0.hasPrefix(#"["EVENT","live","#) && $0.contains(event.id) }, "\(texts)", sourceLocation: sourceLocation)
    #expect(texts.contains { $0.hasPrefix(#"["EVENT","again","#) && $0.contains(event.id) }, "\(texts)", sourceLocation: sourceLocation)
    #expect(texts.last == #"["EOSE","again"]"# || texts.contains(#"["EOSE","again"]"#), "\(texts)", sourceLocation: sourceLocation)
    #expect(f.probe.wait { $0.written(c).count >= 3 }, sourceLocation: sourceLocation)
    #expect(f.probe.events.written(c) == [10, 11, 12], sourceLocation: sourceLocation)
}

/// A 300 KB event each way: many TLS records or Noise messages, many reads, one message.
func exerciseLargeMessage(_ f: DriverFixture, _ id: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let c = ConnectionID(id)
    let content = String(repeating: "large message ", count: 22_000)
    let event = try SoftchatIdentity.generate().sign(UnsignedEvent(createdAt: 1_764_000_000, kind: 1, tags: [], content: content))
    let before = f.probe.events.texts(c).count
    f.send(id, ClientRelayFrame.event(event).toJSON(), token: 100)
    f.send(id, #"["REQ","large",{"ids":["\#(event.id)"]}]"#, token: 101)
    #expect(f.probe.wait { $0.texts(c).count >= before + 3 || $0.closed(c) != nil }, "\(f.probe.events.about(c))", sourceLocation: sourceLocation)
    let texts = Array(f.probe.events.texts(c).dropFirst(before))
    #expect(texts.first == #"["OK","\#(event.id)",true,""]"#, sourceLocation: sourceLocation)
    #expect(texts.contains { $0.hasPrefix(#"["EVENT","large","#) && $0.contains(content) }, sourceLocation: sourceLocation)
    #expect(f.probe.wait { $0.written(c).suffix(2) == [100, 101] }, sourceLocation: sourceLocation)
}

// MARK: Round trips against the embedded relay

@Suite struct DriverTests {
    @Test func wsRoundTripWithTokensInOrder() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.url)
        try exerciseRelay(f, 1)
        try exerciseLargeMessage(f, 1)
        #expect(f.driver.statistics.connectionsOpen == 1)
        #expect(f.driver.statistics.bytesWritten > 0 && f.driver.statistics.bytesRead > 0)
    }

    @Test func aHostNameIsResolvedOffTheDriverThread() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, "ws://localhost:\(relay.port)")
        try exerciseRelay(f, 1)
    }

    @Test func wssWithTheTestCARoundTrips() throws {
        let pki = try TLSTests.pki.get()
        let relay = try tlsRelay("valid")
        defer { relay.stop() }
        let f = DriverFixture()
        let options = ConnectionOptions(tls: TLSOptions(caFile: pki.caFile), connectTimeoutMilliseconds: 5000)
        try f.openAndWait(1, relay.url, options: options)
        try exerciseRelay(f, 1)
        try exerciseLargeMessage(f, 1)
    }

    @Test(arguments: [("wronghost", "mismatch"), ("selfsigned", "self-signed"), ("expired", "expired")])
    func wssRefusesABadCertificate(name: String, mentioning text: String) throws {
        let pki = try TLSTests.pki.get()
        let relay = try tlsRelay(name)
        defer { relay.stop() }
        let f = DriverFixture()
        try f.open(1, relay.url, options: ConnectionOptions(tls: TLSOptions(caFile: pki.caFile), connectTimeoutMilliseconds: 5000))
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        let error = f.probe.events.closed(ConnectionID(1))
        #expect(error?.kind == .certificate, "\(String(describing: error))")
        #expect(error?.message.contains(text) == true, "\(String(describing: error))")
        #expect(!f.probe.events.opened(ConnectionID(1)))
    }

    @Test func wssRefusesTheTestCAWithoutTrustingIt() throws {
        let relay = try tlsRelay("valid")
        defer { relay.stop() }
        let f = DriverFixture()
        try f.open(1, relay.url)
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.closed(ConnectionID(1))?.kind == .certificate)
    }

    @Test(arguments: [NoiseHandshakePattern.IK, .XX])
    func noiseRoundTrips(pattern: NoiseHandshakePattern) throws {
        let relay = try noiseRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.noiseURL(pattern: pattern))
        try exerciseRelay(f, 1)
        try exerciseLargeMessage(f, 1)
        #expect(relay.noiseFailures.isEmpty, "\(relay.noiseFailures)")
    }

    @Test func theNoiseStaticKeyFileIsTheBlockingPathsKey() throws {
        let scratch = Scratch()
        let keyFile = "\(scratch.dir)/client.noise-key"
        let relay = try noiseRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(
            1, relay.noiseURL(pattern: .IK),
            options: ConnectionOptions(connectTimeoutMilliseconds: 5000, noiseStaticKeyFile: keyFile))
        // The driver created the key file exactly as the blocking path would, and derives the
        // same key for this relay from it.
        let stored = try NoiseKeyPair.loadOrCreate(path: keyFile)
        let endpoint = try RelayEndpoint(relay.noiseURL(pattern: .IK))
        let again = try ConnectionOptions(noiseStaticKeyFile: keyFile).noiseStaticKey(for: endpoint)
        #expect(try stored.forRelay(host: endpoint.host, port: endpoint.port).publicKey == again.publicKey)
        try exerciseRelay(f, 1)
    }

    @Test(arguments: [NoiseHandshakePattern.IK, .XX])
    func noiseRekeysInStepWithTheRelay(pattern: NoiseHandshakePattern) throws {
        var options = TestRelayOptions()
        options.noise = TestRelayNoise(rekeyAfterMessages: 3)
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(
            1, relay.noiseURL(pattern: pattern),
            options: ConnectionOptions(connectTimeoutMilliseconds: 5000, noiseRekeyAfterMessages: 3))
        for k in 0..<50 { f.send(1, #"["REQ","s\#(k)",{"kinds":[7]}]"#, token: k) }
        #expect(f.probe.wait { $0.texts(ConnectionID(1)).count >= 50 || $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.texts(ConnectionID(1)) == (0..<50).map { #"["EOSE","s\#($0)"]"# })
        #expect(f.probe.events.written(ConnectionID(1)) == Array(0..<50))
        #expect(relay.noiseFailures.isEmpty, "\(relay.noiseFailures)")
    }

    /// Rekeying really happens: a client that rekeys every 3 messages against a relay on the
    /// default schedule is refused at its 4th transport message (the relay's bad MAC).
    @Test func aRekeyScheduleMismatchIsRefused() throws {
        let relay = try noiseRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(
            1, relay.noiseURL(pattern: .XX),
            options: ConnectionOptions(connectTimeoutMilliseconds: 5000, noiseRekeyAfterMessages: 3))
        for k in 0..<6 { f.send(1, #"["REQ","s\#(k)",{"kinds":[7]}]"#, token: k) }
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        // The relay records the failure as it closes: the client can see the close first.
        #expect(eventually(5) { relay.noiseFailures.contains { $0.contains("bad MAC") } }, "\(relay.noiseFailures)")
    }

    /// The blocking `NoiseStream` client rekeys on the same schedule (the shared code).
    @Test func theBlockingNoiseClientRekeysInStepToo() throws {
        var options = TestRelayOptions()
        options.noise = TestRelayNoise(rekeyAfterMessages: 3)
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let ws = try WebSocketClient.connect(
            try RelayEndpoint(relay.noiseURL(pattern: .IK)),
            options: ConnectionOptions(connectTimeoutMilliseconds: 3000, noiseRekeyAfterMessages: 3))
        defer { ws.close() }
        for k in 0..<50 {
            try ws.send(text: #"["REQ","s\#(k)",{"kinds":[7]}]"#)
            #expect(try ws.receive(timeoutMilliseconds: 3000) == .text(#"["EOSE","s\#(k)"]"#))
        }
    }

    @Test func pingBringsAPong() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.url)
        f.probe.run(on: f.driver) { $0.ping(ConnectionID(1)) }
        #expect(f.probe.wait { $0.pongs(ConnectionID(1)) == 1 })
    }

    @Test func relayInformationOverEveryStack() throws {
        let pki = try TLSTests.pki.get()
        let ws = try TestRelay()
        let wss = try tlsRelay("valid")
        let noise = try noiseRelay()
        defer {
            ws.stop()
            wss.stop()
            noise.stop()
        }
        let f = DriverFixture()
        try f.open(1, ws.url, purpose: .relayInformation)
        try f.open(
            2, wss.url, options: ConnectionOptions(tls: TLSOptions(caFile: pki.caFile), connectTimeoutMilliseconds: 5000),
            purpose: .relayInformation)
        try f.open(3, noise.noiseURL(pattern: .IK), purpose: .relayInformation)
        for id in 1...3 {
            let c = ConnectionID(id)
            #expect(f.probe.wait { $0.information(c) != nil }, "\(f.probe.events.about(c))")
            let info = f.probe.events.information(c) ?? nil
            #expect(info?.name == "softchat test relay")
            #expect(info?.supportedNIPs.contains(11) == true)
            #expect(info?.acceptsEventsBatch == true)
            #expect(f.probe.events.closed(c) == nil)
        }
        // The ids are free again.
        #expect(eventually(5) { f.driver.statistics.connectionsOpen == 0 })
    }

    @Test func relayInformationFromANonRelayIsNil() throws {
        let listener = try TCPListener()
        defer { listener.close() }
        let f = DriverFixture()
        try f.open(1, "ws://127.0.0.1:\(listener.port)", purpose: .relayInformation)
        let tcp = try #require(try listener.accept(timeoutMilliseconds: 5000))
        _ = try WebSocketClient.readHead(tcp, timeoutMilliseconds: 3000)
        try tcp.write(Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".utf8))
        #expect(f.probe.wait { $0.information(ConnectionID(1)) != nil })
        #expect((f.probe.events.information(ConnectionID(1)) ?? nil) == nil)
        tcp.close()
    }

    /// Fifty connections on the one driver thread; once they are idle the thread sleeps in
    /// poll: two seconds of silence cost (almost) no wakeups.
    @Test func fiftyIdleConnectionsCostNoWakeups() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        for id in 1...50 { try f.open(id, relay.url) }
        #expect(
            f.probe.wait(20) { events in (1...50).allSatisfy { events.opened(ConnectionID($0)) } },
            "\(f.probe.events.filter { if case .closed = $0 { true } else { false } })")
        for id in 1...50 { f.send(id, #"["REQ","a",{"kinds":[7]}]"#, token: 1) }
        #expect(f.probe.wait(20) { events in (1...50).allSatisfy { events.texts(ConnectionID($0)).count == 1 } })
        #expect(f.driver.statistics.connectionsOpen == 50)
        let before = f.driver.statistics.wakeups
        let eventsBefore = f.probe.events.count
        // Two seconds in which nothing may happen (a wait that is meant to time out).
        #expect(!f.probe.wait(2) { $0.count > eventsBefore })
        let idleWakeups = f.driver.statistics.wakeups - before
        #expect(idleWakeups <= 2, "\(idleWakeups) wakeups while idle")
        // And every connection still works.
        for id in 1...50 { f.send(id, #"["REQ","b",{"kinds":[7]}]"#, token: 2) }
        #expect(f.probe.wait(20) { events in (1...50).allSatisfy { events.texts(ConnectionID($0)).count == 2 } })
        #expect(relay.connectionCount == 50)
    }

    @Test func stopWithOpenConnectionsReturnsPromptlyAndClosesThem() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let probe = DriverProbe()
        let driver = IODriver(handler: probe)
        driver.start()
        for id in 1...5 {
            let endpoint = try RelayEndpoint(relay.url)
            probe.run(on: driver) { $0.open(ConnectionID(id), endpoint: endpoint, options: ConnectionOptions(connectTimeoutMilliseconds: 5000)) }
        }
        #expect(probe.wait { events in (1...5).allSatisfy { events.opened(ConnectionID($0)) } })
        #expect(eventually(5) { relay.connectionCount == 5 })
        let started = IODriver.monotonicMilliseconds()
        driver.stop()
        let took = IODriver.monotonicMilliseconds() - started
        #expect(took < 1000, "stop took \(took) ms")
        driver.stop()  // idempotent
        #expect(driver.statistics.connectionsOpen == 0)
        #expect(eventually(5) { relay.connectionCount == 0 })
        #expect(!probe.events.contains { if case .closed = $0 { true } else { false } })
    }

    @Test func theHandlersCloseSendsNoEventAndFreesTheIdAtOnce() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.url)
        #expect(eventually(5) { relay.connectionCount == 1 })
        let endpoint = try RelayEndpoint(relay.url)
        f.probe.run(on: f.driver) { d in
            d.send(ConnectionID(1), text: #"["REQ","x",{"kinds":[7]}]"#, token: 5)
            d.close(ConnectionID(1))
            d.open(ConnectionID(1), endpoint: endpoint, options: ConnectionOptions(connectTimeoutMilliseconds: 5000))
        }
        #expect(f.probe.wait { $0.filter { if case .opened(ConnectionID(1)) = $0 { true } else { false } }.count == 2 })
        // The first connection's close handshake reached the relay, which dropped it, after
        // the REQ queued before close() (sent, though no `.written` is reported after close).
        #expect(eventually(5) { relay.connectionCount == 1 && relay.framesReceived == 1 })
        #expect(f.probe.events.closed(ConnectionID(1)) == nil)
        #expect(f.probe.events.written(ConnectionID(1)).isEmpty)
        try exerciseRelay(f, 1)
    }

    @Test func aDroppedConnectionIsReportedOnce() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.url)
        try f.openAndWait(2, relay.url)
        #expect(eventually(5) { relay.connectionCount == 2 })
        relay.dropConnections()
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil && $0.closed(ConnectionID(2)) != nil })
        #expect(f.probe.events.closed(ConnectionID(1))?.kind == .closed)
        #expect(f.probe.events.closedCount(ConnectionID(1)) == 1)
        #expect(eventually(5) { f.driver.statistics.connectionsOpen == 0 })
    }

    @Test func aRefusedPortFailsToOpen() throws {
        let listener = try TCPListener()
        let port = listener.port
        listener.close()
        let f = DriverFixture()
        try f.open(1, "ws://127.0.0.1:\(port)")
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.closed(ConnectionID(1))?.kind == .connect)
    }

    @Test func anUnresolvableHostFailsToOpen() throws {
        let f = DriverFixture()
        try f.open(1, "ws://softchat-no-such-host.invalid:7777", options: ConnectionOptions(connectTimeoutMilliseconds: 8000))
        #expect(f.probe.wait(15) { $0.closed(ConnectionID(1)) != nil })
        let kind = f.probe.events.closed(ConnectionID(1))?.kind
        #expect(kind == .resolve || kind == .timeout, "\(String(describing: kind))")
    }

    /// The peers of driver connections are often blocking `TLSStream`s (the test relay): a
    /// TLS write to a socket whose peer is gone fails with an error instead of SIGPIPE
    /// ending the process (the driver's `stop()` closes sockets the relay still answers on).
    @Test func aTLSWriteToAVanishedPeerFailsWithoutSIGPIPE() throws {
        let pki = try TLSTests.pki.get()
        let listener = try TCPListener()
        defer { listener.close() }
        nonisolated(unsafe) var server: TLSStream?
        let accepted = DispatchSemaphore(value: 0)
        Thread {
            if let tcp = try? listener.accept(timeoutMilliseconds: 5000) {
                server = try? TLSStream(server: tcp, certificateFile: pki.certificate("valid"), keyFile: pki.key("valid"), timeoutMilliseconds: 5000)
            }
            accepted.signal()
        }.start()
        let tcp = try TCPStream.connect(host: "127.0.0.1", port: listener.port, timeoutMilliseconds: 5000)
        let client = try TLSStream(client: tcp, host: "127.0.0.1", options: TLSOptions(caFile: pki.caFile), timeoutMilliseconds: 5000)
        accepted.wait()
        let peer = try #require(server)
        // The client vanishes without a word (no close_notify): its socket just closes.
        tcp.close()
        var failed = false
        for _ in 0..<200 where !failed {
            do { try peer.write([UInt8](repeating: 7, count: 16384)) } catch { failed = true }
        }
        #expect(failed)
        peer.close()
        _ = client
    }

    func tlsRelay(_ name: String) throws -> TestRelay {
        let pki = try TLSTests.pki.get()
        var options = TestRelayOptions()
        options.certificateFile = pki.certificate(name)
        options.keyFile = pki.key(name)
        return try TestRelay(options: options)
    }
}

/// A handler call that stalls (an account write waiting for a lock) must not be followed by
/// another before the sockets are read: the engine judges its deadlines in each call, and a pong
/// or an OK that arrived during the stall but was not read yet looked like silence (a spurious
/// keepalive drop, a spurious acknowledgement timeout).
@Suite struct DriverStallTests {
    /// Opens one connection to a relay, sends REQ "a", and in the call that sees it written sends
    /// REQ "b" and stalls for 400 ms (the relay answers "a" meanwhile). Records, at the first
    /// call after the stall, whether the answer to "a" had been handed over.
    final class StallingHandler: IODriverHandler, @unchecked Sendable {
        // @unchecked: touched on the driver thread only, read after `done` is signalled.
        enum Stage { case opening, sentA, stalled, checked }
        var stage = Stage.opening
        var log: [IOEvent] = []
        var answerSeenAfterStall: Bool?
        let done = DispatchSemaphore(value: 0)
        let endpoint: RelayEndpoint
        var started = false
        let id = ConnectionID(1)

        init(endpoint: RelayEndpoint) { self.endpoint = endpoint }

        func driver(_ driver: IODriver, handle event: IOEvent) { log.append(event) }

        func driverService(_ driver: IODriver, now: Int64) -> Int64? {
            if !started {
                started = true
                driver.open(id, endpoint: endpoint, options: ConnectionOptions(connectTimeoutMilliseconds: 5000))
                return nil
            }
            switch stage {
            case .opening where log.opened(id):
                driver.send(id, text: #"["REQ","a",{"kinds":[1],"limit":1}]"#, token: 1)
                stage = .sentA
            case .sentA where log.written(id).contains(1):
                driver.send(id, text: #"["REQ","b",{"kinds":[1],"limit":1}]"#, token: 2)
                usleep(400_000)  // the stall: the relay's answer to "a" arrives meanwhile
                stage = .stalled
            case .stalled:
                answerSeenAfterStall = log.texts(id).contains { $0.contains(#""EOSE","a""#) }
                stage = .checked
                done.signal()
            default:
                break
            }
            return nil
        }
    }

    @Test func theFirstHandlerCallAfterAStallSeesWhatArrivedDuringIt() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let handler = StallingHandler(endpoint: try RelayEndpoint(relay.url))
        let driver = IODriver(handler: handler, name: "softchat.io.stall")
        driver.start()
        defer { driver.stop() }
        #expect(handler.done.wait(timeout: .now() + 10) == .success)
        #expect(handler.answerSeenAfterStall == true, "a handler call after a 400 ms stall judged without the input that came meanwhile")
    }
}
