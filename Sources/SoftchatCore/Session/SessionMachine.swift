import SoftchatJSON

/// The pure state machine behind `RelaySession`: calls and socket text in, ordered actions
/// and frames out. No I/O, no clock (time arrives as arguments), no randomness but the seeded
/// jitter. Every public entry point validates completely before it mutates, so a rejected
/// call leaves the state exactly as it was.
struct SessionMachine {
    enum Connection: Equatable {
        case idle, connecting, connected, backingOff, cancelled
    }

    struct Subscription {
        var filters: [RelayFilter]
        /// The newest created_at confirmed as persisted for this subscription.
        var newestConfirmed: Int64?
        /// The relay closed it with auth-required before we authenticated: send its REQ again
        /// once the relay accepts our AUTH.
        var awaitingAuthReplay = false
        /// The one auth-required re-send of this connection was used.
        var authReplayUsed = false
        /// Closed with `error:` or `rate-limited:`: the REQ goes out again at this time.
        var retryAt: Int64?
        /// Consecutive retryable closes since the last EOSE (the backoff exponent).
        var closedRetries = 0
    }

    enum Purpose: Equatable {
        case subscription(String)
        case close(String)
        case count(String)
        case auth(String)
        case publish

        /// Frames that wait behind an unanswered AUTH: everything but the AUTH and CLOSEs.
        var waitsForAuthentication: Bool {
            switch self {
            case .subscription, .count, .publish: true
            case .close, .auth: false
            }
        }
    }

    struct OutboundEntry {
        let frame: String
        let deliveryEventIDs: [String]
        let purpose: Purpose
        /// Publish frames are numbered, so a confirmation moves only the events still waiting
        /// in that very frame (an event answered and re-framed meanwhile is in a newer one).
        var serial = 0
    }

    /// Where a held delivery stands. Retryable and terminal events are not held: they leave
    /// the session with their decision (the host re-publishes retryable ones from durable
    /// intent), so nothing the relay never answers can fill the pending bound.
    enum Stage: Equatable {
        /// Waiting to be drained (or drained, not yet confirmed written: `drained`).
        case pending
        /// Written; waiting for the relay's OK.
        case inFlight
        /// Answered auth-required before we authenticated: sent again once after the relay
        /// accepts our AUTH, within its original acknowledgement deadline.
        case awaitingAuthentication
    }

    struct Delivery {
        let event: VerifiedEvent
        var stage: Stage
        /// Events of one `publish` call share a batch number and go out together.
        var batch: Int
        var sequence: Int
        /// The one auth-required re-send of this connection was used.
        var authResendUsed = false
        /// True while the event sits in a drained, unconfirmed frame (`frame`).
        var drained = false
        var frame = 0
        /// When the write was confirmed (`confirmSent(now:)`); nil when the host gave no time,
        /// and then any `handleTimeout` call times it out.
        var sentAt: Int64?
    }

    struct Awaiting {
        let event: VerifiedEvent
        let subscriptionID: String
        /// The session's clock when the event arrived, if it had one.
        let arrivedAt: Int64?
        /// The transport was lost since it was handed out: offer it again if it comes back.
        var reofferable = false
    }

    let config: RelaySessionConfig
    /// The smaller of relay.wire's frame bound and the relay's NIP-11 max_message_length.
    let frameLimit: Int
    var connection = Connection.idle
    var closed = false
    /// The latest time any call passed in (seconds), for rules that need a clock on calls
    /// that carry none.
    var lastNow: Int64?

    var subscriptions: [String: Subscription] = [:]
    var subscriptionOrder: [String] = []
    /// Subscriptions unsubscribed on this connection, newest last, at most
    /// `lingeringSubscriptions`: an EVENT for one (a relay that sends a stored event after its
    /// EOSE, or before our CLOSE reached it) is still verified and checked against its filters,
    /// and handed out if it matches, so an event a relay holds for a subscription is not dropped
    /// for arriving late. Forgotten when the connection ends. Kept as the filters' JSON text and
    /// parsed again for such an EVENT (rare): parsed filters cost about 0.7 KiB each, and every
    /// idle connection keeps the pages and ahead REQs it closed (issue 45's memory figure).
    var lingering: [(id: String, filtersJSON: [String])] = []
    /// How many unsubscribed subscriptions an EVENT is still taken for (memory: their filters).
    static let lingeringSubscriptions = 32
    var pendingCounts: [String: [RelayFilter]] = [:]

