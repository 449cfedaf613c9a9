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
    case eose(String)
    case closed(String, String)
    case notice(String)
    case auth(String)
    case count(String, Int64)
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
func modelSummary(
    _ kind: String, sub: String? = nil, id: String? = nil, prefix: String? = nil, challenge: String? = nil,
    count: Int64? = nil, decision: (String, DeliveryState, DeliveryCategory)? = nil, attempt: Int? = nil,
    retry: Int64? = nil
) -> String {
    var s = kind
    for (k, v) in [
        ("sub", sub), ("id", id), ("prefix", prefix), ("challenge", challenge), ("count", count.map { "\($0)" }),
        ("decision", decision.map { "\($0.0) \($0.1.rawValue) \($0.2.rawValue)" }), ("attempt", attempt.map { "\($0)" }),
        ("retry", retry.map { "\($0)" }),
    ] {
        if let v { s += " \(k)=\(v)" }
    }
    return s
}

func modelSummary(_ a: RelaySessionAction) -> String {
    modelSummary(
        a.kind.rawValue, sub: a.subscriptionID, id: a.event?.id ?? a.eventID, prefix: a.prefix, challenge: a.challenge,
        count: a.count?.count, decision: a.decision.map { ($0.eventID, $0.state, $0.category) }, attempt: a.attempt,
        retry: a.retryDelayMilliseconds)
}

func modelSummary(_ f: OutboundRelayFrame) -> String { "\(f.frame) | \(f.deliveryEventIDs.joined(separator: ","))" }

/// A NIP-42 answer as the model test generates it: the event and what the model needs to know
/// about it (the challenge in its tag, a wrong kind, a relay tag naming another relay).
struct ModelAuthAnswer: CustomStringConvertible {
    let event: VerifiedEvent
    let challenge: String
    var wrongKind = false
    var wrongRelay = false

    var description: String {
        "\(event.pubkey.prefix(8)), \(challenge), created_at \(event.createdAt)\(wrongKind ? ", kind 1" : "")\(wrongRelay ? ", other relay" : "")"
    }
}

/// A small reference model of RelaySession, written from the issue text and the review's
/// rules: connection states, subscriptions (with their auth-required replay and
/// `error:`/`rate-limited:` retry schedule, and which REQs the relay has on this connection)
/// and counts (with the COUNTs cancelled after they went out on this connection), the control queue and publishes packed into numbered frames by bytes at drain
/// time, REQ/COUNT/AUTH frames checked against the frame limit, held deliveries (pending, in
/// flight, awaiting authentication) with per-event deadlines (started by the next
/// handleTimeout for a write without a time), events that timed out on this connection and
/// events answered terminally, in-order correlation of OKs without an id (in hand-out order),
/// the ingestion hand-off, NIP-42 (once per key and challenge per connection, the bounded wait
/// behind our AUTH, whose end counts as an accepted AUTH) and the backoff attempt. Every method
/// validates before it mutates, so a call the model expects to fail leaves it unchanged.
struct SessionModel {
    enum Conn { case idle, connecting, connected, backingOff, cancelled }
    enum Purpose: Equatable {
        case sub(String)
        case close(String)
        case count(String)
        case auth, publish
        /// What waits behind an unanswered AUTH: REQ, COUNT and publishes (not AUTH, not CLOSE).
        var waitsForAuth: Bool {
            switch self {
            case .sub, .count, .publish: true
            case .close, .auth: false
            }
        }
    }
    /// `serial` numbers publish frames: confirming one moves only the events whose latest
    /// frame it is and that still wait in it (an OK may overtake the host's confirmation).
    struct Frame {
        var text: String
        var ids: [String]
        var purpose: Purpose
        var serial = 0
    }
    /// replayPostponed: `retryAt` is an auth replay that found no outbound room (the retry
    /// timer sends it), not an `error:`/`rate-limited:` retry; only for the coverage tally.
    struct Sub {
        var filters: [Int]
        var newest: Int64? = nil
        var awaitingReplay = false
        var replayUsed = false
        var retryAt: Int64? = nil
        var closes = 0
        var replayPostponed = false
    }
    enum Stage { case pending, inFlight, awaitingAuth }
    struct Delivery {
        var event: VerifiedEvent
        var stage: Stage
        var batch: Int
        var seq: Int
        /// drained: in a handed-out, unconfirmed frame (`frame`, its serial); sentAt: the `now`
        /// of the confirmSent of its write, or else of the first handleTimeout after it.
        var authResendUsed = false
        var drained = false
        var frame = 0
        var sentAt: Int64? = nil
    }
    struct Awaiting {
        var event: VerifiedEvent
        var sub: String
        var reofferable = false
        var filters: [Int]
        /// The clock when it arrived: the since it can justify is no later.
        var arrivedAt: Int64? = nil
    }

