import Dispatch
import SoftchatClient
import SoftchatCommandLine
import SoftchatCore
@_spi(Benchmarks) import SoftchatStorage
import SoftchatSync
import SoftchatTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One figure of `softchat-dev bench managed`, beside its baseline from the same run.
public struct ManagedFigure: Sendable {
    public var name: String
    public var value: Double
    public var unit: String
    public var baselineName: String?
    public var baselineValue: Double?
    /// value / baseline when both are rates (higher is better); nil otherwise.
    public var ratio: Double? {
        guard let b = baselineValue, b > 0 else { return nil }
        return value / b
    }
}

/// `softchat-dev bench managed`: the managed transport (SyncEngine + one I/O thread) against
/// embedded relays running in a child process (`softchat relay`), so the relays' threads and
/// context switches are not counted as the client's:
/// - idle: context switches per second of this whole process with 1 and with 50 idle relay
///   connections (keepalive only), and the I/O thread's wakeups;
/// - threads of this process with 0, 1 and 100 relay connections; memory per idle connection;
/// - single EVENT → OK round trips through the I/O driver beside a loopback WebSocket echo
///   through the same driver, and the durable path (intent committed → OK → accepted
///   committed) beside the same echo;
/// - sync throughput: N stored events paged into a fresh account beside `ingest(lines:)` of the
///   same events in batches of 256 (the `account ingest` path).
public enum ManagedBenchmarks {
    public static func run(quick: Bool, executable: String, directory: String) -> [ManagedFigure] {
        var figures: [ManagedFigure] = []
        figures += idle(quick: quick, executable: executable, directory: directory)
        figures += roundTrips(quick: quick, executable: executable, directory: directory)
        figures += syncThroughput(quick: quick, executable: executable, directory: directory)
        return figures
    }

    // MARK: Idle connections

