import Foundation
import SoftchatCore
import SoftchatTestSupport
import Synchronization
import Testing

@_spi(Benchmarks) @testable import SoftchatStorage

/// A clock the test moves.
final class TestClock: Sendable {
    let now = Mutex<Int64>(t0)
    var read: @Sendable () -> Int64 { { [self] in now.withLock { $0 } } }
    func advance(_ seconds: Int64) { now.withLock { $0 += seconds } }
}

/// Every update an observation has queued, applied to `window`; false when a change does not fit.
func drain(_ observation: EventObservation, into window: inout [VerifiedEvent]) -> Bool {
    while let update = observation.poll() {
        switch update {
        case .snapshot(let w), .reload(let w): window = w
        case .changes(let changes): guard EventWindowChange.apply(changes, to: &window) else { return false }
        }
    }
    return true
}

/// The first update `observation` queues within `seconds` (polled every 20 ms), or nil: for
/// changes the account's own timer finds, which no test call drives.
func firstUpdate(of observation: EventObservation, within seconds: Int) -> EventWindowUpdate? {
    for _ in 0..<(seconds * 50) {
        if let update = observation.poll() { return update }
        usleep(20_000)
    }
    return observation.poll()
}

@Suite struct LiveQueryTests {
    func filters(_ json: [String]) throws -> [RelayFilter] { try json.map { try RelayFilter.fromJSON($0) } }