    static let maxSubs = RelaySessionContract.maxSubscriptions.value
    static let maxOutbound = RelaySessionContract.maxOutboundFrames.value
    static let maxPending = RelayPublishContract.maxPendingPublishes.value
    static let maxAwaiting = RelayIngestionContract.maxAwaitingPersistence.value
    /// How many cancelled COUNT ids a connection remembers (the oldest is forgotten first).
    static let closedCountsCapacity = 1024

    let config: RelaySessionConfig
    let pool: [ModelFilter]
    /// Each publishable event's JSON length in bytes, as frames write it.
    let jsonBytes: [String: Int]
    /// min(relay.wire's frame bound, config.maxMessageBytes).
    let frameLimit: Int
    var conn = Conn.idle, closed = false
    var lastNow: Int64?
    var subs: [String: Sub] = [:], subOrder: [String] = []
    var counts: [String: [Int]] = [:], countOrder: [String] = []
    /// COUNTs cancelled after they went out on this connection, oldest first (at most
    /// `closedCountsCapacity`): their id is refused for another COUNT while connected, and a
    /// late answer is a notice.
    var closedCounts: [String] = []
    var queue: [Frame] = [], drained: [Frame] = [], nextSerial = 1
    /// Subscriptions whose REQ was handed out on this connection and neither CLOSEd by us
    /// (handed out) nor CLOSED by the relay.
    var liveREQs: Set<String> = []
    var deliveries: [String: Delivery] = [:], nextBatch = 0, nextSeq = 0
    var timedOut: Set<String> = [], settled: Set<String> = []
    var unanswered: [String] = [], correlationLost = false
    var awaiting: [String: Awaiting] = [:], confirmed: Set<String> = []
    var challenge: String?, answeredPairs: Set<String> = [], answeredChallenges: Set<String> = []
    /// authWaitEnded: the wait for our AUTH's OK ran out and the connection works unauthenticated.
    var authEventID: String?, authenticated = false, authWaitUntil: Int64?, authWaitEnded = false
    /// authRefused: the relay refused our latest AUTH on this connection and no challenge was
    /// asked for (nor AUTH sent) since.
    var authRefused = false
    /// The AUTH policy: a challenge that came while our answer was in flight or within the
    /// interval after the last answer waits here (a newer one replaces it).
    var waitingChallenge: String?, lastAnswerAt: Int64?
    static let answerInterval = Int64(RelaySessionContract.authenticationIntervalSeconds.value)
    var answerInFlight: Bool { authEventID != nil && !authenticated && !authWaitEnded && authWaitUntil != nil }
    var attempt = 0, readySince: Int64?, nominalDelay: Int64 = 0
    /// How often the rules were reached (for the test's coverage check), and challenges
    /// answered on any connection.
    var tally = SessionModelTests.Stats(), everAnswered: Set<String> = []

    init(config: RelaySessionConfig, pool: [ModelFilter], jsonBytes: [String: Int]) {
        self.config = config
        self.pool = pool
        self.jsonBytes = jsonBytes
        frameLimit = min(RelayWireContract.maxFrameBytes.value, config.maxMessageBytes.map { Int($0) } ?? Int.max)
    }

    var outbound: Int { queue.count + drained.count }
    /// The write an OK without an id would answer now (nil: it names no event).
    var correlationTarget: String? { config.correlateUnnamedAcknowledgements && !correlationLost ? unanswered.first : nil }
    var bySeq: [String] { deliveries.keys.sorted { deliveries[$0]!.seq < deliveries[$1]!.seq } }
    var holding: Bool { authWaitUntil != nil && authEventID != nil && !authenticated }

    var stateName: String {
        if closed { return "closed" }
        switch conn {
        case .idle: return "idle"
        case .connecting: return "connecting"
        case .connected: return authEventID != nil && !authenticated && !authWaitEnded ? "authenticating" : "ready"
        case .backingOff: return "backingOff"
        case .cancelled: return "cancelled"
        }
    }

    mutating func observe(_ now: Int64?) { if let now { lastNow = now } }

    func filters(_ indexes: [Int]) -> [RelayFilter] { indexes.map { pool[$0].parsed } }

    func req(_ id: String, _ indexes: [Int], newest: Int64?) -> Frame {
        var sent = filters(indexes)
        if let newest {
            let since = newest - config.sinceOverlapSeconds
            sent = sent.map { f in (f.since ?? Int64.min) >= since ? f : f.withSince(since) }
        }
        return Frame(text: ClientRelayFrame.req(subscriptionID: id, filters: sent).toJSON(), ids: [], purpose: .sub(id))
    }

