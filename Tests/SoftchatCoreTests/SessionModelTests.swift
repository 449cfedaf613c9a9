import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// One host call of the model test.
enum ModelOp: CustomStringConvertible {
    case connect, transportConnected(Int64?), transportLost(Int64?), cancel, close
    /// Filter indexes into the pool; -1 is an invalid filter. An id over 64 characters is invalid.
    case subscribe(String, [Int]), unsubscribe(String), count(String, [Int])
    case publish([VerifiedEvent]), timedOut(Int64), drain(Int), confirmSent([String])
    case receive(ModelRelayInput), confirmIngested(String)
    case authenticate(VerifiedEvent, challenge: String, wrongKind: Bool)

    var description: String {
        switch self {
        case .connect: "connect"
        case .transportConnected(let now): "transportConnected(\(now.map { "\($0)" } ?? "nil"))"
        case .transportLost(let now): "transportLost(\(now.map { "\($0)" } ?? "nil"))"
        case .cancel: "cancel"
        case .close: "close"
        case .subscribe(let id, let idx): "subscribe(\(id.prefix(12)), \(idx))"
        case .unsubscribe(let id): "unsubscribe(\(id))"
        case .count(let id, let idx): "count(\(id), \(idx))"
        case .publish(let events): "publish(\(events.count > 4 ? "\(events.count) events" : "\(events.map { String($0.id.prefix(8)) })"))"
        case .timedOut(let now): "acknowledgementTimedOut(\(now))"
        case .drain(let max): "drainOutbound(\(max))"
        case .confirmSent(let ids): "confirmSent(\(ids.map { String($0.prefix(8)) }))"
        case .receive(let input): "receive(\(input))"
        case .confirmIngested(let id): "confirmIngested(\(id.prefix(8)))"
        case .authenticate(let e, let c, let wrong): "authenticate(\(e.pubkey.prefix(8)), \(c)\(wrong ? ", kind 1" : ""))"
        }
    }
}

