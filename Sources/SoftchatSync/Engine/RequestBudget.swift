import SoftchatCore

/// The REQ budget of one relay connection, as a value with its own transitions: how many
/// subscriptions the relay holds for us, the one-shot REQs waiting for a slot, the ones open and
/// whether each was heard. It never sends anything: the engine sends what it hands out and
/// reports back (`RelayRuntime+Requests` says why the budget exists).
///
/// `negotiations` in the calls below is the NIP-77 sessions open on the connection: they hold a
/// relay subscription each, so they count toward the limit.
struct RequestBudget {
    /// The most REQs held open at once on this connection: `ceiling`, lowered by refusals.
    private(set) var limit: Int
    /// What the relay allows as far as it said: NIP-11's `max_subscriptions` when stated (never
    /// above relay.session's bound), else `SyncEngine.defaultREQBudget`. Each connection starts
    /// from it: a refusal teaches only its own connection, so a transient one (a burst limit, a
    /// restart, a cap for clients not yet authenticated) cannot cap the relay for the engine's
    /// life. A relay whose limit really is lower says so once per connection.
    private(set) var ceiling: Int
    /// Live REQ id → the subscriptions whose live filters it carries.
    var liveChunks: [String: [String]] = [:]
    /// One-shot REQs waiting for a slot, in order.
    private(set) var queue: [QueuedRequest] = []
    /// One-shot REQs sent and not ended.
    private(set) var open: [String: OpenRequest] = [:]

    init(limit: Int = SyncEngine.defaultREQBudget) {
        ceiling = max(1, limit)
        self.limit = ceiling
    }

    /// What the relay's NIP-11 document states: it sets the ceiling (never above relay.session's
    /// bound), and the limit never above it or above what refusals taught this connection.
    mutating func stated(_ maxSubscriptions: Int) {
        guard maxSubscriptions > 0 else { return }
        ceiling = max(1, min(ceiling, maxSubscriptions, RelaySessionContract.maxSubscriptions.value))
        limit = min(limit, ceiling)
    }

    /// Subscriptions the relay holds for us now.
    func inUse(negotiations: Int) -> Int { liveChunks.count + open.count + negotiations }

    func isOpen(_ id: String) -> Bool { open[id] != nil }

    func filters(of id: String) -> [String]? { open[id]?.filtersJSON }

    /// Queues a one-shot REQ (sent by `nextToSend` when a slot is free).
    mutating func enqueue(_ request: QueuedRequest) { queue.append(request) }

    /// The next queued REQ when a slot is free, taken off the queue: the first whose backoff has
    /// passed at `now` (monotonic ms; by default every one has); the engine sends it and calls
    /// `opened(_:deadline:)` when the session took it. One one-shot always has a slot beside the
    /// live REQs, whatever the relay stated (a `max_subscriptions` of 1 would otherwise leave
    /// no page ever asked for), as `refused` never lowers the limit below that either.
    mutating func nextToSend(negotiations: Int, now: Int64 = .max) -> QueuedRequest? {
        guard inUse(negotiations: negotiations) < max(limit, liveChunks.count + 1),
            let next = queue.firstIndex(where: { $0.notBefore <= now })
        else { return nil }
        return queue.remove(at: next)
    }

    /// When the first queued REQ still waiting out its backoff at `now` may go.
    func nextBackoffDue(now: Int64) -> Int64? { queue.lazy.map(\.notBefore).filter { $0 > now }.min() }

    /// The session took `request`. Past `deadline` (monotonic ms; nil: none) with no EOSE and
    /// nothing heard since, it is `overdue`.
    mutating func opened(_ request: QueuedRequest, deadline: Int64? = nil) {
        open[request.id] = OpenRequest(filtersJSON: request.filtersJSON, attempt: request.attempt, deadline: deadline)
    }

    /// One-shot `id` ended (EOSE, or a CLOSED the session will not retry), or was dropped before
    /// it was sent. True when it held a slot (another REQ may go now).
    mutating func ended(_ id: String) -> Bool {
        queue.removeAll { $0.id == id }
        return open.removeValue(forKey: id) != nil
    }

    /// Something came for `id` (an event or its EOSE): the relay took it. Its deadline moves to
    /// `deadline` when given (an answer that is still coming is not given up).
    mutating func heard(_ id: String, deadline: Int64? = nil) {
        guard var request = open[id] else { return }
        request.heard = true
        request.suspectSince = nil
        if let deadline, let current = request.deadline { request.deadline = max(current, deadline) }
        open[id] = request
    }

