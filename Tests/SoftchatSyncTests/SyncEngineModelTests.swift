import SoftchatCore
import SoftchatJSON
import Testing

@testable import SoftchatSync

/// The engine against the relay-quirks simulator: each seed draws a random mix of relays, each
/// with its own rules (`Quirk`: caps, `until` conventions, subscription and rate limits refused
/// each way, CLOSED at any point, NIP-11 absent, slow or wrong, a message length limit, NIP-77
/// answered, refused in every NEG-ERR form, by NOTICE or by silence, late and backdated
/// arrivals, clock skew, silence, NIP-42 for reads and writes with our AUTH accepted or refused,
/// live feeds closed for good, subscription limits in nostr-relay's, strfry's and
/// nostr-rs-relay's words, NEG sessions holding subscription slots, re-sent REQ ids ignored,
/// deletions and NIP-40 expiry at the relay, OKs without an id, `created_at` refusals, answers
/// short of the cap while more lies below — cut by a time or byte budget, filtered after
/// `LIMIT`, a stored event sent after its EOSE — duplicates and events outside the range in an
/// answer, a cap or an `until` reading that changes mid-run) and I/O
/// faults (cuts at any frame, failed commits, groups rolled back, failed and stale lease
/// renewals, a second claimer). A failing seed replays exactly within one process.
///
/// Before the tail, ten fault-free minutes on the connections as they are: every subscription
/// must be synced without a cut (or, on a relay that wants AUTH for reads and refuses ours, have
/// said its windows were refused), so a wedge is not healed by the tail's reconnects.
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
        // The coverage table of this chunk, in the test log (`.build/swift-test.log` under
        // scripts/test).
        print("model coverage, chunk \(chunk), \(steps) steps: \(coverage.summary)")
        let missing = coverage.missing
        #expect(missing.isEmpty, "chunk \(chunk): quirks never reached: \(missing); \(coverage.summary)")
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
        // incomplete (by this window or an earlier one: a later window need not reach back to it),
        // and not arrived past the horizon (those are the end's check).
        var reportedIncomplete: [String: Set<Int64>] = [:]
        w.onReport = { event in
            guard case .synced(let url, let sub, _, let outcome) = event, let r = w.urls.firstIndex(of: url) else { return }
            reportedIncomplete["\(url) \(sub)", default: []].formUnion(outcome.incompleteSeconds)
            let incomplete = reportedIncomplete["\(url) \(sub)"] ?? []
            let lacking = w.relays[r].stored.filter { e in
                e.kind == kinds[sub] && e.createdAt <= outcome.cursor && (insertedAt[e.id] ?? 0) <= w.openedAt[r]
                    && !beyondHorizon.contains(e.id) && !w.relays[r].overOurBound.contains(e.id) && !incomplete.contains(e.createdAt)
                    && !w.relays[r].removedAfterLimit.contains(e.id) && !w.relays[r].listedNotServed.contains(e.id)
                    && !w.relays[r].sentAfterEOSE.contains(e.id) && w.account.events[e.id] == nil
            }
            if !lacking.isEmpty {
                let e = lacking[0]
                out.failures.append(
                    "synced \(sub)@\(r) at unix+\(w.unix - base) while \(lacking.count) held there are missing, e.g. t+\(e.createdAt - base) inserted \(insertedAt[e.id] ?? 0) opened \(w.openedAt[r]) cursor+\(outcome.cursor - base) \(outcome.method) cap \(w.relays[r].cap) incl \(w.relays[r].inclusiveUntil) neg \(w.relays[r].negentropy)"
                )
            }
        }
        let identity = SoftchatIdentity.generate()
        w.start { c in
            c.deepResyncIntervalSeconds = deepInterval
            c.acknowledgementTimeoutSeconds = 5
            c.keepaliveIntervalMilliseconds = 20_000
            c.readDeadlineMilliseconds = 5_000
            c.leaseSeconds = 30
            // NIP-42 challenges are answered (some relays want AUTH for reads or writes).
            c.identity = identity
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
                // One in fifteen is over our frame bound: skipped, but in its page's place. One in
                // twenty is filtered out of answers after their LIMIT (not held for anyone).
                if rng.below(15) == 0 { w.relays[r].overOurBound.insert(e.id) }
                if rng.below(20) == 0 { w.relays[r].removedAfterLimit.insert(e.id) }
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
            case 81 where rng.below(4) == 0:
                // A new configuration, another backend behind the URL: the cap changes, or how
                // `until` is read.
                if rng.below(2) == 0 {
                    let cap = [5, 8, 13, 500][rng.below(4)]
                    if cap != w.relays[r].cap { w.relays[r].saw(.capChanged) }
                    w.relays[r].cap = cap
                } else {
                    w.relays[r].saw(.untilConventionChanged)
                    w.relays[r].inclusiveUntil.toggle()
                }
            case 82:
                // Deleted at the relay (gone from every answer and from NIP-77), or expired there
                // (NIP-40: no answer serves it, the NIP-77 index may still list it).
                let candidates = w.relays[r].stored.filter { $0.kind == 1 || $0.kind == 7 }
                guard !candidates.isEmpty else { break }
                let e = candidates[rng.below(candidates.count)]
                if rng.below(2) == 0 {
                    w.relays[r].stored.removeAll { $0.id == e.id }
                    w.relays[r].saw(.deletedAtRelay)
                } else {
                    w.relays[r].listedNotServed.insert(e.id)
                    w.relays[r].saw(.expiredAtRelay)
                }
            case 83 where seed % 2 == 1:
                // Odd seeds only, as failed commits. The next group of account writes rolls back
                // as a whole (SQLite's automatic rollback): each member is answered failed.
                w.relays[r].saw(.groupRolledBack)
                w.account.failNextGroups += 1
            case 84 where w.connected[r] && !w.inbox[r].isEmpty:
                // The next message is large on a slow link: 25 to 45 s of bytes, past the REQ
                // deadline (20 s) and the NIP-77 one (10 s), then it is whole.
                w.relays[r].saw(.messageArrivedSlowly)
                for _ in 0..<(25 + rng.below(21)) where w.connected[r] {
                    w.handle(.bytesArrived(relay: r))
                    w.advance(1_000)
                }
                w.deliver(r, max: 1)
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
        w.account.failNextGroups = 0
        // Not healed by a cut: on the connections as they are, every subscription is synced
        // within ten minutes (a relay that refuses our AUTH and wants it for reads excepted; it
        // must have said its windows were refused). A subscription wedged on a connection that
        // stays up counts here, before the tail below cuts every connection.
        w.run(for: 600_000)
        for r in 0..<relayCount {
            if w.relays[r].readsNeedAuthentication && !w.relays[r].acceptsAuthentication {
                for sub in ["notes", "reactions"]
                where !w.reports.contains(where: { report in
                    if case .notice(let url, let text) = report { url == w.urls[r] && text.hasPrefix("\(sub): window refused") } else { false }
                }) {
                    out.failures.append("relay \(r) refuses reads without AUTH and ours: \(sub) never said refused")
                }
            } else if !(w.synced(r, "notes") && w.synced(r, "reactions")) {
                out.failures.append("relay \(r) not synced ten fault-free minutes on (connected \(w.connected[r]))")
            }
        }
        // New connections, each after the deeper resync's interval: enough of them for its
        // windows to reach past the latest arrival (three days and an hour late, at most).
        for _ in 0..<10 {
            for r in 0..<relayCount { w.cut(r) }
            w.run(for: (deepInterval + 30) * 1_000)
        }

        // Nothing lost: every event a relay holds for a subscription is in the account, except in
        // a second the sync reported incomplete (a run of equal created_at longer than a page).
        var incomplete: [String: Set<Int64>] = [:]
        for case .synced(let url, _, _, let outcome) in w.reports { incomplete[url, default: []].formUnion(outcome.incompleteSeconds) }
        for r in 0..<relayCount {
            // A relay that refuses our AUTH and wants it for reads serves nothing (checked above).
            if w.relays[r].readsNeedAuthentication && !w.relays[r].acceptsAuthentication { continue }
            let missing = w.relays[r].stored.filter { e in
                (e.kind == 1 || e.kind == 7) && e.createdAt <= w.unix && w.account.events[e.id] == nil
                    && !w.relays[r].overOurBound.contains(e.id) && !(incomplete[w.urls[r]]?.contains(e.createdAt) ?? false)
                    && !w.relays[r].removedAfterLimit.contains(e.id) && !w.relays[r].listedNotServed.contains(e.id)
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
            where intent.category == .restricted && !relay.acceptsAuthentication && relay.refusedForAuthentication.contains(intent.eventID):
                break
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
            case 6: .malformed
            case 7: .reject("invalid: created_at too late")
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
        // NIP-42: reads, writes or both closed `auth-required:` until an AUTH is accepted; one
        // relay in three of those refuses ours (`restricted:`).
        switch g.below(5) {
        case 0: w.relays[r].authRequiredRule = { _ in true }
        case 1: w.relays[r].eventsNeedAuthentication = true
        case 2:
            w.relays[r].authRequiredRule = { _ in true }
            w.relays[r].eventsNeedAuthentication = true
        default: break
        }
        if w.relays[r].authRequiredRule != nil || w.relays[r].eventsNeedAuthentication {
            w.relays[r].acceptsAuthentication = g.below(3) != 0
        }
        // Live feeds closed for good; subscription limits in each relay's words; NEG sessions
        // holding subscription slots; a REQ re-sent under an open id ignored.
        if g.below(6) == 0 {
            w.relays[r].closesLiveFeeds = ["restricted: no live queries here", "blocked: live feeds are off", "no live feed"][g.below(3)]
        }
        w.relays[r].subscriptionLimitNotices = [
            "rejected: too many subscriptions", "ERROR: too many concurrent REQs",
            "Subscription error: Maximum concurrent subscription count reached",
        ]
        w.relays[r].negentropyCountsAsSubscription = g.below(4) != 0
        w.relays[r].ignoresRepeatedREQ = g.below(2) == 0
        // Answers cut by a time or byte budget; events after EOSE, twice, outside the range.
        if g.below(3) == 0 { w.relays[r].budgetCutRule = { g in g.below(10) == 0 } }
        if g.below(2) == 0 {
            w.relays[r].afterEOSERule = { g in g.below(15) == 0 }
            w.relays[r].duplicateRule = { g in g.below(15) == 0 }
            w.relays[r].outsideRangeRule = { g in g.below(15) == 0 }
        }
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