/// 3,200 seeded random call sequences against `SessionModel` (SessionModelReference.swift). After
/// every call: the outcome, actions and frames equal the model's; the snapshot equals the model's
/// and stays within the contract bounds; persistEvent carries only verified events that match the
/// filters of the subscription they were handed out for; scheduleReconnect delays stay within
/// [delay/2, delay] of the capped doubling; a rejected call leaves the snapshot as it was and the
/// session keeps answering exactly like a twin session that never saw the call. After reconnects
/// (sometimes mid-sequence, always at the end) a full drain must carry one REQ per subscription
/// with `since` as specified, one COUNT per unanswered count and every pending publish once; at
/// the end every event still awaiting persistence is offered again when the relay re-sends it.
@Suite struct SessionModelTests {
    typealias F = SessionFixtures
    static let alice = WireKeys.alice, bob = WireKeys.bob
    static let pool: [ModelFilter] = [
        ModelFilter(json: #"{"kinds":[1]}"#) { $0.kind == 1 },
        ModelFilter(json: #"{"kinds":[1,7]}"#) { $0.kind == 1 || $0.kind == 7 },
        ModelFilter(json: #"{"authors":["\#(WireKeys.bob.publicKeyHex)"]}"#) { $0.pubkey == WireKeys.bob.publicKeyHex },
        ModelFilter(json: ##"{"kinds":[7],"#t":["x"]}"##) { $0.kind == 7 && $0.tags.contains(["t", "x"]) },
        ModelFilter(json: #"{"kinds":[1],"since":1700000200}"#) { $0.kind == 1 && $0.createdAt >= 1_700_000_200 },
    ]
    static let ownSince: [Int64?] = [nil, nil, nil, nil, 1_700_000_200]
    static let received: [VerifiedEvent] = (0..<40).map { i in
        F.note(20_000 + i, kind: i % 3 == 2 ? 7 : 1, createdAt: F.baseTime + Int64(i * 29 % 400), by: i % 4 == 1 ? bob : alice,
               tags: i % 5 == 0 ? [["t", "x"]] : [])
    }
    static let published: [VerifiedEvent] = (0..<12).map { F.note(30_000 + $0, kind: 14) }
    static let challenges = ["c1", "c2", "c3", "c4", "c5"]
    static let answers: [String: [VerifiedEvent]] = Dictionary(uniqueKeysWithValues: challenges.map { c in
        (c, [F.auth(c, by: alice), F.auth(c, by: bob)])
    })
    static let wrongKind: [String: VerifiedEvent] = Dictionary(uniqueKeysWithValues: challenges.map { c in
        (c, try! alice.sign(UnsignedEvent(createdAt: F.baseTime, kind: 1, tags: [["relay", F.relay], ["challenge", c]], content: "")))
    })
    static let okMessages = ["", "duplicate: exists", "invalid: bad signature", "rate-limited: slow down", "auth-required: you must auth",
                             "ERROR: auth-required: x", "blocked: no", "error: try later", "pow: 8", "whatever"]
    static let invalidTexts: [(String, SoftchatErrorCode)] = [("nope", .invalidRelayFrame), (#"["EVENT","a"]"#, .invalidRelayFrame),
                                                               (#"["OK","x",true,""]"#, .invalidRelayFrame), (#"["AUTH",""]"#, .invalidRelayAuthentication)]

    enum Output: Equatable {
        case actions([RelaySessionAction]), frames([OutboundRelayFrame]), none
        var summaries: [String] {
            switch self {
            case .actions(let a): a.map(modelSummary)
            case .frames(let f): f.map(modelSummary)
            case .none: []
            }
        }
    }

    struct Stats {
        var steps = 0, rejected = 0, persisted = 0, reoffered = 0, queueFull = 0, authenticated = 0, resets = 0, freshChecks = 0
    }

    /// One sequence: the model, the session under test, and its twin that only sees successful calls.
    struct Run {
        var rng: WireRNG
        /// One sequence in 48 (EVENTS and EVENT-only alike) also makes bursts of subscriptions,
        /// counts and large publishes, to reach the bounds.
        let bulk: Bool
        var model: SessionModel
        let main: RelaySession, twin: RelaySession
        var now: Int64 = F.baseTime
        var failure: String?
        /// The latest calls (described only when a sequence fails).
        var trail: [ModelOp] = []
        var stats = Stats()

        init(seed: UInt64) {
            rng = WireRNG(seed: seed)
            bulk = seed % 96 == 3 || seed % 96 == 50
            let config = RelaySessionConfig(
                supportsEventsBatch: seed % 2 == 0, reconnectBaseDelaySeconds: 1, reconnectMaxDelaySeconds: [1, 2, 8, 300][Int(seed / 2 % 4)],
                reconnectResetAfterSeconds: [0, 5, 30, 60][Int(seed / 8 % 4)], jitterSeed: Int64(bitPattern: seed), sinceOverlapSeconds: Int64(seed / 32 % 21))
            model = SessionModel(config: config, pool: SessionModelTests.pool)
            main = try! RelaySession(config: config)
            twin = try! RelaySession(config: config)
        }

        static func perform(_ op: ModelOp, on s: RelaySession) throws -> Output {
            func json(_ idx: [Int]) -> [String] { idx.map { $0 < 0 ? #"{"kinds":"x"}"# : pool[$0].json } }
            switch op {
            case .connect: return .actions(try s.connect())
            case .transportConnected(let now): return .actions(try s.transportConnected(now: now))
            case .transportLost(let now): return .actions(try s.transportLost(now: now))
            case .cancel: return .actions(try s.cancel())
            case .close: try s.close()
            case .subscribe(let id, let idx): try s.subscribe(id: id, filtersJSON: json(idx))
            case .unsubscribe(let id): try s.unsubscribe(id: id)
            case .count(let id, let idx): try s.count(id: id, filtersJSON: json(idx))
            case .publish(let events): try s.publish(events)
            case .timedOut(let now): return .actions(try s.handleTimeout(now: now))
            case .drain(let max): return .frames(try s.drainOutbound(max: max))
            case .confirmSent(let ids): try s.confirmSent(ids)
            case .receive(let input): return .actions(try s.receive(input.text))
            case .confirmIngested(let id): try s.confirmIngested(id)
            case .authenticate(let e, _, _): return .actions(try s.authenticate(e))
            }
            return .none
        }

        mutating func expect(_ op: ModelOp) -> ModelExpect {
            func inputError(_ id: String, _ idx: [Int]) -> SoftchatErrorCode? {
                id.count > 64 ? .invalidRelayFrame : idx.contains(-1) ? .invalidRelayFilter : nil
            }
            switch op {
            case .connect: return model.connect()
            case .transportConnected(let now): return model.transportConnected(now: now)
            case .transportLost(let now): return model.transportLost(now: now)
            case .cancel: return model.cancel()
            case .close:
                model.close()
                return .ok([])
            case .subscribe(let id, let idx): return model.subscribe(id, idx, inputError: inputError(id, idx))
            case .unsubscribe(let id): return model.unsubscribe(id)
            case .count(let id, let idx): return model.count(id, idx, inputError: inputError(id, idx))
            case .publish(let events): return model.publish(events)
            case .timedOut: return model.timedOut()
            case .drain(let max): return model.drain(max)
            case .confirmSent(let ids): return model.confirmSent(ids)
            case .receive(let input): return model.receive(input)
            case .confirmIngested(let id): return model.confirmIngested(id)
            case .authenticate(let e, let c, let wrong): return model.authenticate(e, challenge: c, wrongKind: wrong)
            }
        }

        mutating func fail(_ message: String) -> Output? {
            if failure == nil { failure = "\(message)\nlast calls:\n" + trail.map(\.description).joined(separator: "\n") }
            return nil
        }

        /// Runs `op` on the model, the session and (when it succeeds) the twin, and checks
        /// every invariant; returns the session's output when the call succeeded.
        @discardableResult
        mutating func step(_ op: ModelOp) -> Output? {
            guard failure == nil else { return nil }
            stats.steps += 1
            if trail.count == 12 { trail.removeFirst() }
            trail.append(op)
            let before = main.snapshot()
            let attemptBefore = model.attempt
            let expected = expect(op)
            let result: Result<Output, SoftchatError>
            do {
                result = .success(try Self.perform(op, on: main))
            } catch let error as SoftchatError {
                result = .failure(error)
            } catch {
                return fail("\(op) threw \(error)")
            }
            switch (expected, result) {
            case (.fail(let code), .failure(let error)):
                stats.rejected += 1
                if code == .relaySessionQueueFull { stats.queueFull += 1 }
                guard error.code == code else { return fail("\(op): expected \(code.rawValue), got \(error)") }
                guard main.snapshot() == before, main.snapshot() == twin.snapshot() else { return fail("\(op): the rejected call changed the session") }
                return nil
            case (.fail(let code), .success(let out)):
                return fail("\(op): expected \(code.rawValue), but it succeeded with \(out.summaries)")
            case (.ok(let summaries), .failure(let error)):
                return fail("\(op): expected \(summaries), but it failed with \(error)")
            case (.ok(let summaries), .success(let out)):
                guard out.summaries == summaries else { return fail("\(op):\n expected \(summaries)\n got      \(out.summaries)") }
                guard (try? Self.perform(op, on: twin)) == out else { return fail("\(op): the twin session answered differently") }
                if case .transportLost = op, model.attempt == 1, attemptBefore > 0 { stats.resets += 1 }
                return checkAfter(op, out) ? out : nil
            }
        }

        mutating func checkAfter(_ op: ModelOp, _ out: Output) -> Bool {
            let s = main.snapshot()
            let m = model.snapshotKey
            guard modelSnapshotKey(s) == m, s == twin.snapshot()
            else { return fail("\(op): snapshot \(s) but the model has \(m)") != nil }
            guard s.subscriptionIDs.count <= RelaySessionContract.maxSubscriptions.value, s.outboundFrames <= RelaySessionContract.maxOutboundFrames.value,
                  s.pendingPublishes <= RelayPublishContract.maxPendingPublishes.value,
                  s.awaitingPersistence <= RelayIngestionContract.maxAwaitingPersistence.value
            else { return fail("\(op): a bound is exceeded: \(s)") != nil }
            guard case .actions(let actions) = out else { return true }
            for a in actions {
                if a.kind == .persistEvent {
                    stats.persisted += 1
                    if case .receive(.event(_, _, _, false)) = op { stats.reoffered += 1 }
                    guard let e = a.event, (try? VerifiedEvent(json: e.jsonValue)) == e, let entry = model.awaiting[e.id], entry.event.sig == e.sig,
                          entry.filters.contains(where: { SessionModelTests.pool[$0].matches(e) })
                    else { return fail("\(op): persistEvent for an unverified or non-matching event") != nil }
                }
                if a.kind == .authenticated { stats.authenticated += 1 }
                if a.kind == .scheduleReconnect {
                    let delay = a.delayMilliseconds ?? -1
                    guard delay >= model.nominalDelay / 2, delay <= model.nominalDelay, model.nominalDelay <= model.config.reconnectMaxDelaySeconds * 1000
                    else { return fail("\(op): delay \(delay) ms outside [\(model.nominalDelay / 2), \(model.nominalDelay)]") != nil }
                }
            }
            return true
        }

        // MARK: Generating calls

        mutating func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
        mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        mutating func filterIndexes() -> [Int] {
            (0..<(chance(30) ? 2 : 1)).map { _ in chance(4) ? -1 : Int(rng.next() % UInt64(SessionModelTests.pool.count)) }
        }

        mutating func relayInput() -> ModelRelayInput {
            let roll = rng.next() % 100
            let subs = model.subOrder
            switch roll {
            case 0..<45:
                let waiting = model.awaiting.keys.sorted().map { model.awaiting[$0]!.event }
                let e = !waiting.isEmpty && chance(30) ? pick(waiting) : pick(SessionModelTests.received)
                let sub = !subs.isEmpty && chance(85) ? pick(subs) : "zz"
                let r = rng.next() % 100
                return .event(sub, e, json: r < 75 ? e.jsonValue : r < 90 ? e.badSignatureJSON : e.tamperedContentJSON, valid: r < 75)
            case 45..<70:
                let inFlight = model.deliveries.filter { $0.value.state == .inFlight }.keys.sorted()
                let id: String? = model.authEventID != nil && chance(40) ? model.authEventID
                    : !inFlight.isEmpty && chance(70) ? pick(inFlight) : chance(70) ? pick(SessionModelTests.published).id : nil
                return .ok(id: id, accepted: chance(50), message: pick(SessionModelTests.okMessages))
            case 70..<78: return .auth(model.challenge != nil && chance(30) ? model.challenge! : pick(SessionModelTests.challenges))
            case 78..<85:
                return .closed(subs.isEmpty || chance(20) ? pick(["zz", "n1"]) : pick(subs),
                               pick(["auth-required: you must auth", "ERROR: auth-required: x", "blocked: no", ""]))
            case 85..<89: return .eose(subs.isEmpty ? "zz" : pick(subs))
            case 89..<92: return .notice(pick(["rate-limited", "restricted: permission denied"]))
            case 92..<96: return .count(!model.countOrder.isEmpty && chance(80) ? pick(model.countOrder) : "n9", Int64(rng.next() % 100))
            default:
                let (text, code) = pick(SessionModelTests.invalidTexts)
                return .invalid(text, code)
            }
        }

        mutating func nextOps() -> [ModelOp] {
            now += Int64(rng.next() % 40)
            let time: Int64? = chance(90) ? now : nil
            if model.conn != .connected && chance(50) {
                return [model.conn == .connecting ? .transportConnected(time) : .connect]
            }
            // steer towards complete rounds: answer a challenge, acknowledge the answer, confirm writes
            if model.conn == .connected, let challenge = model.challenge, model.authEventID == nil, chance(20) {
                return [.authenticate(pick(SessionModelTests.answers[challenge]!), challenge: challenge, wrongKind: false)]
            }
            if let auth = model.authEventID, model.drained.isEmpty, chance(30) { return [.receive(.ok(id: auth, accepted: chance(80), message: ""))] }
            if let first = model.drained.first, chance(25) { return [.confirmSent(first.ids)] }
            var roll = rng.next() % 1000
            if bulk && chance(25) { roll = 965 + rng.next() % 30 } else if !bulk && roll >= 965 { roll = 545 + roll % 300 }
            switch roll {
            case 0..<30: return [.connect]
            case 30..<60: return [.transportConnected(time)]
            case 60..<100: return [.transportLost(time)]
            case 100..<120: return [.cancel]
            case 120..<125: return [.close]
            case 125..<205: return [.subscribe(chance(4) ? String(repeating: "x", count: 65) : pick(["a", "b", "c", "d"]), filterIndexes())]
            case 205..<235: return [.unsubscribe(!model.subOrder.isEmpty && chance(80) ? pick(model.subOrder) : pick(["a", "zz"]))]
            case 235..<265: return [.count(pick(["n1", "n2", "n3", "a"]), filterIndexes())]
            case 265..<345:
                let n = chance(3) ? 0 : Int(rng.next() % 4) + 1
                var batch = (0..<n).map { _ in pick(SessionModelTests.published) }
                if chance(10), let first = batch.first { batch.append(first) }
                return [.publish(batch)]
            case 345..<365: return [.timedOut(now)]
            case 365..<465: return [.drain(chance(12) ? pick([0, 257, -3]) : pick([1, 2, 3, 256, 256, Int(rng.next() % 256) + 1]))]
            case 465..<545:
                return [.confirmSent(!model.drained.isEmpty && chance(80) ? pick(model.drained).ids : chance(50) ? [] : [pick(SessionModelTests.published).id])]
            case 545..<845: return [.receive(relayInput())]
            case 845..<915:
                return [.confirmIngested(!model.awaiting.isEmpty && chance(85) ? pick(model.awaiting.keys.sorted()) : pick(SessionModelTests.received).id)]
            case 915..<965:
                let challenge = model.challenge != nil && chance(70) ? model.challenge! : pick(SessionModelTests.challenges)
                if chance(10) { return [.authenticate(SessionModelTests.wrongKind[challenge]!, challenge: challenge, wrongKind: true)] }
                return [.authenticate(pick(SessionModelTests.answers[challenge]!), challenge: challenge, wrongKind: false)]
            case 965..<977:
                let start = Int(rng.next() % 100)
                return (start..<start + 60).map { .subscribe("s\($0)", [0]) }
            case 977..<983: return (0..<150).map { _ in .count("k\(rng.next() % 1100)", [1]) }
            case 983..<995:
                // EVENT-only relays get one frame per event: smaller bursts keep the run short
                let size = model.config.supportsEventsBatch ? 256 : 48
                let start = size * Int(rng.next() % 4) + Int(rng.next() % 3)
                return [.publish(Array(F.many[start..<start + size]))]
            default: return (0..<6).map { _ in .drain(256) }
            }
        }

        // MARK: Settling

        /// Right after transportConnected: drain and write everything; the fresh connection must
        /// carry one REQ per subscription (since as specified), one COUNT per unanswered count and
        /// every pending publish exactly once.
        mutating func checkFreshConnection() {
            let wantSubs = model.subOrder, wantCounts = model.countOrder
            let wantEvents = Set(model.deliveries.filter { $0.value.state == .pending }.keys)
            var frames: [OutboundRelayFrame] = []
            while failure == nil, case .frames(let batch)? = step(.drain(256)), !batch.isEmpty {
                frames += batch
                for f in batch { step(.confirmSent(f.deliveryEventIDs)) }
            }
            guard failure == nil else { return }
            stats.freshChecks += 1
            var reqs: [String] = [], counts: [String] = [], events: [String] = []
            for f in frames {
                switch try? parseClientRelayFrame(f.frame) {
                case .req(let id, let filters)?:
                    reqs.append(id)
                    for (filter, i) in zip(filters, model.subs[id]?.filters ?? []) {
                        let own = SessionModelTests.ownSince[i]
                        let want = model.subs[id]!.newest.map { Swift.max(own ?? Int64.min, Swift.max(0, $0 - model.config.sinceOverlapSeconds)) } ?? own
                        if filter.since != want { _ = fail("REQ \(id): since \(filter.since as Any), want \(want as Any)") }
                    }
                case .count(let id, _)?: counts.append(id)
                case .event(let e)?: events.append(e.id)
                case .events(let list)?: events += list.map(\.id)
                default: _ = fail("unexpected frame after reconnect: \(f.frame.prefix(80))")
                }
            }
            if reqs != wantSubs || counts != wantCounts || events.count != wantEvents.count || Set(events) != wantEvents {
                _ = fail("fresh connection sent REQs \(reqs) COUNTs \(counts) \(events.count) events; want \(wantSubs) \(wantCounts) \(wantEvents.count)")
            }
        }

        /// End of a sequence: reconnect, check the fresh connection, offer every event still
        /// awaiting persistence again by re-sending it, and confirm them all.
        mutating func settle() {
            guard !model.closed, failure == nil else { return }
            if model.conn == .connected || model.conn == .connecting { step(.transportLost(now)) }
            step(.connect)
            step(.transportConnected(now))
            checkFreshConnection()
            for id in model.awaiting.keys.sorted() where !model.subOrder.isEmpty {
                let event = model.awaiting[id]!.event
                guard case .actions(let a)? = step(.receive(.event(model.subOrder[0], event, json: event.jsonValue, valid: true))),
                      a.map(\.kind) == [.persistEvent]
                else { _ = fail("awaiting event \(id) was not offered again after the reconnect"); return }
            }
            for id in model.awaiting.keys.sorted() { step(.confirmIngested(id)) }
            if failure == nil, main.snapshot().awaitingPersistence != 0 { _ = fail("events still await persistence after settling") }
        }
    }

    @Test(arguments: 0..<4)
    func randomCallSequencesAgreeWithTheReferenceModel(chunk: Int) {
        let perChunk = 800
        var total = Stats()
        var failures = 0
        for i in 0..<perChunk where failures < 3 {
            // SplitMix64 streams of seeds that differ by a multiple of its gamma are shifted copies
            // of each other, so spread the seeds with another odd constant.
            let seed = UInt64(chunk * perChunk + i) &* 0x2545_F491_4F6C_DD1D &+ 0x5EED
            var run = Run(seed: seed)
            let length = run.bulk ? 40 : 10 + Int(run.rng.next() % 60)
            var ops = 0
            while ops < length, run.failure == nil {
                for op in run.nextOps() {
                    let out = run.step(op)
                    if case .transportConnected = op, out != nil, !run.bulk, run.chance(30) { run.checkFreshConnection() }
                }
                ops += 1
            }
            run.settle()
            if let failure = run.failure {
                failures += 1
                Issue.record("seed \(seed) (chunk \(chunk), sequence \(i)): \(failure)")
            }
            let s = run.stats
            total = Stats(steps: total.steps + s.steps, rejected: total.rejected + s.rejected, persisted: total.persisted + s.persisted,
                          reoffered: total.reoffered + s.reoffered, queueFull: total.queueFull + s.queueFull,
                          authenticated: total.authenticated + s.authenticated, resets: total.resets + s.resets, freshChecks: total.freshChecks + s.freshChecks)
        }
        // the sequences reach what they are meant to check
        #expect(total.steps > 20 * perChunk && total.rejected > perChunk && total.persisted > perChunk / 2, "\(total)")
        #expect(total.reoffered > 0 && total.queueFull > 0 && total.authenticated > 0 && total.resets > 0 && total.freshChecks > perChunk, "\(total)")
    }
}