    /// Bytes of a message arrived without completing it: the message may answer any open
    /// one-shot, so none is given up while it comes (each deadline moves to at least
    /// `deadline`).
    mutating func bytesArrived(deadline: Int64) {
        for (id, request) in open {
            guard let current = request.deadline, current < deadline else { continue }
            open[id]!.deadline = deadline
        }
    }

    /// Every one-shot that heard nothing yet becomes a suspect at `now` (unless it is one
    /// already): a relay NOTICE came, whatever its text, and may have been the refusal of any of
    /// them (nostr-relay's bare "rate-limited" is all it sends for a REQ it drops). Each is sent
    /// again in place if it stays silent (`dueSuspects`).
    mutating func suspectUnheard(now: Int64) {
        for (id, request) in open where !request.heard && request.suspectSince == nil { open[id]?.suspectSince = now }
    }

    /// The relay refused a REQ for its subscription limit ("too many subscriptions" as a NOTICE
    /// or a CLOSED). The limit drops to what is open and answering (never below one one-shot
    /// beside the live REQs); every one-shot that heard nothing becomes a suspect, to be sent
    /// again in place if it stays silent (`dueSuspects`).
    ///
    /// - Returns: The lowered limit, or nil when it did not change.
    mutating func refused(now: Int64, negotiations: Int) -> Int? {
        let unheard = open.filter { !$0.value.heard }.count
        let lowered = max(liveChunks.count + 1, inUse(negotiations: negotiations) - unheard)
        suspectUnheard(now: now)
        guard lowered < limit else { return nil }
        limit = lowered
        return lowered
    }

    /// Suspects unheard for their wait (`wait` ms, doubled per time each was already sent again
    /// in place), to send again now, as many as the limit holds beside the REQs that answer; the
    /// others wait another round.
    mutating func dueSuspects(now: Int64, wait: Int64, negotiations: Int) -> [(id: String, filtersJSON: [String])] {
        let suspects = open.filter { $0.value.suspectSince != nil }.keys.sorted()
        guard !suspects.isEmpty else { return [] }
        var room = limit - (inUse(negotiations: negotiations) - suspects.count)
        var due: [(id: String, filtersJSON: [String])] = []
        for id in suspects {
            guard let request = open[id], let since = request.suspectSince, now - since >= request.suspectWait(wait) else { continue }
            guard room > 0 else {
                open[id]?.suspectSince = now
                continue
            }
            room -= 1
            open[id]?.suspectSince = nil
            open[id]?.resends += 1
            due.append((id, request.filtersJSON))
        }
        return due
    }

    /// When the earliest suspect is due (its wait after it became one).
    func nextSuspectDue(wait: Int64) -> Int64? {
        open.values.compactMap { request in request.suspectSince.map { $0 + request.suspectWait(wait) } }.min()
    }

    /// The one-shots past their deadline at `now`, in id order: silent since they went out or
    /// since their last event, with no EOSE.
    func overdue(now: Int64) -> [String] { open.filter { ($0.value.deadline ?? .max) <= now }.keys.sorted() }

    /// The earliest deadline of a one-shot open now.
    var nextDeadline: Int64? { open.values.compactMap(\.deadline).min() }

    /// The connection is gone: every REQ with it, and what its refusals taught (the next one
    /// starts from `ceiling`). Returns the ids the session held.
    mutating func withdrawAll() -> [String] {
        limit = ceiling
        let ids = liveChunks.keys.sorted() + open.keys.sorted()
        liveChunks.removeAll()
        open.removeAll()
        queue.removeAll()
        return ids
    }
}

/// A one-shot REQ waiting for a slot.
struct QueuedRequest: Equatable {
    let id: String
    let filtersJSON: [String]
    /// 1 for a first ask; one more for each ask after an unanswered one.
    var attempt = 1
    /// Not sent before this (monotonic ms): the backoff of a REQ asked again.
    var notBefore: Int64 = 0
}

/// A one-shot REQ sent on this connection.
struct OpenRequest: Equatable {
    let filtersJSON: [String]
    /// Its `QueuedRequest.attempt`.
    var attempt = 1
    /// Past this (monotonic ms) with nothing heard since it went out or since its last event,
    /// and no EOSE, it is given up (`RequestBudget.overdue`); nil: never.
    var deadline: Int64?
    /// An event or its EOSE came: the relay took it.
    var heard = false
    /// Unheard when a NOTICE came or the relay refused a REQ for its limit (monotonic ms):
    /// maybe this one was refused.
    var suspectSince: Int64?
    /// Times it was sent again in place as a suspect.
    var resends = 0

    /// How long it waits as a suspect before it is sent again: `wait`, doubled per resend.
    func suspectWait(_ wait: Int64) -> Int64 { wait << Int64(min(resends, 16)) }
}
