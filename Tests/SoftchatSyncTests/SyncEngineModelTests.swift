import SoftchatCore
import SoftchatJSON
import Testing

@testable import SoftchatSync

/// The engine against the relay-quirks simulator: each seed draws a random mix of relays, each
/// with its own rules (`Quirk`: caps, `until` conventions, subscription and rate limits refused
/// each way, CLOSED at any point, NIP-11 absent, slow or wrong, a message length limit, NIP-77
/// answered, refused in every NEG-ERR form, by NOTICE or by silence, late and backdated
/// arrivals, clock skew, silence) and I/O faults (cuts at any frame, failed commits). A failing
/// seed replays exactly.
///
/// After every step: no `synced` while the relay holds a matching event the account lacks
/// (of those it held when the connection opened and that did not arrive past the horizon), no
/// frame over a limit the relay stated, no loop without input. At the end, after a fault-free
/// tail: every event a relay holds for a subscription is in the account, each committed once;
/// every intent terminal by what its relay said; no lease held after stop. Each run must reach
/// every quirk, and deliberate bugs in the simulator's relay or account must make it fail.
@Suite struct SyncEngineModelTests {
    /// Seeds per chunk, chunks, steps per seed: 4 × 10 × 2,600 = 104,000 steps per run.
    static let chunks = 4
    static let seedsPerChunk = 10
    static let stepsPerSeed = 2_600
    /// The most actions one `pump()` may return: far above any real step (a page of events, its
    /// commit, the next REQs), far below a loop.
    static let actionBound = 5_000
    /// The deeper resync's interval in the model (a fifteen-minute stand-in for hours).
    static let deepInterval: Int64 = 900

    struct Outcome {
        var steps = 0
        var failures: [String] = []
        var seen: [Quirk: Int] = [:]
        var mostActions = 0
    }

    /// Deliberate bugs, each of which the checks must catch.
    enum Mutation: CaseIterable {
        /// The relay holds an event it never sends.
        case relayHidesAnEvent
        /// The account reports a commit's events stored and keeps none.
        case accountLosesACommit
        /// The account takes a write for the relay's acceptance.
        case accountAcceptsOnWrite
    }

    @Test(arguments: 0..<chunks)
    func randomQuirkyRelaysAndFaultsLoseNothingMisreportNothingAndReachEveryQuirk(chunk: Int) {
        var coverage = QuirkCoverage()
        var steps = 0
        var mostActions = 0
        for i in 0..<Self.seedsPerChunk {
            let seed = UInt64(chunk * Self.seedsPerChunk + i + 1)
            let outcome = Self.run(seed: seed)
            steps += outcome.steps
            mostActions = max(mostActions, outcome.mostActions)
            coverage.add(outcome.seen)
            #expect(outcome.failures.isEmpty, "seed \(seed): \(outcome.failures.count) failures, e.g. \(outcome.failures.prefix(4))")
        }
        #expect(steps == Self.seedsPerChunk * Self.stepsPerSeed)
        #expect(coverage.missing.isEmpty, "chunk \(chunk): quirks never reached: \(coverage.missing); \(coverage.summary)")
        #expect(mostActions <= Self.actionBound, "chunk \(chunk): \(mostActions) actions in one pump")
    }

    @Test func theModelRunsAtLeastOneHundredThousandStepsPerRun() {
        #expect(Self.chunks * Self.seedsPerChunk * Self.stepsPerSeed >= 100_000)
    }

    @Test(arguments: Mutation.allCases)
    func aDeliberateBugMakesTheModelFail(mutation: Mutation) {
        // The first seeds whose runs reach the bug's conditions (a rejection, a commit).
        let failed = (1...4).contains { seed in !Self.run(seed: UInt64(seed), mutation: mutation).failures.isEmpty }
        #expect(failed, "\(mutation) went unnoticed")
    }