    /// The filters of lingering subscription `id` (the newest of that id), parsed again; nil
    /// when none lingers.
    func lingeringFilters(_ id: String) -> [RelayFilter]? {
        guard let texts = lingering.last(where: { $0.id == id })?.filtersJSON else { return nil }
        var filters: [RelayFilter] = []
        for text in texts {
            // They parsed when the subscription was made; text the same parser wrote parses again.
            guard let filter = try? RelayFilter.fromJSON(text) else { return nil }
            filters.append(filter)
        }
        return filters
    }
    var countOrder: [String] = []

    /// Control frames (REQ, CLOSE, COUNT, AUTH) not yet drained; publishes are framed at drain time.
    var queue: [OutboundEntry] = []
    /// Frames drained and not yet confirmed written.
    var drained: [OutboundEntry] = []

    /// Publishes the session holds (pending, in flight, awaiting authentication): the count
    /// that `maxPendingPublishes` bounds.
    var deliveries: [String: Delivery] = [:]
    var nextFrameSerial = 1
    /// Subscriptions whose REQ went out on this connection and was not closed: an
    /// unsubscription sends CLOSE exactly for these.
    var liveREQs: Set<String> = []
    /// COUNTs cancelled after they went out on this connection: a late answer is a notice, and
    /// the id is not reused for another COUNT on this connection (its answer could not be told
    /// apart).
    var closedCounts = RecentIDs(capacity: 1024)
    var nextBatch = 0
    var nextSequence = 0
    /// Events that timed out on this connection: a late OK still settles them.
    var timedOut = RecentIDs(capacity: RelayPublishContract.maxPendingPublishes.value)
    /// Events the relay answered terminally: a later answer never contradicts that.
    var settled = RecentIDs(capacity: 4096)
    /// Written events of this connection in write order, until answered (timed-out ones
    /// included), for in-order correlation of OKs without an id.
    var unanswered: [String] = []
    /// In-order correlation lost its place on this connection (the window overflowed): OKs
    /// without an id are reported, never applied, until the next connection.
    var correlationLost = false

    var awaiting: [String: Awaiting] = [:]
    var recentlyConfirmed = RecentIDs(capacity: 4096)

    var challenge: String?
    /// Challenges answered on this connection, and by which key (`pubkey|challenge`): each is
    /// asked for and answered once per connection. The most recent 256 are kept, so a relay
    /// issuing challenge after challenge cannot grow them.
    var answeredChallenges = RecentIDs(capacity: 256)
    var answeredChallengeTexts = RecentIDs(capacity: 256)
    /// A challenge not yet asked for: it came while our answer was in flight or sooner than
    /// `authenticationIntervalSeconds` after the last answer; a later challenge replaces it.
    var deferredChallenge: String?
    /// When this connection's last AUTH answer was queued (session clock).
    var lastAnswerAt: Int64?
    var authEventID: String?
    var authenticated = false
    /// Frames behind our AUTH wait for its OK until this time (a bounded wait for relays that
    /// never answer a good AUTH).
    var authWaitUntil: Int64?
    /// The wait for our AUTH's OK ran out: the connection works unauthenticated (a late OK is
    /// still recognised).
    var authWaitEnded = false
    /// The relay refused our latest AUTH on this connection, and no challenge was asked for and
    /// no AUTH sent since: an event answered auth-required would wait for nothing.
    var authRefused = false

    var backoff: ReconnectBackoff
    var readySince: Int64?

    init(config: RelaySessionConfig) {
        self.config = config
        frameLimit = min(RelayWireContract.maxFrameBytes.value, config.maxMessageBytes.map { Int(clamping: $0) } ?? Int.max)
        backoff = ReconnectBackoff(config: config)
    }

    mutating func observe(_ now: Int64?) {
        if let now { lastNow = now }
    }

