import SoftchatCommandLine
import SoftchatCore
@_spi(Benchmarks) import SoftchatStorage
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench observe`: live queries (``SoftchatAccount/observe(_:limit:clock:)``).
/// - ingest throughput (batches of 256, durable) with 1,000 open observations over varied
///   filters (by author, by `#p`, a kind nothing has, and one in ten a feed every event enters),
///   beside the same ingest with none, interleaved, best of three;
/// - commit to change delivered (the reader's `await next()` resuming), p50 and p99, for one
///   observer alone and for one of 1,000;
/// - resident memory per observation (1,000 windows of up to 100 events, filled);
/// - a reader that never reads while the events are ingested: what waits for it, and whether
///   its reload equals a fresh read.
public enum ObserveBenchmarks {
    public static func run(quick: Bool, directory: String) -> [ManagedFigure] {
        let count = quick ? 4_096 : 40_960
        let corpus = BenchCorpus.events(count: count, contentBytes: 200)
        let batches = stride(from: 0, to: count, by: 256).map { Array(corpus[$0..<min($0 + 256, count)]) }
        let keys = BenchCorpus.authors()
        let now: Int64 = 1_800_000_000
        let clock: @Sendable () -> Int64 = { now }
        /// Observation `i`'s filters: one in ten the feed every event enters (the same filter:
        /// screens showing one feed), four in ten two authors' notes, four in ten the notes
        /// naming two people (`#p`), one in ten the reactions to one note nothing reacts to; the
        /// pairs and notes vary with `i`, so nearly all of those windows differ.
        func filters(_ i: Int) -> [RelayFilter] {
            let n = i / 10
            let a = keys[n % keys.count].publicKeyHex
            let b = keys[(n / keys.count + n + 1) % keys.count].publicKeyHex
            let json: String
            switch i % 10 {
            case 0: json = ##"{"kinds":[1],"#t":["bench"]}"##
            case 1, 2, 3, 4:
                let c = keys[(n + i % 10 * 7) % keys.count].publicKeyHex
                json = ##"{"kinds":[1],"authors":[""## + a + ##"",""## + c + ##""]}"##
            case 5, 6, 7, 8:
                let c = keys[(n + i % 10 * 11) % keys.count].publicKeyHex
                json = ##"{"kinds":[1],"#p":[""## + b + ##"",""## + c + ##""]}"##
            default: json = ##"{"kinds":[7],"#e":[""## + BenchCorpus.sha256Hex("note " + String(i)) + ##""]}"##
            }
            return [try! RelayFilter.fromJSON(json)]
        }
        var run = 0
        /// Seconds from the first batch to every window holding the last (the worker done), and
        /// to the last `ingest` returning. `shared`: on the wall clock, where observations of the
        /// same filters and limit share one window; else each keeps its own.
        func ingest(observers: Int, shared: Bool) -> (settled: Double, returned: Double, windows: Int) {
            run += 1
            let path = "\(directory)/observe-\(run).db"
            defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
            let account = try! SoftchatAccount.open(path: path)
            defer { account.close() }
            let observations = (0..<observers).map { try! account.observe(filters($0), limit: 100, clock: shared ? nil : clock) }
            let windows = account.openWindowsForBenchmarks
            let t0 = monotonicSeconds()
            for b in batches { _ = try! account.incoming.ingest(b, receivedAt: now) }
            let returned = monotonicSeconds() - t0
            account.settleObservations()
            let settled = monotonicSeconds() - t0
            for o in observations { o.cancel() }
            return (settled, returned, windows)
        }
        var none = Double.infinity
        var shared = (settled: Double.infinity, returned: Double.infinity, windows: 0)
        var own = shared
        for _ in 0..<3 {
            none = min(none, ingest(observers: 0, shared: true).settled)
            let s = ingest(observers: 1_000, shared: true)
            if s.settled < shared.settled { shared = s }
            let o = ingest(observers: 1_000, shared: false)
            if o.settled < own.settled { own = o }
        }
        var figures: [ManagedFigure] = []
        for (label, t) in [("wall clock, equal ones sharing: \(shared.windows) windows", shared), ("each its own window: \(own.windows)", own)] {
            figures.append(
                ManagedFigure(
                    name: "ingest with 1,000 open observations (\(label)), batches of 256, until every window holds the last",
                    value: Double(count) / t.settled, unit: "/s", baselineName: "the same ingest with none", baselineValue: Double(count) / none))
            figures.append(
                ManagedFigure(
                    name: "the same, until the last ingest returned", value: Double(count) / t.returned, unit: "/s",
                    baselineName: "the same ingest with none", baselineValue: Double(count) / none))
        }
        figures += latency(observers: 1, samples: quick ? 50 : 400, directory: directory, filters: filters, clock: clock)
        figures += latency(observers: 1_000, samples: quick ? 50 : 400, directory: directory, filters: filters, clock: clock)
        figures.append(memoryPerObservation(batches: batches, directory: directory, filters: filters, clock: clock))
        // The slow reader: 100,000 events (the quick run: the same corpus as above).
        let slowCorpus = quick ? corpus : BenchCorpus.events(count: 100_000, contentBytes: 200, seed: 7, firstCreatedAt: 1_600_000_000)
        let slowBatches = stride(from: 0, to: slowCorpus.count, by: 256).map { Array(slowCorpus[$0..<min($0 + 256, slowCorpus.count)]) }
        figures += slowReader(batches: slowBatches, directory: directory, clock: clock)
        return figures
    }

