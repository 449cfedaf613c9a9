import SoftchatCore
import SoftchatJSON

/// A relay message as the model test generates it; `text` is what the session receives.
enum ModelRelayInput: CustomStringConvertible {
    /// `frame` is the EVENT text; `valid` is false for a corrupted copy (bad signature or tampered
    /// content; the claimed id is still `event.id`).
    case event(sub: String, event: VerifiedEvent, frame: String, valid: Bool)

    static func event(_ sub: String, _ event: VerifiedEvent, json: JSONValue, valid: Bool) -> ModelRelayInput {
        .event(sub: sub, event: event, frame: SessionFixtures.event(sub, json: json), valid: valid)
    }
    case ok(id: String?, accepted: Bool, message: String)
    case eose(String), closed(String, String), notice(String), auth(String), count(String, Int64)
    case invalid(String, SoftchatErrorCode)

    var text: String {
        switch self {
        case .event(_, _, let frame, _): frame
        case .ok(let id, let accepted, let message): SessionFixtures.ok(id ?? "", accepted, message)
        case .eose(let s): wireFrame("EOSE", .string(s))
        case .closed(let s, let m): SessionFixtures.closed(s, m)
        case .notice(let m): wireFrame("NOTICE", .string(m))
        case .auth(let c): SessionFixtures.authChallenge(c)
        case .count(let s, let n): SessionFixtures.countAnswer(s, n)
        case .invalid(let text, _): text
        }
    }

    var description: String { text.count > 120 ? String(text.prefix(120)) + "…" : text }
}

/// One filter of the model's pool: its JSON and an independent predicate (not RelayFilter.matches).
struct ModelFilter: Sendable {
    let json: String
    let parsed: RelayFilter
    let matches: @Sendable (VerifiedEvent) -> Bool

    init(json: String, matches: @escaping @Sendable (VerifiedEvent) -> Bool) {
        self.json = json
        parsed = try! RelayFilter.fromJSON(json)
        self.matches = matches
    }
}

/// The expected result of one call: a failure code, or the summaries of its actions or frames.
enum ModelExpect: Equatable {
    case fail(SoftchatErrorCode)
    case ok([String])
}

/// One line per action, the same for a real action and the model's expectation.
func modelSummary(_ kind: String, sub: String? = nil, id: String? = nil, prefix: String? = nil, challenge: String? = nil,
                  count: Int64? = nil, decision: (String, DeliveryState, DeliveryCategory)? = nil, attempt: Int? = nil) -> String {
    var s = kind
    for (k, v) in [("sub", sub), ("id", id), ("prefix", prefix), ("challenge", challenge), ("count", count.map { "\($0)" }),
                   ("decision", decision.map { "\($0.0) \($0.1.rawValue) \($0.2.rawValue)" }), ("attempt", attempt.map { "\($0)" })] {
        if let v { s += " \(k)=\(v)" }
    }
    return s
}

func modelSummary(_ a: RelaySessionAction) -> String {
    modelSummary(a.kind.rawValue, sub: a.subscriptionID, id: a.event?.id ?? a.eventID, prefix: a.prefix, challenge: a.challenge,
                 count: a.count?.count, decision: a.decision.map { ($0.eventID, $0.state, $0.category) }, attempt: a.attempt)
}

func modelSummary(_ f: OutboundRelayFrame) -> String { "\(f.frame) | \(f.deliveryEventIDs.joined(separator: ","))" }

/// A small reference model of RelaySession, written from the issue text: connection states,
/// subscriptions and counts, the control queue and lazily framed publishes, delivery states,
/// the ingestion hand-off, NIP-42 and the backoff attempt. Every method validates before it
/// mutates, so a call the model expects to fail leaves the model unchanged.
struct SessionModel {
    enum Conn { case idle, connecting, connected, backingOff, cancelled }
    enum Purpose: Equatable { case sub(String), close(String), count(String), auth, publish }
    struct Frame { var text: String; var ids: [String]; var purpose: Purpose }
    struct Sub { var filters: [Int]; var newest: Int64?; var awaitingReplay = false; var replayUsed = false }
    struct Delivery {
        var event: VerifiedEvent; var state: DeliveryState; var batch: Int; var seq: Int
        var authResendUsed = false; var awaitingAuthResend = false; var drained = false
    }
    struct Awaiting { var event: VerifiedEvent; var sub: String; var reofferable = false; var filters: [Int] }

