import SoftchatBenchmarks
import SoftchatJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum BenchCommand {
    static let help = """
        usage: softchat bench [events|wire|session|account|transport|all] [--json] [--quick]

        Each figure is printed beside a baseline measured in the same process, with the ratio
        and the peak memory so far:
          events     parse+verify of 20,000 events (~200 B content) and 1,000 (~50 KB), and
                     signing, beside raw libsecp256k1 verify + SHA-256 (sign32 for signing)
          wire       relay EVENT frames parse+verify, filter matching, EVENTS batches (all cores)
          session    receive → persistEvent → confirmIngested beside parse+verify alone
          account    durable ingestion in batches of 256 beside raw SQLite inserts of the same
                     rows with the same durability; chat-history query latency
          transport  publish → OK round trips on loopback, single EVENTs vs EVENTS batches,
                     beside a loopback REQ → EOSE round trip
        --small FILE / --large FILE measure these JSON-lines corpora in `events` instead of the
        generated ones (scripts/bench-peers uses the peers kit's files).
        --quick runs small corpora once (a smoke test, not a measurement). Build with
        `swift build -c release` for figures worth reporting.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--small", "--large"], switches: ["--json", "--quick", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let which = parsed.positional.first ?? "all"
        let all = ["events", "wire", "session", "account", "transport"]
        guard all.contains(which) || which == "all", parsed.positional.count <= 1 else {
            throw UsageError("unknown benchmark \"\(which)\" (\(all.joined(separator: ", ")), all)")
        }
        let quick = parsed.has("--quick")
        for name in which == "all" ? all : [which] {
            let results: [BenchResult]
            switch name {
            case "events":
                results = EventBenchmarks.run(quick: quick, smallFile: parsed.options["--small"], largeFile: parsed.options["--large"])
            case "wire": results = WireBenchmarks.run(quick: quick)
            case "session": results = SessionBenchmarks.run(quick: quick)
            case "account":
                var template = Array("/tmp/softchat-bench-XXXXXX".utf8CString)
                guard let dir = mkdtemp(&template) else { throw RuntimeFailure(code: "tempdir", message: "mkdtemp failed") }
                let path = String(cString: dir)
                results = AccountBenchmarks.run(quick: quick, directory: path)
                rmdir(path)
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
