import SoftchatCore
import SoftchatJSON

/// `softchat-dev bench wire` and `bench session`: relay frames through relay.wire and through
/// RelaySession.receive, each beside raw verify + SHA-256 (and parse+verify) in the same run.
public enum WireBenchmarks {
    public static func run(quick: Bool) -> [BenchResult] {
        let count = quick ? 500 : 20_000
        let reps = quick ? 1 : 3
        let corpus = BenchCorpus.events(count: count, contentBytes: 200)
        let frames = corpus.map { RelayResponseFrame.event(subscriptionID: "chat", event: $0).toJSON() }
        let raw = RawVerifyBaseline(corpus)
        let rawSeconds = bestOf(reps) { precondition(raw.run() == corpus.count) }
        let parseSeconds = bestOf(reps) {
            var ok = 0
            for f in frames where (try? parseRelayResponseFrame(f)) != nil { ok += 1 }
            precondition(ok == frames.count)
        }
        var results = [
            BenchResult(
                name: "relay EVENT frames parse+verify", items: count, seconds: parseSeconds,
                baselineName: "raw SHA-256 + schnorrsig_verify", baselinePerSecond: Double(count) / rawSeconds, peakMiB: peakMemoryMiB())
        ]

        // Filter matching: a chat-history filter set against every event, live-matching style.
        let filters = [
            try! RelayFilter.fromJSON("{\"kinds\":[1],\"#t\":[\"bench\"],\"since\":1700000000}"),
            try! RelayFilter.fromJSON("{\"authors\":[\"\(corpus[0].pubkey)\",\"\(corpus[1].pubkey)\"],\"kinds\":[1,14]}"),
            try! RelayFilter.fromJSON("{\"#p\":[\"\(corpus[2].pubkey)\"],\"limit\":100}"),
        ]
        let matchReps = quick ? 1 : 20
        var matched = 0
        let matchSeconds = bestOf(reps) {
            matched = 0
            for _ in 0..<matchReps { for e in corpus where RelayFilter.anyMatches(filters, e) { matched += 1 } }
        }
        results.append(
            BenchResult(
                name: "filter matching (3 filters OR) per event", items: count * matchReps, seconds: matchSeconds,
                baselineName: "raw SHA-256 + schnorrsig_verify", baselinePerSecond: Double(count) / rawSeconds, peakMiB: peakMemoryMiB()))

        // EVENTS batches of 256: parse + verify with the batch's events spread over the cores.
        let batches = stride(from: 0, to: count - 255, by: 256).map { ClientRelayFrame.events(Array(corpus[$0..<$0 + 256])).toJSON() }
        if !batches.isEmpty {
            let batchSeconds = bestOf(reps) {
                for b in batches { precondition((try? parseClientRelayFrame(b)) != nil) }
            }
            results.append(
                BenchResult(
                    name: "EVENTS batches of 256 parse+verify (all cores)", items: batches.count * 256, seconds: batchSeconds,
                    baselineName: "relay EVENT frames parse+verify (one core)", baselinePerSecond: Double(count) / parseSeconds,
                    peakMiB: peakMemoryMiB()))
        }
        return results
    }
}

public enum SessionBenchmarks {
    public static func run(quick: Bool) -> [BenchResult] {
        let count = quick ? 500 : 20_000
        let reps = quick ? 1 : 9
        let corpus = BenchCorpus.events(count: count, contentBytes: 200)
        let frames = corpus.map { RelayResponseFrame.event(subscriptionID: "chat", event: $0).toJSON() }
        // Figure and baseline alternate, best of nine each, so drift on a shared VM hits both.
        let (sessionSeconds, parseSeconds) = bestOfInterleaved(
            reps,
            {
                let session = RelaySession()
                _ = try! session.connect()
                try! session.transportConnected(now: 1)
                try! session.subscribe(id: "chat", filtersJSON: ["{\"kinds\":[1]}"])
                var persisted = 0
                for f in frames {
                    for action in try! session.receive(f) where action.kind == .persistEvent {
                        try! session.confirmIngested(action.event!.id)
                        persisted += 1
                    }
                }
                precondition(persisted == count)
            },
            baseline: {
                for f in frames { precondition((try? parseRelayResponseFrame(f)) != nil) }
            })
        return [
            BenchResult(
                name: "session receive → persistEvent → confirmIngested", items: count, seconds: sessionSeconds,
                baselineName: "parse+verify alone", baselinePerSecond: Double(count) / parseSeconds, peakMiB: peakMemoryMiB())
        ]
    }
}