    static let maxSubs = RelaySessionContract.maxSubscriptions.value
    static let maxOutbound = RelaySessionContract.maxOutboundFrames.value
    static let maxPending = RelayPublishContract.maxPendingPublishes.value
    static let maxAwaiting = RelayIngestionContract.maxAwaitingPersistence.value

    let config: RelaySessionConfig
    let pool: [ModelFilter]
    var conn = Conn.idle, closed = false
    var subs: [String: Sub] = [:], subOrder: [String] = []
    var counts: [String: [Int]] = [:], countOrder: [String] = []
    var queue: [Frame] = [], drained: [Frame] = []
    var deliveries: [String: Delivery] = [:], nextBatch = 0, nextSeq = 0
    var awaiting: [String: Awaiting] = [:], confirmed: Set<String> = []
    var challenge: String?, answered: Set<String> = [], authEventID: String?, authenticated = false
    var attempt = 0, readySince: Int64?, nominalDelay: Int64 = 0

    init(config: RelaySessionConfig, pool: [ModelFilter]) {
        self.config = config
        self.pool = pool
    }

    var outbound: Int { queue.count + drained.count }
    var bySeq: [String] { deliveries.keys.sorted { deliveries[$0]!.seq < deliveries[$1]!.seq } }

    var stateName: String {
        if closed { return "closed" }
        switch conn {
        case .idle: return "idle"
        case .connecting: return "connecting"
        case .connected: return authEventID != nil && !authenticated ? "authenticating" : "ready"
        case .backingOff: return "backingOff"
        case .cancelled: return "cancelled"
        }
    }

    func filters(_ indexes: [Int]) -> [RelayFilter] { indexes.map { pool[$0].parsed } }

    func req(_ id: String, _ indexes: [Int], newest: Int64?) -> Frame {
        var sent = filters(indexes)
        if let newest {
            let since = newest - config.sinceOverlapSeconds
            sent = sent.map { f in (f.since ?? Int64.min) >= since ? f : f.withSince(since) }
        }
        return Frame(text: ClientRelayFrame.req(subscriptionID: id, filters: sent).toJSON(), ids: [], purpose: .sub(id))
    }

    // MARK: Lifecycle

    mutating func connect() -> ModelExpect {
        guard !closed, [.idle, .backingOff, .cancelled].contains(conn) else { return .fail(.invalidRelaySession) }
        conn = .connecting
        return .ok(["openTransport"])
    }

    mutating func transportConnected(now: Int64?) -> ModelExpect {
        guard !closed, conn == .connecting else { return .fail(.invalidRelaySession) }
        let control = subOrder.map { req($0, subs[$0]!.filters, newest: subs[$0]!.newest) } + countOrder.map {
            Frame(text: ClientRelayFrame.count(subscriptionID: $0, filters: filters(counts[$0]!)).toJSON(), ids: [], purpose: .count($0))
        }
        conn = .connected
        readySince = now
        queue = control
        return .ok([])
    }

    mutating func endTransport(_ category: DeliveryCategory) -> [String] {
        var out: [String] = []
        for id in bySeq {
            deliveries[id]!.drained = false
            if deliveries[id]!.state == .inFlight {
                deliveries[id]!.state = .retryable
                out.append(modelSummary("deliveryChanged", decision: (id, .retryable, category)))
            }
        }
        queue = []
        drained = []
        (challenge, authEventID, authenticated) = (nil, nil, false)
        for id in awaiting.keys { awaiting[id]!.reofferable = true }
        for id in subOrder {
            subs[id]!.awaitingReplay = false
            subs[id]!.replayUsed = false
        }
        return out
    }