    /// Deliveries in publish order.
    var deliveryIDsInOrder: [String] {
        deliveries.keys.sorted { deliveries[$0]!.sequence < deliveries[$1]!.sequence }
    }

    // MARK: Guards

    func requireOpen(_ call: String) throws(SoftchatError) {
        if closed { throw .invalidRelaySession("\(call): the session is closed") }
    }

    func requireConnected(_ call: String) throws(SoftchatError) {
        try requireOpen(call)
        guard connection == .connected else {
            throw .invalidRelaySession("\(call) needs a connected transport; the session is \(stateName)")
        }
    }

    var stateName: String {
        if closed { return "closed" }
        switch connection {
        case .idle: return "idle"
        case .connecting: return "connecting"
        case .connected: return authEventID != nil && !authenticated && !authWaitEnded ? "authenticating" : "ready"
        case .backingOff: return "backingOff"
        case .cancelled: return "cancelled"
        }
    }

    var outboundCount: Int { queue.count + drained.count }

    func requireOutboundRoom(_ frames: Int, _ call: String) throws(SoftchatError) {
        let bound = RelaySessionContract.maxOutboundFrames
        guard outboundCount + frames <= bound.value else {
            throw SoftchatError(
                bound.error,
                "\(call): \(outboundCount) outbound frames are queued; \(frames) more would pass the limit of \(bound.value)",
                operation: .relaySession)
        }
    }

    /// A reconnect sends a REQ per subscription and a COUNT per unanswered count; that has to
    /// fit in the outbound bound, or `transportConnected` could never succeed again.
    func requireReconnectRoom(_ call: String) throws(SoftchatError) {
        let bound = RelaySessionContract.maxOutboundFrames
        guard subscriptions.count + pendingCounts.count < bound.value else {
            throw SoftchatError(
                bound.error,
                "\(call): \(subscriptions.count) subscriptions and \(pendingCounts.count) unanswered COUNTs already fill the "
                    + "\(bound.value) frames a reconnect sends", operation: .relaySession)
        }
    }

    /// Every frame the session drains fits `frameLimit`; a call that would queue a larger one
    /// is refused with relay.wire's frame-bound code.
    func requireFrameFits(_ frame: String, _ call: String) throws(SoftchatError) {
        let bytes = frame.utf8.count
        guard bytes <= frameLimit else {
            throw SoftchatError(
                RelayWireContract.maxFrameBytes.error,
                "\(call): the frame would be \(bytes) bytes, over this relay's limit of \(frameLimit)", operation: .relaySession)
        }
    }

    // MARK: Lifecycle