    /// One seeded run; its failures, coverage and step count.
    static func run(seed: UInt64, mutation: Mutation? = nil) -> Outcome {
        var out = Outcome()
        var rng = SplitMix64(seed: seed)
        let relayCount = 1 + rng.below(3)
        let w = EngineWorld(relayCount: relayCount)
        let base = w.unix - 1_000
        let horizon: Int64 = 300
        var skew = [Int64](repeating: 0, count: relayCount)
        for r in 0..<relayCount { drawRules(w, r, seed: seed, skew: &skew[r]) }
        // Some history first, in runs of equal created_at.
        var insertedAt: [String: Int64] = [:]
        var beyondHorizon: Set<String> = []
        for i in 0..<(20 + rng.below(40)) {
            let e = Fixtures.event(base + Int64(rng.below(120)), kind: [1, 7][rng.below(2)], content: "h\(seed)-\(i)")
            for r in 0..<relayCount where rng.below(3) != 0 { w.relays[r].insert(e) }
        }
        if mutation == .relayHidesAnEvent, let e = w.relays[0].stored.first { w.relays[0].hides.insert(e.id) }
        w.account.acceptsOnWrite = mutation == .accountAcceptsOnWrite
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil), ("reactions", [#"{"kinds":[7]}"#], nil)]
        let kinds = ["notes": 1, "reactions": 7]

        // No `synced` while the relay holds a matching event the account lacks: of those stored
        // before the connection opened, dated up to the window's end, not in a second reported
        // incomplete, and not arrived past the horizon (those are the end's check).
        w.onReport = { event in
            guard case .synced(let url, let sub, _, let outcome) = event, let r = w.urls.firstIndex(of: url) else { return }
            let lacking = w.relays[r].stored.filter { e in
                e.kind == kinds[sub] && e.createdAt <= outcome.cursor && (insertedAt[e.id] ?? 0) <= w.openedAt[r]
                    && !beyondHorizon.contains(e.id) && !w.relays[r].overOurBound.contains(e.id) && !outcome.incompleteSeconds.contains(e.createdAt)
                    && w.account.events[e.id] == nil
            }
            if !lacking.isEmpty {
                let e = lacking[0]
                out.failures.append(
                    "synced \(sub)@\(r) at unix+\(w.unix - base) while \(lacking.count) held there are missing, e.g. t+\(e.createdAt - base) inserted \(insertedAt[e.id] ?? 0) opened \(w.openedAt[r]) cursor+\(outcome.cursor - base) \(outcome.method) cap \(w.relays[r].cap) incl \(w.relays[r].inclusiveUntil) neg \(w.relays[r].negentropy)"
                )
            }
        }
        w.start { c in
            c.deepResyncIntervalSeconds = deepInterval
            c.acknowledgementTimeoutSeconds = 5
            c.keepaliveIntervalMilliseconds = 20_000
            c.readDeadlineMilliseconds = 5_000
            c.leaseSeconds = 30
        }
        var intents: [String] = []
        var injected = 0
        var published = 0
        for _ in 0..<stepsPerSeed {
            out.steps += 1
            let r = rng.below(relayCount)
            switch rng.below(100) {
            case 0..<40:
                w.completeOpens()
                w.deliver(r, max: 1 + rng.below(4))
            case 40..<52:
                w.advance(Int64(10 + rng.below(8_000)))
            case 52..<55:
                if w.connected[r] || w.connecting[r] { w.relays[r].saw(.cut) }
                w.cut(r)
            case 55..<65:
                // Arrives at a relay from elsewhere, dated by the relay's clock: now, backdated
                // within the horizon, ahead, or backdated past any horizon (stored late).
                let shift = [0, -Int64(rng.below(200)), Int64(rng.below(60)), -(horizon + 1 + Int64(rng.below(3 * 86_400)))][rng.below(4)]
                let e = Fixtures.event(w.unix + skew[r] + shift, kind: [1, 7][rng.below(2)], content: "x\(seed)-\(injected)")
                injected += 1
                insertedAt[e.id] = w.mono
                if skew[r] != 0 { w.relays[r].saw(.clockSkew) }
                if e.createdAt < w.unix - horizon {
                    beyondHorizon.insert(e.id)
                    w.relays[r].saw(.storedLateBeyondHorizon)
                }
                // One in fifteen is over our frame bound: skipped, but in its page's place.
                if rng.below(15) == 0 { w.relays[r].overOurBound.insert(e.id) }
                let frames = w.relays[r].publishFromElsewhere(e)
                if w.connected[r] { w.inbox[r] += frames }
            case 65..<70:
                // One in ten is large: past a message length limit some relays keep.
                let big = rng.below(10) == 0
                let content = big ? String(repeating: "b", count: 5_000) : "p\(seed)-\(published)"
                let e = Fixtures.event(w.unix, content: content)
                published += 1
                let targets = w.urls.filter { _ in rng.below(2) == 0 }
                intents += w.account.enqueue(e, relays: targets.isEmpty ? [w.urls[r]] : targets)
                w.handle(.workAvailable)
            case 70..<73:
                if w.connected[r] {
                    w.inbox[r] += w.relays[r].heldOKs
                    w.relays[r].heldOKs.removeAll()
                }
            case 73..<75:
                if w.connected[r] { w.inbox[r].append(RelayResponseFrame.notice(RelayMessage("noise \(out.steps)")).toJSON()) }
            case 75 where seed % 2 == 1:
                // Odd seeds only: the even ones check that nothing is committed twice.
                w.relays[r].saw(.failedCommit)
                w.account.failNextCommits += 1
            case 76:
                // Silence: the relay stops answering until cut (a half-open connection).
                if w.connected[r] {
                    w.relays[r].saw(.silence)
                    w.inbox[r].removeAll()
                }
            case 77:
                w.answerInformation()
            case 78 where mutation == .accountLosesACommit:
                w.account.losesNextCommit = true
            case 79:
                w.relays[r].saw(.renewalFailed)
                w.account.failRenewals += 1
            case 80:
                // Frozen past the lease (the wall clock moved on, the engine saw no time), and
                // another process claims what is free or expired and never answers for it: the
                // engine's renewal is stale, and the work comes back when the rival's lease ends.
                w.unix += w.account.leaseSeconds + 1
                let rival = w.account.answer(.claim(relayURL: w.urls[r], leaseID: "rival-\(seed)-\(out.steps)", max: 4), now: w.unix)
                if case .claimed(_?) = rival { w.relays[r].saw(.secondClaimer) }
            default:
                w.completeOpens()
                w.deliver(r)
            }
            for r in 0..<relayCount where !w.relays[r].overStatedLimits.isEmpty {
                out.failures.append("step \(out.steps): relay \(r) got \(w.relays[r].overStatedLimits)")
                w.relays[r].overStatedLimits.removeAll()
            }
            if w.runaway {
                out.failures.append("step \(out.steps): more than \(w.runawayActions) actions without input")
                return out
            }
        }
        // A fault-free tail: relays answer everything, every connection is renewed (a new
        // window). The relays' own rules stay: caps, conventions, limits, NIP-77 or not.
        w.answerInformation()
        for r in 0..<relayCount {
            w.relays[r].okRule = nil
            w.relays[r].closeRule = nil
            w.relays[r].midAnswerCloseRule = nil
            w.relays[r].reqRateRule = nil
            w.relays[r].negErrorRule = nil
            if w.connected[r] { w.inbox[r] += w.relays[r].heldOKs }
            w.relays[r].heldOKs.removeAll()
        }
        w.account.failNextCommits = 0
        w.account.failRenewals = 0
        w.account.losesNextCommit = false
        w.run(for: 2_000)
        // New connections, each after the deeper resync's interval: enough of them for its
        // windows to reach past the latest arrival (three days and an hour late, at most).
        for _ in 0..<7 {
            for r in 0..<relayCount { w.cut(r) }
            w.run(for: (deepInterval + 30) * 1_000)
        }

        // Nothing lost: every event a relay holds for a subscription is in the account, except in
        // a second the sync reported incomplete (a run of equal created_at longer than a page).
        var incomplete: [String: Set<Int64>] = [:]
        for case .synced(let url, _, _, let outcome) in w.reports { incomplete[url, default: []].formUnion(outcome.incompleteSeconds) }
        for r in 0..<relayCount {
            let missing = w.relays[r].stored.filter { e in
                (e.kind == 1 || e.kind == 7) && e.createdAt <= w.unix && w.account.events[e.id] == nil
                    && !w.relays[r].overOurBound.contains(e.id) && !(incomplete[w.urls[r]]?.contains(e.createdAt) ?? false)
            }
            if !missing.isEmpty {
                let late = missing.filter { beyondHorizon.contains($0.id) }.count
                out.failures.append("relay \(r): \(missing.count) held there missing (\(late) stored late past the horizon)")
            }
            if !(w.synced(r, "notes") && w.synced(r, "reactions")) { out.failures.append("relay \(r) not synced after the tail") }
        }
        // Nothing misreported: accepted and rejected only as the relay said (or, for a frame over
        // the length its NIP-11 states, as the engine refused to send it); all terminal.
        for id in intents {
            let intent = w.account.intents[id]!
            let r = w.urls.firstIndex(of: intent.relayURL)!
            let relay = w.relays[r]
            switch intent.state {
            case .accepted where relay.saidAccepted.contains(intent.eventID): break
            case .rejected where intent.category == .exhausted || relay.saidRejected.contains(intent.eventID): break
            case .rejected
            where intent.category == .invalid
                && relay.stated.maxMessageLength.map { limit in
                    w.account.events[intent.eventID]!.jsonText.utf8.count > limit - 20
                } == true:
                break
            default:
                out.failures.append("intent \(id) ended \(intent.state.rawValue)/\(intent.category.rawValue) without the relay saying so")
            }
        }
        if seed % 2 == 0 && w.account.duplicateCommits > 0 {
            out.failures.append("\(w.account.duplicateCommits) events committed twice")
        }
        w.handle(.stop)
        if !w.stopped { out.failures.append("not stopped") }
        if w.account.liveLeases > 0 { out.failures.append("\(w.account.liveLeases) leases held after stop") }
        out.mostActions = w.mostActionsPerPump
        for r in 0..<relayCount { for (quirk, n) in w.relays[r].seen { out.seen[quirk, default: 0] += n } }
        return out
    }

    /// Draws relay `r`'s rules; the draws come from their own generator, so one rule's draws do
    /// not shift another's.
    static func drawRules(_ w: EngineWorld, _ r: Int, seed: UInt64, skew: inout Int64) {
        var g = SplitMix64(seed: seed &* 7_919 &+ UInt64(r))
        let cap = [5, 8, 13, 500][g.below(4)]
        let inclusive = g.below(2) == 0
        w.relays[r].cap = cap
        w.relays[r].inclusiveUntil = inclusive
        w.relays[r].rng = SplitMix64(seed: seed &* 31 &+ UInt64(r))
        // A subscription limit, unstated, refused by a NOTICE alone (nostr-relay) or a CLOSED.
        let maxSubscriptions = [nil, 2, 3, 5, 32][g.below(5)]
        w.relays[r].maxSubscriptions = maxSubscriptions
        w.relays[r].refusesSubscriptionsWithClosed = g.below(2) == 0
        // A message length limit, stated or not.
        let maxMessageLength = [nil, 4_096, 16_384][g.below(3)]
        w.relays[r].maxMessageLength = maxMessageLength
        let statesLength = g.below(2) == 0
        // What NIP-11 tells: the truth (at once or slowly), nothing, or limits it does not keep.
        var truth = RelayLimits(maxMessageLength: statesLength ? maxMessageLength : nil, maxLimit: cap)
        truth.untilConvention = inclusive ? .inclusive : .exclusive
        // The subscription limit, stated or not (nostr-relay states none).
        truth.maxSubscriptions = g.below(2) == 0 ? maxSubscriptions : nil
        switch g.below(4) {
        case 0:
            w.limits[r] = truth
            w.relays[r].saw(.informationTrue)
        case 1:
            w.limits[r] = truth
            w.slowInformation[r] = true
            w.relays[r].saw(.informationSlow)
        case 2:
            w.limits[r] = nil
            w.relays[r].saw(.informationAbsent)
        default:
            var wrong = RelayLimits(maxMessageLength: statesLength ? maxMessageLength : nil, maxLimit: 500)
            wrong.maxSubscriptions = maxSubscriptions.map { $0 * 4 }
            w.limits[r] = wrong
            w.relays[r].saw(.informationWrong)
        }
        w.relays[r].stated = w.limits[r] ?? RelayLimits()
        // NIP-77: spoken (refusing some NEG-OPENs in every NEG-ERR form), or met by a NOTICE,
        // by silence, or by one NEG-ERR each time.
        switch g.below(5) {
        case 0, 1:
            w.relays[r].negentropy = .answer
            w.relays[r].negentropyMaxItems = [nil, 40][g.below(2)]
            w.relays[r].negentropyMessagesOverOurBound = [nil, 600][g.below(2)]
            w.relays[r].negErrorRule = { g in g.below(3) == 0 ? g.pick(Quirk.negentropyErrors) : nil }
        case 2: w.relays[r].negentropy = .notice
        case 3: w.relays[r].negentropy = .silent
        default: w.relays[r].negentropy = .error(Quirk.negentropyErrors[Int((seed &+ UInt64(r)) % 5)])
        }
        // The relay's clock: the client's, a little off, or an hour behind.
        skew = [0, 0, Int64(g.below(241)) - 120, -3_600][g.below(4)]
        w.relays[r].okRule = { _, g in
            switch g.below(20) {
            case 0: .silent
            case 1: .late
            case 2: .reject("invalid: refused")
            case 3, 4: .retry("rate-limited: slow down")
            case 5: .retry("error: try again")
            default: .accept
            }
        }
        if g.below(3) == 0 {
            w.relays[r].reqRateRule = { g in
                switch g.below(25) {
                case 0: .notice
                case 1: .closed
                default: nil
                }
            }
        }
        // Pages closed part-way through their answer, retryable or not.
        w.relays[r].midAnswerCloseRule = { id, g in
            guard id.contains("~p") || id.contains("~f") else { return nil }
            switch g.below(30) {
            case 0: return "error: query failed"
            case 1: return "rate-limited: slow down"
            default: return nil
            }
        }
        w.relays[r].closeRule = { _, g in
            switch g.below(40) {
            case 0: "error: busy"
            case 1: "rate-limited: later"
            default: nil
            }
        }
    }
}
