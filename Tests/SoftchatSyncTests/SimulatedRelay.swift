import SoftchatCore
import SoftchatJSON
import SoftchatSync

/// An event as the simulated relay holds it: only what paging looks at.
struct SimEvent: Hashable {
    let id: String
    let createdAt: Int64
    let kind: Int
}

/// A relay's stored-event answer: matching events newest first, at most `min(limit, cap)`,
/// `until` read inclusively or exclusively, equal `created_at` in id order or shuffled per REQ.
struct SimulatedRelay {
    private(set) var events: [SimEvent] = []
    var cap: Int
    var inclusiveUntil: Bool
    var shuffleTies = false

    mutating func insert(_ event: SimEvent) {
        let i = events.firstIndex { $0.createdAt < event.createdAt || ($0.createdAt == event.createdAt && $0.id > event.id) }
        events.insert(event, at: i ?? events.count)
    }

    static func matches(_ filter: RelayFilter, _ e: SimEvent, inclusiveUntil: Bool = true) -> Bool {
        if let kinds = filter.kinds, !kinds.contains(e.kind) { return false }
        if let since = filter.since, e.createdAt < since { return false }
        if let until = filter.until {
            if inclusiveUntil ? e.createdAt > until : e.createdAt >= until { return false }
        }
        return true
    }

    func answer(_ filter: RelayFilter, rng: inout SplitMix64) -> [SimEvent] {
        let n = min(cap, filter.limit.map { Int($0) } ?? cap)
        // Newest first: binary-search the first event within until, then stop after the n-th
        // match's second (the whole tie group, so a shuffle can pick any of it).
        let newest = filter.until.map { inclusiveUntil ? $0 : $0 - 1 } ?? Int64.max
        var lo = 0
        var hi = events.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if events[mid].createdAt > newest { lo = mid + 1 } else { hi = mid }
        }
        var out: [SimEvent] = []
        var i = lo
        while i < events.count {
            let e = events[i]
            if out.count >= n, e.createdAt != out[out.count - 1].createdAt { break }
            if let since = filter.since, e.createdAt < since { break }
            if Self.matches(filter, e, inclusiveUntil: inclusiveUntil) { out.append(e) }
            i += 1
        }
        if shuffleTies {
            var start = 0
            while start < out.count {
                var end = start + 1
                while end < out.count, out[end].createdAt == out[start].createdAt { end += 1 }
                out[start..<end].shuffle(using: &rng)
                start = end
            }
        }
        return Array(out.prefix(n))
    }
}

func eventID(_ n: Int) -> String {
    let hex = String(n, radix: 16)
    return String(repeating: "0", count: 64 - hex.count) + hex
}

func parseFilter(_ text: String) -> RelayFilter {
    try! RelayFilter.fromJSON(text)
}

/// Saves to JSON text and loads it again, as a host would across a crash.
func reloaded(_ sync: SubscriptionSync) throws -> SubscriptionSync {
    try SubscriptionSync(json: JSONReader().parse(sync.jsonValue.jsonText))
}

/// What one window did, for the checks.
struct WindowReport {
    var outcome: SyncOutcome
    var since: Int64?
    var until: Int64
    var requests = 0
    var cuts = 0
    /// Completed pages per filter index.
    var pages: [Int: Int] = [:]
    var received: Set<String> = []
    var maxRemembered = 0
}

struct DriveOptions {
    var cutPercent = 0
    var maxCuts = 0
    var reloadPercent = 0
    var live: [SimEvent] = []
}