    func countFrame(_ id: String, _ indexes: [Int]) -> Frame {
        Frame(text: ClientRelayFrame.count(subscriptionID: id, filters: filters(indexes)).toJSON(), ids: [], purpose: .count(id))
    }

    func closeFrame(_ id: String) -> Frame { Frame(text: ClientRelayFrame.close(subscriptionID: id).toJSON(), ids: [], purpose: .close(id)) }

    static func changed(_ id: String, _ state: DeliveryState, _ category: DeliveryCategory) -> String {
        modelSummary("deliveryChanged", decision: (id, state, category))
    }

    // MARK: Lifecycle

    mutating func connect() -> ModelExpect {
        guard !closed, [.idle, .backingOff, .cancelled].contains(conn) else { return .fail(.invalidRelaySession) }
        conn = .connecting
        return .ok(["openTransport"])
    }

    mutating func transportConnected(now: Int64?) -> ModelExpect {
        guard !closed, conn == .connecting else { return .fail(.invalidRelaySession) }
        observe(now)
        conn = .connected
        readySince = now
        queue = subOrder.map { req($0, subs[$0]!.filters, newest: subs[$0]!.newest) } + countOrder.map { countFrame($0, counts[$0]!) }
        return .ok([])
    }

    /// What ending a connection does apart from deliveries: frames, per-connection memory
    /// (timed-out events, cancelled COUNTs, correlation, challenges, authentication,
    /// subscription retries).
    mutating func dropConnection() {
        for id in bySeq { deliveries[id]!.drained = false }
        queue = []
        drained = []
        liveREQs = []
        closedCounts = []
        unanswered = []
        correlationLost = false
        timedOut = []
        (challenge, authEventID, authenticated, authWaitUntil, authWaitEnded) = (nil, nil, false, nil, false)
        authRefused = false
        (waitingChallenge, lastAnswerAt) = (nil, nil)
        answeredPairs = []
        answeredChallenges = []
        for id in awaiting.keys { awaiting[id]!.reofferable = true }
        for id in subOrder {
            subs[id]!.awaitingReplay = false
            subs[id]!.replayUsed = false
            subs[id]!.retryAt = nil
            subs[id]!.replayPostponed = false
        }
    }

    mutating func transportLost(now: Int64?) -> ModelExpect {
        guard !closed, conn == .connecting || conn == .connected else { return .fail(.invalidRelaySession) }
        observe(now)
        // in flight and awaiting authentication leave as retryable; pending ones stay for the next connection
        var out: [String] = []
        for id in bySeq where deliveries[id]!.stage != .pending {
            deliveries[id] = nil
            out.append(Self.changed(id, .retryable, .transportLost))
        }
        dropConnection()
        if conn == .connected, let ready = readySince, let now, now - ready >= config.reconnectResetAfterSeconds { attempt = 0 }
        attempt += 1
        nominalDelay = min((config.reconnectBaseDelaySeconds * 1000) << Int64(min(attempt - 1, 40)), config.reconnectMaxDelaySeconds * 1000)
        readySince = nil
        conn = .backingOff
        out.append(modelSummary("scheduleReconnect", attempt: attempt))
        return .ok(out)
    }

