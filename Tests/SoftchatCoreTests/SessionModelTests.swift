import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// One host call of the model test. `Int64?` arguments are the `now` passed (nil: none).
enum ModelOp: CustomStringConvertible {
    case connect
    case transportConnected(Int64?)
    case transportLost(Int64?)
    case cancel, close
    /// Filter indexes into the pool; -1 is an invalid filter. An id over 64 characters is invalid.
    case subscribe(String, [Int])
    case unsubscribe(String)
    case count(String, [Int])
    case cancelCount(String)
    case publish([VerifiedEvent])
    case handleTimeout(Int64)
    case drain(Int)
    case confirmSent([String], Int64?)
    case receive(ModelRelayInput, Int64?)
    case confirmIngested(String)
    case authenticate(ModelAuthAnswer, Int64?)

    var description: String {
        func t(_ now: Int64?) -> String { now.map { "\($0 - SessionFixtures.baseTime)" } ?? "nil" }
        switch self {
        case .connect: return "connect"
        case .transportConnected(let now): return "transportConnected(\(t(now)))"
        case .transportLost(let now): return "transportLost(\(t(now)))"
        case .cancel: return "cancel"
        case .close: return "close"
        case .subscribe(let id, let idx): return "subscribe(\(id.prefix(12)), \(idx))"
        case .unsubscribe(let id): return "unsubscribe(\(id))"
        case .count(let id, let idx): return "count(\(id), \(idx))"
        case .cancelCount(let id): return "cancelCount(\(id))"
        case .publish(let events): return "publish(\(events.count > 4 ? "\(events.count) events" : "\(events.map { String($0.id.prefix(8)) })"))"
        case .handleTimeout(let now): return "handleTimeout(\(t(now)))"
        case .drain(let max): return "drainOutbound(\(max))"
        case .confirmSent(let ids, let now):
            return "confirmSent(\(ids.count > 4 ? "\(ids.count) ids" : "\(ids.map { String($0.prefix(8)) })"), \(t(now)))"
        case .receive(let input, let now): return "receive(\(input), \(t(now)))"
        case .confirmIngested(let id): return "confirmIngested(\(id.prefix(8)))"
        case .authenticate(let a, let now): return "authenticate(\(a), \(t(now)))"
        }
    }
}

