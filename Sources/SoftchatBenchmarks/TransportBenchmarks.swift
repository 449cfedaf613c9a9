import SoftchatCore
import SoftchatStorage
import SoftchatTestRelay
import SoftchatTransport

/// `softchat bench transport`: publish → OK round trips against the embedded relay on loopback,
/// single EVENTs one at a time versus EVENTS batches of 256, beside the loopback round trip of a
/// frame the relay answers without storing anything (REQ for an unknown id → EOSE).
public enum TransportBenchmarks {
    public static func run(quick: Bool) -> [BenchResult] {
        let count = quick ? 256 : 4096
        let corpus = BenchCorpus.events(count: count * 2, contentBytes: 200, seed: 9)
        let relay = try! TestRelay()
        defer { relay.stop() }
        let ws = try! WebSocketClient.connect(try! RelayEndpoint(relay.url))
        defer { ws.close() }

        func waitFor(_ n: Int, _ verb: String) {
            var seen = 0
            while seen < n {
                if case .text(let t) = try! ws.receive(timeoutMilliseconds: 10_000), t.hasPrefix("[\"\(verb)\"") { seen += 1 }
            }
        }
        let echoes = quick ? 200 : 2000
        let e0 = monotonicSeconds()
        for _ in 0..<echoes {
            try! ws.send(text: "[\"REQ\",\"e\",{\"ids\":[\"\(String(repeating: "0", count: 64))\"]}]")
            waitFor(1, "EOSE")
        }
        let echoSeconds = monotonicSeconds() - e0

        let s0 = monotonicSeconds()
        for e in corpus[0..<count] {
            try! ws.send(text: ClientRelayFrame.event(e).toJSON())
            waitFor(1, "OK")
        }
        let singleSeconds = monotonicSeconds() - s0

        let b0 = monotonicSeconds()
        for start in stride(from: count, to: 2 * count, by: 256) {
            try! ws.send(text: ClientRelayFrame.events(Array(corpus[start..<min(start + 256, 2 * count)])).toJSON())
            waitFor(min(256, 2 * count - start), "OK")
        }
        let batchSeconds = monotonicSeconds() - b0
        let echoRate = Double(echoes) / echoSeconds
        return [
            BenchResult(name: "publish → OK, single EVENT round trips", items: count, seconds: singleSeconds,
                baselineName: "loopback round trip (REQ → EOSE)", baselinePerSecond: echoRate, peakMiB: peakMemoryMiB()),
            BenchResult(name: "publish → OK, EVENTS batches of 256", items: count, seconds: batchSeconds,
                baselineName: "single EVENT round trips", baselinePerSecond: Double(count) / singleSeconds, peakMiB: peakMemoryMiB()),
        ]
    }
}
