import SoftchatCore
import SoftchatJSON
import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench cli`: the paths users pipe data through (`event verify`, `frame check`,
/// `account ingest`), run as real child processes on corpus files, each beside the same
/// library call on the same lines inside this process. A ratio near 1 means the CLI's I/O,
/// process start and output cost nothing that shows.
public enum CLIBenchmarks {
    public static func run(quick: Bool, executable: String, directory: String) -> [BenchResult] {
        let reps = quick ? 1 : 3
        let small = BenchCorpus.small(quick: quick)
        let large = BenchCorpus.large(quick: quick)
        let smallLines = small.map(\.jsonText)
        let largeLines = large.map(\.jsonText)
        let frames = small.map { RelayResponseFrame.event(subscriptionID: "chat", event: $0).toJSON() }
        let smallPath = CorpusFiles.written(smallLines, to: directory + "/events.jsonl")
        let largePath = CorpusFiles.written(largeLines, to: directory + "/large.jsonl")
        let framesPath = CorpusFiles.written(frames, to: directory + "/frames.jsonl")
        var results: [BenchResult] = []

        func child(_ arguments: [String], _ stdin: String, setUp: () -> Void = {}) -> ChildRun {
            var best: ChildRun?
            for _ in 0..<reps {
                setUp()
                let run = ChildProcess.run(executable, arguments, stdinPath: stdin)
                precondition(run.status == 0, "softchat \(arguments.joined(separator: " ")) exited \(run.status)")
                if best == nil || run.seconds < best!.seconds { best = run }
            }
            return best!
        }

        for (label, lines, path) in [("~200 B", smallLines, smallPath), ("~50 KB", largeLines, largePath)] {
            // The same input the CLI gets: bytes, whose UTF-8 is checked before anything else.
            let bytes = lines.map { Array($0.utf8) }
            let library = bestOf(reps) {
                var ok = 0
                for start in stride(from: 0, to: bytes.count, by: 256) {
                    for r in VerifiedEvent.verify(utf8: Array(bytes[start..<min(start + 256, bytes.count)])) {
                        if case .success = r { ok += 1 }
                    }
                }
                precondition(ok == lines.count)
            }
            let cli = child(["event", "verify"], path)
            results.append(
                BenchResult(
                    name: "CLI event verify, \(lines.count) events \(label) (child process)", items: lines.count, seconds: cli.seconds,
                    baselineName: "VerifiedEvent.verify(utf8:) in-process, same lines", baselinePerSecond: Double(lines.count) / library,
                    peakMiB: cli.peakMiB))
        }

        let frameLibrary = bestOf(reps) {
            for f in frames { precondition((try? parseRelayResponseFrame(f)) != nil) }
        }
        let frameCLI = child(["frame", "check", "--from", "relay"], framesPath)
        results.append(
            BenchResult(
                name: "CLI frame check --from relay, \(frames.count) EVENT frames (child process)", items: frames.count,
                seconds: frameCLI.seconds, baselineName: "parseRelayResponseFrame in-process",
                baselinePerSecond: Double(frames.count) / frameLibrary, peakMiB: frameCLI.peakMiB))

        let libraryDB = directory + "/library.db"
        let cliDB = directory + "/cli.db"
        let ingestLibrary = bestOf(reps) {
            CorpusFiles.removeDatabase(libraryDB)
            let account = try! SoftchatAccount.open(path: libraryDB)
            for start in stride(from: 0, to: smallLines.count, by: 256) {
                let outcome = try! account.incoming.ingest(
                    lines: Array(smallLines[start..<min(start + 256, smallLines.count)]), receivedAt: 1_800_000_000)
                precondition(outcome.receipt.quarantinedEventIDs.isEmpty)
            }
            account.close()
        }
        let ingestCLI = child(["account", "ingest", "--db", cliDB, "--now", "1800000000"], smallPath) {
            CorpusFiles.removeDatabase(cliDB)
        }
        results.append(
            BenchResult(
                name: "CLI account ingest, \(smallLines.count) events in batches of 256 (child process)", items: smallLines.count,
                seconds: ingestCLI.seconds, baselineName: "account.incoming.ingest(lines:) in-process",
                baselinePerSecond: Double(smallLines.count) / ingestLibrary, peakMiB: ingestCLI.peakMiB))

        for p in [smallPath, largePath, framesPath] { unlink(p) }
        for db in [libraryDB, cliDB] { CorpusFiles.removeDatabase(db) }
        return results
    }
}

/// Peak resident memory of the streaming paths as the input grows: each size runs in a fresh
/// child process, so every figure is that run's own peak.
public struct MemoryProbe: Sendable {
    public var path: String
    public var sizes: [Int]
    public var peakMiB: [Double]
    /// Peak at the largest input over peak at the smallest: 1.0 is no growth at all.
    public var growth: Double { peakMiB.last! / peakMiB.first! }
}

/// `softchat-dev bench memory`: `event verify`, `account ingest` and a RelaySession replay (receive
/// → confirmIngested per event) over 1×, 2×, 4× and 8× the events.
public enum MemoryBenchmarks {
    public static func run(quick: Bool, executable: String, directory: String) -> [MemoryProbe] {
        let sizes = quick ? [250, 500, 1_000, 2_000] : [2_500, 5_000, 10_000, 20_000]
        let corpus = BenchCorpus.events(count: sizes.last!, contentBytes: 200)
        let lines = corpus.map(\.jsonText)
        var replay = [
            #"{"call":"connect"}"#, #"{"call":"transportConnected","now":1800000000}"#,
            #"{"call":"subscribe","id":"chat","filters":[{"kinds":[1]}]}"#,
        ]
        for e in corpus {
            let frame = RelayResponseFrame.event(subscriptionID: "chat", event: e).toJSON()
            replay.append(JSONValue.object(JSONObject(["call": "receive", "text": .string(frame)])).jsonText)
            replay.append(JSONValue.object(JSONObject(["call": "confirmIngested", "eventId": .string(e.id)])).jsonText)
        }
        let db = directory + "/memory.db"
        var probes = [
            MemoryProbe(path: "event verify", sizes: sizes, peakMiB: []),
            MemoryProbe(path: "account ingest", sizes: sizes, peakMiB: []),
            MemoryProbe(path: "replay (RelaySession receive → confirmIngested)", sizes: sizes, peakMiB: []),
        ]
        for n in sizes {
            let eventsPath = CorpusFiles.written(Array(lines.prefix(n)), to: directory + "/events-\(n).jsonl")
            let scriptPath = CorpusFiles.written(Array(replay.prefix(3 + 2 * n)), to: directory + "/replay-\(n).jsonl")
            CorpusFiles.removeDatabase(db)
            let runs = [
                ChildProcess.run(executable, ["event", "verify"], stdinPath: eventsPath),
                ChildProcess.run(executable, ["account", "ingest", "--db", db, "--now", "1800000000"], stdinPath: eventsPath),
                ChildProcess.run(executable, ["replay", "-"], stdinPath: scriptPath),
            ]
            for (i, run) in runs.enumerated() {
                precondition(run.status == 0, "\(probes[i].path) on \(n) events exited \(run.status)")
                probes[i].peakMiB.append(run.peakMiB)
            }
            unlink(eventsPath)
            unlink(scriptPath)
        }
        CorpusFiles.removeDatabase(db)
        return probes
    }
}

public enum CorpusFiles {
    /// Writes one line per text; false when the file cannot be written.
    public static func write(_ lines: [String], to path: String) -> Bool {
        guard let f = fopen(path, "wb") else { return false }
        var ok = true
        for line in lines {
            var line = line
            line.withUTF8 { if fwrite($0.baseAddress, 1, $0.count, f) != $0.count { ok = false } }
            if fputc(0x0A, f) == EOF { ok = false }
        }
        return fclose(f) == 0 && ok
    }

    /// The same for a benchmark's own scratch files, which must be writable; returns the path.
    static func written(_ lines: [String], to path: String) -> String {
        precondition(write(lines, to: path), "cannot write \(path)")
        return path
    }

    static func removeDatabase(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }
}
