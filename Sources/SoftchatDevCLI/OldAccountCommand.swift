import SoftchatBenchmarks
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
@_spi(OldLayouts) import SoftchatStorage

/// `softchat-dev old-account`: writes an account in an older schema's layout (version 8 by
/// default: events keyed by id), so the migration harness can rebuild, interrupt and resume a
/// large one. The events are the benchmarks' chat corpus, in batches of 256.
enum OldAccountCommand {
    static let help = """
        usage: softchat-dev old-account --db FILE [--version N] [--events N]

          Creates FILE at schema version N (default 8) holding N events (default 20000) of the
          benchmark corpus (kind 1, 50 authors, t/p/e tags) and a few publish intents, then prints
          {"version":N,"events":N}. FILE must not exist.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--db", "--version", "--events"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard let path = parsed.options["--db"] else { throw UsageError("old-account needs --db FILE") }
        let version = Int(try parsed.int("--version") ?? 8)
        let count = Int(try parsed.int("--events") ?? 20_000)
        guard (1..<SoftchatAccount.latestSchemaVersion).contains(version) else {
            throw UsageError("--version must be 1 to \(SoftchatAccount.latestSchemaVersion - 1)")
        }
        guard count >= 1 else { throw UsageError("--events must be at least 1") }
        let account = try SoftchatAccount.open(path: path, version: version)
        defer { account.close() }
        var held = 0
        var chunk: UInt64 = 0
        while held < count {
            let events = BenchCorpus.events(count: min(10_000, count - held), contentBytes: 200, seed: 5_000 + chunk)
            chunk += 1
            for start in stride(from: 0, to: events.count, by: 256) {
                _ = try account.incoming.ingest(Array(events[start..<min(start + 256, events.count)]), receivedAt: 1_800_000_000 + Int64(chunk))
            }
            held += events.count
        }
        if version >= 2 {
            let own = BenchCorpus.events(count: 3, contentBytes: 50, seed: 4_999)
            _ = try account.outgoing.enqueueSigned(operationID: "old-account", events: own, relayURLs: ["wss://relay.example"], now: 1_800_000_000)
        }
        Output.standard.line(#"{"version":\#(version),"events":\#(held)}"#)
        return .success
    }
}
