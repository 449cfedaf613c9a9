import CSQLite
import SoftchatCore
@_spi(OldLayouts) import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench account`: durable ingestion in batches of 256 (WAL, synchronous=FULL, one
/// transaction per batch) beside raw SQLite inserts of the same rows with the same durability,
/// the latency of a chat-history query, and durable enqueue one operation per commit beside 256
/// per commit.
public enum AccountBenchmarks {
    /// `events(matching:limit:now:)` of the filter `filterJSON` on the account at `path`, `repeats` times after
    /// one untimed read, in this process (`softchat-dev bench query`; rust-nostr's query beside it
    /// in scripts/bench/peers_ingest_bench.py): the median and p99 in milliseconds, and the
    /// events one read returns.
    public static func timeQuery(path: String, filterJSON: String, limit: Int, repeats: Int, now: Int64) throws -> (
        medianMilliseconds: Double, p99Milliseconds: Double, events: Int
    ) {
        let filters = [try RelayFilter.fromJSON(filterJSON)]
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        let events = try account.events(matching: filters, limit: limit, now: now).count
        var milliseconds: [Double] = []
        for _ in 0..<max(1, repeats) {
            let t0 = monotonicSeconds()
            _ = try account.events(matching: filters, limit: limit, now: now)
            milliseconds.append((monotonicSeconds() - t0) * 1_000)
        }
        milliseconds.sort()
        return (percentile(milliseconds, 50), percentile(milliseconds, 99), events)
    }

    public static func run(quick: Bool, directory: String) -> [BenchResult] {
        let count = quick ? 1_024 : 20_480
        let corpus = BenchCorpus.events(count: count, contentBytes: 200)
        let batches = stride(from: 0, to: count, by: 256).map { Array(corpus[$0..<min($0 + 256, count)]) }

        let rawPath = directory + "/raw.db"
        let rawSeconds = rawInserts(batches, path: rawPath)

        let path = directory + "/account.db"
        let account = try! SoftchatAccount.open(path: path)
        let t0 = monotonicSeconds()
        for b in batches { _ = try! account.incoming.ingest(b, receivedAt: 1_800_000_000) }
        let ingestSeconds = monotonicSeconds() - t0
        var results = [
            BenchResult(
                name: "durable ingestion, batches of 256", items: count, seconds: ingestSeconds,
                baselineName: "raw SQLite inserts, same rows and durability", baselinePerSecond: Double(count) / rawSeconds,
                peakMiB: peakMemoryMiB())
        ]

        // Chat history: one recipient's messages, newest 100.
        let recipient = corpus.first { $0.firstTagValue("p") != nil }!.firstTagValue("p")!
        let filter = try! RelayFilter.fromJSON("{\"kinds\":[1],\"#p\":[\"\(recipient)\"],\"limit\":100}")
        let queries = quick ? 20 : 200
        var latencies: [Double] = []
        for _ in 0..<queries {
            let q0 = monotonicSeconds()
            let found = try! account.events(matching: [filter], now: 1_800_000_000)
            latencies.append(monotonicSeconds() - q0)
            precondition(!found.isEmpty)
        }
        latencies.sort()
        let median = latencies[latencies.count / 2]
        results.append(
            BenchResult(
                name: "chat-history query (#p + kind, limit 100), median", items: 1, seconds: median,
                baselineName: nil, baselinePerSecond: nil, peakMiB: peakMemoryMiB()))
        account.close()

        // Durable enqueue: one intent per operation, one commit each, beside 256 operations per
        // commit (enqueueSigned of many operations), into the same kind of account.
        let publishCount = quick ? 512 : 8_192
        let outgoing = BenchCorpus.events(count: publishCount * 2, contentBytes: 200, seed: 31)
        let relay = "wss://relay.example"
        let singlePath = directory + "/enqueue-single.db"
        let single = try! SoftchatAccount.open(path: singlePath)
        let s0 = monotonicSeconds()
        for (i, e) in outgoing[0..<publishCount].enumerated() {
            _ = try! single.outgoing.enqueueSigned(operationID: "one-\(i)", events: [e], relayURLs: [relay], now: 1_800_000_000)
        }
        let singleSeconds = monotonicSeconds() - s0
        single.close()
        let groupPath = directory + "/enqueue-group.db"
        let group = try! SoftchatAccount.open(path: groupPath)
        let operations = outgoing[publishCount...].enumerated().map {
            OutgoingOperation(operationID: "grouped-\($0.offset)", events: [$0.element], relayURLs: [relay])
        }
        let g0 = monotonicSeconds()
        for start in stride(from: 0, to: operations.count, by: 256) {
            _ = try! group.outgoing.enqueueSigned(Array(operations[start..<min(start + 256, operations.count)]), now: 1_800_000_000)
        }
        let groupSeconds = monotonicSeconds() - g0
        group.close()
        results.append(
            BenchResult(
                name: "durable enqueue, 256 operations per commit (intents committed)", items: publishCount, seconds: groupSeconds,
                baselineName: "one operation per commit", baselinePerSecond: Double(publishCount) / singleSeconds, peakMiB: peakMemoryMiB()))
        for p in [rawPath, path, singlePath, groupPath] { CorpusFiles.removeDatabase(p) }
        return results
    }

    /// The same rows the account writes (event, its single-letter tags), prepared statements,
    /// one transaction per batch, WAL + synchronous=FULL: the floor the account is measured by.
    static func rawInserts(_ batches: [[VerifiedEvent]], path: String) -> Double {
        var db: OpaquePointer?
        precondition(sqlite3_open(path, &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        func exec(_ sql: String) { precondition(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, sql) }
        exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
        exec(
            """
            CREATE TABLE events (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, id_key INTEGER NOT NULL, pubkey TEXT NOT NULL,
              created_at INTEGER NOT NULL, kind INTEGER NOT NULL, d_tag TEXT, expires_at INTEGER, deleted INTEGER NOT NULL DEFAULT 0,
              received_at INTEGER NOT NULL, json TEXT NOT NULL);
            CREATE INDEX events_id_key ON events (id_key);
            CREATE INDEX events_author_kind_time ON events (pubkey, kind, created_at);
            CREATE INDEX events_kind_time ON events (kind, created_at);
            CREATE INDEX events_time ON events (created_at);
            CREATE TABLE event_tags (event_seq INTEGER NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL);
            CREATE INDEX event_tags_time ON event_tags (name, value, created_at DESC, event_seq);
            CREATE INDEX event_tags_event ON event_tags (event_seq);
            """)
        var insert: OpaquePointer?
        var tag: OpaquePointer?
        sqlite3_prepare_v2(
            db, "INSERT INTO events (id, id_key, pubkey, created_at, kind, received_at, json) VALUES (?, ?, ?, ?, ?, ?, ?)", -1, &insert, nil)
        sqlite3_prepare_v2(db, "INSERT INTO event_tags (event_seq, name, value, created_at) VALUES (?, ?, ?, ?)", -1, &tag, nil)
        defer {
            sqlite3_finalize(insert)
            sqlite3_finalize(tag)
        }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        let texts = batches.map { $0.map { ($0, $0.jsonText, Int64(bitPattern: UInt64($0.id.prefix(16), radix: 16)!)) } }
        let t0 = monotonicSeconds()
        for batch in texts {
            exec("BEGIN IMMEDIATE")
            for (e, json, key) in batch {
                sqlite3_bind_text(insert, 1, e.id, -1, transient)
                sqlite3_bind_int64(insert, 2, key)
                sqlite3_bind_text(insert, 3, e.pubkey, -1, transient)
                sqlite3_bind_int64(insert, 4, e.createdAt)
                sqlite3_bind_int64(insert, 5, Int64(e.kind))
                sqlite3_bind_int64(insert, 6, 1_800_000_000)
                sqlite3_bind_text(insert, 7, json, -1, transient)
                precondition(sqlite3_step(insert) == SQLITE_DONE)
                sqlite3_reset(insert)
                let seq = sqlite3_last_insert_rowid(db)
                for t in e.tags where t.count >= 2 && t[0].unicodeScalars.count == 1 {
                    sqlite3_bind_int64(tag, 1, seq)
                    sqlite3_bind_text(tag, 2, t[0], -1, transient)
                    sqlite3_bind_text(tag, 3, t[1], -1, transient)
                    sqlite3_bind_int64(tag, 4, e.createdAt)
                    precondition(sqlite3_step(tag) == SQLITE_DONE)
                    sqlite3_reset(tag)
                }
            }
            exec("COMMIT")
        }
        return monotonicSeconds() - t0
    }
}

/// `softchat-dev bench scale`: an account of 1,000,000 events — the ingest rate of its last 10,000
/// beside its first 10,000, the chat-history and conversation-list queries' medians at 1,000,000
/// beside the same at 10,000, and the peak memory of a fresh `softchat` process that opens the
/// account and answers the chat query — so "cost flat" is measured, not assumed.
public enum ScaleBenchmarks {
    /// When the events of the account were made, relative to their arrival.
    public enum Arrival: String, Sendable {
        /// Every chunk of 10,000 dated over the same 10,000 seconds (the workload issue 34 was
        /// measured with): each chunk's events land between the earlier chunks' in every time index.
        case overlapping
        /// Each chunk dated after the one before, as live messages arrive (and as a sync's pages,
        /// newest first, arrive in order the other way).
        case dated
    }

    /// - Parameters:
    ///   - layoutVersion: The schema the account is kept at: nil for the latest, or 8 for the
    ///     layout before schema 9 (events keyed by id, checkpoints every 4 MiB),
    ///     written by the same build for a same-run baseline.
    public static func run(
        quick: Bool, directory: String, events: Int? = nil, arrival: Arrival = .overlapping,
        layoutVersion: Int? = nil
    ) -> [BenchResult] {
        let layoutVersion = layoutVersion ?? SoftchatAccount.latestSchemaVersion
        let total = events ?? (quick ? 20_000 : 1_000_000)
        let step = quick ? 2_000 : 10_000
        let path = directory + "/scale.db"
        // The old layout runs with the old builds' checkpoint too: SQLite's default, every 1,000
        // pages (4 MiB).
        let policy = layoutVersion < 9 ? AccountPolicy(checkpointMebibytes: 4) : AccountPolicy()
        let account = try! SoftchatAccount.open(path: path, version: layoutVersion, policy: policy)
        let latest = layoutVersion == SoftchatAccount.latestSchemaVersion
        defer {
            account.close()  // idempotent
            CorpusFiles.removeDatabase(path)
        }
        var firstRate = 0.0
        var lastRate = 0.0
        var queryAtSmall = 0.0
        var queryAtLarge = 0.0
        var listAtSmall = 0.0
        var recipient: String?
        var held = 0
        var chunk = 0
        while held < total {
            // Chunks of fresh events (a seed each), so a million never sit in memory at once.
            let dated = arrival == .dated ? Int64(chunk * step) : 0
            let events = BenchCorpus.events(count: step, contentBytes: 200, seed: 1_000 + UInt64(chunk), firstCreatedAt: 1_700_000_000 + dated)
            chunk += 1
            recipient = recipient ?? events.first { $0.firstTagValue("p") != nil }?.firstTagValue("p")
            let t0 = monotonicSeconds()
            for start in stride(from: 0, to: events.count, by: 256) {
                _ = try! account.incoming.ingest(Array(events[start..<min(start + 256, events.count)]), receivedAt: 1_800_000_000)
            }
            let rate = Double(events.count) / (monotonicSeconds() - t0)
            held += events.count
            if held == step {
                firstRate = rate
                // The reads run on the latest layout only (this build reads no other).
                if latest {
                    queryAtSmall = medianQuery(account, recipient!, quick: quick)
                    listAtSmall = medianList(account, quick: quick)
                }
            }
            if held >= total { lastRate = rate }
        }
        queryAtLarge = latest ? medianQuery(account, recipient!, quick: quick) : 0
        let listAtLarge = latest ? medianList(account, quick: quick) : 0
        account.close()
        let label = "\(arrival.rawValue) arrivals, schema \(layoutVersion)"
        guard latest else {
            return [
                BenchResult(
                    name: "durable ingestion at \(total) events (the last \(step)), \(label)", items: step, seconds: Double(step) / lastRate,
                    baselineName: "the first \(step)", baselinePerSecond: firstRate, peakMiB: peakMemoryMiB())
            ]
        }
        // A fresh process that opens the account and answers the chat query: its own peak.
        let child = ChildProcess.run(
            ChildProcess.softchatExecutable,
            ["account", "query", "--db", path, "--filter", "{\"kinds\":[1],\"#p\":[\"\(recipient!)\"],\"limit\":100}", "--now", "1800000000"],
            stdinPath: "/dev/null")
        precondition(child.status == 0, "softchat account query exited \(child.status)")
        return [
            BenchResult(
                name: "durable ingestion at \(total) events (the last \(step)), \(label)", items: step, seconds: Double(step) / lastRate,
                baselineName: "the first \(step)", baselinePerSecond: firstRate, peakMiB: peakMemoryMiB()),
            BenchResult(
                name: "chat-history query (#p + kind, limit 100) at \(total) events, median", items: 1, seconds: queryAtLarge,
                baselineName: "at \(step) events", baselinePerSecond: 1 / queryAtSmall, peakMiB: peakMemoryMiB()),
            BenchResult(
                name: "conversation list (50 newest, kind 1 by #p) at \(total) events, median", items: 1, seconds: listAtLarge,
                baselineName: "at \(step) events", baselinePerSecond: 1 / listAtSmall, peakMiB: peakMemoryMiB()),
            BenchResult(
                name: "a fresh `softchat account query` of the chat history at \(total) events (peak is its own)", items: 1,
                seconds: child.seconds, baselineName: nil, baselinePerSecond: nil, peakMiB: child.peakMiB),
        ]
    }

    static func medianList(_ account: SoftchatAccount, quick: Bool) -> Double {
        var latencies: [Double] = []
        for _ in 0..<(quick ? 21 : 201) {
            let q0 = monotonicSeconds()
            let list = try! account.conversations(kind: 1, tag: "p", limit: 50, now: 1_800_000_000)
            latencies.append(monotonicSeconds() - q0)
            precondition(!list.isEmpty)
        }
        latencies.sort()
        return latencies[latencies.count / 2]
    }

    static func medianQuery(_ account: SoftchatAccount, _ recipient: String, quick: Bool) -> Double {
        let filter = try! RelayFilter.fromJSON("{\"kinds\":[1],\"#p\":[\"\(recipient)\"],\"limit\":100}")
        var latencies: [Double] = []
        for _ in 0..<(quick ? 21 : 201) {
            let q0 = monotonicSeconds()
            let found = try! account.events(matching: [filter], now: 1_800_000_000)
            latencies.append(monotonicSeconds() - q0)
            precondition(!found.isEmpty)
        }
        latencies.sort()
        return latencies[latencies.count / 2]
    }
}