    mutating func connect() throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("connect")
        guard connection == .idle || connection == .backingOff || connection == .cancelled else {
            throw .invalidRelaySession("connect: the session is already \(stateName)")
        }
        connection = .connecting
        return [.openTransport]
    }

    mutating func transportConnected(now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("transportConnected")
        guard connection == .connecting else {
            throw .invalidRelaySession("transportConnected: expected a connecting session, the session is \(stateName)")
        }
        let control = resubscriptionFrames()
        try requireOutboundRoom(control.count, "transportConnected")
        observe(now)
        connection = .connected
        readySince = now
        queue = control
        return []
    }

    /// REQs for every subscription (since advanced past what was confirmed, minus the overlap)
    /// and COUNTs still unanswered: what a fresh connection needs.
    func resubscriptionFrames() -> [OutboundEntry] {
        var frames: [OutboundEntry] = []
        for id in subscriptionOrder {
            let sub = subscriptions[id]!
            frames.append(reqEntry(id, filters: sub.filters, newestConfirmed: sub.newestConfirmed))
        }
        for id in countOrder {
            frames.append(countEntry(id, filters: pendingCounts[id]!))
        }
        return frames
    }

    func reqEntry(_ id: String, filters: [RelayFilter], newestConfirmed: Int64?) -> OutboundEntry {
        var sent = filters
        if let newest = newestConfirmed {
            let since = newest - config.sinceOverlapSeconds
            sent = filters.map { f in
                // Never widen a filter: keep a later since the host asked for.
                if let own = f.since, own >= since { return f }
                return f.withSince(since)
            }
        }
        return OutboundEntry(
            frame: ClientRelayFrame.req(subscriptionID: id, filters: sent).toJSON(), deliveryEventIDs: [],
            purpose: .subscription(id))
    }

    func countEntry(_ id: String, filters: [RelayFilter]) -> OutboundEntry {
        OutboundEntry(frame: ClientRelayFrame.count(subscriptionID: id, filters: filters).toJSON(), deliveryEventIDs: [], purpose: .count(id))
    }

    mutating func transportLost(now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("transportLost")
        guard connection == .connecting || connection == .connected else {
            throw .invalidRelaySession("transportLost: no transport is active; the session is \(stateName)")
        }
        observe(now)
        var actions = endTransport()
        backoff.connectionEnded(readySince: connection == .connected ? readySince : nil, now: now)
        readySince = nil
        let (delay, attempt) = backoff.next()
        connection = .backingOff
        actions.append(.scheduleReconnect(delayMilliseconds: delay, attempt: attempt))
        return actions
    }

    /// Stops: every delivery the session holds (pending, in flight, awaiting authentication)
    /// becomes retryable/cancelled and leaves it, one deliveryChanged each in publish order, so
    /// the host can release its lease; then closeTransport when a transport is active.
    mutating func cancel() throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("cancel")
        let active = connection == .connecting || connection == .connected
        guard active || connection == .backingOff || !deliveries.isEmpty else {
            throw .invalidRelaySession("cancel: nothing to cancel; the session is \(stateName)")
        }
        var actions: [RelaySessionAction] = []
        for id in deliveryIDsInOrder {
            deliveries[id] = nil
            actions.append(
                .deliveryChanged(
                    decision: DeliveryDecision(
                        eventID: id, state: .retryable, category: .cancelled, message: "the session was cancelled before the relay answered")))
        }
        if active { _ = endTransport() }
        connection = .cancelled
        readySince = nil
        if active { actions.append(.closeTransport) }
        return actions
    }

    /// What ending a transport does to session state: events in flight (or awaiting
    /// authentication) become retryable and leave the session, one deliveryChanged each in
    /// publish order; pending ones stay, to go out on the next connection. Undrained frames are
    /// forgotten (rebuilt on the next connection), per-connection authentication and
    /// correlation end, and events handed out but not confirmed may be offered again.
    mutating func endTransport() -> [RelaySessionAction] {
        var actions: [RelaySessionAction] = []
        for id in deliveryIDsInOrder {
            deliveries[id]!.drained = false
            guard deliveries[id]!.stage != .pending else { continue }
            deliveries[id] = nil
            actions.append(
                .deliveryChanged(
                    decision: DeliveryDecision(
                        eventID: id, state: .retryable, category: .transportLost, message: "the transport was lost before the relay answered")))
        }
        queue.removeAll()
        drained.removeAll()
        liveREQs.removeAll()
        lingering.removeAll()
        closedCounts = RecentIDs(capacity: closedCounts.capacity)
        unanswered.removeAll()
        correlationLost = false
        timedOut = RecentIDs(capacity: timedOut.capacity)
        challenge = nil
        answeredChallenges = RecentIDs(capacity: answeredChallenges.capacity)
        answeredChallengeTexts = RecentIDs(capacity: answeredChallengeTexts.capacity)
        deferredChallenge = nil
        lastAnswerAt = nil
        authEventID = nil
        authenticated = false
        authWaitUntil = nil
        authWaitEnded = false
        authRefused = false
        for id in awaiting.keys { awaiting[id]!.reofferable = true }
        for id in subscriptionOrder {
            subscriptions[id]!.awaitingAuthReplay = false
            subscriptions[id]!.authReplayUsed = false
            subscriptions[id]!.retryAt = nil
        }
        return actions
    }

    /// Releases the session, unless it still holds deliveries: closing then would orphan them
    /// (and the durable leases behind them), so it refuses until `cancel()` returned their
    /// changes. Idempotent.
    mutating func close() throws(SoftchatError) {
        if closed { return }
        guard deliveries.isEmpty else {
            throw .invalidRelaySession(
                "close: the session holds \(deliveries.count) deliveries; call cancel() first and commit the changes it returns")
        }
        closed = true
        queue.removeAll()
        drained.removeAll()
    }

    // MARK: Subscriptions

    static func parseFilters(_ filtersJSON: [String], verb: String) throws(SoftchatError) -> [RelayFilter] {
        guard !filtersJSON.isEmpty else { throw .invalidRelayFilter("\(verb) needs at least one filter, got none") }
        try RelayWireContract.maxFilters.check(filtersJSON.count, verb)
        var filters: [RelayFilter] = []
        for (i, text) in filtersJSON.enumerated() {
            let value: JSONValue
            do {
                value = try JSONReader().parse(text)
            } catch {
                throw .invalidRelayFilter("filter \(i) is not valid JSON: \(error)")
            }
            filters.append(try RelayFilter(json: value, index: i))
        }
        return filters
    }

    mutating func subscribe(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try requireOpen("subscribe")
        try FrameReader.checkSubscriptionID(id, verb: "subscribe")
        let filters = try Self.parseFilters(filtersJSON, verb: "subscribe")
        guard pendingCounts[id] == nil else {
            throw .invalidRelaySession("subscribe: \"\(id)\" is the id of a pending COUNT; cancel it with cancelCount first or use another id")
        }
        // A resubscription adds `since` to every filter: the REQ must fit with the longest one.
        try requireFrameFits(ClientRelayFrame.req(subscriptionID: id, filters: filters.map { $0.withSince(Int64.max) }).toJSON(), "subscribe")
        let replacing = subscriptions[id] != nil
        if !replacing {
            let bound = RelaySessionContract.maxSubscriptions
            guard subscriptions.count < bound.value else {
                throw SoftchatError(
                    bound.error, "subscribe: \(subscriptions.count) subscriptions are open, the limit is \(bound.value)",
                    operation: .relaySession)
            }
            try requireReconnectRoom("subscribe")
        }
        if connection == .connected {
            // A replaced subscription's undrained REQ is superseded rather than sent twice.
            let superseded = queue.filter { $0.purpose == .subscription(id) }.count
            try requireOutboundRoom(1 - superseded, "subscribe")
            queue.removeAll { $0.purpose == .subscription(id) }
            queue.append(reqEntry(id, filters: filters, newestConfirmed: nil))
        }
        if replacing {
            // A changed subscription starts over: its old cursor and retry state do not apply.
            subscriptions[id] = Subscription(filters: filters)
        } else {
            subscriptions[id] = Subscription(filters: filters)
            subscriptionOrder.append(id)
        }
    }

    mutating func unsubscribe(id: String) throws(SoftchatError) {
        try requireOpen("unsubscribe")
        guard subscriptions[id] != nil else { throw .invalidRelaySession("unsubscribe: no subscription \"\(id)\"") }
        if connection == .connected {
            let undrained = queue.contains { $0.purpose == .subscription(id) }
            if liveREQs.contains(id) && !queue.contains(where: { $0.purpose == .close(id) }) {
                // The relay has a REQ for it (perhaps an older one than a queued replacement).
                try requireOutboundRoom(undrained ? 0 : 1, "unsubscribe")
                queue.removeAll { $0.purpose == .subscription(id) }
                queue.append(OutboundEntry(frame: ClientRelayFrame.close(subscriptionID: id).toJSON(), deliveryEventIDs: [], purpose: .close(id)))
            } else {
                // No REQ of it reached the relay: dropping the queued one is the whole unsubscription.
                queue.removeAll { $0.purpose == .subscription(id) }
            }
        }
        if let subscription = subscriptions[id], connection == .connected {
            lingering.removeAll { $0.id == id }
            if lingering.count == Self.lingeringSubscriptions { lingering.removeFirst() }
            lingering.append((id, subscription.filters.map { $0.toJSON() }))
        }
        subscriptions[id] = nil
        subscriptionOrder.removeAll { $0 == id }
    }

    mutating func count(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try requireOpen("count")
        try FrameReader.checkSubscriptionID(id, verb: "count")
        let filters = try Self.parseFilters(filtersJSON, verb: "count")
        guard subscriptions[id] == nil else {
            throw .invalidRelaySession("count: \"\(id)\" is already a subscription id on this connection")
        }
        if pendingCounts[id] == nil { try requireReconnectRoom("count") }
        if connection == .connected, closedCounts.contains(id) {
            throw .invalidRelaySession(
                "count: a cancelled COUNT \"\(id)\" went out on this connection; its late answer could not be told apart, use another id")
        }
        if connection == .connected, pendingCounts[id] != nil, !queue.contains(where: { $0.purpose == .count(id) }) {
            // Its COUNT already went out: the relay's answer would be credited to the new filters.
            throw .invalidRelaySession("count: the COUNT \"\(id)\" already went out; cancelCount it first or use another id")
        }
        try requireFrameFits(ClientRelayFrame.count(subscriptionID: id, filters: filters).toJSON(), "count")
        if connection == .connected {
            // A repeated count's undrained COUNT is superseded rather than sent twice.
            let superseded = queue.filter { $0.purpose == .count(id) }.count
            try requireOutboundRoom(1 - superseded, "count")
            queue.removeAll { $0.purpose == .count(id) }
            queue.append(countEntry(id, filters: filters))
        }
        if pendingCounts[id] == nil { countOrder.append(id) }
        pendingCounts[id] = filters
    }

    /// Cancels a pending COUNT: an undrained COUNT frame is dropped, one already handed out is
    /// closed with CLOSE (NIP-45 answers on the subscription id), and a late answer becomes a
    /// notice.
    mutating func cancelCount(id: String) throws(SoftchatError) {
        try requireOpen("cancelCount")
        guard pendingCounts[id] != nil else { throw .invalidRelaySession("cancelCount: no pending COUNT \"\(id)\"") }
        if connection == .connected {
            let undrained = queue.contains { $0.purpose == .count(id) }
            if !undrained {
                try requireOutboundRoom(1, "cancelCount")
                queue.append(OutboundEntry(frame: ClientRelayFrame.close(subscriptionID: id).toJSON(), deliveryEventIDs: [], purpose: .close(id)))
                closedCounts.insert(id)
            }
            queue.removeAll { $0.purpose == .count(id) }
        }
        pendingCounts[id] = nil
        countOrder.removeAll { $0 == id }
    }

    // MARK: Ingestion hand-off

    mutating func confirmIngested(_ eventID: String) throws(SoftchatError) {
        try requireOpen("confirmIngested")
        guard let entry = awaiting.removeValue(forKey: eventID) else {
            throw .invalidRelaySession(
                "confirmIngested: event \(eventID) was not handed out for persistence, or was already confirmed",
                operation: .relayIngestion)
        }
        recentlyConfirmed.insert(eventID)
        if subscriptions[entry.subscriptionID] != nil {
            // An event can only say it was written by the time it arrived: one dated later (a
            // fast clock, or a created_at of 2^63 − 1) must not move the resubscription's since
            // past the arrival, or every event written in between would be asked from after it.
            let dated = entry.arrivedAt.map { Swift.min(entry.event.createdAt, $0) } ?? entry.event.createdAt
            let newest = subscriptions[entry.subscriptionID]!.newestConfirmed ?? Int64.min
            subscriptions[entry.subscriptionID]!.newestConfirmed = Swift.max(newest, dated)
        }
    }

    /// The host's commit of a `persistEvent` failed: the event no longer awaits persistence
    /// (a copy the relay sends again is verified and offered again). Unknown ids are ignored.
    mutating func ingestionFailed(_ eventID: String) {
        awaiting[eventID] = nil
    }

    // MARK: Diagnostics

    func snapshot() -> RelaySessionSnapshot {
        RelaySessionSnapshot(
            state: stateName, subscriptionIDs: subscriptionOrder, outboundFrames: outboundCount,
            pendingPublishes: deliveries.count, awaitingPersistence: awaiting.count,
            reconnectAttempt: backoff.attempt, authenticated: authenticated)
    }
}
