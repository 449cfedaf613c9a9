import SoftchatCore
import SoftchatJSON
import SoftchatSync
import Testing

/// Random relays, event sets and faults; three windows per case with time passing, late
/// (backdated) and future-dated events published between them.
@Suite struct SubscriptionSyncPropertyTests {
    static let filterSets: [[String]] = [
        [#"{"kinds":[1]}"#],
        [#"{"kinds":[1059]}"#],
        [#"{"kinds":[1]}"#, #"{"kinds":[1059]}"#],
        [#"{}"#],
        [#"{"kinds":[1],"since":T}"#],
        [#"{"kinds":[1,1059],"until":T}"#, #"{"kinds":[1],"limit":2}"#],
    ]

    /// 4 × 800 cases (each three windows), in parallel chunks.
    @Test(arguments: 0..<4) func randomRelaysAndCuts(chunk: Int) {
        var failures: [String] = []
        var totals = (windows: 0, requests: 0, cuts: 0, incomplete: 0, events: 0)
        let cases = 800
        for seed in UInt64(chunk * cases + 1)...UInt64((chunk + 1) * cases) {
            if let message = Self.check(seed: seed, totals: &totals) {
                failures.append("seed \(seed): \(message)")
                if failures.count >= 5 { break }
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        // The cases must exercise what they claim to.
        #expect(totals.windows == 3 * cases || !failures.isEmpty)
        #expect(totals.cuts > cases / 2)
        #expect(totals.incomplete > cases / 10)
        #expect(totals.events > 50 * cases)
    }

    static func check(seed: UInt64, totals: inout (windows: Int, requests: Int, cuts: Int, incomplete: Int, events: Int)) -> String? {
        var rng = SplitMix64(seed: seed)
        func below(_ n: Int) -> Int { Int(rng.next() % UInt64(max(1, n))) }
        func between(_ lo: Int64, _ hi: Int64) -> Int64 { hi <= lo ? lo : lo + Int64(rng.next() % UInt64(hi - lo + 1)) }

        let pageSize = 1 + below(12)
        // Half the cases are told the relay's cap and convention; the other half learn both, from
        // a relay that may cap below the page size asked for.
        let learned = below(2) == 0
        let cap = learned ? 1 + below(pageSize + 3) : pageSize + below(4)
        var relay = SimulatedRelay(cap: cap, inclusiveUntil: below(2) == 0, shuffleTies: below(3) == 0)
        let paging =
            learned
            ? RelayPaging.learning(pageSize: pageSize) : RelayPaging(pageSize: pageSize, until: relay.inclusiveUntil ? .inclusive : .exclusive)
        // The size of the pages the relay really sends.
        let sent = min(pageSize, cap)
        var now: Int64 = 1_700_000_000
        let span: Int64 = [30, 600, 300_000][below(3)]
        var nextID = 0
        func makeEvent(_ createdAt: Int64) -> SimEvent {
            nextID += 1
            return SimEvent(id: eventID(nextID), createdAt: max(0, createdAt), kind: below(2) == 0 ? 1 : 1059)
        }
        // Stored history, long equal-created_at runs, future-dated events.
        for _ in 0..<below(60) { relay.insert(makeEvent(now - between(0, span))) }
        for _ in 0..<below(3) {
            let second = now - between(0, span)
            for _ in 0..<(1 + below(3 * pageSize)) { relay.insert(makeEvent(second)) }
        }
        for _ in 0..<below(4) { relay.insert(makeEvent(now + between(1, 1_000))) }

        let filterTexts = filterSets[below(filterSets.count)].map {
            $0.replacing("T", with: String(now - between(0, span)))
        }
        let filters = filterTexts.map(parseFilter)
        let horizon: Int64? = below(2) == 0 ? nil : between(0, 2_000)
        let initialCursor: Int64? = below(3) == 0 ? now - between(0, span) : nil
        var sync = SubscriptionSync(filters: filters, cursor: initialCursor, horizon: horizon, paging: paging)
        if horizon == nil, sync.horizon != SubscriptionSync.defaultHorizon(for: filters) { return "default horizon not applied" }

        for window in 0..<3 {
            var live: [SimEvent] = []
            for _ in 0..<below(3) { live.append(makeEvent(now - between(-5, 5))) }
            let options = DriveOptions(cutPercent: [0, 20, 60][below(3)], maxCuts: 6, reloadPercent: 5, live: live)
            let snapshot = relay
            let cursorBefore = sync.cursor
            let report: WindowReport
            switch drive(&sync, relay: snapshot, now: now, options: options, rng: &rng) {
            case .failure(let failure): return "window \(window): \(failure.message)"
            case .success(let r): report = r
            }
            totals.windows += 1
            totals.requests += report.requests
            totals.cuts += report.cuts
            totals.incomplete += report.outcome.incompleteSeconds.count
            totals.events += report.received.count

            // The window is the one the rules say.
            let expectedSince = cursorBefore.map { max(0, $0 - sync.horizon) }
            if report.since != expectedSince {
                return "window \(window): since \(String(describing: report.since)), expected \(String(describing: expectedSince))"
            }
            if report.until != now { return "window \(window): until \(report.until) is not now \(now)" }
            // The cursor moves to the window's until, never past now.
            if sync.cursor != report.until || report.outcome.cursor != report.until {
                return "window \(window): cursor \(String(describing: sync.cursor))"
            }
            if let cursor = sync.cursor, cursor > now { return "window \(window): cursor \(cursor) after now \(now)" }
            if report.outcome.requests != report.requests {
                return "window \(window): outcome counts \(report.outcome.requests) REQs, sent \(report.requests)"
            }
            if sync.paging.until != .unknown, (sync.paging.until == .inclusive) != relay.inclusiveUntil {
                return "window \(window): learned until \(sync.paging.until), the relay is inclusive: \(relay.inclusiveUntil)"
            }
            if sync.paging.isCapKnown, sync.paging.pageSize > cap {
                return "window \(window): page size \(sync.paging.pageSize) taken as known, the relay caps at \(cap)"
            }
            if report.maxRemembered > 3 * pageSize { return "window \(window): remembered \(report.maxRemembered) ids, page size \(pageSize)" }

            // Every event of the window was received, except in seconds reported incomplete,
            // which must really hold more events than a page.
            var requestBound = report.cuts
            let incomplete = Set(report.outcome.incompleteSeconds)
            if incomplete.count != report.outcome.incompleteSeconds.count { return "window \(window): a second reported incomplete twice" }
            for (index, f) in filters.enumerated() {
                let lo = max(f.since ?? 0, report.since ?? 0)
                let hi = min(f.until ?? Int64.max, report.until)
                let inWindow = snapshot.events.filter { e in
                    (f.kinds.map { $0.contains(e.kind) } ?? true) && e.createdAt >= lo && e.createdAt <= hi
                }
                for e in inWindow where !report.received.contains(e.id) && !incomplete.contains(e.createdAt) {
                    return "window \(window): event \(e) of filter \(f) never received (since \(lo), until \(hi), \(report.requests) REQs)"
                }
                var runs: [Int64: Int] = [:]
                for e in inWindow { runs[e.createdAt, default: 0] += 1 }
                // Every full page lowers until below a second that holds events, or steps below
                // a run of at least a page (at most once per second, after reaching it): at most
                // one page per second plus one, or two with such runs, and one event asked below
                // a short last page.
                // Learning costs at most a page asked again (the convention) and two pages past the
                // last (the cap).
                let longest = runs.values.max() ?? 0
                requestBound += lo <= hi ? (longest < sent ? 1 : 2) * runs.count + 2 + (learned ? 3 : 0) : 0
                // And every full page brings at least pageSize − (longest run) new events.
                if longest < sent {
                    let pages = report.pages[index, default: 0]
                    let bound = lo <= hi ? inWindow.count / (sent - longest) + 2 + (learned ? 3 : 0) : 0
                    if pages > bound { return "window \(window): filter \(index) took \(pages) pages for \(inWindow.count) events (bound \(bound))" }
                }
            }
            var runsAtIncomplete: [Int64: [Int]] = [:]
            for e in snapshot.events where incomplete.contains(e.createdAt) {
                var counts = runsAtIncomplete[e.createdAt] ?? Array(repeating: 0, count: filters.count)
                for (i, f) in filters.enumerated() where SimulatedRelay.matches(f, e) { counts[i] += 1 }
                runsAtIncomplete[e.createdAt] = counts
            }
            for second in incomplete {
                let longest = runsAtIncomplete[second]?.max() ?? 0
                // A learning sync may report a second it cannot tell complete (its page may have been
                // capped); never one without events.
                if longest < (learned ? 1 : pageSize) {
                    return "window \(window): second \(second) reported incomplete with a run of \(longest)"
                }
            }
            if report.requests > requestBound {
                return
                    "window \(window): \(report.requests) REQs, bound \(requestBound) cuts \(report.cuts) pages \(report.pages) filters \(filterTexts) ps \(pageSize) cap \(relay.cap) incl \(relay.inclusiveUntil) since \(String(describing: report.since)) until \(report.until) events \(snapshot.events.map { ($0.createdAt, $0.kind) })"
            }

            // Time passes; new events, late (backdated within the horizon) events, future-dated ones.
            for e in live { relay.insert(e) }
            let previous = now
            now += [between(0, 60), between(0, 3_000), between(0, 200_000)][below(3)]
            for _ in 0..<below(20) { relay.insert(makeEvent(between(previous + 1, now))) }
            if let cursor = sync.cursor {
                for _ in 0..<below(8) { relay.insert(makeEvent(between(max(0, cursor - sync.horizon), previous))) }
            }
            if below(3) == 0 {
                let second = between(previous + 1, now)
                for _ in 0..<(1 + below(2 * pageSize)) { relay.insert(makeEvent(second)) }
            }
            for _ in 0..<below(3) { relay.insert(makeEvent(now + between(1, 500))) }
        }
        return nil
    }
}