/// 3,200 seeded random call sequences against `SessionModel` (SessionModelReference.swift), over
/// configs with and without EVENTS, small `maxMessageBytes` (so batches split across frames and
/// large events, REQs — with the `since` a reconnect adds —, COUNTs and AUTHs are refused),
/// in-order correlation of unnamed OKs, a `relayURL`, hosts that do not answer NIP-42
/// (`answersAuthentication` off), different acknowledgement deadlines, AUTH waits and NIP-42
/// windows, and some sequences that never give a time. After every call: the outcome, actions and
/// frames equal the model's; the snapshot and `pollTimeout()` equal the model's and the snapshot
/// stays within the contract bounds; every drained frame fits min(relay.wire's frame bound,
/// maxMessageBytes); no event is in two frames of a drain nor in two drained, unconfirmed frames
/// (unless an OK — named, or unnamed and correlated in hand-out order — already answered the
/// earlier copy: an OK may overtake `confirmSent`, and then that write moves nothing in flight);
/// every event the session held is either still counted in `pendingPublishes` or got exactly one
/// retryable or terminal decision (so none is stranded and `publish` cannot stay queue-full), and
/// no decision follows a terminal one for the same event; persistEvent carries only verified
/// events that match the filters of the subscription they were handed out for; scheduleReconnect
/// delays stay within [delay/2, delay] of the capped doubling; a rejected call leaves the snapshot
/// and `pollTimeout()` as they were and the session keeps answering exactly like a twin session
/// that never saw the call. After reconnects (sometimes mid-sequence, always at the end) a full
/// drain must carry one REQ per subscription with `since` as specified, one COUNT per unanswered
/// count and every pending publish exactly once; at the end every event still awaiting
/// persistence is offered again when the relay re-sends it, `close()` refuses while deliveries are
/// held, `cancel()` releases them all (retryable / cancelled, in publish order), and the closed
/// session arms no timer. Generated calls lean towards complete rounds (answered challenges,
/// confirmed writes, due timers, AUTH waits that run out, auth-required answers before and after
/// authentication, late answers to cancelled COUNTs, unsubscribe/subscribe/unsubscribe before the
/// first CLOSE went out); bulk sequences also script a CLOSED subscription whose retry finds the
/// outbound queue full, or an auth-required replay after the accepted AUTH and an auth-required
/// CLOSED once authenticated that find it full, are handed to the retry timer and go out once
/// there is room; and the test fails unless every rule above was reached in each chunk of 800
/// sequences.
@Suite struct SessionModelTests {
    typealias F = SessionFixtures
    static let alice = WireKeys.alice, bob = WireKeys.bob
    static let pool: [ModelFilter] = [
        ModelFilter(json: #"{"kinds":[1]}"#) { $0.kind == 1 },
        ModelFilter(json: #"{"kinds":[1,7]}"#) { $0.kind == 1 || $0.kind == 7 },
        ModelFilter(json: #"{"authors":["\#(WireKeys.bob.publicKeyHex)"]}"#) { $0.pubkey == WireKeys.bob.publicKeyHex },
        ModelFilter(json: ##"{"kinds":[7],"#t":["x"]}"##) { $0.kind == 7 && $0.tags.contains(["t", "x"]) },
        ModelFilter(json: #"{"kinds":[1],"since":1700000200}"#) { $0.kind == 1 && $0.createdAt >= 1_700_000_200 },
        // 989 bytes: its REQ fits a 1,024-byte limit only without the `since` a reconnect adds
        // (refused up front), its COUNT fits; two of them fit neither 1,024 nor 1,500 bytes
        ModelFilter(
            json: "{\"authors\":[" + bigAuthors.map { "\"" + $0 + "\"" }.joined(separator: ",") + "],\"kinds\":[1,7,20001,20002,20003,20004]}"
        ) {
            ($0.kind == 1 || $0.kind == 7) && bigAuthors.contains($0.pubkey)
        },
    ]
    static let bigAuthors =
        [WireKeys.alice.publicKeyHex, WireKeys.bob.publicKeyHex] + (0..<12).map { String(repeating: String($0, radix: 16), count: 64) }
    static let ownSince: [Int64?] = [nil, nil, nil, nil, 1_700_000_200, nil]
    static let received: [VerifiedEvent] = (0..<40).map { i in
        F.note(
            20_000 + i, kind: i % 3 == 2 ? 7 : 1, createdAt: F.baseTime + Int64(i * 29 % 400), by: i % 4 == 1 ? bob : alice,
            tags: i % 5 == 0 ? [["t", "x"]] : [])
    }
    /// An event whose EVENT frame is exactly `bytes` long.
    static func sized(_ n: Int, frameBytes bytes: Int) -> VerifiedEvent {
        let bare = F.note(n, kind: 14, content: "")
        return F.note(n, kind: 14, content: String(repeating: "s", count: bytes - #"["EVENT",]"#.utf8.count - bare.jsonValue.jsonText.utf8.count))
    }
    /// Small notes (some with content that needs escaping), and events near or over the frame limits:
    /// EVENT frames of exactly 1,024 and 1,025 bytes, about 1.1 KB and 2.6 KB, and one over 512 KiB.
    static let published: [VerifiedEvent] =
        (0..<12).map { F.note(30_000 + $0, kind: 14) } + [
            F.note(30_100, kind: 14, content: "quote \" backslash \\ newline \n tab \t </script> \u{1} é 𝄞 😀"),
            F.note(30_101, kind: 14, content: String(repeating: "\u{7f}\u{2028}ü\"", count: 40)),
            sized(30_102, frameBytes: 1024), sized(30_103, frameBytes: 1025),
            F.note(30_104, kind: 14, content: String(repeating: "m", count: 700)),
            F.note(30_105, kind: 14, content: String(repeating: "L", count: 2200)),
        ]
    static let huge = F.note(30_106, kind: 14, content: String(repeating: "h", count: RelayWireContract.maxFrameBytes.value + 10))
    /// Each publishable event's JSON length as frames write it.
    static let publishable: [String: VerifiedEvent] = Dictionary(uniqueKeysWithValues: (published + [huge] + F.many).map { ($0.id, $0) })
    static let jsonBytes: [String: Int] = publishable.mapValues { $0.jsonValue.jsonText.utf8.count }

    static let challenges = ["c1", "c2", "c3", "c4", "c5"]
    /// NIP-42 answers for created_at base + 300·k; the generator picks the one nearest `now` mostly.
    static let authTimes: [Int64] = (0..<16).map { F.baseTime + Int64($0) * 300 }
    /// Per challenge and time: alice's and bob's answers, one naming another relay, and one of
    /// alice's with 700 bytes of content, whose AUTH frame is over a 1,024-byte limit.
    static let answers: [String: [[ModelAuthAnswer]]] = Dictionary(
        uniqueKeysWithValues: challenges.map { c in
            (
                c,
                authTimes.map { t in
                    [alice, bob].map {
                        ModelAuthAnswer(event: try! $0.createNip42Authentication(challenge: c, relayURL: F.relay, createdAt: t), challenge: c)
                    }
                        + [
                            ModelAuthAnswer(
                                event: try! alice.createNip42Authentication(challenge: c, relayURL: "wss://other.example.com", createdAt: t),
                                challenge: c, wrongRelay: true),
                            ModelAuthAnswer(
                                event: try! alice.sign(
                                    UnsignedEvent(
                                        createdAt: t, kind: 22242, tags: [["relay", F.relay], ["challenge", c]],
                                        content: String(repeating: "a", count: 700))), challenge: c),
                        ]
                }
            )
        })
    static let wrongKind: [String: ModelAuthAnswer] = Dictionary(
        uniqueKeysWithValues: challenges.map { c in
            (
                c,
                ModelAuthAnswer(
                    event: try! alice.sign(
                        UnsignedEvent(createdAt: F.baseTime, kind: 1, tags: [["relay", F.relay], ["challenge", c]], content: "")),
                    challenge: c, wrongKind: true)
            )
        })
    static let okMessages = [
        "", "duplicate: exists", "invalid: bad signature", "rate-limited: slow down", "auth-required: you must auth",
        "ERROR: auth-required: x", "blocked: no", "error: try later", "pow: 8", "whatever", "auth-required: again",
    ]
    static let closedMessages = [
        "auth-required: you must auth", "ERROR: auth-required: x", "blocked: no", "", "error: try later",
        "rate-limited: slow down", "restricted: members only", "invalid: bad filter", "whatever: x",
    ]
    static let invalidTexts: [(String, SoftchatErrorCode)] = [
        ("nope", .invalidRelayFrame), (#"["EVENT","a"]"#, .invalidRelayFrame),
        (#"["OK","x",true,""]"#, .invalidRelayFrame), (#"["AUTH",""]"#, .invalidRelayAuthentication),
    ]

    enum Output: Equatable {
        case actions([RelaySessionAction])
        case frames([OutboundRelayFrame])
        case none
        var summaries: [String] {
            switch self {
            case .actions(let a): a.map(modelSummary)
            case .frames(let f): f.map(modelSummary)
            case .none: []
            }
        }
    }

    struct Stats: CustomStringConvertible {
        var n: [String: Int] = [:]
        subscript(_ key: String) -> Int {
            get { n[key, default: 0] }
            set { n[key] = newValue }
        }
        mutating func add(_ other: Stats) { for (k, v) in other.n { self[k] += v } }
        var description: String { n.keys.sorted().map { "\($0)=\(n[$0]!)" }.joined(separator: " ") }
    }

    /// One sequence: the model, the session under test, and its twin that only sees successful calls.
    struct Run {
        var rng: WireRNG
        /// One sequence in 48 (EVENTS and EVENT-only alike) also makes bursts of subscriptions,
        /// counts and large publishes, to reach the bounds, and scripts one round (`plan`) that
        /// fills the outbound queue.
        let bulk: Bool
        /// One sequence in 10 passes no time to any call but handleTimeout.
        let timeless: Bool
        var model: SessionModel
        let main: RelaySession, twin: RelaySession
        var now: Int64 = F.baseTime
        var failure: String?
        /// The latest calls (described only when a sequence fails).
        var trail: [ModelOp] = []
        var stats = Stats()
        /// The write an unnamed OK being received answers (in-order correlation; the one thing
        /// below taken from the model, as the session's outputs do not name it when it is held
        /// for an auth resend).
        var correlated: String?
        // Kept from the session's own outputs, independently of the model:
        /// the delivery ids of frames drained and not yet confirmed written, and which of them an
        /// OK answered meanwhile;
        var outstanding: [(ids: [String], answered: Set<String>)] = []
        /// events published and without a retryable or terminal decision since;
        var held: Set<String> = []
        /// terminal decisions seen.
        var terminal: [String: DeliveryState] = [:]
        /// A scripted round under way (once in a bulk sequence): a subscription's retry or auth
        /// replay that falls due while the outbound queue is full.
        var plan: [PlanStep] = []
        var fillSerial = 0, plannedOnce = false

        enum PlanStep {
            case op(ModelOp)
            /// Control frames until the outbound queue holds all but `leave` of its bound: CLOSEs of
            /// COUNTs that went out, and COUNTs under fresh ids (as far as the reconnect room allows).
            case fill(leave: Int)
            /// handleTimeout past every subscription retry.
            case lateTimeout
            /// Two control frames handed out and confirmed written: room for two REQs.
            case makeRoom
            /// Answer the current challenge; then the relay accepts our AUTH.
            case answerChallenge, acceptAuth
            /// The transport is lost and the filling COUNTs are cancelled (no frames while
            /// disconnected), so the rest of the sequence does not carry a thousand of them.
            case unfill
        }

        init(seed: UInt64) {
            rng = WireRNG(seed: seed)
            bulk = seed % 96 == 3 || seed % 96 == 50
            var c = WireRNG(seed: seed ^ 0xC0F1_6000_0000_0001)
            func pick<T>(_ items: [T]) -> T { items[Int(c.next() % UInt64(items.count))] }
            let config = RelaySessionConfig(
                supportsEventsBatch: seed % 2 == 0, reconnectBaseDelaySeconds: 1, reconnectMaxDelaySeconds: [1, 2, 8, 300][Int(seed / 2 % 4)],
                reconnectResetAfterSeconds: [0, 5, 30, 60][Int(seed / 8 % 4)], jitterSeed: Int64(bitPattern: seed),
                sinceOverlapSeconds: Int64(seed / 32 % 21),
                correlateUnnamedAcknowledgements: pick([false, false, true]),
                relayURL: pick([nil, F.relay, "wss://Relay.Example.COM:443/"] as [String?]),
                maxMessageBytes: pick([nil, nil, 1024, 1500, 4096] as [Int64?]), acknowledgementTimeoutSeconds: pick([10, 10, 30, 120]),
                authenticationWaitSeconds: pick([5, 20]), authenticationWindowSeconds: pick([600, 600, 60]),
                answersAuthentication: pick([true, true, true, false]))
            timeless = c.next() % 10 == 0
            model = SessionModel(config: config, pool: SessionModelTests.pool, jsonBytes: SessionModelTests.jsonBytes)
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
            case .cancelCount(let id): try s.cancelCount(id: id)
            case .publish(let events): try s.publish(events)
            case .handleTimeout(let now): return .actions(try s.handleTimeout(now: now))
            case .drain(let max): return .frames(try s.drainOutbound(max: max))
            case .confirmSent(let ids, let now): try s.confirmSent(ids, now: now)
            case .receive(let input, let now): return .actions(try s.receive(input.text, now: now))
            case .confirmIngested(let id): try s.confirmIngested(id)
            case .authenticate(let answer, let now): return .actions(try s.authenticate(answer.event, now: now))
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
            case .close: return model.close()
            case .subscribe(let id, let idx): return model.subscribe(id, idx, inputError: inputError(id, idx))
            case .unsubscribe(let id): return model.unsubscribe(id)
            case .count(let id, let idx): return model.count(id, idx, inputError: inputError(id, idx))
            case .cancelCount(let id): return model.cancelCount(id)
            case .publish(let events): return model.publish(events)
            case .handleTimeout(let now): return model.handleTimeout(now)
            case .drain(let max): return model.drain(max)
            case .confirmSent(let ids, let now): return model.confirmSent(ids, now: now)
            case .receive(let input, let now): return model.receive(input, now: now)
            case .confirmIngested(let id): return model.confirmIngested(id)
            case .authenticate(let answer, let now): return model.authenticate(answer, now: now)
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
            stats["steps"] += 1
            if trail.count == 16 { trail.removeFirst() }
            trail.append(op)
            let before = main.snapshot()
            let pollBefore = main.pollTimeout()
            let attemptBefore = model.attempt
            if case .receive(.ok(nil, _, _), _) = op { correlated = model.correlationTarget } else { correlated = nil }
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
                stats["rejected"] += 1
                if code == .relaySessionQueueFull { stats["queueFull"] += 1 }
                if case .close = op { stats["closeRefused"] += 1 }
                guard error.code == code else { return fail("\(op): expected \(code.rawValue), got \(error)") }
                guard main.snapshot() == before, main.snapshot() == twin.snapshot(), main.pollTimeout() == pollBefore,
                    twin.pollTimeout() == pollBefore
                else { return fail("\(op): the rejected call changed the session") }
                return nil
            case (.fail(let code), .success(let out)):
                return fail("\(op): expected \(code.rawValue), but it succeeded with \(out.summaries)")
            case (.ok(let summaries), .failure(let error)):
                return fail("\(op): expected \(summaries), but it failed with \(error)")
            case (.ok(let summaries), .success(let out)):
                guard out.summaries == summaries else { return fail("\(op):\n expected \(summaries)\n got      \(out.summaries)") }
                guard (try? Self.perform(op, on: twin)) == out else { return fail("\(op): the twin session answered differently") }
                if case .transportLost = op, model.attempt == 1, attemptBefore > 0 { stats["resets"] += 1 }
                return checkAfter(op, out) ? out : nil
            }
        }

        mutating func checkAfter(_ op: ModelOp, _ out: Output) -> Bool {
            let s = main.snapshot()
            let m = model.snapshotKey
            guard modelSnapshotKey(s) == m, s == twin.snapshot()
            else { return fail("\(op): snapshot \(s) but the model has \(m)") != nil }
            let poll = main.pollTimeout()
            guard poll == model.pollTimeout(), poll == twin.pollTimeout()
            else { return fail("\(op): pollTimeout \(poll as Any) but the model has \(model.pollTimeout() as Any)") != nil }
            guard s.subscriptionIDs.count <= RelaySessionContract.maxSubscriptions.value,
                s.outboundFrames <= RelaySessionContract.maxOutboundFrames.value,
                s.pendingPublishes <= RelayPublishContract.maxPendingPublishes.value,
                s.awaitingPersistence <= RelayIngestionContract.maxAwaitingPersistence.value
            else { return fail("\(op): a bound is exceeded: \(s)") != nil }
            switch op {
            case .publish(let events): held.formUnion(events.map(\.id))
            case .transportLost, .cancel, .close: outstanding = []
            case .confirmSent(let ids, _):
                if let i = outstanding.firstIndex(where: { $0.ids == ids }) { outstanding.remove(at: i) }
            case .receive(.ok(let named, _, _), _):
                // an OK (named, or unnamed and correlated in hand-out order) may overtake confirmSent
                if let id = named ?? correlated {
                    for i in outstanding.indices where outstanding[i].ids.contains(id) { outstanding[i].answered.insert(id) }
                }
            default: break
            }
            switch out {
            case .none: break
            case .frames(let frames):
                var seen: Set<String> = []
                // an event may be in a second unconfirmed frame only when the relay already answered the first copy
                let before = Set(outstanding.flatMap { $0.ids.filter { [answered = $0.answered] in !answered.contains($0) } })
                for f in frames {
                    guard f.frame.utf8.count <= model.frameLimit
                    else { return fail("\(op): a \(f.frame.utf8.count)-byte frame, over the limit of \(model.frameLimit)") != nil }
                    for id in f.deliveryEventIDs {
                        guard seen.insert(id).inserted else { return fail("\(op): event \(id.prefix(8)) in two frames of one drain") != nil }
                        guard !before.contains(id)
                        else { return fail("\(op): event \(id.prefix(8)) drained again while an earlier frame with it is unconfirmed") != nil }
                    }
                    outstanding.append((f.deliveryEventIDs, []))
                    if f.deliveryEventIDs.count > 1 { stats["batchFrames"] += 1 }
                }
            case .actions(let actions):
                for a in actions {
                    stats[a.kind.rawValue] += 1
                    if let d = a.decision {
                        guard terminal[d.eventID] == nil
                        else { return fail("\(op): \(d.state) for \(d.eventID.prefix(8)) after a terminal \(terminal[d.eventID]!)") != nil }
                        if d.state.isTerminal { terminal[d.eventID] = d.state }
                        stats["decision." + d.category.rawValue] += 1
                        if held.remove(d.eventID) == nil { stats["lateDecision"] += 1 }
                    }
                    if let retry = a.retryDelayMilliseconds { stats[retry == 0 ? "closedReplayAtOnce" : "closedRetryScheduled"] += 1 }
                    if a.kind == .notice, a.eventID != nil { stats["okNotice"] += 1 }
                    if a.kind == .persistEvent {
                        if case .receive(.event(_, _, _, false), _) = op { stats["reoffered"] += 1 }
                        guard let e = a.event, (try? VerifiedEvent(json: e.jsonValue)) == e, let entry = model.awaiting[e.id],
                            entry.event.sig == e.sig,
                            entry.filters.contains(where: { SessionModelTests.pool[$0].matches(e) })
                        else { return fail("\(op): persistEvent for an unverified or non-matching event") != nil }
                    }
                    if a.kind == .scheduleReconnect {
                        let delay = a.delayMilliseconds ?? -1
                        guard delay >= model.nominalDelay / 2, delay <= model.nominalDelay,
                            model.nominalDelay <= model.config.reconnectMaxDelaySeconds * 1000
                        else { return fail("\(op): delay \(delay) ms outside [\(model.nominalDelay / 2), \(model.nominalDelay)]") != nil }
                    }
                }
            }
            // nothing is stranded: every event the session counts is one published without a decision since
            guard s.pendingPublishes == held.count
            else { return fail("\(op): the session holds \(s.pendingPublishes) publishes, \(held.count) are published and undecided") != nil }
            return true
        }

        // MARK: Generating calls

        mutating func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
        mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        mutating func filterIndexes() -> [Int] {
            (0..<(chance(30) ? 2 : 1)).map { _ in chance(4) ? -1 : Int(rng.next() % UInt64(SessionModelTests.pool.count)) }
        }
        /// The `now` of a call: mostly the current time, sometimes none (always none when timeless).
        mutating func time() -> Int64? { timeless || chance(10) ? nil : now }

        /// An answer to `challenge`: mostly created near now, by alice or bob; sometimes naming another relay.
        mutating func answer(_ challenge: String) -> ModelAuthAnswer {
            let nearest = Int(max(0, min(Int64(SessionModelTests.authTimes.count - 1), (now - F.baseTime + 150) / 300)))
            let byTime = SessionModelTests.answers[challenge]![chance(85) ? nearest : Int(rng.next() % UInt64(SessionModelTests.authTimes.count))]
            return chance(10) ? byTime[2] : chance(model.frameLimit <= 1024 ? 15 : 5) ? byTime[3] : pick(Array(byTime[0..<2]))
        }

        mutating func relayInput() -> ModelRelayInput {
            let roll = rng.next() % 100
            let subs = model.subOrder
            switch roll {
            case 0..<40:
                let waiting = model.awaiting.keys.sorted().map { model.awaiting[$0]!.event }
                let e = !waiting.isEmpty && chance(30) ? pick(waiting) : pick(SessionModelTests.received)
                let sub = !subs.isEmpty && chance(85) ? pick(subs) : "zz"
                let r = rng.next() % 100
                return .event(sub, e, json: r < 75 ? e.jsonValue : r < 90 ? e.badSignatureJSON : e.tamperedContentJSON, valid: r < 75)
            case 40..<70:
                let held = model.bySeq
                let written = held.filter { model.deliveries[$0]!.stage != .pending }
                let r = rng.next() % 100
                let id: String?
                if let auth = model.authEventID, chance(35) {
                    id = auth
                } else if r < 45 && !written.isEmpty {
                    id = pick(written)
                } else if r < 60 && !held.isEmpty {
                    id = pick(held)  // pending, perhaps drained: an OK that overtakes confirmSent
                } else if r < 72 && !model.timedOut.isEmpty {
                    id = pick(model.timedOut.sorted())
                } else if r < 78 && !model.settled.isEmpty {
                    id = pick(model.settled.sorted())
                } else if r < 90 {
                    id = nil
                } else {
                    id = pick(SessionModelTests.published).id
                }
                return .ok(id: id, accepted: chance(40), message: pick(SessionModelTests.okMessages))
            case 70..<78: return .auth(model.challenge != nil && chance(30) ? model.challenge! : pick(SessionModelTests.challenges))
            case 78..<86:
                return .closed(subs.isEmpty || chance(15) ? pick(["zz", "n1"]) : pick(subs), pick(SessionModelTests.closedMessages))
            case 86..<89: return .eose(subs.isEmpty ? "zz" : pick(subs))
            case 89..<91: return .notice(pick(["rate-limited", "restricted: permission denied"]))
            case 91..<96: return .count(!model.countOrder.isEmpty && chance(80) ? pick(model.countOrder) : "n9", Int64(rng.next() % 100))
            default:
                let (text, code) = pick(SessionModelTests.invalidTexts)
                return .invalid(text, code)
            }
        }

        mutating func planned(_ step: PlanStep) -> [ModelOp] {
            switch step {
            case .op(let op): return [op]
            case .fill(let leave):
                // cancelling a COUNT that went out queues its CLOSE and frees room for another COUNT
                let need = SessionModel.maxOutbound - leave - model.outbound
                let sent = model.countOrder.filter { id in !model.queue.contains { $0.purpose == .count(id) } }.prefix(Swift.max(0, need))
                let room = Swift.min(need - sent.count, SessionModel.maxOutbound - 1 - model.subs.count - model.counts.count + sent.count)
                return sent.map { .cancelCount($0) }
                    + (0..<Swift.max(0, room)).map { _ in
                        fillSerial += 1
                        return .count("q\(fillSerial)", [0])
                    }
            case .unfill:
                return [.transportLost(now)] + model.countOrder.filter { $0.hasPrefix("q") }.map { .cancelCount($0) }
            case .lateTimeout:
                now += model.config.reconnectMaxDelaySeconds + 1
                return [.handleTimeout(now)]
            case .makeRoom:
                return [.drain(2), .confirmSent([], now), .confirmSent([], now)]
            case .answerChallenge:
                guard let challenge = model.challenge else { return [] }
                let nearest = Int(max(0, min(Int64(SessionModelTests.authTimes.count - 1), (now - F.baseTime + 150) / 300)))
                return [.authenticate(SessionModelTests.answers[challenge]![nearest][0], now)]
            case .acceptAuth:
                guard let auth = model.authEventID else { return [] }
                return [.receive(.ok(id: auth, accepted: true, message: ""), now)]
            }
        }

        /// Scripts a round that reaches the outbound bound from a rule other than a host call:
        /// a CLOSED error whose retry falls due while the queue is full, or a CLOSED
        /// auth-required whose replay after the accepted AUTH finds the queue full, then another
        /// auth-required CLOSED once authenticated: both go to the retry timer, are postponed
        /// while the queue stays full, and go out once two frames made room.
        mutating func startPlan() {
            let k = rng.next() % 3
            let id = "r\(k)"
            let other = "r\((k + 1) % 3)"
            let setup: [PlanStep] = [.op(.subscribe(id, [1])), .op(.subscribe(other, [0])), .op(.drain(256)), .op(.drain(256))]
            let fresh = SessionModelTests.challenges.filter { $0 != model.challenge && !model.answeredChallenges.contains($0) }
            if chance(35) || model.holding || model.authenticated || model.authWaitEnded || !model.config.answersAuthentication || fresh.isEmpty {
                // two retries fall due together: each is postponed, not only the first
                plan =
                    setup + [
                        .op(.receive(.closed(id, "error: later"), now)), .op(.receive(.closed(other, "rate-limited: slow"), now)),
                        .fill(leave: 0), .lateTimeout, .unfill,
                    ]
            } else {
                // filled to one short of the bound first: the AUTH (authenticate needs room) takes the last slot
                plan =
                    setup + [
                        .op(.receive(.closed(id, "auth-required: first"), now)), .fill(leave: 1),
                        .op(.receive(.auth(pick(fresh)), now)), .answerChallenge, .acceptAuth,
                        .op(.receive(.closed(other, "auth-required: again"), now)), .lateTimeout, .makeRoom, .lateTimeout, .unfill,
                    ]
            }
        }

        mutating func nextOps() -> [ModelOp] {
            if !plan.isEmpty { return planned(plan.removeFirst()) }
            now += chance(8) ? Int64(rng.next() % 700) : Int64(rng.next() % 6)
            if bulk, !plannedOnce, model.conn == .connected, chance(8) {
                plannedOnce = true
                startPlan()
                return planned(plan.removeFirst())
            }
            if model.conn != .connected && chance(50) {
                return [model.conn == .connecting ? .transportConnected(time()) : .connect]
            }
            // steer towards complete rounds: answer a challenge, acknowledge the answer, confirm writes, run due timers
            if model.conn == .connected, let challenge = model.challenge, model.authEventID == nil, chance(20) {
                return [.authenticate(answer(challenge), time())]
            }
            if let auth = model.authEventID, model.drained.isEmpty, chance(30) {
                let waiting = model.deliveries.values.contains { $0.stage == .awaitingAuth }
                return [.receive(.ok(id: auth, accepted: chance(waiting ? 50 : 80), message: chance(50) ? "" : "restricted: no"), time())]
            }
            // events held for authentication: answer the challenge, then the relay accepts, refuses or
            // stays silent until the wait runs out
            if model.conn == .connected, model.deliveries.values.contains(where: { $0.stage == .awaitingAuth }), chance(25) {
                if model.holding, let until = model.authWaitUntil, chance(30) {
                    now = max(now, until)
                    return [.handleTimeout(now)]
                }
                if let auth = model.authEventID { return [.receive(.ok(id: auth, accepted: chance(50), message: "restricted: no"), time())] }
                if let challenge = model.challenge, chance(70) { return [.authenticate(answer(challenge), time())] }
                return [.receive(.auth(pick(SessionModelTests.challenges)), time())]
            }
            // auth-required once already authenticated (or past the AUTH wait): the event is sent
            // again, the REQ replayed, at once
            if model.authenticated && chance(6) || model.authWaitEnded && chance(40) {
                let written = model.bySeq.filter { model.deliveries[$0]!.stage == .inFlight }
                if !written.isEmpty, chance(50) {
                    return [.receive(.ok(id: pick(written), accepted: false, message: "auth-required: again"), time())]
                }
                let live = model.subOrder.filter { model.liveREQs.contains($0) }
                if !live.isEmpty, chance(70) { return [.receive(.closed(pick(live), "auth-required: x"), time())] }
                if !model.subOrder.isEmpty { return [.receive(.closed(pick(model.subOrder), "auth-required: x"), time())] }
            }
            if let first = model.drained.first, chance(25) { return [.confirmSent(first.ids, time())] }
            // a COUNT that went out cancelled (its CLOSE queued); then its id counted again, or the
            // relay's late answer to it
            if model.conn == .connected, chance(6) {
                let sent = model.countOrder.filter { id in !model.queue.contains { $0.purpose == .count(id) } }
                if !sent.isEmpty { return [.cancelCount(pick(sent))] }
            }
            if model.conn == .connected, !model.closedCounts.isEmpty, chance(10) {
                let id = pick(model.closedCounts)
                return [chance(50) ? .count(id, filterIndexes()) : .receive(.count(id, Int64(rng.next() % 100)), time())]
            }
            // a subscription unsubscribed while the relay has its REQ, subscribed and unsubscribed
            // again before that CLOSE went out: no second CLOSE
            let closing = model.queue.compactMap { f -> String? in
                if case .close(let id) = f.purpose, model.liveREQs.contains(id), model.subs[id] == nil { return id }
                return nil
            }
            if !closing.isEmpty, chance(20) {
                let id = pick(closing)
                return [.subscribe(id, filterIndexes()), .unsubscribe(id)]
            }
            // an event the relay answered (retryable) before its write was confirmed, published again at once
            let answeredEarly = model.drained.flatMap(\.ids).filter { model.deliveries[$0] == nil && !model.settled.contains($0) }
            if !answeredEarly.isEmpty, chance(30) { return [.publish([SessionModelTests.publishable[pick(answeredEarly)]!])] }
            if let due = model.pollTimeout(), chance(8) {
                now = max(now, due + pick([-1, 0, 0, 1]))
                return [.handleTimeout(now)]
            }
            var roll = rng.next() % 1000
            if bulk && chance(25) { roll = 965 + rng.next() % 30 } else if !bulk && roll >= 965 { roll = 545 + roll % 300 }
            switch roll {
            case 0..<30: return [.connect]
            case 30..<60: return [.transportConnected(time())]
            case 60..<100: return [.transportLost(time())]
            case 100..<120: return [.cancel]
            case 120..<125: return [.close]
            case 125..<205:
                return [
                    .subscribe(chance(4) ? String(repeating: "x", count: 65) : pick(["a", "b", "c", "d", "a", "b", "c", "d", "n1"]), filterIndexes())
                ]
            case 205..<235: return [.unsubscribe(!model.subOrder.isEmpty && chance(80) ? pick(model.subOrder) : pick(["a", "zz"]))]
            case 235..<255: return [.count(pick(["n1", "n2", "n3", "a"]), filterIndexes())]
            case 255..<265: return [.cancelCount(!model.countOrder.isEmpty && chance(80) ? pick(model.countOrder) : pick(["n1", "n7"]))]
            case 265..<345:
                let n = chance(3) ? 0 : Int(rng.next() % 5) + 1
                var batch = (0..<n).map { _ in chance(80) ? pick(Array(SessionModelTests.published[0..<12])) : pick(SessionModelTests.published) }
                if chance(1) { batch.append(SessionModelTests.huge) }
                if chance(8), let first = batch.first { batch.append(first) }
                return [.publish(batch)]
            case 345..<365: return [.handleTimeout(now)]
            case 365..<465: return [.drain(chance(12) ? pick([0, 257, -3]) : pick([1, 2, 3, 256, 256, Int(rng.next() % 256) + 1]))]
            case 465..<545:
                let ids = !model.drained.isEmpty && chance(80) ? pick(model.drained).ids : chance(50) ? [] : [pick(SessionModelTests.published).id]
                return [.confirmSent(ids, time())]
            case 545..<845: return [.receive(relayInput(), time())]
            case 845..<915:
                return [
                    .confirmIngested(!model.awaiting.isEmpty && chance(85) ? pick(model.awaiting.keys.sorted()) : pick(SessionModelTests.received).id)
                ]
            case 915..<965:
                let challenge = model.challenge != nil && chance(70) ? model.challenge! : pick(SessionModelTests.challenges)
                if chance(10) { return [.authenticate(SessionModelTests.wrongKind[challenge]!, time())] }
                return [.authenticate(answer(challenge), time())]
            case 965..<977:
                let start = Int(rng.next() % 100)
                return (start..<start + 60).map { .subscribe("s\($0)", [0]) }
            case 977..<983: return (0..<150).map { _ in .count("k\(rng.next() % 1100)", [1]) }
            case 983..<995:
                // EVENT-only relays and small frame limits get one frame per event or two: smaller bursts keep the run short
                let size = model.config.supportsEventsBatch && model.frameLimit > 4096 ? 256 : 48
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
            let wantSubs = model.subOrder
            let wantCounts = model.countOrder
            let wantEvents = Set(model.deliveries.filter { $0.value.stage == .pending }.keys)
            var frames: [OutboundRelayFrame] = []
            while failure == nil, case .frames(let batch)? = step(.drain(256)), !batch.isEmpty {
                frames += batch
                for f in batch { step(.confirmSent(f.deliveryEventIDs, time())) }
            }
            guard failure == nil else { return }
            stats["freshChecks"] += 1
            var reqs: [String] = []
            var counts: [String] = []
            var events: [String] = []
            for f in frames {
                switch try? parseClientRelayFrame(f.frame) {
                case .req(let id, let filters)?:
                    reqs.append(id)
                    for (filter, i) in zip(filters, model.subs[id]?.filters ?? []) {
                        let own = SessionModelTests.ownSince[i]
                        let want =
                            model.subs[id]!.newest.map { Swift.max(own ?? Int64.min, Swift.max(0, $0 - model.config.sinceOverlapSeconds)) } ?? own
                        if filter.since != want { _ = fail("REQ \(id): since \(filter.since as Any), want \(want as Any)") }
                    }
                case .count(let id, _)?: counts.append(id)
                case .event(let e)?: events.append(e.id)
                case .events(let list)?: events += list.map(\.id)
                default: _ = fail("unexpected frame after reconnect: \(f.frame.prefix(80))")
                }
            }
            if reqs != wantSubs || counts != wantCounts || events.count != wantEvents.count || Set(events) != wantEvents {
                _ = fail(
                    "fresh connection sent REQs \(reqs) COUNTs \(counts) \(events.count) events; want \(wantSubs) \(wantCounts) \(wantEvents.count)")
            }
        }

        /// End of a sequence: reconnect, check the fresh connection, offer every event still
        /// awaiting persistence again by re-sending it, and confirm them all; then close must
        /// refuse while deliveries are held, cancel must release every one, and close succeed.
        mutating func settle() {
            guard !model.closed, failure == nil else { return }
            if model.conn == .connected || model.conn == .connecting { step(.transportLost(time())) }
            step(.connect)
            step(.transportConnected(time()))
            checkFreshConnection()
            for id in model.awaiting.keys.sorted() where !model.subOrder.isEmpty {
                let event = model.awaiting[id]!.event
                guard case .actions(let a)? = step(.receive(.event(model.subOrder[0], event, json: event.jsonValue, valid: true), time())),
                    a.map(\.kind) == [.persistEvent]
                else {
                    _ = fail("awaiting event \(id) was not offered again after the reconnect")
                    return
                }
            }
            for id in model.awaiting.keys.sorted() { step(.confirmIngested(id)) }
            if failure == nil, main.snapshot().awaitingPersistence != 0 { _ = fail("events still await persistence after settling") }
            if !model.deliveries.isEmpty {
                step(.close)
                if failure == nil, main.snapshot().state == "closed" { _ = fail("close succeeded while deliveries were held") }
            }
            step(.cancel)
            if failure == nil, main.snapshot().pendingPublishes != 0 || !held.isEmpty { _ = fail("cancel left deliveries held") }
            step(.close)
            if failure == nil, main.snapshot().state != "closed" || main.pollTimeout() != nil { _ = fail("close did not release the session") }
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
            total.add(run.stats)
            total.add(run.model.tally)
            total["sequences"] += 1
        }
        // the sequences reach what they are meant to check
        #expect(total["steps"] > 20 * perChunk && total["rejected"] > perChunk && total["persistEvent"] > perChunk / 2, "\(total)")
        #expect(
            total["reoffered"] > 0 && total["queueFull"] > 0 && total["authenticated"] > 0 && total["resets"] > 0
                && total["freshChecks"] > perChunk, "\(total)")
        let reached = [
            "batchFrames", "split", "tooLarge", "decision.cancelled", "decision.timeout", "decision.transport-lost",
            "decision.auth-required", "lateDecision", "okNotice", "okBeforeConfirm", "authHeld", "authWaitEnded", "authResend",
            "authResendAtOnce", "closedRetryScheduled", "closedReplayAtOnce", "retriedREQ", "cancelCount", "countIDRefused",
            "correlated", "closeRefused", "authOutsideWindow", "authWrongRelay", "challengeAgainOnNewConnection", "challengeWaitsForAnswer",
            "reqTooLarge", "countTooLarge", "authTooLarge", "countWentOut", "closeOverReplacement", "closedBehindReplacement",
            "confirmedStale", "confirmedAwaitingAuth", "deadlineStarted", "authWaitReplay", "authResendAfterWait",
            "closedReplayAfterWait", "correlatedBeforeConfirm", "replayBounded", "retryPostponed",
            "closedCountRefused", "closedCountAnswer", "closedReplayPostponed", "replayRetried", "authRefusedAfterWait",
            "closeAlreadyQueued",
        ]
        #expect(reached.allSatisfy { total[$0] > 0 }, "not reached: \(reached.filter { total[$0] == 0 })")
    }
}