    mutating func transportLost(now: Int64?) -> ModelExpect {
        guard !closed, conn == .connecting || conn == .connected else { return .fail(.invalidRelaySession) }
        var out = endTransport(.transportLost)
        if conn == .connected, let ready = readySince, let now, now - ready >= config.reconnectResetAfterSeconds { attempt = 0 }
        attempt += 1
        nominalDelay = min((config.reconnectBaseDelaySeconds * 1000) << Int64(min(attempt - 1, 40)), config.reconnectMaxDelaySeconds * 1000)
        readySince = nil
        conn = .backingOff
        out.append(modelSummary("scheduleReconnect", attempt: attempt))
        return .ok(out)
    }

    mutating func cancel() -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        switch conn {
        case .connecting, .connected:
            let out = endTransport(.transportLost)
            (conn, readySince) = (.cancelled, nil)
            return .ok(out + ["closeTransport"])
        case .backingOff:
            conn = .cancelled
            return .ok([])
        case .idle, .cancelled: return .fail(.invalidRelaySession)
        }
    }

    mutating func close() {
        closed = true
        queue = []
        drained = []
    }

    // MARK: Subscriptions

    func room(_ n: Int) -> Bool { outbound + n <= Self.maxOutbound }

    mutating func subscribe(_ id: String, _ indexes: [Int], inputError: SoftchatErrorCode?) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        if let inputError { return .fail(inputError) }
        let replacing = subs[id] != nil
        if !replacing, subs.count >= Self.maxSubs || subs.count + counts.count >= Self.maxOutbound { return .fail(.relaySessionQueueFull) }
        if conn == .connected {
            guard room(1 - queue.filter({ $0.purpose == .sub(id) }).count) else { return .fail(.relaySessionQueueFull) }
            queue.removeAll { $0.purpose == .sub(id) }
            queue.append(req(id, indexes, newest: nil))
        }
        if replacing {
            subs[id]!.filters = indexes
            subs[id]!.newest = nil
        } else {
            subs[id] = Sub(filters: indexes, newest: nil)
            subOrder.append(id)
        }
        return .ok([])
    }

    mutating func unsubscribe(_ id: String) -> ModelExpect {
        guard !closed, subs[id] != nil else { return .fail(.invalidRelaySession) }
        if conn == .connected {
            let undrained = queue.contains { $0.purpose == .sub(id) }
            if drained.contains(where: { $0.purpose == .sub(id) }) || !undrained {
                guard room(undrained ? 0 : 1) else { return .fail(.relaySessionQueueFull) }
                queue.removeAll { $0.purpose == .sub(id) }
                queue.append(Frame(text: ClientRelayFrame.close(subscriptionID: id).toJSON(), ids: [], purpose: .close(id)))
            } else {
                queue.removeAll { $0.purpose == .sub(id) }
            }
        }
        subs[id] = nil
        subOrder.removeAll { $0 == id }
        return .ok([])
    }

    mutating func count(_ id: String, _ indexes: [Int], inputError: SoftchatErrorCode?) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        if let inputError { return .fail(inputError) }
        guard subs[id] == nil else { return .fail(.invalidRelaySession) }
        if counts[id] == nil, subs.count + counts.count >= Self.maxOutbound { return .fail(.relaySessionQueueFull) }
        if conn == .connected {
            guard room(1) else { return .fail(.relaySessionQueueFull) }
            queue.append(Frame(text: ClientRelayFrame.count(subscriptionID: id, filters: filters(indexes)).toJSON(), ids: [], purpose: .count(id)))
        }
        if counts[id] == nil { countOrder.append(id) }
        counts[id] = indexes
        return .ok([])
    }

    // MARK: Publishing and the outbound queue

    mutating func publish(_ events: [VerifiedEvent]) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        guard (1...256).contains(events.count) else { return .fail(.invalidRelayBatch) }
        var ids: Set<String> = []
        var added = 0
        for e in events {
            guard ids.insert(e.id).inserted else { return .fail(.invalidRelayBatch) }
            if let d = deliveries[e.id] {
                guard d.state == .retryable else { return .fail(.invalidDeliveryState) }
            } else {
                added += 1
            }
        }
        guard deliveries.count + added <= Self.maxPending else { return .fail(.relaySessionQueueFull) }
        for e in events {
            if deliveries[e.id] == nil { deliveries[e.id] = Delivery(event: e, state: .pending, batch: nextBatch, seq: nextSeq) }
            deliveries[e.id]!.state = .pending
            deliveries[e.id]!.batch = nextBatch
            deliveries[e.id]!.seq = nextSeq
            deliveries[e.id]!.awaitingAuthResend = false
            nextSeq += 1
        }
        nextBatch += 1
        return .ok([])
    }

    mutating func timedOut() -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        return .ok(bySeq.filter { deliveries[$0]!.state == .inFlight }.map { id in
            deliveries[id]!.state = .retryable
            return modelSummary("deliveryChanged", decision: (id, .retryable, .timeout))
        })
    }

    mutating func drain(_ max: Int) -> ModelExpect {
        guard !closed, (1...256).contains(max) else { return .fail(.invalidRelaySession) }
        guard conn == .connected else { return .ok([]) }
        var out = Array(queue.prefix(max))
        queue.removeFirst(out.count)
        drained += out
        // Publishes are framed oldest first: one publish call's pending events together (their
        // sequence numbers are consecutive), or one EVENT each for relays without EVENTS.
        let ready = deliveries.values.filter { $0.state == .pending && !$0.drained }.sorted { $0.seq < $1.seq }
        var next = 0
        while out.count < max, outbound < Self.maxOutbound, next < ready.count {
            let batch = config.supportsEventsBatch ? Array(ready[next...].prefix { $0.batch == ready[next].batch }.map(\.event)) : [ready[next].event]
            next += batch.count
            let frame = batch.count == 1 ? ClientRelayFrame.event(batch[0]) : ClientRelayFrame.events(batch)
            let f = Frame(text: frame.toJSON(), ids: batch.map(\.id), purpose: .publish)
            for id in f.ids { deliveries[id]!.drained = true }
            out.append(f)
            drained.append(f)
        }
        return .ok(out.map { "\($0.text) | \($0.ids.joined(separator: ","))" })
    }

    mutating func confirmSent(_ ids: [String]) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        guard let i = drained.firstIndex(where: { $0.ids == ids }) else { return .fail(ids.isEmpty ? .invalidRelaySession : .invalidDeliveryState) }
        for id in drained.remove(at: i).ids where deliveries[id] != nil {
            deliveries[id]!.drained = false
            deliveries[id]!.state = .inFlight
        }
        return .ok([])
    }

    // MARK: Receiving

    mutating func confirmIngested(_ id: String) -> ModelExpect {
        guard !closed, let entry = awaiting.removeValue(forKey: id) else { return .fail(.invalidRelaySession) }
        confirmed.insert(id)
        if subs[entry.sub] != nil { subs[entry.sub]!.newest = max(subs[entry.sub]!.newest ?? Int64.min, entry.event.createdAt) }
        return .ok([])
    }

    mutating func receive(_ input: ModelRelayInput) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        switch input {
        case .invalid(_, let code): return .fail(code)
        case .event(let sub, let e, _, let valid):
            guard let s = subs[sub] else { return .ok([modelSummary("eventRejected", sub: sub, id: e.id)]) }
            if let a = awaiting[e.id] {
                guard a.reofferable else { return .ok([]) }
                awaiting[e.id]!.reofferable = false
                return .ok([modelSummary("persistEvent", sub: a.sub, id: e.id)])
            }
            if confirmed.contains(e.id) { return .ok([]) }
            guard valid, s.filters.contains(where: { pool[$0].matches(e) }) else { return .ok([modelSummary("eventRejected", sub: sub, id: e.id)]) }
            guard awaiting.count < Self.maxAwaiting else { return .fail(.relaySessionQueueFull) }
            awaiting[e.id] = Awaiting(event: e, sub: sub, filters: s.filters)
            return .ok([modelSummary("persistEvent", sub: sub, id: e.id)])
        case .ok(let id, let accepted, let message):
            let prefix = RelayMessage(message).prefix
            if let id, id == authEventID {
                authEventID = nil
                guard accepted else { return .ok([modelSummary("authenticationFailed", id: id, prefix: prefix)]) }
                authenticated = true
                return .ok([modelSummary("authenticated", id: id)] + replayAfterAuthentication())
            }
            guard let id, let d = deliveries[id], d.state == .inFlight else { return .ok([modelSummary("notice", id: id, prefix: prefix)]) }
            let decision = try! classifyDeliveryAcknowledgement(parseRelayResponseFrame(input.text))
            if decision.state.isTerminal {
                deliveries[id] = nil
            } else {
                deliveries[id]!.state = .retryable
                if decision.category == .authRequired && !d.authResendUsed { deliveries[id]!.awaitingAuthResend = true }
            }
            return .ok([modelSummary("deliveryChanged", decision: (id, decision.state, decision.category))])
        case .eose(let s): return .ok([modelSummary("endOfStoredEvents", sub: s)])
        case .closed(let s, let message):
            let prefix = RelayMessage(message).prefix
            counts[s] = nil
            countOrder.removeAll { $0 == s }
            if subs[s] != nil, prefix == "auth-required", !subs[s]!.replayUsed { subs[s]!.awaitingReplay = true }
            return .ok([modelSummary("subscriptionClosed", sub: s, prefix: prefix)])
        case .notice(let m): return .ok([modelSummary("notice", prefix: RelayMessage(m).prefix)])
        case .auth(let c):
            if c == challenge || answered.contains(where: { $0.hasSuffix("|" + c) }) { return .ok([]) }
            challenge = c
            return .ok([modelSummary("authenticationRequested", challenge: c)])
        case .count(let s, let n):
            guard counts.removeValue(forKey: s) != nil else { return .ok([modelSummary("notice", sub: s)]) }
            countOrder.removeAll { $0 == s }
            return .ok([modelSummary("countResult", sub: s, count: n)])
        }
    }

    mutating func replayAfterAuthentication() -> [String] {
        for id in subOrder where subs[id]!.awaitingReplay {
            subs[id]!.awaitingReplay = false
            subs[id]!.replayUsed = true
            if outbound < Self.maxOutbound { queue.append(req(id, subs[id]!.filters, newest: subs[id]!.newest)) }
        }
        return bySeq.filter { deliveries[$0]!.awaitingAuthResend }.map { id in
            deliveries[id]!.awaitingAuthResend = false
            deliveries[id]!.authResendUsed = true
            deliveries[id]!.state = .pending
            return modelSummary("deliveryChanged", decision: (id, .pending, .authRequired))
        }
    }

    /// `challenge` is the one in the event's tag; `wrongKind` marks a kind-1 event with the same tags.
    mutating func authenticate(_ event: VerifiedEvent, challenge tagged: String, wrongKind: Bool) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        guard let challenge, !wrongKind, tagged == challenge, !answered.contains(event.pubkey + "|" + challenge) else {
            return .fail(.invalidRelayAuthentication)
        }
        guard room(1) else { return .fail(.relaySessionQueueFull) }
        answered.insert(event.pubkey + "|" + challenge)
        (authEventID, authenticated) = (event.id, false)
        queue.insert(Frame(text: ClientRelayFrame.auth(event).toJSON(), ids: [], purpose: .auth), at: 0)
        return .ok([])
    }

    var snapshotKey: String {
        "\(stateName) [\(subOrder.joined(separator: ","))] outbound=\(outbound) pending=\(deliveries.count) awaiting=\(awaiting.count) "
            + "attempt=\(attempt) auth=\(authenticated)"
    }
}

/// The same fields of a real snapshot, spelled as `SessionModel.snapshotKey`.
func modelSnapshotKey(_ s: RelaySessionSnapshot) -> String {
    "\(s.state) [\(s.subscriptionIDs.joined(separator: ","))] outbound=\(s.outboundFrames) pending=\(s.pendingPublishes) awaiting=\(s.awaitingPersistence) "
        + "attempt=\(s.reconnectAttempt) auth=\(s.authenticated)"
}
