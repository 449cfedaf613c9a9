import CSQLite
import SoftchatCore
import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench account`: durable ingestion in batches of 256 (WAL, synchronous=FULL, one
/// transaction per batch) beside raw SQLite inserts of the same rows with the same durability,
/// and the latency of a chat-history query.
public enum AccountBenchmarks {
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
        for p in [rawPath, path] { CorpusFiles.removeDatabase(p) }
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
            CREATE TABLE events (id TEXT PRIMARY KEY NOT NULL, pubkey TEXT NOT NULL, created_at INTEGER NOT NULL, kind INTEGER NOT NULL,
              d_tag TEXT, expires_at INTEGER, deleted INTEGER NOT NULL DEFAULT 0, received_at INTEGER NOT NULL, json TEXT NOT NULL) WITHOUT ROWID;
            CREATE INDEX events_author_kind_time ON events (pubkey, kind, created_at);
            CREATE INDEX events_kind_time ON events (kind, created_at);
            CREATE INDEX events_time ON events (created_at);
            CREATE TABLE event_tags (event_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL);
            CREATE INDEX event_tags_lookup ON event_tags (name, value, event_id);
            CREATE INDEX event_tags_event ON event_tags (event_id);
            """)
        var insert: OpaquePointer?
        var tag: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO events (id, pubkey, created_at, kind, received_at, json) VALUES (?, ?, ?, ?, ?, ?)", -1, &insert, nil)
        sqlite3_prepare_v2(db, "INSERT INTO event_tags (event_id, name, value) VALUES (?, ?, ?)", -1, &tag, nil)
        defer {
            sqlite3_finalize(insert)
            sqlite3_finalize(tag)
        }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        let texts = batches.map { $0.map { ($0, $0.jsonText) } }
        let t0 = monotonicSeconds()
        for batch in texts {
            exec("BEGIN IMMEDIATE")
            for (e, json) in batch {
                sqlite3_bind_text(insert, 1, e.id, -1, transient)
                sqlite3_bind_text(insert, 2, e.pubkey, -1, transient)
                sqlite3_bind_int64(insert, 3, e.createdAt)
                sqlite3_bind_int64(insert, 4, Int64(e.kind))
                sqlite3_bind_int64(insert, 5, 1_800_000_000)
                sqlite3_bind_text(insert, 6, json, -1, transient)
                precondition(sqlite3_step(insert) == SQLITE_DONE)
                sqlite3_reset(insert)
                for t in e.tags where t.count >= 2 && t[0].unicodeScalars.count == 1 {
                    sqlite3_bind_text(tag, 1, e.id, -1, transient)
                    sqlite3_bind_text(tag, 2, t[0], -1, transient)
                    sqlite3_bind_text(tag, 3, t[1], -1, transient)
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
/// beside its first 10,000, and the chat-history query's median at 1,000,000 beside the same
/// query at 10,000 — so "cost flat" is measured, not assumed.
public enum ScaleBenchmarks {
    public static func run(quick: Bool, directory: String, events: Int? = nil) -> [BenchResult] {
        let total = events ?? (quick ? 20_000 : 1_000_000)
        let step = quick ? 2_000 : 10_000
        let path = directory + "/scale.db"
        let account = try! SoftchatAccount.open(path: path)
        defer {
            account.close()
            CorpusFiles.removeDatabase(path)
        }
        var firstRate = 0.0
        var lastRate = 0.0
        var queryAtSmall = 0.0
        var queryAtLarge = 0.0
        var recipient: String?
        var held = 0
        var chunk = 0
        while held < total {
            // Chunks of fresh events (a seed each), so a million never sit in memory at once.
            let events = BenchCorpus.events(count: step, contentBytes: 200, seed: 1_000 + UInt64(chunk))
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
                queryAtSmall = medianQuery(account, recipient!, quick: quick)
            }
            if held >= total { lastRate = rate }
        }
        queryAtLarge = medianQuery(account, recipient!, quick: quick)
        return [
            BenchResult(
                name: "durable ingestion at \(total) events (the last \(step))", items: step, seconds: Double(step) / lastRate,
                baselineName: "the first \(step)", baselinePerSecond: firstRate, peakMiB: peakMemoryMiB()),
            BenchResult(
                name: "chat-history query (#p + kind, limit 100) at \(total) events, median", items: 1, seconds: queryAtLarge,
                baselineName: "at \(step) events", baselinePerSecond: 1 / queryAtSmall, peakMiB: peakMemoryMiB()),
        ]
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