/// Drives one window against `relay`; returns the report or the first broken rule.
func drive(
    _ sync: inout SubscriptionSync, relay: SimulatedRelay, now: Int64, options: DriveOptions,
    rng: inout SplitMix64
) -> Result<WindowReport, DriveFailure> {
    func fail(_ message: String) -> Result<WindowReport, DriveFailure> { .failure(DriveFailure(message: message)) }
    let cursorBefore = sync.cursor
    sync.begin(now: now)
    guard let until = sync.windowUntil else { return fail("begin opened no window") }
    var report = WindowReport(outcome: SyncOutcome(cursor: 0, incompleteSeconds: [], requests: 0), since: sync.windowSince, until: until)
    let hardLimit = 10 * (relay.events.count + 10) * sync.filters.count + options.maxCuts + 10
    while true {
        guard report.requests <= hardLimit else { return fail("more than \(hardLimit) REQs: paging does not end") }
        switch sync.next() {
        case .idle: return fail("idle inside a window")
        case .awaitingEndOfStoredEvents: return fail("awaiting EOSE with nothing in flight")
        case .synced(let outcome):
            report.outcome = outcome
            return .success(report)
        case .send(let request):
            report.requests += 1
            // One event below a short page confirms its end; every other page asks for a page.
            // A page below a short page asks a whole page too (a relay filtering after `LIMIT`
            // answers a one-event ask with nothing while more lies below).
            let limit = sync.paging.pageSize
            guard request.filter.limit == Int64(limit) else { return fail("limit \(String(describing: request.filter.limit))") }
            // The form of `until` is the convention known (or learned) so far; unknown sends NIP-01's.
            let exclusiveForm = sync.paging.until != .inclusive
            guard let sentUntil = request.filter.until, sentUntil == (exclusiveForm ? request.until + 1 : request.until)
            else { return fail("until \(String(describing: request.filter.until)) for page until \(request.until)") }
            guard request.until <= until else { return fail("page until \(request.until) after window until \(until)") }
            // The host's own bounds only narrow the window, never widen it.
            let host = sync.filters[request.filterIndex]
            let floor = max(host.since ?? 0, report.since ?? 0)
            if host.since != nil || report.since != nil {
                guard request.filter.since == floor else { return fail("since \(String(describing: request.filter.since)), expected \(floor)") }
            } else if request.filter.since != nil {
                return fail("since sent without a cursor or a host since")
            }
            if let hostUntil = host.until, request.until > hostUntil { return fail("page until \(request.until) after the host's \(hostUntil)") }
            let page = relay.answer(request.filter, rng: &rng)
            let cutAt: Int? =
                report.cuts < options.maxCuts && Int(rng.next() % 100) < options.cutPercent
                ? Int(rng.next() % UInt64(page.count + 1)) : nil
            for (i, e) in page.enumerated() {
                if i == cutAt { break }
                let disposition = sync.received(eventID: e.id, createdAt: e.createdAt)
                // An inclusive relay asked in the exclusive form (convention unknown) also sends
                // the next second's events: outside the page.
                let beyond = exclusiveForm && relay.inclusiveUntil && e.createdAt == request.until + 1
                guard disposition == (beyond ? .outsideRequest : disposition), beyond || disposition == .new || disposition == .duplicate else {
                    return fail("event \(e) was \(disposition) (page until \(request.until))")
                }
                report.received.insert(e.id)
                report.maxRemembered = max(report.maxRemembered, sync.rememberedIDCount)
            }
            if cutAt != nil {
                report.cuts += 1
                if Int(rng.next() % 3) == 0 {
                    var expected = sync
                    expected.restarted()
                    guard let loaded = try? reloaded(sync) else { return fail("state did not reload") }
                    guard loaded == expected else { return fail("reloaded state differs from the restarted one") }
                    sync = loaded
                } else {
                    sync.restarted()
                }
            } else {
                guard sync.endOfStoredEvents() else { return fail("EOSE refused") }
                report.pages[request.filterIndex, default: 0] += 1
                for e in options.live where Int(rng.next() % 3) == 0 {
                    guard sync.received(eventID: e.id, createdAt: e.createdAt) == .notPaging else { return fail("live event counted") }
                }
                if Int(rng.next() % 100) < options.reloadPercent {
                    guard let loaded = try? reloaded(sync), loaded == sync else { return fail("state between pages did not round-trip") }
                    sync = loaded
                }
            }
            if sync.isSyncing, sync.cursor != cursorBefore { return fail("cursor moved before the window was synced") }
        }
    }
}

struct DriveFailure: Error {
    let message: String
}