    /// This process's resident memory now (VmRSS), in KiB.
    static func residentKiB() -> Double {
        guard let status = PeakMemoryReport.readSmallFile("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Double(line.split(separator: " ").dropFirst().first.map(String.init) ?? "") ?? 0
    }

    /// Commit to delivery: single events committed one at a time; the feed observer (observation
    /// 0, which every event enters) awaits each on a task of its own.
    static func latency(
        observers: Int, samples: Int, directory: String, filters: (Int) -> [RelayFilter], clock: @escaping @Sendable () -> Int64
    ) -> [ManagedFigure] {
        let path = "\(directory)/observe-latency-\(observers).db"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let account = try! SoftchatAccount.open(path: path)
        let observations = (0..<observers).map { try! account.observe(filters($0), limit: 100, clock: clock) }
        let received = Mutex<[Int64]>([])
        let feed = observations[0]
        let reader = Task.detached {
            var iterator = feed.makeAsyncIterator()
            _ = await iterator.next()  // the snapshot
            while let update = await iterator.next() {
                guard case .changes = update else { continue }
                var ts = timespec()
                clock_gettime(CLOCK_MONOTONIC, &ts)
                let at = Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
                received.withLock { $0.append(at) }
            }
        }
        let events = BenchCorpus.events(count: samples, contentBytes: 200, seed: 91, firstCreatedAt: 1_750_000_000)
        var latencies: [Double] = []
        for (i, e) in events.enumerated() {
            _ = try! account.incoming.ingest([e], receivedAt: 1_800_000_000)
            let committed = account.lastObservedCommitNanoseconds
            let deadline = monotonicSeconds() + 5
            while received.withLock({ $0.count }) <= i && monotonicSeconds() < deadline { usleep(50) }
            guard let at = received.withLock({ $0.count > i ? $0[i] : nil }) else { break }
            latencies.append(Double(at - committed) / 1e6)
        }
        for o in observations { o.cancel() }
        reader.cancel()
        account.close()
        latencies.sort()
        guard !latencies.isEmpty else { return [] }
        let label = observers == 1 ? "one observer" : "one of \(observers) observers"
        return [
            ManagedFigure(name: "commit to change delivered, \(label), p50", value: percentile(latencies, 50), unit: "ms"),
            ManagedFigure(name: "commit to change delivered, \(label), p99", value: percentile(latencies, 99), unit: "ms"),
        ]
    }

    /// Resident memory of 1,000 filled windows, per observation.
    static func memoryPerObservation(
        batches: [[VerifiedEvent]], directory: String, filters: (Int) -> [RelayFilter], clock: @escaping @Sendable () -> Int64
    ) -> ManagedFigure {
        let path = "\(directory)/observe-memory.db"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let account = try! SoftchatAccount.open(path: path)
        for b in batches { _ = try! account.incoming.ingest(b, receivedAt: 1_800_000_000) }
        let before = residentKiB()
        let observations = (0..<1_000).map { try! account.observe(filters($0), limit: 100, clock: clock) }
        let filled = observations.reduce(0) { $0 + $1.window.count }
        let after = residentKiB()
        for o in observations { o.cancel() }
        account.close()
        return ManagedFigure(
            name: "resident memory per observation (1,000 open, \(filled / 1_000) events per window on average)", value: (after - before) / 1_000,
            unit: "KiB")
    }

    /// A reader that never reads while every batch is ingested.
    static func slowReader(batches: [[VerifiedEvent]], directory: String, clock: @escaping @Sendable () -> Int64) -> [ManagedFigure] {
        let path = "\(directory)/observe-slow.db"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let account = try! SoftchatAccount.open(path: path)
        let filter = [try! RelayFilter.fromJSON(#"{"kinds":[1]}"#)]
        let slow = try! account.observe(filter, limit: 100, clock: clock)
        let before = residentKiB()
        var ingested = 0
        for b in batches {
            _ = try! account.incoming.ingest(b, receivedAt: 1_800_000_000)
            ingested += b.count
        }
        account.settleObservations()
        let after = residentKiB()
        let waiting = slow.queue.depthForBenchmarks
        var window: [VerifiedEvent] = []
        var fits = true
        while let update = slow.poll() {
            switch update {
            case .snapshot(let w), .reload(let w): window = w
            case .changes(let changes): fits = fits && EventWindowChange.apply(changes, to: &window)
            }
        }
        let fresh = try! account.events(matching: filter, limit: 100, now: clock())
        slow.cancel()
        account.close()
        return [
            ManagedFigure(
                name: "a reader that never read, after \(ingested) events: changes waiting (bound \(EventObservation.maxBacklog))",
                value: Double(waiting), unit: "changes"),
            ManagedFigure(name: "its resident memory growth over those events", value: (after - before) / 1024, unit: "MiB"),
            ManagedFigure(name: "its reload and later changes equal a fresh read (1 yes, 0 no)", value: fits && window == fresh ? 1 : 0, unit: ""),
        ]
    }
}