    @Test func aWindowStartsWithItsSnapshotAndAnIngestedEventArrivesAsOneInsertion() throws {
        let t = try TestAccount()
        let old = signed(content: "old", createdAt: t0 - 10)
        _ = try t.account.incoming.ingest([old], receivedAt: t0)
        let clock = TestClock()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]), limit: 10, clock: clock.read)
        #expect(observation.poll() == .snapshot(events: [old]))
        let new = signed(content: "new", createdAt: t0)
        _ = try t.account.incoming.ingest([new], receivedAt: t0)
        // Ingestion hands its rows to the live-query worker and returns; the worker's change follows.
        t.account.store.settleLiveQueries()
        #expect(observation.poll() == .changes(changes: [.inserted(event: new, at: 0)]))
        #expect(observation.poll() == nil)
        // An event the filters do not match changes nothing.
        _ = try t.account.incoming.ingest([signed(kind: 7, createdAt: t0)], receivedAt: t0)
        t.account.store.settleLiveQueries()
        #expect(observation.poll() == nil)
        #expect(observation.window == [new, old])
    }

    /// The app's own writes wait for the worker: a message sent is in its window when the call
    /// returns, with nothing settled by the test.
    @Test func aSentEventIsInItsWindowWhenTheSendReturns() throws {
        let t = try TestAccount()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]), limit: 10, clock: TestClock().read)
        #expect(observation.poll() == .snapshot(events: []))
        var sent: [VerifiedEvent] = []
        for i in 0..<20 {
            let mine = signed(content: "mine \(i)", createdAt: t0 + Int64(i))
            _ = try t.account.outgoing.enqueueSigned(operationID: "op\(i)", events: [mine], relayURLs: ["wss://relay.example"], now: t0)
            // Past 10, the oldest leaves the full window as the new one enters.
            let leaving: [EventWindowChange] = sent.count < 10 ? [] : [.removed(id: sent[sent.count - 10].id, at: 9)]
            #expect(observation.poll() == .changes(changes: leaving + [.inserted(event: mine, at: 0)]), "send \(i)")
            sent.append(mine)
        }
    }

    /// Observations on the wall clock with the same filters and limit share one window: each
    /// gets every update, one joining later starts from the window as it is, and cancelling one
    /// leaves the others' updates whole.
    @Test func observationsOfTheSameWindowShareItAndEachGetsEveryUpdate() throws {
        let t = try TestAccount()
        let kind1 = try filters(["{\"kinds\":[1]}"])
        let first = try t.account.observe(kind1, limit: 3)
        let second = try t.account.observe(kind1, limit: 3)
        let otherLimit = try t.account.observe(kind1, limit: 2)
        #expect(t.account.store.live.state.withLock { $0.entries.count } == 2)
        let events = (0..<4).map { signed(content: "s\($0)", createdAt: t0 + Int64($0)) }
        _ = try t.account.incoming.ingest(Array(events.prefix(2)), receivedAt: t0)
        t.account.store.settleLiveQueries()
        let late = try t.account.observe(kind1, limit: 3)
        var windows: [[VerifiedEvent]] = [[], [], [], []]
        #expect(drain(first, into: &windows[0]) && windows[0] == [events[1], events[0]])
        #expect(late.poll() == .snapshot(events: [events[1], events[0]]))
        windows[3] = [events[1], events[0]]
        first.cancel()
        _ = try t.account.incoming.ingest(Array(events.suffix(2)), receivedAt: t0)
        t.account.store.settleLiveQueries()
        #expect(first.poll() == nil, "a cancelled observation gets nothing more")
        for (i, o) in [second, otherLimit, late].enumerated() { #expect(drain(o, into: &windows[i + 1])) }
        #expect(windows[1] == [events[3], events[2], events[1]])
        #expect(windows[2] == [events[3], events[2]])
        #expect(windows[3] == windows[1] && late.window == windows[1])
        second.cancel()
        late.cancel()
        otherLimit.cancel()
        #expect(t.account.store.live.state.withLock { $0.entries.isEmpty && $0.index.isEmpty && $0.shared.isEmpty })
    }

    @Test func aDeletionRemovesTheEventAndAFullWindowRefillsFromBeyondIt() throws {
        let t = try TestAccount()
        let events = (0..<4).map { signed(content: "n\($0)", createdAt: t0 - Int64($0)) }
        _ = try t.account.incoming.ingest(events, receivedAt: t0)
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]), limit: 3, clock: TestClock().read)
        var window: [VerifiedEvent] = []
        #expect(drain(observation, into: &window))
        #expect(window == Array(events.prefix(3)))
        let deletion = signed(kind: 5, tags: [["e", events[1].id]], createdAt: t0)
        _ = try t.account.incoming.ingest([deletion], receivedAt: t0)
        t.account.store.settleLiveQueries()
        #expect(drain(observation, into: &window))
        #expect(window == [events[0], events[2], events[3]])
        #expect(window == (try t.account.events(matching: try filters(["{\"kinds\":[1]}"]), limit: 3, now: t0)))
    }

    @Test func anExpiryLeavesTheWindowWhenItsTimeComes() throws {
        let t = try TestAccount()
        let clock = TestClock()
        let fleeting = signed(tags: [["expiration", String(t0 + 5)]], content: "fleeting", createdAt: t0)
        let lasting = signed(content: "lasting", createdAt: t0 - 1)
        _ = try t.account.incoming.ingest([fleeting, lasting], receivedAt: t0)
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]), clock: clock.read)
        var window: [VerifiedEvent] = []
        #expect(drain(observation, into: &window))
        #expect(window == [fleeting, lasting])
        clock.advance(10)
        try t.account.store.tickLiveQueries()
        #expect(observation.poll() == .changes(changes: [.removed(id: fleeting.id, at: 0)]))
    }

    @Test func aCommitByAnotherConnectionReachesTheWindowByItself() throws {
        let t = try TestAccount()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]))
        #expect(observation.poll() == .snapshot(events: []))
        // A second account on the same file: another connection, as a second process has. No
        // tick is called here: the account's own timer finds the commit (data_version).
        let other = try SoftchatAccount.open(path: t.path)
        defer { other.close() }
        let event = signed(createdAt: Int64(time(nil)) - 5)
        _ = try other.incoming.ingest([event], receivedAt: Int64(time(nil)))
        #expect(firstUpdate(of: observation, within: 5) == .changes(changes: [.inserted(event: event, at: 0)]))
    }

    /// A commit by another process: `softchat account ingest` (the CLI built beside this test
    /// binary) writes the account file while this process observes it.
    @Test func aCommitByAnotherProcessReachesTheWindow() throws {
        let t = try TestAccount()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]))
        #expect(observation.poll() == .snapshot(events: []))
        let event = signed(content: "from another process", createdAt: Int64(time(nil)) - 5)
        let input = t.directory.file("event.jsonl")
        try (event.jsonText + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let cli = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        var folder = cli
        while !FileManager.default.isExecutableFile(atPath: folder.appendingPathComponent("softchat").path), folder.path != "/" {
            folder.deleteLastPathComponent()
        }
        let process = Process()
        process.executableURL = folder.appendingPathComponent("softchat")
        process.arguments = ["account", "ingest", "--db", t.path]
        process.standardInput = FileHandle(forReadingAtPath: input)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "softchat account ingest at \(folder.path)")
        #expect(firstUpdate(of: observation, within: 5) == .changes(changes: [.inserted(event: event, at: 0)]))
    }

    @Test func aReaderThatNeverReadsHoldsABoundedBacklogAndThenGetsOneReloadEqualToAFreshRead() throws {
        let t = try TestAccount()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]), limit: 50, clock: TestClock().read)
        for batch in 0..<40 {
            let events = (0..<25).map { i in signed(content: "b\(batch) e\(i)", createdAt: t0 - 10_000 + Int64(batch * 25 + i)) }
            _ = try t.account.incoming.ingest(events, receivedAt: t0)
        }
        t.account.store.settleLiveQueries()
        let queued = observation.queue.depth
        // At most maxBacklog changes wait (each batch here is 50: 25 in, 25 pushed out), behind
        // at most one reload.
        #expect(queued.changes <= EventObservation.maxBacklog && queued.updates <= EventObservation.maxBacklog + 1, "\(queued)")
        let fresh = try t.account.events(matching: try filters(["{\"kinds\":[1]}"]), limit: 50, now: t0)
        guard case .reload(let window) = observation.poll() else {
            Issue.record("expected a reload first")
            return
        }
        var current = window
        #expect(drain(observation, into: &current))
        #expect(current == fresh)
    }

    @Test func cancellingEndsTheSequence() async throws {
        let t = try TestAccount()
        let observation = try t.account.observe(try filters(["{\"kinds\":[1]}"]))
        var iterator = observation.makeAsyncIterator()
        #expect(await iterator.next() == .snapshot(events: []))
        observation.cancel()
        #expect(await iterator.next() == nil)
        _ = try t.account.incoming.ingest([signed()], receivedAt: t0)
        #expect(observation.poll() == nil)
    }

    @Test(arguments: [(["{\"kinds\":[1]}"], 0), (["{\"kinds\":[1]}"], 501), (["{\"kinds\":[1],\"limit\":5}"], 10), ([], 10)])
    func aWindowThatCannotBeKeptIsRefusedWithItsCode(_ json: [String], _ limit: Int) throws {
        let t = try TestAccount()
        let parsed = try filters(json)
        do {
            _ = try t.account.observe(parsed, limit: limit)
            Issue.record("observe accepted \(json) with limit \(limit)")
        } catch {
            #expect(error.code == .invalidRelayFilter)
        }
    }

    /// The filters as JSON texts are parsed as a subscription's are, with its bound: the one
    /// parser every binding goes through.
    @Test(arguments: [
        ["{\"kinds\":[1]", "{\"kinds\":[1]}"], Array(repeating: "{\"kinds\":[1]}", count: 65), ["{\"kinds\":\"1\"}"], [],
    ])
    func filterTextsAreParsedAsASubscriptionsAreAndRefusedWithTheirCode(_ json: [String]) throws {
        let t = try TestAccount()
        do {
            _ = try t.account.observe(filtersJSON: json)
            Issue.record("observe accepted \(json.prefix(2)) (\(json.count) filters)")
        } catch {
            #expect(error.code == .invalidRelayFilter)
        }
        let kept = try t.account.observe(filtersJSON: Array(repeating: "{\"kinds\":[1]}", count: 64))
        kept.cancel()
    }

    /// The oracle: random stores (plain, replaceable, addressable, expiring, future-dated),
    /// NIP-09 deletions, time passing, and writes from a second connection; after every round each
    /// observation's window, and the window its changes build from the previous one, equal a
    /// fresh read. 600 rounds in the test command; SOFTCHAT_LIVE_ORACLE_ROUNDS=N (and
    /// SOFTCHAT_LIVE_ORACLE_SEED) for a longer soak.
    @Test func everyWindowEqualsAFreshReadAfterEveryRoundOfRandomWrites() throws {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["SOFTCHAT_LIVE_ORACLE_ROUNDS"].flatMap(Int.init) ?? 600
        let seed = environment["SOFTCHAT_LIVE_ORACLE_SEED"].flatMap(UInt64.init) ?? 48
        let t = try TestAccount()
        let other = try SoftchatAccount.open(path: t.path)
        defer { other.close() }
        let clock = TestClock()
        var rng = StorageRNG(seed: seed)
        let keys = [StorageKeys.alice, StorageKeys.bob, StorageKeys.carol]
        let windows: [([String], Int)] = [
            (["{\"kinds\":[1]}"], 5), (["{\"kinds\":[1,7]}"], 20), (["{\"kinds\":[30023]}"], 3), (["{\"kinds\":[10002]}"], 10),
            (["{\"#t\":[\"chat\"]}"], 4), (["{}"], 8), (["{\"authors\":[\"\(StorageKeys.bob.publicKeyHex)\"],\"kinds\":[1]}"], 6),
            (["{\"kinds\":[1],\"#t\":[\"chat\"]}", "{\"kinds\":[30023]}"], 7),
        ]
        let observations = try windows.map { json, limit in
            (try filters(json), limit, try t.account.observe(try filters(json), limit: limit, clock: clock.read))
        }
        var built = Array(repeating: [VerifiedEvent](), count: observations.count)
        var stored: [VerifiedEvent] = []
        var rounds = 0
        var heldAtTheEnd = 0
        for round in 0..<total {
            let writer = rng.next() % 4 == 0 ? other : t.account
            let now = clock.read()
            var advanced = false
            switch rng.next() % 8 {
            case 0:
                clock.advance(Int64(1 + rng.next() % 30))
                advanced = true
            case 1 where !stored.isEmpty:
                // A deletion by the target's author (another author's deletion is ignored).
                let target = stored[Int(rng.next() % UInt64(stored.count))]
                let author = keys.first { $0.publicKeyHex == target.pubkey }!
                let tags =
                    target.kind >= 30000
                    ? [["a", "\(target.kind):\(target.pubkey):\(target.tags.first { $0.first == "d" }?[1] ?? "")"]] : [["e", target.id]]
                _ = try writer.incoming.ingest([signed(author, kind: 5, tags: tags, createdAt: now)], receivedAt: now)
            default:
                var batch: [VerifiedEvent] = []
                for i in 0..<Int(1 + rng.next() % 4) {
                    let key = keys[Int(rng.next() % 3)]
                    let kind = [1, 1, 7, 30023, 10002][Int(rng.next() % 5)]
                    var tags: [[String]] = rng.next() % 2 == 0 ? [["t", "chat"]] : []
                    if kind == 30023 { tags.append(["d", "doc\(rng.next() % 2)"]) }
                    if rng.next() % 6 == 0 { tags.append(["expiration", String(now + Int64(rng.next() % 40))]) }
                    let future = rng.next() % 12 == 0
                    let createdAt = future ? now + 1_000 + Int64(rng.next() % 60) : now - Int64(rng.next() % 500)
                    batch.append(signed(key, kind: kind, tags: tags, content: "r\(round) e\(i)", createdAt: createdAt))
                }
                _ = try writer.incoming.ingest(batch, receivedAt: now)
                stored += batch
            }
            // Another connection's writes and time reach windows at the tick (every 200 ms; here
            // when the round needs it, and at random besides).
            if writer === other || advanced || rng.next() % 5 == 0 {
                try t.account.store.tickLiveQueries()
            } else {
                t.account.store.settleLiveQueries()
            }
            let at = clock.read()
            for (i, (f, limit, observation)) in observations.enumerated() {
                let fresh = try t.account.events(matching: f, limit: limit, now: at)
                let applied = drain(observation, into: &built[i])
                #expect(applied, "round \(round), window \(i): a change did not fit")
                #expect(built[i].map(\.id) == fresh.map(\.id), "round \(round), window \(i)")
                #expect(observation.window.map(\.id) == fresh.map(\.id), "round \(round), window \(i)")
            }
            rounds += 1
        }
        // Finally, after a tick, every window equals a fresh read whoever wrote last.
        try t.account.store.tickLiveQueries()
        for (i, (f, limit, observation)) in observations.enumerated() {
            #expect(drain(observation, into: &built[i]))
            #expect(built[i] == (try t.account.events(matching: f, limit: limit, now: clock.read())), "window \(i) at the end")
            heldAtTheEnd += built[i].count
        }
        #expect(rounds == total && heldAtTheEnd > 0)
    }
}
