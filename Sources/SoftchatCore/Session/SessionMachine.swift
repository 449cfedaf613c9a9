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
        /// The relay closed it with auth-required; replay its REQ once after authenticating.
        var awaitingAuthReplay = false
        var authReplayUsed = false
    }

    enum Purpose: Equatable {
        case subscription(String), close(String), count(String), auth(String), publish
    }

    struct OutboundEntry {
        let frame: String
        let deliveryEventIDs: [String]
        let purpose: Purpose
    }

    struct Delivery {
        let event: VerifiedEvent
        var state: DeliveryState
        /// Events of one `publish` call share a batch number and go out together.
        var batch: Int
        var sequence: Int
        var authResendUsed = false
        var awaitingAuthResend = false
        /// True while the event sits in a drained, unconfirmed frame.
        var drained = false
        /// When it went in flight, in confirmSent order (for in-order OK correlation).
        var sentOrder = 0
    }

    struct Awaiting {
        let event: VerifiedEvent
        let subscriptionID: String
        /// The transport was lost since it was handed out: offer it again if it comes back.
        var reofferable = false
    }

    let config: RelaySessionConfig
    var connection = Connection.idle
    var closed = false

    var subscriptions: [String: Subscription] = [:]
    var subscriptionOrder: [String] = []
    var pendingCounts: [String: [RelayFilter]] = [:]
    var countOrder: [String] = []

    /// Control frames (REQ, CLOSE, COUNT, AUTH) not yet drained; publishes are framed at drain time.
    var queue: [OutboundEntry] = []
    /// Frames drained and not yet confirmed written.
    var drained: [OutboundEntry] = []

    var deliveries: [String: Delivery] = [:]
    var nextBatch = 0
    var nextSequence = 0
    var nextSentOrder = 0

    var awaiting: [String: Awaiting] = [:]
    var recentlyConfirmed = RecentIDs(capacity: 4096)

    var challenge: String?
    /// Challenges answered, and by which key (`pubkey|challenge`): each is answered once. The
    /// most recent 256 are kept, so a relay issuing challenge after challenge cannot grow them.
    var answeredChallenges = RecentIDs(capacity: 256)
    var answeredChallengeTexts = RecentIDs(capacity: 256)
    var authEventID: String?
    var authenticated = false

    var backoff: ReconnectBackoff
    var readySince: Int64?

    init(config: RelaySessionConfig) {
        self.config = config
        backoff = ReconnectBackoff(
            baseSeconds: config.reconnectBaseDelaySeconds, maxSeconds: config.reconnectMaxDelaySeconds,
            resetAfterSeconds: config.reconnectResetAfterSeconds, seed: config.jitterSeed)
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
        case .connected: return authEventID != nil && !authenticated ? "authenticating" : "ready"
        case .backingOff: return "backingOff"
        case .cancelled: return "cancelled"
        }
    }

    var outboundCount: Int { queue.count + drained.count }

    func requireOutboundRoom(_ frames: Int, _ call: String) throws(SoftchatError) {
        let bound = RelaySessionContract.maxOutboundFrames
        guard outboundCount + frames <= bound.value else {
            throw SoftchatError(bound.error,
                "\(call): \(outboundCount) outbound frames are queued; \(frames) more would pass the limit of \(bound.value)",
                operation: .relaySession)
        }
    }

    /// A reconnect sends a REQ per subscription and a COUNT per unanswered count; that has to
    /// fit in the outbound bound, or `transportConnected` could never succeed again.
    func requireReconnectRoom(_ call: String) throws(SoftchatError) {
        let bound = RelaySessionContract.maxOutboundFrames
        guard subscriptions.count + pendingCounts.count < bound.value else {
            throw SoftchatError(bound.error,
                "\(call): \(subscriptions.count) subscriptions and \(pendingCounts.count) unanswered COUNTs already fill the "
                    + "\(bound.value) frames a reconnect sends", operation: .relaySession)
        }
    }

    // MARK: Lifecycle

    mutating func connect() throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("connect")
        guard connection == .idle || connection == .backingOff || connection == .cancelled else {
            throw .invalidRelaySession("connect: the session is already \(stateName)")
        }
        connection = .connecting
        return [RelaySessionAction(.openTransport)]
    }

    mutating func transportConnected(now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("transportConnected")
        guard connection == .connecting else {
            throw .invalidRelaySession("transportConnected: expected a connecting session, the session is \(stateName)")
        }
        let control = resubscriptionFrames()
        try requireOutboundRoom(control.count, "transportConnected")
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
            frames.append(OutboundEntry(
                frame: ClientRelayFrame.count(subscriptionID: id, filters: pendingCounts[id]!).toJSON(),
                deliveryEventIDs: [], purpose: .count(id)))
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
        return OutboundEntry(frame: ClientRelayFrame.req(subscriptionID: id, filters: sent).toJSON(), deliveryEventIDs: [],
            purpose: .subscription(id))
    }

    mutating func transportLost(now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("transportLost")
        guard connection == .connecting || connection == .connected else {
            throw .invalidRelaySession("transportLost: no transport is active; the session is \(stateName)")
        }
        var actions = endTransport(category: .transportLost, message: "the transport was lost while the event was in flight")
        backoff.connectionEnded(readySince: connection == .connected ? readySince : nil, now: now)
        readySince = nil
        let (delay, attempt) = backoff.next()
        connection = .backingOff
        actions.append(.with(.scheduleReconnect) {
            $0.delayMilliseconds = delay
            $0.attempt = attempt
        })
        return actions
    }

    mutating func cancel() throws(SoftchatError) -> [RelaySessionAction] {
        try requireOpen("cancel")
        switch connection {
        case .connecting, .connected:
            var actions = endTransport(category: .transportLost, message: "the session was cancelled while the event was in flight")
            connection = .cancelled
            readySince = nil
            actions.append(RelaySessionAction(.closeTransport))
            return actions
        case .backingOff:
            connection = .cancelled
            return []
        case .idle, .cancelled:
            throw .invalidRelaySession("cancel: nothing to cancel; the session is \(stateName)")
        }
    }

    /// What ending a transport does to session state: in-flight deliveries become retryable
    /// (one deliveryChanged each, in publish order), undelivered frames are forgotten (they are
    /// rebuilt on the next connection), per-connection authentication ends, and events handed
    /// out but not confirmed may be offered again.
    mutating func endTransport(category: DeliveryCategory, message: String) -> [RelaySessionAction] {
        var actions: [RelaySessionAction] = []
        for id in deliveries.keys.sorted(by: { deliveries[$0]!.sequence < deliveries[$1]!.sequence }) {
            deliveries[id]!.drained = false
            if deliveries[id]!.state == .inFlight {
                deliveries[id]!.state = .retryable
                actions.append(.with(.deliveryChanged) {
                    $0.decision = DeliveryDecision(eventID: id, state: .retryable, category: category, message: message)
                })
            }
        }
        queue.removeAll()
        drained.removeAll()
        challenge = nil
        authEventID = nil
        authenticated = false
        for id in awaiting.keys { awaiting[id]!.reofferable = true }
        for id in subscriptionOrder {
            subscriptions[id]!.awaitingAuthReplay = false
            subscriptions[id]!.authReplayUsed = false
        }
        return actions
    }

    mutating func close() {
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
        let replacing = subscriptions[id] != nil
        if !replacing {
            let bound = RelaySessionContract.maxSubscriptions
            guard subscriptions.count < bound.value else {
                throw SoftchatError(bound.error, "subscribe: \(subscriptions.count) subscriptions are open, the limit is \(bound.value)",
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
            subscriptions[id]!.filters = filters
            subscriptions[id]!.newestConfirmed = nil
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
            let wasSent = drained.contains { $0.purpose == .subscription(id) } || !undrained
            if wasSent {
                try requireOutboundRoom(undrained ? 0 : 1, "unsubscribe")
                queue.removeAll { $0.purpose == .subscription(id) }
                queue.append(OutboundEntry(frame: ClientRelayFrame.close(subscriptionID: id).toJSON(), deliveryEventIDs: [], purpose: .close(id)))
            } else {
                // Its REQ never left: dropping it is the whole unsubscription.
                queue.removeAll { $0.purpose == .subscription(id) }
            }
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
        if connection == .connected {
            try requireOutboundRoom(1, "count")
            queue.append(OutboundEntry(
                frame: ClientRelayFrame.count(subscriptionID: id, filters: filters).toJSON(), deliveryEventIDs: [], purpose: .count(id)))
        }
        if pendingCounts[id] == nil { countOrder.append(id) }
        pendingCounts[id] = filters
    }

    // MARK: Outbound

    mutating func drainOutbound(max: Int) throws(SoftchatError) -> [OutboundRelayFrame] {
        try requireOpen("drainOutbound")
        let bound = RelaySessionContract.defaultDrainMax
        guard max >= 1 && max <= bound.value else {
            throw .invalidRelaySession("drainOutbound: max must be 1 to \(bound.value), not \(max)")
        }
        guard connection == .connected else { return [] }
        var out: [OutboundRelayFrame] = []
        while out.count < max, !queue.isEmpty {
            let entry = queue.removeFirst()
            drained.append(entry)
            out.append(OutboundRelayFrame(frame: entry.frame, deliveryEventIDs: entry.deliveryEventIDs))
        }
        // Publish frames are built here; a drained one counts towards the outbound bound too.
        while out.count < max, outboundCount < RelaySessionContract.maxOutboundFrames.value, let entry = nextPublishFrame() {
            drained.append(entry)
            for id in entry.deliveryEventIDs { deliveries[id]!.drained = true }
            out.append(OutboundRelayFrame(frame: entry.frame, deliveryEventIDs: entry.deliveryEventIDs))
        }
        return out
    }

    /// The oldest publish batch with pending, undrained events, as one EVENT, one EVENTS, or
    /// (for relays without EVENTS) the first of its events as an EVENT.
    func nextPublishFrame() -> OutboundEntry? {
        let ready = deliveries.values.filter { $0.state == .pending && !$0.drained }
        guard let first = ready.min(by: { $0.sequence < $1.sequence }) else { return nil }
        if !config.supportsEventsBatch {
            return OutboundEntry(frame: ClientRelayFrame.event(first.event).toJSON(), deliveryEventIDs: [first.event.id], purpose: .publish)
        }
        let batch = ready.filter { $0.batch == first.batch }.sorted { $0.sequence < $1.sequence }.map(\.event)
        if batch.count == 1 {
            return OutboundEntry(frame: ClientRelayFrame.event(batch[0]).toJSON(), deliveryEventIDs: [batch[0].id], purpose: .publish)
        }
        return OutboundEntry(frame: ClientRelayFrame.events(batch).toJSON(), deliveryEventIDs: batch.map(\.id), purpose: .publish)
    }

    mutating func confirmSent(_ deliveryEventIDs: [String]) throws(SoftchatError) {
        try requireConnected("confirmSent")
        guard let index = drained.firstIndex(where: { $0.deliveryEventIDs == deliveryEventIDs }) else {
            if deliveryEventIDs.isEmpty {
                throw .invalidRelaySession("confirmSent: no drained frame without events is waiting for confirmation")
            }
            throw .invalidDeliveryState(
                "confirmSent: no drained frame carries exactly \(deliveryEventIDs.count) event(s) starting with \(deliveryEventIDs[0])",
                operation: .relayPublish)
        }
        let entry = drained.remove(at: index)
        for id in entry.deliveryEventIDs where deliveries[id] != nil {
            deliveries[id]!.drained = false
            deliveries[id]!.state = .inFlight
            deliveries[id]!.sentOrder = nextSentOrder
            nextSentOrder += 1
        }
    }

    // MARK: Ingestion hand-off

    mutating func confirmIngested(_ eventID: String) throws(SoftchatError) {
        try requireOpen("confirmIngested")
        guard let entry = awaiting.removeValue(forKey: eventID) else {
            throw .invalidRelaySession("confirmIngested: event \(eventID) was not handed out for persistence, or was already confirmed",
                operation: .relayIngestion)
        }
        recentlyConfirmed.insert(eventID)
        if subscriptions[entry.subscriptionID] != nil {
            let newest = subscriptions[entry.subscriptionID]!.newestConfirmed ?? Int64.min
            subscriptions[entry.subscriptionID]!.newestConfirmed = Swift.max(newest, entry.event.createdAt)
        }
    }

    // MARK: Diagnostics

    func snapshot() -> RelaySessionSnapshot {
        RelaySessionSnapshot(
            state: stateName, subscriptionIDs: subscriptionOrder, outboundFrames: outboundCount,
            pendingPublishes: deliveries.count, awaitingPersistence: awaiting.count,
            reconnectAttempt: backoff.attempt, authenticated: authenticated)
    }
}

/// A bounded set of recently seen ids, forgetting the oldest first.
struct RecentIDs {
    let capacity: Int
    private var set: Set<String> = []
    private var order: [String] = []
    private var head = 0

    init(capacity: Int) { self.capacity = capacity }

    func contains(_ id: String) -> Bool { set.contains(id) }

    mutating func insert(_ id: String) {
        guard set.insert(id).inserted else { return }
        if order.count < capacity {
            order.append(id)
        } else {
            set.remove(order[head])
            order[head] = id
            head = (head + 1) % capacity
        }
    }
}
