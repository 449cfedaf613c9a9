import Foundation
import SoftchatBenchmarks
import SoftchatCore
import SoftchatFaultProxy
import SoftchatTestRelay
import SoftchatTransport
import Testing

/// The fault harness end to end (CI-sized), the harness's ability to fail, and the fault
/// proxy's own behaviour.
@Suite(.serialized) struct FaultHarnessTests {
    @Test(arguments: [UInt64(11), 12])
    func aSeededRunThroughEveryFaultKindLosesNothingAndAcceptsEachIntentOnce(seed: UInt64) throws {
        let scratch = Scratch()
        var options = FaultRunOptions(seed: seed, events: 600, directory: scratch.dir)
        options.plan = FaultRunOptions.densePlan
        options.batchSize = 10
        options.deadlineSeconds = 40
        options.quietSeconds = 1
        let result = FaultHarness.run(options)
        print("fault harness: \(result.line)")
        #expect(result.passed, "\(result.line)")
        #expect(result.lost == 0 && result.rejected == 0 && result.notTerminal == 0 && result.liveLeases == 0)
        #expect(result.accepted == 600 && result.receiverHeld == 600)
        #expect(result.faults.total > 0 && result.faults.informationRequests > 0, "\(result.faults.summary)")
    }

    @Test func withoutKeepaliveBlackHolesMakeTheHarnessReportFailure() throws {
        let scratch = Scratch()
        var options = FaultRunOptions(seed: 5, events: 60, directory: scratch.dir)
        options.preloaded = 30
        options.plan = FaultPlan()
        options.plan.blackHole = 1  // every connection goes silent at its first message
        options.keepaliveIntervalMilliseconds = 100_000_000
        options.readDeadlineMilliseconds = 100_000_000
        options.deadlineSeconds = 4
        options.quietSeconds = 0
        options.restartReceiver = false
        let result = FaultHarness.run(options)
        print("fault harness (keepalive off): \(result.line)")
        #expect(!result.passed)
        #expect(result.timedOut)
        #expect(result.lost + result.notTerminal > 0 || result.relayStored < 60)
        #expect(result.faults.blackHoles > 0)
        #expect(result.keepaliveTimeouts == 0)
    }

    @Test func relayInformationPassesThroughTheProxyUnmodified() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        var plan = FaultPlan()
        plan.blackHole = 1
        let proxy = try FaultProxy(upstream: relay.url, plan: plan)
        defer { proxy.stop() }
        let info = try RelayInformation.fetch(try RelayEndpoint(proxy.url))
        #expect(info.acceptsEventsBatch)
        #expect(info.name == "softchat test relay")
        #expect(proxy.faults.informationRequests == 1 && proxy.faults.blackHoles == 0)
    }

    @Test func fragmentedRelayMessagesWithPingsBetweenFragmentsArriveWhole() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        var plan = FaultPlan()
        plan.fragment = 1
        plan.maxFragments = 4
        plan.fragmentGapMilliseconds = 30...60
        plan.pingBetweenFragments = 1
        let proxy = try FaultProxy(upstream: relay.url, plan: plan)
        defer { proxy.stop() }
        let ws = try WebSocketClient.connect(try RelayEndpoint(proxy.url))
        defer { ws.close(waitMilliseconds: 0) }
        for i in 0..<5 {
            try ws.send(text: "[\"REQ\",\"s\(i)\",{\"kinds\":[1]}]")
            #expect(try ws.receive(timeoutMilliseconds: 5_000) == .text("[\"EOSE\",\"s\(i)\"]"))
        }
        #expect(proxy.faults.fragmented == 5 && proxy.faults.pingsInjected >= 5)
    }

    @Test func theSameSeedAndMessagesReplayTheSameFaults() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        func fragments(seed: UInt64) throws -> Int {
            var plan = FaultPlan()
            plan.seed = seed
            plan.fragment = 0.5
            plan.fragmentGapMilliseconds = 1...5
            let proxy = try FaultProxy(upstream: relay.url, plan: plan)
            defer { proxy.stop() }
            let ws = try WebSocketClient.connect(try RelayEndpoint(proxy.url))
            defer { ws.close(waitMilliseconds: 0) }
            for i in 0..<24 {
                try ws.send(text: "[\"REQ\",\"s\(i)\",{\"kinds\":[1]}]")
                _ = try ws.receive(timeoutMilliseconds: 5_000)
            }
            return proxy.faults.fragmented
        }
        let first = try fragments(seed: 42)
        #expect(try fragments(seed: 42) == first)
        #expect(first > 0 && first < 24)
    }

    @Test func aBlackHoledConnectionStaysOpenAndSilentUntilTheClientLeaves() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        var plan = FaultPlan()
        plan.blackHole = 1
        let proxy = try FaultProxy(upstream: relay.url, plan: plan)
        defer { proxy.stop() }
        let ws = try WebSocketClient.connect(try RelayEndpoint(proxy.url))
        try ws.send(text: "[\"REQ\",\"s\",{\"kinds\":[1]}]")
        #expect(throws: TransportError.self) { try ws.receive(timeoutMilliseconds: 300) }
        #expect(proxy.faults.blackHoles == 1)
        ws.stream.close()
        // The proxy drops the relay side once the client has gone.
        #expect(eventually(5) { relay.connectionCount == 0 })
    }
}