    static func idle(quick: Bool, executable: String, directory: String) -> [ManagedFigure] {
        // Longer than two keepalive intervals (30 s): the window holds at least one ping round.
        let window: UInt32 = quick ? 2 : 65
        let relays = RelayProcess(executable: executable, arguments: ["--count", "100"], lines: 100)
        defer { relays.stop() }
        let threadsBefore = ProcStatus.threads()
        var figures: [ManagedFigure] = []
        var rss: [Int: Double] = [:]
        var threads: [Int: Int] = [:]
        var switches: [Int: Double] = [:]
        for count in [1, 50, 100] {
            let account = try! SoftchatAccount.open(path: "\(directory)/idle-\(count).db")
            let nobody = String(repeating: "0", count: 64)
            try! account.setSubscription(id: "chat", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(nobody)\"]}"])
            let synced = Counter()
            var policy = ManagedTransportPolicy()
            policy.observer = { if case .synced = $0 { synced.add() } }
            let transport = try! account.startManagedTransport(relays: Array(relays.urls.prefix(count)), identity: nil, policy: policy)
            let deadline = monotonicSeconds() + 60
            while synced.value < count && monotonicSeconds() < deadline { usleep(20_000) }
            sleep(1)
            threads[count] = ProcStatus.threads()
            rss[count] = ProcStatus.residentKiB()
            if count != 100 {
                let wakeups0 = transport.driverStatistics.wakeups
                let s0 = ProcStatus.contextSwitches()
                sleep(window)
                let s1 = ProcStatus.contextSwitches()
                let wakeups = transport.driverStatistics.wakeups - wakeups0
                switches[count] = Double(s1 - s0) / Double(window)
                figures.append(
                    ManagedFigure(
                        name: "idle, \(count) relay connection\(count == 1 ? "" : "s"): I/O thread wakeups per second",
                        value: Double(wakeups) / Double(window), unit: "/s"))
            }
            transport.stop()
            account.close()
        }
        figures.insert(
            ManagedFigure(
                name: "idle, 1 relay connection: context switches per second (whole process)",
                value: switches[1]!, unit: "/s"), at: 0)
        figures.insert(
            ManagedFigure(
                name: "idle, 50 relay connections: context switches per second (whole process)",
                value: switches[50]!, unit: "/s", baselineName: "1 connection", baselineValue: switches[1]!), at: 1)
        figures.append(
            ManagedFigure(
                name: "threads with 1 relay connection", value: Double(threads[1]!), unit: "threads",
                baselineName: "before starting", baselineValue: Double(threadsBefore)))
        figures.append(
            ManagedFigure(
                name: "threads with 100 relay connections", value: Double(threads[100]!), unit: "threads",
                baselineName: "1 connection", baselineValue: Double(threads[1]!)))
        figures.append(
            ManagedFigure(
                name: "memory per idle relay connection (RSS, 100 vs 1)",
                value: (rss[100]! - rss[1]!) / 99, unit: "KiB"))
        return figures
    }

    // MARK: Round trips

    static func roundTrips(quick: Bool, executable: String, directory: String) -> [ManagedFigure] {
        let count = quick ? 200 : 4_000
        let reps = quick ? 1 : 3
        let relays = RelayProcess(executable: executable, arguments: ["--count", "1", "--echo"], lines: 2)
        defer { relays.stop() }
        let corpus = BenchCorpus.events(count: count * reps, contentBytes: 200, seed: 21)
        var echo = Double.infinity
        var relay = Double.infinity
        var blocking = Double.infinity
        let blockingCorpus = BenchCorpus.events(count: count * reps, contentBytes: 200, seed: 24)
        for rep in 0..<reps {
            let frames = corpus[rep * count..<(rep + 1) * count].map { ClientRelayFrame.event($0).toJSON() }
            echo = min(echo, DriverRoundTrips.run(url: relays.urls[1], frames: frames, answer: { _ in true }))
            relay = min(relay, DriverRoundTrips.run(url: relays.urls[0], frames: frames, answer: { $0.hasPrefix("[\"OK\"") }))
            // The previous transport's path: a blocking WebSocket client, one EVENT at a time.
            let others = blockingCorpus[rep * count..<(rep + 1) * count].map { ClientRelayFrame.event($0).toJSON() }
            let ws = try! WebSocketClient.connect(try! RelayEndpoint(relays.urls[0]))
            let b0 = monotonicSeconds()
            for frame in others {
                try! ws.send(text: frame)
                while case .text(let t) = try! ws.receive(timeoutMilliseconds: 10_000), !t.hasPrefix("[\"OK\"") {}
            }
            blocking = min(blocking, monotonicSeconds() - b0)
            ws.close()
        }
        // The durable path: each intent committed, claimed, written, marked in flight, answered,
        // applied and released — five fsync'd transactions per event with synchronous=FULL.
        let durableCount = quick ? 20 : 200
        let account = try! SoftchatAccount.open(path: "\(directory)/publish.db")
        defer { account.close() }
        let accepted = Counter()
        var policy = ManagedTransportPolicy()
        policy.observer = { if case .delivery(_, _, let d) = $0, d.state == .accepted { accepted.add() } }
        let transport = try! account.startManagedTransport(relays: [relays.urls[0]], identity: nil, policy: policy)
        let events = BenchCorpus.events(count: durableCount, contentBytes: 200, seed: 22)
        let t0 = monotonicSeconds()
        for (i, event) in events.enumerated() {
            _ = try! account.outgoing.enqueueSigned(operationID: "bench-\(i)", events: [event], relayURLs: [relays.urls[0]], now: Int64(time(nil)))
            accepted.wait(for: i + 1)
        }
        let durable = monotonicSeconds() - t0
        transport.stop()
        let echoRate = Double(count) / echo
        // The floors, same run: the storage's (one fdatasync of a 4 KiB append, what one durable
        // commit of a small transaction costs at least) and the network's (one EVENT → OK round
        // trip through the driver). Enqueueing is one commit; a message delivered one at a time
        // needs two around its round trip (the enqueue, and the relay's answer).
        let sync = FsyncFloor.seconds(directory: directory, count: quick ? 50 : 500)
        let roundTrip = relay / Double(count)
        let oneCommitFloor = 1 / sync
        let twoCommitFloor = 1 / (2 * sync + roundTrip)
        let enqueueCount = quick ? 50 : 500
        let enqueueAccount = try! SoftchatAccount.open(path: "\(directory)/enqueue.db")
        let enqueueEvents = BenchCorpus.events(count: enqueueCount, contentBytes: 200, seed: 25)
        let e0 = monotonicSeconds()
        for (i, event) in enqueueEvents.enumerated() {
            _ = try! enqueueAccount.outgoing.enqueueSigned(
                operationID: "enqueue-\(i)", events: [event], relayURLs: [relays.urls[0]], now: Int64(time(nil)))
        }
        let enqueue = monotonicSeconds() - e0
        // The floor of the enqueue's own commit: as many WAL frames as it writes (one more
        // enqueue, measured), written and made durable with nothing else done.
        let frames = enqueueAccount.walFramesForBenchmarks {
            let event = BenchCorpus.events(count: 1, contentBytes: 200, seed: 27)[0]
            _ = try! enqueueAccount.outgoing.enqueueSigned(operationID: "frames", events: [event], relayURLs: [relays.urls[0]], now: Int64(time(nil)))
        }
        let commitFloor = FsyncFloor.frames(frames, directory: directory, count: quick ? 50 : 500)
        enqueueAccount.close()
        // Eight senders at once, each one message at a time: the writer commits what waits
        // together (one fdatasync per group).
        let perSender = quick ? 100 : 1_000
        let concurrentAccount = try! SoftchatAccount.open(path: "\(directory)/enqueue-8.db")
        let senderEvents = BenchCorpus.events(count: 8 * perSender, contentBytes: 200, seed: 26)
        let relayURL = relays.urls[0]
        let c0 = monotonicSeconds()
        // One thread per sender (serial queues overcommit: each gets a thread of its own, where
        // concurrentPerform would use one per core).
        let senders = DispatchGroup()
        for sender in 0..<8 {
            DispatchQueue(label: "softchat.bench.sender-\(sender)").async(group: senders) {
                for i in 0..<perSender {
                    _ = try! concurrentAccount.outgoing.enqueueSigned(
                        operationID: "sender-\(sender)-\(i)", events: [senderEvents[sender * perSender + i]], relayURLs: [relayURL],
                        now: Int64(time(nil)))
                }
            }
        }
        senders.wait()
        let concurrent = monotonicSeconds() - c0
        let groupCommits = concurrentAccount.commitsForBenchmarks
        concurrentAccount.close()
        return [
            ManagedFigure(name: "floor: fdatasync of a 4 KiB append (one durable commit at least)", value: sync * 1e3, unit: "ms"),
            ManagedFigure(name: "floor: one EVENT → OK round trip through the I/O driver", value: roundTrip * 1e3, unit: "ms"),
            ManagedFigure(
                name: "enqueue one message at a time (enqueueSigned, durable)", value: Double(enqueueCount) / enqueue, unit: "/s",
                baselineName: "the one-commit floor (1 / fdatasync)", baselineValue: oneCommitFloor),
            ManagedFigure(name: "WAL frames (4 KiB pages) one enqueue commits", value: Double(frames), unit: "frames"),
            ManagedFigure(
                name: "enqueue one message at a time (enqueueSigned, durable)", value: Double(enqueueCount) / enqueue, unit: "/s",
                baselineName: "its own commit's floor (\(frames) WAL frames written into a reused file, fdatasync)",
                baselineValue: 1 / commitFloor),
            ManagedFigure(
                name: "eight concurrent senders, each enqueueing one message at a time (durable; goal 5,000/s)",
                value: Double(8 * perSender) / concurrent, unit: "/s", baselineName: "one sender at a time",
                baselineValue: Double(enqueueCount) / enqueue),
            ManagedFigure(name: "their messages per commit", value: Double(8 * perSender) / Double(max(groupCommits, 1)), unit: "messages"),
            ManagedFigure(
                name: "durable publish, one message at a time (enqueue → OK → accepted committed)", value: Double(durableCount) / durable,
                unit: "/s", baselineName: "the two-commit floor (1 / (2 fdatasync + one round trip))", baselineValue: twoCommitFloor),
            ManagedFigure(
                name: "single EVENT → OK round trips through the I/O driver", value: Double(count) / relay, unit: "/s",
                baselineName: "loopback WebSocket echo through the same driver", baselineValue: echoRate),
            ManagedFigure(
                name: "single EVENT → OK round trips through the I/O driver", value: Double(count) / relay, unit: "/s",
                baselineName: "the same through a blocking WebSocket client (the previous transport)",
                baselineValue: Double(count) / blocking),
            ManagedFigure(
                name: "durable publish, one intent at a time (commit → OK → accepted committed)",
                value: Double(durableCount) / durable, unit: "/s",
                baselineName: "loopback WebSocket echo through the same driver", baselineValue: echoRate),
        ]
    }

    /// The storage's floor: seconds per `fdatasync` of a 4 KiB append to a file in `directory`
    /// (the median of `count`), what the smallest durable commit costs at least on this disk.
    enum FsyncFloor {
        static func seconds(directory: String, count: Int) -> Double {
            let page = [UInt8](repeating: 0x5a, count: 4096)
            return median(directory: directory, flags: O_APPEND, count: count) { fd in
                _ = page.withUnsafeBytes { write(fd, $0.baseAddress, 4096) }
                _ = fdatasync(fd)
            }
        }

        /// Seconds per commit of `frames` WAL frames (a 24-byte header and a 4 KiB page each,
        /// two writes, as SQLite writes them) into a file already that long (SQLite reuses its
        /// WAL from the start after a checkpoint), then `fdatasync`: the median of `count`.
        static func frames(_ frames: Int, directory: String, count: Int) -> Double {
            let header = [UInt8](repeating: 0x3c, count: 24)
            let page = [UInt8](repeating: 0x5a, count: 4096)
            return median(directory: directory, flags: 0, count: count, warmUp: true) { fd in
                var offset = 32
                for _ in 0..<max(frames, 1) {
                    _ = header.withUnsafeBytes { pwrite(fd, $0.baseAddress, 24, off_t(offset)) }
                    _ = page.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, off_t(offset + 24)) }
                    offset += 4120
                }
                _ = fdatasync(fd)
            }
        }

        /// The median seconds of `count` runs of `commit` on a scratch file in `directory`
        /// (opened write-only with `flags`, removed after); `warmUp`: one untimed run first.
        static func median(directory: String, flags: Int32, count: Int, warmUp: Bool = false, _ commit: (Int32) -> Void) -> Double {
            let path = "\(directory)/fsync-floor"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | flags, 0o600)
            defer {
                close(fd)
                unlink(path)
            }
            if warmUp { commit(fd) }
            var samples: [Double] = []
            for _ in 0..<count {
                let t0 = monotonicSeconds()
                commit(fd)
                samples.append(monotonicSeconds() - t0)
            }
            samples.sort()
            return samples[samples.count / 2]
        }
    }

    // MARK: Sync throughput

    static func syncThroughput(quick: Bool, executable: String, directory: String) -> [ManagedFigure] {
        let count = quick ? 2_000 : 100_000
        let events = BenchCorpus.events(count: count, contentBytes: 200, seed: 23)
        let lines = events.map(\.jsonText)
        let file = "\(directory)/sync-corpus.jsonl"
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for line in lines { _ = (line + "\n").withCString { write(fd, $0, strlen($0)) } }
        close(fd)
        defer { unlink(file) }
        let relays = RelayProcess(executable: executable, arguments: ["--count", "1", "--cap", "500", "--preload", file], lines: 1)
        defer { relays.stop() }

        let baselineAccount = try! SoftchatAccount.open(path: "\(directory)/ingest.db")
        let b0 = monotonicSeconds()
        var offset = 0
        while offset < lines.count {
            _ = try! baselineAccount.incoming.ingest(lines: Array(lines[offset..<min(offset + 256, lines.count)]), receivedAt: Int64(time(nil)))
            offset += 256
        }
        let ingest = monotonicSeconds() - b0
        baselineAccount.close()

        let account = try! SoftchatAccount.open(path: "\(directory)/sync.db")
        defer { account.close() }
        try! account.setSubscription(id: "all", filtersJSON: [#"{"kinds":[1]}"#])
        let synced = Counter()
        var policy = ManagedTransportPolicy()
        policy.observer = { if case .synced = $0 { synced.add() } }
        let s0 = monotonicSeconds()
        let transport = try! account.startManagedTransport(relays: relays.urls, identity: nil, policy: policy)
        synced.wait(for: 1)
        let sync = monotonicSeconds() - s0
        transport.stop()
        let held = (try? account.events(matching: [try! RelayFilter.fromJSON(#"{"kinds":[1]}"#)], now: Int64(time(nil))).count) ?? 0
        return [
            ManagedFigure(
                name: "sync of \(count) stored events (LocalRelay-like cap of 500) into a fresh account; \(held) held",
                value: Double(count) / sync, unit: "/s",
                baselineName: "ingest(lines:) of the same events in batches of 256", baselineValue: Double(count) / ingest)
        ]
    }
}

/// A thread-safe counter that can be waited on.
final class Counter: Sendable {
    private let state = Mutex(0)
    private let signal = DispatchSemaphore(value: 0)
    func add() {
        state.withLock { $0 += 1 }
        signal.signal()
    }
    var value: Int { state.withLock { $0 } }
    /// Waits until the count reaches `n` (at most 120 s).
    func wait(for n: Int) {
        let deadline = monotonicSeconds() + 120
        while value < n && monotonicSeconds() < deadline { _ = signal.wait(timeout: .now() + .milliseconds(100)) }
    }
}

/// This process's counters from /proc.
enum ProcStatus {
    static func field(_ text: String, _ name: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).filter(\.isNumber))
        }
        return nil
    }

    static func threads() -> Int { field(PeakMemoryReport.readSmallFile("/proc/self/status") ?? "", "Threads") ?? 0 }

    static func residentKiB() -> Double { Double(field(PeakMemoryReport.readSmallFile("/proc/self/status") ?? "", "VmRSS") ?? 0) }

    /// Voluntary + involuntary context switches of every thread of this process.
    static func contextSwitches() -> Int {
        guard let dir = opendir("/proc/self/task") else { return 0 }
        defer { closedir(dir) }
        var total = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.first?.isNumber == true, let text = PeakMemoryReport.readSmallFile("/proc/self/task/\(name)/status") else { continue }
            total += (field(text, "voluntary_ctxt_switches") ?? 0) + (field(text, "nonvoluntary_ctxt_switches") ?? 0)
        }
        return total
    }
}

/// `softchat relay …` as a child process: its URLs, and its end when its stdin closes.
final class RelayProcess {
    let urls: [String]
    private let pid: pid_t
    private let input: Int32

    init(executable: String, arguments: [String], lines: Int) {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        precondition(pipe(&toChild) == 0 && pipe(&fromChild) == 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addclose(&actions, toChild[1])
        posix_spawn_file_actions_addclose(&actions, fromChild[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable, "relay"] + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        precondition(posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0, "cannot start \(executable) relay")
        close(toChild[0])
        close(fromChild[1])
        self.pid = pid
        input = toChild[1]
        var text = ""
        var byte: UInt8 = 0
        var got: [String] = []
        while got.count < lines, read(fromChild[0], &byte, 1) == 1 {
            if byte == 10 {
                got.append(text)
                text = ""
            } else {
                text.append(Character(UnicodeScalar(byte)))
            }
        }
        close(fromChild[0])
        precondition(got.count == lines, "softchat relay printed \(got.count) of \(lines) URLs")
        urls = got
    }

    func stop() {
        close(input)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}

/// Round trips through an `IODriver`: one frame out, wait for the answer, the next.
final class DriverRoundTrips: IODriverHandler, @unchecked Sendable {
    // @unchecked: confined to the driver thread once started; `done` signals the caller.
    let endpoint: RelayEndpoint
    let frames: [String]
    let answer: @Sendable (String) -> Bool
    var next = 0
    var started = 0.0
    var elapsed = 0.0
    var opened = false
    let done = DispatchSemaphore(value: 0)

    init(url: String, frames: [String], answer: @escaping @Sendable (String) -> Bool) {
        endpoint = try! RelayEndpoint(url)
        self.frames = frames
        self.answer = answer
    }

    /// Seconds for every frame's round trip.
    static func run(url: String, frames: [String], answer: @escaping @Sendable (String) -> Bool) -> Double {
        let client = DriverRoundTrips(url: url, frames: frames, answer: answer)
        let driver = IODriver(handler: client, name: "softchat.bench")
        driver.start()
        client.done.wait()
        driver.stop()
        return client.elapsed
    }

    func driver(_ driver: IODriver, handle event: IOEvent) {
        switch event {
        case .opened(let id):
            started = monotonicSeconds()
            driver.send(id, text: frames[0], token: 0)
        case .text(let id, let text):
            guard answer(text) else { return }
            next += 1
            if next == frames.count {
                elapsed = monotonicSeconds() - started
                driver.close(id)
                done.signal()
            } else {
                driver.send(id, text: frames[next], token: next)
            }
        case .closed:
            elapsed = .infinity
            done.signal()
        default:
            break
        }
    }

    func driverService(_ driver: IODriver, now: Int64) -> Int64? {
        if !opened {
            opened = true
            driver.open(ConnectionID(1), endpoint: endpoint, options: ConnectionOptions())
        }
        return nil
    }
}
