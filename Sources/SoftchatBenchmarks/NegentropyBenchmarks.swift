import SoftchatClient
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatSync

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench negentropy`: NIP-77 sync beside REQ paging, in one run.
///
/// - In process, no I/O: both roles reconciling identical sets of half the corpus (the anchor:
///   strfry reconciles identical 50k sets in about 30 ms), and the corpus with 1% missing on
///   one side, with the prefix-sum fingerprints beside rescanning each range.
/// - The account's side: reading the reconciliation items of the corpus from SQLite.
/// - End to end over loopback WebSockets (a `softchat relay` child process holding the corpus,
///   or `--relay URL`, e.g. LocalRelay, loaded with the same events): an account holding 99%
///   of the corpus syncs by negentropy, and the same account file syncs by REQ paging from
///   scratch (the full resync that finds an old gap without negentropy); bytes on the wire
///   (read + written by the client) and seconds. Then identical sets of half the corpus: a
///   negentropy sync beside a REQ sync of the 300-second horizon (which costs little and
///   finds nothing older, whatever is missing), the same negentropy sync again with nothing
///   stored since (the account's kept items and the relay's kept storage answer), and once
///   more after ten events outside the set were stored (the kept items, with the events stored
///   since read and matched).
public enum NegentropyBenchmarks {
    public struct Options: Sendable {
        public var quick = false
        /// JSONL of signed events (one kind); default: a generated corpus.
        public var eventsFile: String?
        /// A relay that holds exactly the corpus for `filter` (default: a `softchat relay` child).
        public var relayURL: String?
        public var filterJSON = #"{"kinds":[1]}"#
        public init() {}
    }

    public static func run(_ options: Options, executable: String, directory: String) -> [ManagedFigure] {
        let corpus: [VerifiedEvent]
        if let file = options.eventsFile {
            corpus = readEvents(file)
        } else {
            corpus = BenchCorpus.events(count: options.quick ? 4_000 : 100_000, contentBytes: 200, seed: 31)
        }
        let filter = try! RelayFilter.fromJSON(options.filterJSON)
        precondition(corpus.allSatisfy { filter.matches($0) }, "every corpus event must match --filter")
        // Held locally: all but every 100th event.
        let local = corpus.enumerated().filter { $0.offset % 100 != 99 }.map(\.element)
        // The identical sets: the oldest half, selected by an `until` both sides apply.
        let byTime = corpus.map(\.createdAt).sorted()
        let halfUntil = byTime[byTime.count / 2]
        let halfFilter = filter.withUntil(halfUntil)
        let half = corpus.filter { $0.createdAt <= halfUntil }

        var figures = inProcess(corpus: corpus, local: local, half: half)

        let file = "\(directory)/negentropy-corpus.jsonl"
        writeEvents(corpus, to: file)
        defer { unlink(file) }
        var relays: RelayProcess?
        let url: String
        if let given = options.relayURL {
            url = given
        } else {
            relays = RelayProcess(executable: executable, arguments: ["--count", "1", "--cap", "500", "--preload", file], lines: 1)
            url = relays!.urls[0]
        }
        defer { relays?.stop() }

        // The accounts: 99% of the corpus; and exactly the identical half.
        let partial = "\(directory)/neg-partial.db"
        let whole = "\(directory)/neg-half.db"
        let i0 = monotonicSeconds()
        prepare(partial, events: local)
        let ingestSeconds = monotonicSeconds() - i0
        prepare(whole, events: half)
        let account = try! SoftchatAccount.open(path: partial)
        let r0 = monotonicSeconds()
        let items = try! account.reconciliationItems(matching: [filter])
        let readSeconds = monotonicSeconds() - r0
        account.close()
        figures.append(
            ManagedFigure(
                name: "reconciliation items of \(local.count) events read from the account (SQLite, no event decoded)",
                value: readSeconds * 1000, unit: "ms",
                baselineName: "ingest of the same events (batches of 256), ms", baselineValue: ingestSeconds * 1000))
        precondition(items[0].count == local.count, "the account must hold the local set")

        let negentropy = sync(copy(partial, "\(directory)/neg-run.db"), url: url, filter: options.filterJSON, negentropy: true, cursorAge: nil)
        let paging = sync(copy(partial, "\(directory)/page-run.db"), url: url, filter: options.filterJSON, negentropy: false, cursorAge: nil)
        let n = corpus.count
        figures.append(
            ManagedFigure(
                name: "sync of \(n) events with 1% missing by negentropy (\(negentropy.held) held, \(negentropy.method)): bytes on the wire",
                value: Double(negentropy.bytes), unit: "B",
                baselineName: "REQ paging resync of the same account (\(paging.held) held, \(paging.method)), bytes",
                baselineValue: Double(paging.bytes)))
        figures.append(
            ManagedFigure(
                name: "sync of \(n) events with 1% missing by negentropy: seconds", value: negentropy.seconds, unit: "s",
                baselineName: "REQ paging resync, seconds", baselineValue: paging.seconds))
        let samePath = copy(whole, "\(directory)/same-run.db")
        let identical = sync(samePath, url: url, filter: halfFilter.toJSON(), negentropy: true, cursorAge: nil)
        // Nothing changed since: the account's kept items and the relay's kept storage answer.
        let again = sync(samePath, url: url, filter: halfFilter.toJSON(), negentropy: true, cursorAge: nil)
        // Ten events outside the set stored since (messages of other conversations): the kept
        // items answer with the events stored after their mark read and matched.
        let others = try! SoftchatAccount.open(path: samePath)
        _ = try! others.incoming.ingest(Array(corpus.filter { $0.createdAt > halfUntil }.prefix(10)), receivedAt: Int64(time(nil)))
        others.close()
        let afterOthers = sync(samePath, url: url, filter: halfFilter.toJSON(), negentropy: true, cursorAge: nil)
        let horizon = sync(copy(whole, "\(directory)/horizon-run.db"), url: url, filter: halfFilter.toJSON(), negentropy: false, cursorAge: 3_600)
        figures.append(
            ManagedFigure(
                name: "sync of identical sets of \(half.count) by negentropy (\(identical.method)): milliseconds, \(identical.bytes) B",
                value: identical.seconds * 1000, unit: "ms",
                baselineName: "REQ sync of the 300 s horizon of the same account (\(horizon.bytes) B), ms",
                baselineValue: horizon.seconds * 1000))
        figures.append(
            ManagedFigure(
                name: "the same identical sets synced again, nothing stored since (\(again.method)): milliseconds, \(again.bytes) B",
                value: again.seconds * 1000, unit: "ms",
                baselineName: "the first sync of them, ms", baselineValue: identical.seconds * 1000))
        figures.append(
            ManagedFigure(
                name:
                    "the same identical sets synced again after 10 events outside them were stored (\(afterOthers.method)): milliseconds, \(afterOthers.bytes) B",
                value: afterOthers.seconds * 1000, unit: "ms",
                baselineName: "the first sync of them, ms", baselineValue: identical.seconds * 1000))
        for name in ["neg-partial", "neg-half", "neg-run", "page-run", "same-run", "horizon-run"] {
            for suffix in [".db", ".db-wal", ".db-shm"] { unlink("\(directory)/\(name)\(suffix)") }
        }
        return figures
    }

    // MARK: In process

    static func items(_ events: [VerifiedEvent]) -> [NegentropyItem] {
        events.compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }
    }

    /// Both roles to the end; returns the bytes exchanged and the ids learnt.
    static func reconcile(_ ours: NegentropyStorage, _ theirs: NegentropyStorage, rescan: Bool) -> (bytes: Int, need: Int, rounds: Int) {
        var initiator = Negentropy(storage: ours, frameSizeLimit: 262_016)
        var responder = Negentropy(storage: theirs, frameSizeLimit: 262_016)
        initiator.rescansFingerprints = rescan
        responder.rescansFingerprints = rescan
        var message: [UInt8]? = initiator.initiate()
        var bytes = 0
        var need = 0
        var rounds = 0
        while let query = message {
            let answer = try! responder.respond(query)
            let step = try! initiator.reconcile(answer)
            bytes += query.count + answer.count
            need += step.need.count
            rounds += 1
            message = step.next
        }
        return (bytes, need, rounds)
    }

    static func inProcess(corpus: [VerifiedEvent], local: [VerifiedEvent], half: [VerifiedEvent]) -> [ManagedFigure] {
        let all = NegentropyStorage(items: items(corpus))
        let mine = NegentropyStorage(items: items(local))
        let halfStorage = NegentropyStorage(items: items(half))
        var result = (bytes: 0, need: 0, rounds: 0)
        let identical = bestOf(5) { result = reconcile(halfStorage, halfStorage, rescan: false) }
        var figures = [
            ManagedFigure(
                name: "reconcile identical sets of \(half.count) in process (both roles, \(result.rounds) round, \(result.bytes) B)",
                value: identical * 1000, unit: "ms",
                baselineName: "strfry's published figure for identical 50k sets, ms", baselineValue: 30)
        ]
        let prefix = bestOf(3) { result = reconcile(mine, all, rescan: false) }
        let found = result
        let rescan = bestOf(3) { result = reconcile(mine, all, rescan: true) }
        precondition(found.need == corpus.count - local.count && result.need == found.need, "reconciliation missed ids")
        figures.append(
            ManagedFigure(
                name:
                    "reconcile \(corpus.count) with 1% missing in process, prefix-sum fingerprints (\(found.rounds) rounds, \(found.bytes) B, \(found.need) found)",
                value: prefix * 1000, unit: "ms",
                baselineName: "the same, rescanning each range's ids, ms", baselineValue: rescan * 1000))
        let b0 = monotonicSeconds()
        blackHole(NegentropyStorage(items: items(corpus)))
        figures.append(
            ManagedFigure(
                name: "build the storage of \(corpus.count) items (sort + prefix sums)",
                value: (monotonicSeconds() - b0) * 1000, unit: "ms"))
        return figures
    }

    // MARK: End to end

    struct SyncRun {
        var seconds: Double
        var bytes: UInt64
        var held: Int
        var method: String
    }

    static func sync(_ path: String, url: String, filter: String, negentropy: Bool, cursorAge: Int64?) -> SyncRun {
        let account = try! SoftchatAccount.open(path: path)
        defer { account.close() }
        try! account.setSubscription(id: "bench", filtersJSON: [filter])
        if let age = cursorAge {
            try! account.advanceSyncCursor(relayURL: url, subscriptionID: "bench", createdAt: Int64(time(nil)) - age, now: Int64(time(nil)))
        }
        let synced = Counter()
        let method = MethodBox()
        var policy = ManagedTransportPolicy()
        policy.negentropy = negentropy
        policy.publishes = false
        policy.observer = {
            if case .synced(_, _, _, let m) = $0 {
                method.set(m.method.rawValue)
                synced.add()
            }
        }
        let s0 = monotonicSeconds()
        let transport = try! account.startManagedTransport(relays: [url], identity: nil, policy: policy)
        synced.wait(for: 1)
        let seconds = monotonicSeconds() - s0
        let statistics = transport.driverStatistics
        transport.stop()
        let held = (try? account.events(matching: [try! RelayFilter.fromJSON(filter)], now: Int64(time(nil))).count) ?? 0
        return SyncRun(seconds: seconds, bytes: statistics.bytesRead + statistics.bytesWritten, held: held, method: method.value)
    }

    // MARK: Files

    static func prepare(_ path: String, events: [VerifiedEvent]) {
        let account = try! SoftchatAccount.open(path: path)
        var offset = 0
        let lines = events.map(\.jsonText)
        while offset < lines.count {
            _ = try! account.incoming.ingest(lines: Array(lines[offset..<min(offset + 256, lines.count)]), receivedAt: Int64(time(nil)))
            offset += 256
        }
        account.close()
    }

    /// A copy of a closed account file. A closed account is that file alone (its log is
    /// checkpointed into it); a log beside it would hold commits the copy lacks.
    static func copy(_ from: String, _ to: String) -> String {
        precondition(access(from + "-wal", F_OK) != 0, "\(from) was not closed: its write-ahead log is beside it")
        let input = open(from, O_RDONLY)
        let output = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        precondition(input >= 0 && output >= 0, "cannot copy \(from)")
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            _ = buffer.withUnsafeBytes { write(output, $0.baseAddress, n) }
        }
        close(input)
        close(output)
        return to
    }

    static func writeEvents(_ events: [VerifiedEvent], to file: String) {
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for e in events { _ = (e.jsonText + "\n").withCString { write(fd, $0, strlen($0)) } }
        close(fd)
    }

    static func readEvents(_ file: String) -> [VerifiedEvent] {
        let fd = open(file, O_RDONLY)
        precondition(fd >= 0, "cannot open \(file)")
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        close(fd)
        let lines = data.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
        return VerifiedEvent.verify(texts: lines).map { try! $0.get() }
    }
}

final class MethodBox: @unchecked Sendable {
    // @unchecked: `text` is only touched under `lock`.
    private let lock = Lock()
    private var text = "none"
    func set(_ value: String) { lock.with { text = value } }
    var value: String { lock.with { text } }
}
