import SoftchatBenchmarks
import SoftchatJSON

enum BenchCommand {
    static let help = """
        usage: softchat bench [events|all] [--json] [--quick]

        Measures throughput beside a baseline measured in the same process and prints the
        ratio. events: parse+verify of a deterministic corpus (20,000 events with ~200-byte
        content, 1,000 with ~50 KB) and signing, beside raw libsecp256k1 + SHA-256.
        --quick runs a small corpus once (a smoke test, not a measurement).
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: [], switches: ["--json", "--quick", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let which = parsed.positional.first ?? "all"
        guard ["events", "all"].contains(which), parsed.positional.count <= 1 else {
            throw UsageError("unknown benchmark \"\(which)\" (events, all)")
        }
        let results = EventBenchmarks.run(quick: parsed.has("--quick"))
        for r in results {
            if parsed.has("--json") {
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
                var text = "\(r.name): \(Int(r.perSecond)) /s"
                if let b = r.baselinePerSecond, let name = r.baselineName, let ratio = r.ratio {
                    text += " — baseline \(name): \(Int(b)) /s — ratio \(format(ratio, 3))"
                }
                text += " — peak \(format(r.peakMiB, 1)) MiB"
                Output.standard.line(text)
            }
            Output.standard.flush()
        }
        return .success
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
