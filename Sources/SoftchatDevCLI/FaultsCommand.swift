import SoftchatBenchmarks
import SoftchatCommandLine
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev faults`: the fault harness (`FaultHarness`), seeded runs of a sender and a
/// receiver managed transport through fault proxies, each checked for lost, rejected,
/// unsettled and doubly held messages and leases left held.
enum FaultsCommand {
    static let help = """
        usage: softchat-dev faults [--runs N] [--events N] [--seed S] [--json]

        Runs N (default 1) seeded fault runs of N events each (default 2,000). Run k uses seed
        S + k (S defaults to 1), so a failing run replays with `--runs 1 --seed <its seed>`.
        Each run: an embedded relay capping REQs at 500 events, behind two fault proxies that
        black-hole connections (forward nothing, keep sockets open), re-frame relay messages
        as fragments with gaps of 200–1,500 ms (pings between them), cut connections at random
        messages (truncating a frame), right after an EOSE and inside stored-event bursts, and
        delay messages; NIP-11 passes through. A sender publishes the events (half before the
        receiver starts, the rest in batches while it runs); the receiver keeps one
        subscription on one account file, restarted once mid-run. Then the faults stop and
        both must converge within 180 s.
        A run passes when the relay's events are all at the receiver, held once; every intent
        is accepted (once, by the sender's records) and none rejected; no lease is left held;
        both accounts pass check(). One line per run on stdout (a JSON object with --json):
        seed, events, faults per kind, reconnects, seconds, PASS/FAIL with the numbers.
        Progress goes to stderr when it is a terminal. Exit 0 when every run passed, 1 if any
        failed.
        """

    /// One progress line straight to stderr (the runs' own threads may call it).
    @Sendable static func progress(_ line: String) {
        let bytes = Array("faults: \(line)\n".utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--runs", "--events", "--seed"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard parsed.positional.isEmpty else { throw UsageError("faults takes no positional arguments\n\n\(help)") }
        let runs = Int(try parsed.int("--runs") ?? 1)
        let events = Int(try parsed.int("--events") ?? 2_000)
        let seed = try parsed.int("--seed") ?? 1
        guard runs >= 1 else { throw UsageError("--runs needs N ≥ 1") }
        guard events >= 1 && events <= 1_000_000 else { throw UsageError("--events needs 1 ≤ N ≤ 1,000,000") }
        guard seed >= 0 else { throw UsageError("--seed needs S ≥ 0") }
        let directory = try BenchCommand.temporaryDirectory()
        defer { rmdir(directory) }
        let progress: (@Sendable (String) -> Void)? = isTerminal(2) ? Self.progress : nil
        var failed = 0
        for k in 0..<runs {
            let options = FaultRunOptions(seed: UInt64(seed) + UInt64(k), events: events, directory: directory)
            let result = FaultHarness.run(options, progress: progress)
            if !result.passed { failed += 1 }
            Output.standard.line(parsed.has("--json") ? result.json.jsonText : result.line)
            Output.standard.flush()
        }
        if runs > 1 && !parsed.has("--json") { Output.standard.line("faults: \(runs - failed) of \(runs) runs passed") }
        return failed == 0 ? .success : .inputRejected
    }
}