    /// Every held delivery leaves as retryable / cancelled, in publish order.
    mutating func cancel() -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        let active = conn == .connecting || conn == .connected
        guard active || conn == .backingOff || !deliveries.isEmpty else { return .fail(.invalidRelaySession) }
        let out = bySeq.map { Self.changed($0, .retryable, .cancelled) }
        deliveries = [:]
        if active { dropConnection() }
        (conn, readySince) = (.cancelled, nil)
        return .ok(out + (active ? ["closeTransport"] : []))
    }

    mutating func close() -> ModelExpect {
        if closed { return .ok([]) }
        guard deliveries.isEmpty else { return .fail(.invalidRelaySession) }
        closed = true
        queue = []
        drained = []
        return .ok([])
    }

    // MARK: Subscriptions and counts

    func room(_ n: Int) -> Bool { outbound + n <= Self.maxOutbound }

    mutating func subscribe(_ id: String, _ indexes: [Int], inputError: SoftchatErrorCode?) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        if let inputError { return .fail(inputError) }
        guard counts[id] == nil else {
            tally["countIDRefused"] += 1
            return .fail(.invalidRelaySession)
        }
        // a reconnect adds `since` to every filter: the REQ must fit the limit with the longest one
        let longest = ClientRelayFrame.req(subscriptionID: id, filters: filters(indexes).map { $0.withSince(Int64.max) }).toJSON()
        guard longest.utf8.count <= frameLimit else {
            tally["reqTooLarge"] += 1
            return .fail(.invalidRelayFrame)
        }
        let replacing = subs[id] != nil
        if !replacing, subs.count >= Self.maxSubs || subs.count + counts.count >= Self.maxOutbound { return .fail(.relaySessionQueueFull) }
        if conn == .connected {
            guard room(1 - queue.filter({ $0.purpose == .sub(id) }).count) else { return .fail(.relaySessionQueueFull) }
            queue.removeAll { $0.purpose == .sub(id) }
            queue.append(req(id, indexes, newest: nil))
        }
        // a replaced subscription starts over: no cursor, no replay or retry state
        subs[id] = Sub(filters: indexes)
        if !replacing { subOrder.append(id) }
        return .ok([])
    }

    mutating func unsubscribe(_ id: String) -> ModelExpect {
        guard !closed, subs[id] != nil else { return .fail(.invalidRelaySession) }
        if conn == .connected {
            // CLOSE exactly when the relay has a REQ of it and no CLOSE of it is queued yet (after
            // unsubscribe, subscribe, unsubscribe before the first CLOSE went out); an undrained
            // REQ is dropped either way
            let undrained = queue.contains { $0.purpose == .sub(id) }
            let closeQueued = queue.contains { $0.purpose == .close(id) }
            if liveREQs.contains(id), closeQueued { tally["closeAlreadyQueued"] += 1 }
            if liveREQs.contains(id), !closeQueued {
                guard room(undrained ? 0 : 1) else { return .fail(.relaySessionQueueFull) }
                queue.removeAll { $0.purpose == .sub(id) }
                queue.append(closeFrame(id))
                if undrained { tally["closeOverReplacement"] += 1 }
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
        // nor can a COUNT cancelled after it went out on this connection (a late answer to it
        // could not be told apart)
        if conn == .connected, closedCounts.contains(id) {
            tally["closedCountRefused"] += 1
            return .fail(.invalidRelaySession)
        }
        // a COUNT that already went out cannot be reissued under its id (its answer would be
        // credited to the new filters)
        if conn == .connected, counts[id] != nil, !queue.contains(where: { $0.purpose == .count(id) }) {
            tally["countWentOut"] += 1
            return .fail(.invalidRelaySession)
        }
        guard countFrame(id, indexes).text.utf8.count <= frameLimit else {
            tally["countTooLarge"] += 1
            return .fail(.invalidRelayFrame)
        }
        if conn == .connected {
            // a repeated count's undrained COUNT is superseded
            guard room(1 - queue.filter({ $0.purpose == .count(id) }).count) else { return .fail(.relaySessionQueueFull) }
            queue.removeAll { $0.purpose == .count(id) }
            queue.append(countFrame(id, indexes))
        }
        if counts[id] == nil { countOrder.append(id) }
        counts[id] = indexes
        return .ok([])
    }

    mutating func cancelCount(_ id: String) -> ModelExpect {
        guard !closed, counts[id] != nil else { return .fail(.invalidRelaySession) }
        if conn == .connected {
            if !queue.contains(where: { $0.purpose == .count(id) }) {
                guard room(1) else { return .fail(.relaySessionQueueFull) }
                queue.append(closeFrame(id))
                if !closedCounts.contains(id) {
                    closedCounts.append(id)
                    if closedCounts.count > Self.closedCountsCapacity { closedCounts.removeFirst() }
                }
            }
            queue.removeAll { $0.purpose == .count(id) }
        }
        counts[id] = nil
        countOrder.removeAll { $0 == id }
        tally["cancelCount"] += 1
        return .ok([])
    }

    // MARK: Publishing, timers and the outbound queue

    func eventFrameBytes(_ e: VerifiedEvent) -> Int { #"["EVENT",]"#.utf8.count + jsonBytes[e.id]! }

    mutating func publish(_ events: [VerifiedEvent]) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        guard (1...256).contains(events.count) else { return .fail(.invalidRelayBatch) }
        var ids: Set<String> = []
        for e in events {
            guard ids.insert(e.id).inserted else { return .fail(.invalidRelayBatch) }
            guard deliveries[e.id] == nil, !settled.contains(e.id) else { return .fail(.invalidDeliveryState) }
            guard eventFrameBytes(e) <= frameLimit else {
                tally["tooLarge"] += 1
                return .fail(.invalidRelayBatch)
            }
        }
        guard deliveries.count + events.count <= Self.maxPending else { return .fail(.relaySessionQueueFull) }
        for e in events {
            timedOut.remove(e.id)
            deliveries[e.id] = Delivery(event: e, stage: .pending, batch: nextBatch, seq: nextSeq)
            nextSeq += 1
        }
        nextBatch += 1
        return .ok([])
    }

    /// The earliest armed deadline: held events' own (none for a pending one; at once — the
    /// latest time seen, or 0 — for one written or answered without a time, whose deadline the
    /// next handleTimeout starts), the AUTH wait, subscription retries.
    func pollTimeout() -> Int64? {
        // a closed session has no work for handleTimeout (which refuses every call)
        guard !closed else { return nil }
        var times = deliveries.values.filter { $0.stage != .pending }.map {
            $0.sentAt.map { $0 + config.acknowledgementTimeoutSeconds } ?? lastNow ?? 0
        }
        if holding, let until = authWaitUntil { times.append(until) }
        if waitingChallenge != nil, conn == .connected, !answerInFlight, let last = lastAnswerAt { times.append(last + Self.answerInterval) }
        if conn == .connected { times += subOrder.compactMap { subs[$0]!.retryAt } }
        return times.min()
    }

    mutating func handleTimeout(_ now: Int64) -> ModelExpect {
        guard !closed else { return .fail(.invalidRelaySession) }
        observe(now)
        var out: [String] = []
        for id in bySeq where deliveries[id]!.stage != .pending {
            guard let sent = deliveries[id]!.sentAt else {
                // written (or answered) without a known time: its deadline starts now
                deliveries[id]!.sentAt = now
                tally["deadlineStarted"] += 1
                continue
            }
            if sent + config.acknowledgementTimeoutSeconds > now { continue }
            deliveries[id] = nil
            timedOut.insert(id)
            out.append(Self.changed(id, .retryable, .timeout))
        }
        if holding, let until = authWaitUntil, until <= now {
            // the relay never answered our AUTH: the connection goes on as if it had accepted it
            (authWaitUntil, authWaitEnded) = (nil, true)
            tally["authWaitEnded"] += 1
            if deliveries.values.contains(where: { $0.stage == .awaitingAuth }) || subOrder.contains(where: { subs[$0]!.awaitingReplay }) {
                tally["authWaitReplay"] += 1
            }
            replayAfterAuth()
        }
        if conn == .connected {
            for id in subOrder {
                guard let at = subs[id]!.retryAt, at <= now else { continue }
                guard outbound < Self.maxOutbound else {
                    // no room: again after the base delay
                    subs[id]!.retryAt = now + config.reconnectBaseDelaySeconds
                    tally["retryPostponed"] += 1
                    continue
                }
                if subs[id]!.replayPostponed { tally["replayRetried"] += 1 }
                (subs[id]!.retryAt, subs[id]!.replayPostponed) = (nil, false)
                queue.removeAll { $0.purpose == .sub(id) }
                queue.append(req(id, subs[id]!.filters, newest: subs[id]!.newest))
                tally["retriedREQ"] += 1
            }
        }
        return .ok(out + offerWaitingChallenge(now))
    }

    /// The waiting challenge is asked for once no answer is in flight and the interval since the
    /// last answer (on this connection) has passed.
    mutating func offerWaitingChallenge(_ clock: Int64?) -> [String] {
        guard let c = waitingChallenge, conn == .connected, !answerInFlight else { return [] }
        if let last = lastAnswerAt, let t = clock ?? lastNow, t < last + Self.answerInterval { return [] }
        waitingChallenge = nil
        challenge = c
        authRefused = false
        if everAnswered.contains(c) { tally["challengeAgainOnNewConnection"] += 1 }
        return [modelSummary("authenticationRequested", challenge: c)]
    }

    /// The oldest publish call's pending, undrained events, as many (in publish order) as fit
    /// the frame limit in one EVENTS frame — a single event goes as EVENT —, or one EVENT each
    /// for relays without EVENTS.
    func nextPublishFrame() -> Frame? {
        let ready = deliveries.values.filter { $0.stage == .pending && !$0.drained }.sorted { $0.seq < $1.seq }
        guard let first = ready.first else { return nil }
        var packed: [VerifiedEvent] = [first.event]
        if config.supportsEventsBatch {
            // ["EVENTS",e1,e2,…]: 11 bytes around the events, one comma between two
            var size = #"["EVENTS",]"#.utf8.count + jsonBytes[first.event.id]!
            for d in ready.dropFirst() where d.batch == first.batch {
                size += 1 + jsonBytes[d.event.id]!
                if size > frameLimit { break }
                packed.append(d.event)
            }
        }
        let frame = packed.count == 1 ? ClientRelayFrame.event(packed[0]) : ClientRelayFrame.events(packed)
        return Frame(text: frame.toJSON(), ids: packed.map(\.id), purpose: .publish)
    }

    mutating func drain(_ max: Int) -> ModelExpect {
        guard !closed, (1...256).contains(max) else { return .fail(.invalidRelaySession) }
        guard conn == .connected else { return .ok([]) }
        var out: [Frame] = []
        let held = holding
        var i = 0
        while out.count < max, i < queue.count {
            if held && queue[i].purpose.waitsForAuth {
                tally["authHeld"] += 1
                i += 1
            } else {
                let f = queue.remove(at: i)
                // the relay has a REQ from its hand-out until our CLOSE is handed out
                if case .sub(let id) = f.purpose { liveREQs.insert(id) }
                if case .close(let id) = f.purpose { liveREQs.remove(id) }
                out.append(f)
            }
        }
        drained += out
        while !held, out.count < max, outbound < Self.maxOutbound, var f = nextPublishFrame() {
            f.serial = nextSerial
            nextSerial += 1
            for id in f.ids {
                deliveries[id]!.drained = true
                deliveries[id]!.frame = f.serial
                // frames are written in hand-out order: that is the order an in-order relay answers in
                noteWritten(id)
            }
            if config.supportsEventsBatch, let batch = deliveries[f.ids[0]]?.batch,
                deliveries.values.contains(where: { $0.batch == batch && $0.stage == .pending && !$0.drained })
            {
                tally["split"] += 1
            }
            out.append(f)
            drained.append(f)
        }
        return .ok(out.map { "\($0.text) | \($0.ids.joined(separator: ","))" })
    }

    mutating func confirmSent(_ ids: [String], now: Int64?) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        guard let i = drained.firstIndex(where: { $0.ids == ids }) else { return .fail(ids.isEmpty ? .invalidRelaySession : .invalidDeliveryState) }
        observe(now)
        let frame = drained.remove(at: i)
        if frame.purpose == .auth, holding, let now { authWaitUntil = now + config.authenticationWaitSeconds }
        for id in frame.ids {
            // only an event whose latest frame this is: one answered and re-framed since, or
            // settled and published again, is not in flight by this write
            guard let d = deliveries[id], d.frame == frame.serial else {
                tally["confirmedStale"] += 1
                continue
            }
            switch d.stage {
            case .awaitingAuth:
                // answered auth-required before this confirmation: the deadline runs from this write
                tally["confirmedAwaitingAuth"] += 1
                if d.sentAt == nil { deliveries[id]!.sentAt = now }
            case .pending where d.drained:
                deliveries[id]!.drained = false
                deliveries[id]!.stage = .inFlight
                deliveries[id]!.sentAt = now
            default:
                // pending again (an auth-required answer re-sends it at once), not yet re-framed
                tally["confirmedStale"] += 1
            }
        }
        return .ok([])
    }

    mutating func noteWritten(_ id: String) {
        guard config.correlateUnnamedAcknowledgements, !correlationLost else { return }
        if unanswered.count >= 2 * Self.maxPending {
            correlationLost = true
            unanswered = []
        } else {
            unanswered.append(id)
        }
    }

    // MARK: Receiving

    mutating func confirmIngested(_ id: String) -> ModelExpect {
        guard !closed, let entry = awaiting.removeValue(forKey: id) else { return .fail(.invalidRelaySession) }
        confirmed.insert(id)
        let dated = entry.arrivedAt.map { min(entry.event.createdAt, $0) } ?? entry.event.createdAt
        if subs[entry.sub] != nil { subs[entry.sub]!.newest = max(subs[entry.sub]!.newest ?? Int64.min, dated) }
        return .ok([])
    }

    /// A frame the session accepts moves the time last seen (after it was handled: a CLOSED
    /// schedules its retry from `now`, or the time seen before); a rejected one changes nothing.
    mutating func receive(_ input: ModelRelayInput, now: Int64?) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        let result = handle(input, clock: now ?? lastNow)
        if case .ok = result { observe(now) }
        return result
    }

    mutating func handle(_ input: ModelRelayInput, clock: Int64?) -> ModelExpect {
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
            awaiting[e.id] = Awaiting(event: e, sub: sub, filters: s.filters, arrivedAt: clock)
            return .ok([modelSummary("persistEvent", sub: sub, id: e.id)])
        case .ok(let named, let accepted, let message):
            return .ok(receiveOK(named, accepted: accepted, message: message, clock: clock))
        case .eose(let s):
            subs[s]?.closes = 0
            return .ok([modelSummary("endOfStoredEvents", sub: s)])
        case .closed(let s, let message):
            return .ok([receiveClosed(s, prefix: RelayMessage(message).prefix, clock: clock)])
        case .notice(let m): return .ok([modelSummary("notice", prefix: RelayMessage(m).prefix)])
        case .auth(let c):
            if c.utf8.count > RelaySessionContract.maxChallengeBytes.value { return .ok([modelSummary("notice")]) }
            if c == challenge || c == waitingChallenge || answeredChallenges.contains(c) { return .ok([]) }
            if answerInFlight { tally["challengeWaitsForAnswer"] += 1 }
            waitingChallenge = c
            return .ok(offerWaitingChallenge(clock))
        case .count(let s, let n):
            if closedCounts.contains(s) { tally["closedCountAnswer"] += 1 }
            guard !closedCounts.contains(s), counts.removeValue(forKey: s) != nil else { return .ok([modelSummary("notice", sub: s)]) }
            countOrder.removeAll { $0 == s }
            return .ok([modelSummary("countResult", sub: s, count: n)])
        }
    }

    mutating func receiveOK(_ named: String?, accepted: Bool, message: String, clock: Int64?) -> [String] {
        let prefix = RelayMessage(message).prefix
        if let named, named == authEventID { return receiveAuthOK(named, accepted: accepted, prefix: prefix) + offerWaitingChallenge(clock) }
        var target = named
        if let named {
            if let i = unanswered.firstIndex(of: named) { unanswered.remove(at: i) }
        } else if config.correlateUnnamedAcknowledgements, !correlationLost, !unanswered.isEmpty {
            // the oldest unanswered write of this connection, timed-out ones included
            target = unanswered.removeFirst()
            tally["correlated"] += 1
        }
        guard let id = target else { return [modelSummary("notice", prefix: prefix)] }
        let decision = try! classifyDeliveryAcknowledgement(parseRelayResponseFrame(SessionFixtures.ok(id, accepted, message)))
        if let d = deliveries[id] {
            if d.stage == .pending { tally[named == nil ? "correlatedBeforeConfirm" : "okBeforeConfirm"] += 1 }
            // after our AUTH was refused, with no challenge waiting, nothing would release it: it
            // leaves at once, as for a host that does not answer challenges
            let mayAuthenticate = !authRefused || waitingChallenge != nil
            if !decision.state.isTerminal, decision.category == .authRequired, !d.authResendUsed, config.answersAuthentication, !mayAuthenticate {
                tally["authRequiredAfterRefusal"] += 1
            }
            if !decision.state.isTerminal, decision.category == .authRequired, !d.authResendUsed, config.answersAuthentication, mayAuthenticate {
                // held until our AUTH is accepted or its wait ran out (or at once, when that
                // already happened), no decision
                let asAuthenticated = authenticated || authWaitEnded
                tally[asAuthenticated ? "authResendAtOnce" : "authResend"] += 1
                if authWaitEnded && !authenticated { tally["authResendAfterWait"] += 1 }
                if asAuthenticated {
                    deliveries[id]!.authResendUsed = true
                    deliveries[id]!.stage = .pending
                    deliveries[id]!.drained = false
                } else {
                    deliveries[id]!.stage = .awaitingAuth
                }
                return []
            }
            deliveries[id] = nil
            if decision.state.isTerminal { settled.insert(id) }
            return [Self.changed(id, decision.state, decision.category)]
        }
        if timedOut.contains(id), decision.state.isTerminal {
            timedOut.remove(id)
            settled.insert(id)
            return [Self.changed(id, decision.state, decision.category)]
        }
        return [modelSummary("notice", id: id, prefix: prefix)]
    }

    mutating func receiveAuthOK(_ id: String, accepted: Bool, prefix: String?) -> [String] {
        (authEventID, authWaitUntil) = (nil, nil)
        guard accepted else {
            // a refusal after the wait ran out still counts: the connection is not authenticated
            if authWaitEnded { tally["authRefusedAfterWait"] += 1 }
            authWaitEnded = false
            authRefused = true
            let out =
                [modelSummary("authenticationFailed", id: id, prefix: prefix)]
                + bySeq.filter { deliveries[$0]!.stage == .awaitingAuth }.map { e in
                    deliveries[e] = nil
                    return Self.changed(e, .retryable, .authRequired)
                }
            // subscriptions closed for auth wait for a later accepted AUTH
            return out
        }
        authenticated = true
        authRefused = false
        replayAfterAuth()
        return [modelSummary("authenticated", id: id)]
    }

    /// After our AUTH was accepted or its wait ran out: the REQs the relay closed auth-required
    /// go out again, each once, in subscription order; one that finds the outbound queue full
    /// is not stranded: the retry timer sends it, from the time last seen (or 0) + base. Events
    /// answered auth-required are pending again, each once.
    mutating func replayAfterAuth() {
        for s in subOrder where subs[s]!.awaitingReplay {
            subs[s]!.awaitingReplay = false
            subs[s]!.replayUsed = true
            if queue.contains(where: { $0.purpose == .sub(s) }) {
                // Its REQ is already queued (a due retry): that one goes out, not a second.
            } else if room(1) {
                queue.append(req(s, subs[s]!.filters, newest: subs[s]!.newest))
            } else {
                tally["replayBounded"] += 1
                subs[s]!.retryAt = (lastNow ?? 0) + config.reconnectBaseDelaySeconds
                subs[s]!.replayPostponed = true
            }
        }
        for e in bySeq where deliveries[e]!.stage == .awaitingAuth {
            deliveries[e]!.authResendUsed = true
            deliveries[e]!.stage = .pending
            deliveries[e]!.drained = false
        }
    }

    /// A CLOSED ends the relay's REQ (and a pending COUNT). When a newer REQ of the
    /// subscription is still queued, that one goes out as it is. Otherwise auth-required: the
    /// REQ again once after our AUTH is accepted or its wait ran out (when that already
    /// happened: at once, retry 0, if there is room, else by the retry timer at clock + base,
    /// retry base·1000; not at all for a host that does not answer challenges);
    /// error/rate-limited: again at clock + base·2^(n-1) s (capped); others: not on this
    /// connection.
    mutating func receiveClosed(_ s: String, prefix: String?, clock: Int64?) -> String {
        counts[s] = nil
        countOrder.removeAll { $0 == s }
        liveREQs.remove(s)
        var retry: Int64?
        if subs[s] != nil, queue.contains(where: { $0.purpose == .sub(s) }) {
            tally["closedBehindReplacement"] += 1
        } else if var sub = subs[s] {
            (sub.retryAt, sub.replayPostponed) = (nil, false)
            if prefix == "auth-required", !sub.replayUsed, config.answersAuthentication {
                if authenticated || authWaitEnded {
                    if authWaitEnded && !authenticated { tally["closedReplayAfterWait"] += 1 }
                    sub.replayUsed = true
                    if room(1) {
                        queue.append(req(s, sub.filters, newest: sub.newest))
                        retry = 0
                    } else {
                        // no room now: the retry timer sends it once there is
                        tally["closedReplayPostponed"] += 1
                        sub.retryAt = (clock ?? 0) + config.reconnectBaseDelaySeconds
                        sub.replayPostponed = true
                        retry = config.reconnectBaseDelaySeconds * 1000
                    }
                } else {
                    sub.awaitingReplay = true
                }
            } else if prefix == "error" || prefix == "rate-limited", let now = clock {
                sub.closes += 1
                let delay = min(config.reconnectBaseDelaySeconds << Int64(min(sub.closes - 1, 40)), config.reconnectMaxDelaySeconds)
                sub.retryAt = now + delay
                retry = delay * 1000
            }
            subs[s] = sub
        }
        return modelSummary("subscriptionClosed", sub: s, prefix: prefix, retry: retry)
    }

    mutating func authenticate(_ answer: ModelAuthAnswer, now: Int64?) -> ModelExpect {
        guard !closed, conn == .connected else { return .fail(.invalidRelaySession) }
        let clock = now ?? lastNow
        if answer.wrongRelay && config.relayURL != nil { tally["authWrongRelay"] += 1 }
        if let clock, abs(answer.event.createdAt - clock) > config.authenticationWindowSeconds { tally["authOutsideWindow"] += 1 }
        guard let challenge, !answer.wrongKind, answer.challenge == challenge, !(answer.wrongRelay && config.relayURL != nil),
            clock.map({ abs(answer.event.createdAt - $0) <= config.authenticationWindowSeconds }) ?? true,
            !answeredPairs.contains(answer.event.pubkey + "|" + challenge)
        else { return .fail(.invalidRelayAuthentication) }
        let frame = ClientRelayFrame.auth(answer.event).toJSON()
        guard frame.utf8.count <= frameLimit else {
            tally["authTooLarge"] += 1
            return .fail(.invalidRelayAuthentication)
        }
        guard room(1) else { return .fail(.relaySessionQueueFull) }
        observe(now)
        answeredPairs.insert(answer.event.pubkey + "|" + challenge)
        answeredChallenges.insert(challenge)
        everAnswered.insert(challenge)
        lastAnswerAt = clock
        (authEventID, authenticated) = (answer.event.id, false)
        authWaitUntil = clock.map { $0 + config.authenticationWaitSeconds }
        authWaitEnded = false
        authRefused = false
        queue.insert(Frame(text: frame, ids: [], purpose: .auth), at: 0)
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
