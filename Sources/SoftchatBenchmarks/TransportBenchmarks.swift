import Dispatch
import SoftchatCore
import SoftchatStorage
import SoftchatTestRelay
import SoftchatTransport

/// `softchat-dev bench transport`: publish → OK round trips against the embedded relay on loopback,
/// single EVENTs one at a time versus EVENTS batches of 256, beside a loopback WebSocket echo of
/// the same frames (the floor: the same sockets and framing, no relay and no storage behind).
public enum TransportBenchmarks {
    public static func run(quick: Bool) -> [BenchResult] {
        let count = quick ? 256 : 4096
        let reps = quick ? 1 : 3
        // Fresh events for every repetition: a relay answers a duplicate without storing it.
        let corpus = BenchCorpus.events(count: count * 2 * reps, contentBytes: 200, seed: 9)
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
        var echoSeconds = Double.infinity
        var singleSeconds = Double.infinity
        var batchSeconds = Double.infinity
        for rep in 0..<reps {
            let base = rep * 2 * count
            let frames = corpus[base..<base + count].map { ClientRelayFrame.event($0).toJSON() }
            echoSeconds = min(echoSeconds, echoRoundTrips(frames))

            let s0 = monotonicSeconds()
            for frame in frames {
                try! ws.send(text: frame)
                waitFor(1, "OK")
            }
            singleSeconds = min(singleSeconds, monotonicSeconds() - s0)

            let b0 = monotonicSeconds()
            for start in stride(from: base + count, to: base + 2 * count, by: 256) {
                try! ws.send(text: ClientRelayFrame.events(Array(corpus[start..<min(start + 256, base + 2 * count)])).toJSON())
                waitFor(min(256, base + 2 * count - start), "OK")
            }
            batchSeconds = min(batchSeconds, monotonicSeconds() - b0)
        }
        return [
            BenchResult(
                name: "publish → OK, single EVENT round trips", items: count, seconds: singleSeconds,
                baselineName: "loopback WebSocket echo of the same frames", baselinePerSecond: Double(count) / echoSeconds,
                peakMiB: peakMemoryMiB()),
            BenchResult(
                name: "publish → OK, EVENTS batches of 256", items: count, seconds: batchSeconds,
                baselineName: "single EVENT round trips", baselinePerSecond: Double(count) / singleSeconds, peakMiB: peakMemoryMiB()),
        ]
    }

    /// Seconds for each frame to go to a WebSocket server on loopback that sends it straight
    /// back, one at a time.
    static func echoRoundTrips(_ frames: [String]) -> Double {
        let listener = try! TCPListener()
        defer { listener.close() }
        let done = DispatchSemaphore(value: 0)
        DispatchQueue(label: "softchat.bench-echo").async {
            defer { done.signal() }
            guard let tcp = try? listener.accept(timeoutMilliseconds: 10_000),
                case .websocket(let server)? = try? ServerHandshake.accept(tcp, timeoutMilliseconds: 10_000)
            else { return }
            while case .text(let t)? = try? server.receive(timeoutMilliseconds: 10_000) {
                guard (try? server.send(text: t)) != nil else { return }
            }
        }
        let client = try! WebSocketClient.connect(try! RelayEndpoint("ws://127.0.0.1:\(listener.port)"))
        let t0 = monotonicSeconds()
        for frame in frames {
            try! client.send(text: frame)
            guard case .text = try! client.receive(timeoutMilliseconds: 10_000) else { fatalError("echo server closed") }
        }
        let seconds = monotonicSeconds() - t0
        client.close()
        done.wait()
        return seconds
    }
}
