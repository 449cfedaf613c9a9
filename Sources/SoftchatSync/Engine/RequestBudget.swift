import SoftchatCore

/// The REQ budget of one relay connection, as a value with its own transitions: how many
/// subscriptions the relay holds for us, the one-shot REQs waiting for a slot, the ones open and
/// whether each was heard. It never sends anything: the engine sends what it hands out and
/// reports back (`SyncEngine+Requests` says why the budget exists).
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

    /// The next queued REQ when a slot is free, taken off the queue; the engine sends it and
    /// calls `opened(_:)` when the session took it. One one-shot always has a slot beside the
    /// live REQs, whatever the relay stated (a `max_subscriptions` of 1 would otherwise leave
    /// no page ever asked for), as `refused` never lowers the limit below that either.
    mutating func nextToSend(negotiations: Int) -> QueuedRequest? {
        guard !queue.isEmpty, inUse(negotiations: negotiations) < max(limit, liveChunks.count + 1) else { return nil }
        return queue.removeFirst()
    }

    mutating func opened(_ request: QueuedRequest) { open[request.id] = OpenRequest(filtersJSON: request.filtersJSON) }

    /// One-shot `id` ended (EOSE, or a CLOSED the session will not retry), or was dropped before
    /// it was sent. True when it held a slot (another REQ may go now).
    mutating func ended(_ id: String) -> Bool {
        queue.removeAll { $0.id == id }
        return open.removeValue(forKey: id) != nil
    }

    /// Something came for `id` (an event or its EOSE): the relay took it.
    mutating func heard(_ id: String) {
        open[id]?.heard = true
        open[id]?.suspectSince = nil
    }

    /// The relay refused a REQ for its subscription limit ("too many subscriptions" as a NOTICE
    /// or a CLOSED). The limit drops to what is open and answering (never below one one-shot
    /// beside the live REQs); every one-shot that heard nothing becomes a suspect, to be sent
    /// again in place if it stays silent (`dueSuspects`).
    ///
    /// - Returns: The lowered limit, or nil when it did not change.
    mutating func refused(now: Int64, negotiations: Int) -> Int? {
        let unheard = open.filter { !$0.value.heard }.keys.sorted()
        let lowered = max(liveChunks.count + 1, inUse(negotiations: negotiations) - unheard.count)
        for id in unheard where open[id]?.suspectSince == nil { open[id]?.suspectSince = now }
        guard lowered < limit else { return nil }
        limit = lowered
        return lowered
    }

    /// Suspects unheard for `wait` ms, to send again now, as many as the limit holds beside the
    /// REQs that answer; the others wait another `wait`.
    mutating func dueSuspects(now: Int64, wait: Int64, negotiations: Int) -> [(id: String, filtersJSON: [String])] {
        let suspects = open.filter { $0.value.suspectSince != nil }.keys.sorted()
        guard !suspects.isEmpty else { return [] }
        var room = limit - (inUse(negotiations: negotiations) - suspects.count)
        var due: [(id: String, filtersJSON: [String])] = []
        for id in suspects {
            guard let request = open[id], let since = request.suspectSince, now - since >= wait else { continue }
            guard room > 0 else {
                open[id]?.suspectSince = now
                continue
            }
            room -= 1
            open[id]?.suspectSince = nil
            due.append((id, request.filtersJSON))
        }
        return due
    }

    /// When the earliest suspect is due (`wait` after it became one).
    func nextSuspectDue(wait: Int64) -> Int64? { open.values.compactMap(\.suspectSince).min().map { $0 + wait } }

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
}

/// A one-shot REQ sent on this connection.
struct OpenRequest: Equatable {
    let filtersJSON: [String]
    /// An event or its EOSE came: the relay took it.
    var heard = false
    /// Unheard when the relay refused a REQ for its limit (monotonic ms): maybe this one.
    var suspectSince: Int64?
}
