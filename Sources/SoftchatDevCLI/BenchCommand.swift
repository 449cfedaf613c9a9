import SoftchatBenchmarks
import SoftchatCommandLine
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

enum BenchCommand {
    static let help = """
        usage: softchat-dev bench [events|wire|session|account|scale|transport|managed|cli|memory|negentropy|dm|all] [--json] [--quick]
               softchat-dev bench corpus DIR [--quick]
               softchat-dev bench query --db FILE --filter JSON [--limit N] [--repeat N] [--now T]

        Each figure is printed beside a baseline measured in the same process, with the ratio
        and the peak memory so far:
          events     parse+verify of 20,000 events (~200 B content) and 1,000 (~50 KB), and
                     signing, beside raw libsecp256k1 verify + SHA-256 (sign32 for signing)
          wire       relay EVENT frames parse+verify, filter matching, EVENTS batches (all cores)
          session    receive → persistEvent → confirmIngested beside parse+verify alone
          account    durable ingestion in batches of 256 beside raw SQLite inserts of the same
                     rows with the same durability; chat-history query latency
          scale      an account of 1,000,000 events: ingest rate of the last 10,000 beside the
                     first 10,000, chat-history and conversation-list medians beside the same
                     at 10,000, a fresh process's peak memory serving the chat query
                     [--events N] [--arrival overlapping|dated] [--layout 8 (the old layout)]
          transport  publish → OK round trips on loopback, single EVENTs vs EVENTS batches,
                     beside a loopback REQ → EOSE round trip
          managed    the managed transport against relays in a child process (`softchat relay`):
                     context switches per second idle with 1 and 50 connections, threads with
                     1 and 100, memory per idle connection, single EVENT → OK round trips
                     through the I/O driver beside a loopback echo through the same driver,
                     the durable publish path, and a 100,000-event sync into a fresh account
                     beside `account ingest` of the same events
          cli        `event verify`, `frame check`, `account ingest` as child processes on
                     corpus files beside the same library calls in-process; the child's peak
          memory     peak memory of `event verify`, `account ingest` and a RelaySession replay
                     in fresh processes over 1×, 2×, 4×, 8× the events (growth = last/first)
          negentropy NIP-77 sync of 100,000 events with 1% missing beside a REQ paging resync
                     (bytes, seconds), identical sets of 50,000 (in process beside strfry's
                     30 ms, and end to end beside a REQ sync of the horizon), prefix-sum
                     fingerprints beside rescanning; --events-file FILE, --relay URL (a relay
                     holding exactly those events, e.g. LocalRelay) and --filter JSON measure
                     given sets (scripts/bench/bench-negentropy runs rust-nostr on the same)
          dm         NIP-17: unwrap throughput on one core beside its crypto floor (two ECDH,
                     HKDF+HMAC, ChaCha20, the seal's Schnorr verify, on precomputed inputs);
                     durable ingestion with unwrapping beside storing alone; a 5,000-wrap inbox
                     synced into a fresh account to its room list (goal 2 s) and a cold reopen
                     to it (goal 100 ms) [--wraps N] [--wraps-file FILE] [--relay URL]
                     [--write-wraps FILE: write N wraps and stop] (scripts/bench/bench-dm adds
                     rust-nostr's unwrap rate on the same wraps)
          observe    live queries: ingest with 1,000 open observations beside none; commit to
                     change delivered (p50, p99) for one observer and one of 1,000; memory per
                     observation; a reader that never reads (what waits, and its reload)
        --small FILE / --large FILE measure these JSON-lines corpora in `events` instead of the
        generated ones (scripts/bench/bench-peers uses the peers kit's files); --small-only measures
        parse+verify of the small corpus alone (scripts/bench/bench-wasm's native figure: the
        WebAssembly build in Node and Chromium beside it, its size and instantiation time).
        `corpus DIR` writes the generated corpora as JSON lines (events-20k.jsonl,
        events-1k-50kb.jsonl) for measuring the CLI's streaming paths (`bench cli`).
        `query` opens the account at FILE and reads the newest N (default 50) events matching the
        filter R times (default 200) in this process, after one untimed read: one JSON line with
        the median and p99 in milliseconds and the events each read returned
        (scripts/bench/peers_ingest_bench.py times rust-nostr's query beside it).
        --quick runs small corpora once (a smoke test, not a measurement). Build with
        `swift build -c release` for figures worth reporting.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args,
            valued: [
                "--small", "--large", "--events", "--events-file", "--relay", "--filter", "--arrival", "--layout", "--wraps", "--wraps-file",
                "--write-wraps", "--db", "--limit", "--repeat", "--now",
            ],
            switches: ["--json", "--quick", "--small-only", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let which = parsed.positional.first ?? "all"
        if which == "corpus" {
            guard parsed.positional.count == 2 else { throw UsageError("bench corpus needs a directory") }
            try writeCorpus(to: parsed.positional[1], quick: parsed.has("--quick"))
            return .success
        }
        if which == "dm", let out = parsed.options["--write-wraps"] {
            let wraps = PrivateMessageBenchmarks.makeWraps(count: Int(try parsed.int("--wraps") ?? 5_000))
            guard CorpusFiles.write(wraps.map(\.jsonText), to: out) else { throw RuntimeFailure(code: "io", message: "cannot write \(out)") }
            return .success
        }
        if which == "query" {
            guard let db = parsed.options["--db"], let filterText = parsed.options["--filter"] else {
                throw UsageError("bench query needs --db FILE and --filter JSON")
            }
            let repeats = max(1, Int(try parsed.int("--repeat") ?? 200))
            let timed = try AccountBenchmarks.timeQuery(
                path: db, filterJSON: filterText, limit: Int(try parsed.int("--limit") ?? 50), repeats: repeats,
                now: try parsed.int("--now") ?? Int64(time(nil)))
            var o = JSONObject()
            o.append("median_ms", .number("\(timed.medianMilliseconds)"))
            o.append("p99_ms", .number("\(timed.p99Milliseconds)"))
            o.append("events", .integer(Int64(timed.events)))
            o.append("repeats", .integer(Int64(repeats)))
            Output.standard.line(JSONValue.object(o).jsonText)
            return .success
        }
        let all = ["events", "wire", "session", "account", "scale", "transport", "managed", "cli", "memory", "negentropy", "dm", "observe"]
        guard all.contains(which) || which == "all", parsed.positional.count <= 1 else {
            throw UsageError("unknown benchmark \"\(which)\" (\(all.joined(separator: ", ")), all)")
        }
        let quick = parsed.has("--quick")
        for name in which == "all" ? all : [which] {
            let results: [BenchResult]
            switch name {
            case "events":
                results = EventBenchmarks.run(
                    quick: quick, smallFile: parsed.options["--small"], largeFile: parsed.options["--large"],
                    smallOnly: parsed.has("--small-only"))
            case "wire": results = WireBenchmarks.run(quick: quick)
            case "session": results = SessionBenchmarks.run(quick: quick)
            case "account":
                let path = try temporaryDirectory()
                results = AccountBenchmarks.run(quick: quick, directory: path)
                rmdir(path)
            case "cli":
                let path = try temporaryDirectory()
                results = CLIBenchmarks.run(quick: quick, executable: ChildProcess.softchatExecutable, directory: path)
                rmdir(path)
            case "scale":
                let path = try temporaryDirectory()
                guard let arrival = ScaleBenchmarks.Arrival(rawValue: parsed.options["--arrival"] ?? "overlapping") else {
                    throw UsageError("--arrival must be overlapping or dated")
                }
                results = ScaleBenchmarks.run(
                    quick: quick, directory: path, events: try parsed.int("--events").map { Int($0) }, arrival: arrival,
                    layoutVersion: try parsed.int("--layout").map { Int($0) })
                rmdir(path)
            case "managed":
                let path = try temporaryDirectory()
                let figures = ManagedBenchmarks.run(quick: quick, executable: ChildProcess.softchatExecutable, directory: path)
                for name in ["idle-1", "idle-50", "idle-100", "publish", "enqueue", "enqueue-8", "ingest", "sync"] {
                    for suffix in [".db", ".db-wal", ".db-shm"] { unlink("\(path)/\(name)\(suffix)") }
                }
                rmdir(path)
                print(figures, json: parsed.has("--json"))
                continue
            case "negentropy":
                let path = try temporaryDirectory()
                var options = NegentropyBenchmarks.Options()
                options.quick = quick
                options.eventsFile = parsed.options["--events-file"]
                options.relayURL = parsed.options["--relay"]
                if let filter = parsed.options["--filter"] { options.filterJSON = filter }
                let figures = NegentropyBenchmarks.run(options, executable: ChildProcess.softchatExecutable, directory: path)
                rmdir(path)
                print(figures, json: parsed.has("--json"))
                continue
            case "dm":
                let path = try temporaryDirectory()
                var options = PrivateMessageBenchmarks.Options()
                options.quick = quick
                if let n = try parsed.int("--wraps") { options.wraps = Int(n) }
                options.wrapsFile = parsed.options["--wraps-file"]
                options.relayURL = parsed.options["--relay"]
                let figures = PrivateMessageBenchmarks.run(options, executable: ChildProcess.softchatExecutable, directory: path)
                rmdir(path)
                print(figures, json: parsed.has("--json"))
                continue
            case "observe":
                let path = try temporaryDirectory()
                let figures = ObserveBenchmarks.run(quick: quick, directory: path)
                rmdir(path)
                print(figures, json: parsed.has("--json"))
                continue
            case "memory":
                let path = try temporaryDirectory()
                let probes = MemoryBenchmarks.run(quick: quick, executable: ChildProcess.softchatExecutable, directory: path)
                rmdir(path)
                print(probes, json: parsed.has("--json"))
                continue
            default: results = TransportBenchmarks.run(quick: quick)
            }
            print(results, json: parsed.has("--json"))
        }
        return .success
    }

    static func print(_ results: [BenchResult], json: Bool) {
        for r in results {
            if json {
                var o = JSONObject()
                o.append("bench", .string(r.name))
                o.append("items", .integer(Int64(r.items)))
                o.append("perSecond", .integer(Int64(r.perSecond)))
                if let b = r.baselineName { o.append("baseline", .string(b)) }
                if let b = r.baselinePerSecond { o.append("baselinePerSecond", .integer(Int64(b))) }
                if let ratio = r.ratio { o.append("ratio", .number(format(ratio, 3))) }
                o.append("peakMiB", .number(format(r.peakMiB, 1)))
                Output.standard.line(JSONValue.object(o).jsonText)
            } else {
                var text = r.items == 1 ? "\(r.name): \(format(r.seconds * 1000, 3)) ms" : "\(r.name): \(Int(r.perSecond)) /s"
                if let b = r.baselinePerSecond, let name = r.baselineName, let ratio = r.ratio {
                    text += " — baseline \(name): \(Int(b)) /s — ratio \(format(ratio, 3))"
                }
                text += " — peak \(format(r.peakMiB, 1)) MiB"
                Output.standard.line(text)
            }
            Output.standard.flush()
        }
    }

    static func temporaryDirectory() throws -> String {
        var template = Array("/tmp/softchat-bench-XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw RuntimeFailure(code: "tempdir", message: "mkdtemp failed") }
        return String(cString: dir)
    }

    static func print(_ figures: [ManagedFigure], json: Bool) {
        for f in figures {
            if json {
                var o = JSONObject()
                o.append("bench", .string(f.name))
                o.append("value", .number(format(f.value, 3)))
                o.append("unit", .string(f.unit))
                if let b = f.baselineName { o.append("baseline", .string(b)) }
                if let b = f.baselineValue { o.append("baselineValue", .number(format(b, 3))) }
                if let r = f.ratio, f.unit == "/s" { o.append("ratio", .number(format(r, 3))) }
                Output.standard.line(JSONValue.object(o).jsonText)
            } else {
                var text = "\(f.name): \(format(f.value, 2)) \(f.unit)"
                if let b = f.baselineValue, let name = f.baselineName {
                    text += " — baseline \(name): \(format(b, 2))"
                    if let r = f.ratio, f.unit == "/s" { text += " — ratio \(format(r, 3))" }
                }
                Output.standard.line(text)
            }
            Output.standard.flush()
        }
    }

    static func print(_ probes: [MemoryProbe], json: Bool) {
        for p in probes {
            if json {
                var o = JSONObject()
                o.append("bench", .string("peak memory, \(p.path)"))
                o.append("sizes", .array(p.sizes.map { .integer(Int64($0)) }))
                o.append("peakMiB", .array(p.peakMiB.map { .number(format($0, 1)) }))
                o.append("growth", .number(format(p.growth, 3)))
                Output.standard.line(JSONValue.object(o).jsonText)
            } else {
                let steps = zip(p.sizes, p.peakMiB).map { "\($0) events \(format($1, 1)) MiB" }.joined(separator: ", ")
                Output.standard.line(
                    "peak memory, \(p.path): \(steps) — growth \(format(p.growth, 3))× "
                        + "over \(p.sizes.last! / p.sizes.first!)× the events")
            }
        }
        Output.standard.flush()
    }

    static func writeCorpus(to directory: String, quick: Bool) throws {
        mkdir(directory, 0o755)
        let files = [
            ("events-20k.jsonl", BenchCorpus.small(quick: quick)),
            ("events-1k-50kb.jsonl", BenchCorpus.large(quick: quick)),
            ("events-1k-50kb-dense.jsonl", BenchCorpus.dense(quick: quick)),
        ]
        for (name, events) in files {
            let path = directory + "/" + name
            guard CorpusFiles.write(events.map(\.jsonText), to: path) else {
                throw RuntimeFailure(code: "io", message: "cannot write \(path)")
            }
            Output.standard.line("\(path): \(events.count) events")
        }
    }

    static func format(_ x: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let n = Int((x * scale).rounded())
        let whole = n / Int(scale)
        var frac = String(n % Int(scale))
        while frac.count < digits { frac = "0" + frac }
        return "\(whole).\(frac)"
    }
}
