import SoftchatCore
import Testing

@testable import SoftchatSync

/// Issue 45's paths where the engine spun, wedged or lost while it said all was well, each
/// reproduced against the engine's simulator (`EngineWorld`) and pinned to the guarantee its
/// fix gives.
@Suite struct EnginePathTests {
    /// Path 1, a stale renewal: the process was frozen past its lease (Android's cached-app
    /// freezer), another claimer took the work, and the account refuses the renewal as stale.
    /// It was asked again inside the same `handle`, for ever (the pump gave up at 200,000
    /// actions). Now the claim is dropped: one notice, no second renewal of it, and the
    /// other claimer's work is left to it.
    @Test func aStaleLeaseRenewalDropsTheClaimAndIsNeverAskedAgain() {
        let w = EngineWorld()
        let ids = w.account.enqueue(Fixtures.event(w.unix, content: "held"), relays: [w.urls[0]])
        w.relays[0].okRule = { _, _ in .late }
        w.start { $0.acknowledgementTimeoutSeconds = 3_600 }
        w.run(for: 1_000)
        #expect(w.account.intents[ids[0]]!.state == .inFlight)
        let ours = w.account.intents[ids[0]]!.lease!
        // Frozen past the lease: the wall clock jumps, and another process claims the work.
        w.unix += 2 * w.account.leaseSeconds
        #expect(
            {
                if case .claimed(let result?) = w.account.answer(.claim(relayURL: w.urls[0], leaseID: "other-1", max: 8), now: w.unix) {
                    return result.payloads.count == 1
                }
                return false
            }())
        w.run(for: 40_000)
        #expect(!w.runaway, "the renewal was asked again inside the handle that refused it")
        #expect(w.mostActionsPerPump < 100)
        let stale = w.reports.filter {
            if case .notice(_, let text) = $0 { return text.hasPrefix("lease renewal refused as stale") }
            return false
        }
        #expect(stale.count == 1)
        #expect(w.account.intents[ids[0]]!.lease == "other-1", "the other claimer's work stays its own")
        #expect(w.account.leases[ours]!.released)
    }

    /// Path 1, any other renewal failure (the disk, a busy database): retried after the retry
    /// delay, never in the same `handle`, and the claim is kept.
    @Test func aFailedLeaseRenewalIsRetriedAfterTheDelayNotInTheSameHandle() {
        let w = EngineWorld()
        let ids = w.account.enqueue(Fixtures.event(w.unix, content: "held"), relays: [w.urls[0]])
        w.relays[0].okRule = { _, _ in .late }
        w.start { $0.acknowledgementTimeoutSeconds = 3_600 }
        w.run(for: 1_000)
        let ours = w.account.intents[ids[0]]!.lease!
        w.account.failRenewals = 3
        w.run(for: 40_000)
        #expect(!w.runaway)
        let failed = w.reports.filter {
            if case .notice(_, let text) = $0 { return text.hasPrefix("lease renewal failed, retried in 1 s") }
            return false
        }
        #expect(failed.count == 3)
        #expect(w.account.failRenewals == 0)
        // Failed at the half-lease mark, then once per retry delay (the old engine asked all
        // four inside one handle, in the same second).
        let times = w.account.renewalTimes.prefix(4)
        #expect(times.count == 4 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 >= 1 }, "\(Array(times))")
        #expect(w.account.intents[ids[0]]!.lease == ours, "the claim is kept and renewed once the account answers")
        #expect(w.account.leases[ours]!.expiresAt > w.unix + 30)
    }

    /// Path 1, a payload that does not read back: it was let go and left to its lease, the
    /// empty claim released at once and claimed again, for ever (66,667 lease rows in one
    /// pump). Now it gets a terminal decision that says why, and the rest of the batch goes.
    @Test func aStoredPayloadThatDoesNotReadBackIsRejectedOnceWithItsReason() {
        let w = EngineWorld()
        let broken = Fixtures.event(w.unix, content: "broken")
        let good = Fixtures.event(w.unix, content: "good")
        let ids = w.account.enqueue(broken, relays: [w.urls[0]]) + w.account.enqueue(good, relays: [w.urls[0]])
        w.account.corruptPayloads = [broken.id]
        w.start()
        w.run(for: 5_000)
        #expect(!w.runaway)
        #expect(w.account.leases.count <= 3, "claimed once, not in a loop: \(w.account.leases.count) leases")
        let intent = w.account.intents[ids[0]]!
        #expect(intent.state == DeliveryState.rejected && intent.category == DeliveryCategory.invalid)
        #expect(intent.message.contains("does not read back"))
        #expect(w.account.intents[ids[1]]!.state == .accepted)
        #expect(!w.relays[0].stored.contains { $0.id == broken.id })
    }

    /// Path 2: a live REQ the relay closes for good (`restricted:`, `blocked:`, `invalid:`, no
    /// prefix, `auth-required:` without an identity), every time it is asked. The
    /// reconciliation of every subscription packed into it waited for that REQ's EOSE for ever:
    /// no NEG-OPEN, no paging, 200 of 2,000 notes and 10 of 100 reactions missing, neither
    /// subscription ever synced. Now NIP-77 never waits on a REQ that will not answer: both are
    /// reconciled and synced, marked "no live feed", and each `synced` report says the live
    /// feed was refused, in the relay's words.
    @Test(arguments: [
        "restricted: this inbox is read by its owner only",
        "blocked: reactions are not served here",
        "invalid: unsupported filter",
        "we do not serve that",
        "auth-required: sign in to read",
    ])
    func aLiveREQClosedForGoodWedgesNoReconciliationAndTheSyncedReportSaysSo(refusal: String) {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        let notes = (0..<2_000).map { Fixtures.event(w.unix - 90 * 86_400 + Int64($0) * 3_887, content: "n\($0)") }
        let reactions = (0..<100).map { Fixtures.event(w.unix - 30 * 86_400 + Int64($0) * 25_919, kind: 7, content: "r\($0)") }
        let events = notes + reactions
        w.relays[0].stored = events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        for (i, e) in notes.enumerated() where i % 10 != 0 { w.account.events[e.id] = e }
        for (i, e) in reactions.enumerated() where i % 10 != 0 { w.account.events[e.id] = e }
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil), ("reactions", [#"{"kinds":[7]}"#], nil)]
        for id in ["notes", "reactions"] { w.account.cursors[w.account.key(w.urls[0], id)] = w.unix - 3_600 }
        // Both subscriptions travel in `~live0`; the relay refuses it, and only it.
        w.relays[0].closeRule = { id, _ in id.hasPrefix("~live") ? refusal : nil }
        w.start()
        w.run(for: 10_000)
        #expect(w.relays[0].verbs.contains("NEG-OPEN"), "the reconciliations waited for the live REQ's EOSE")
        let missing = events.filter { w.account.events[$0.id] == nil }
        #expect(missing.isEmpty, "\(missing.count) of \(events.count) missing")
        #expect(w.synced(0, "notes") && w.synced(0, "reactions"))
        let synced = w.reports.compactMap { report -> (String, SyncOutcome)? in
            if case .synced(_, let id, _, let outcome) = report { (id, outcome) } else { nil }
        }
        #expect(Set(synced.map { $0.0 }) == ["notes", "reactions"])
        #expect(synced.allSatisfy { $0.1.method == .negentropy && $0.1.liveFeedRefused == refusal }, "\(synced)")
        #expect(w.engine.relays[0].subscriptions.values.allSatisfy { $0.live == .refused(refusal) })
        #expect(
            w.reports.contains {
                if case .notice(_, let text) = $0 { return text.hasPrefix("live feed refused for notes, reactions (\(refusal))") }
                return false
            })
    }

    /// Path 7: a relay whose NIP-11 states a `max_message_length` of 16,384 bytes (NIP-11's own
    /// example), and an account that lacks the relay's newest 421 notes (nine days offline).
    /// NIP-77 found nearly all of them in one round and asked for them in one REQ by ids of
    /// about 28 KB: the session refused it, the engine only noted "cannot send REQ" and kept the
    /// fetch in flight, and the reconciliation never completed (421 missing, never synced). A subscription whose filter
    /// alone is over the frame lost its page the same way, left in flight for the connection's
    /// life, and took the live REQ of every subscription packed with it down too. Now fetches
    /// carry as many ids as the frame holds, live REQs are packed to fit it, and a REQ that
    /// cannot fit is refused in a notice and held nowhere.
    @Test func fetchesFitTheRelaysStatedFrameAndARequestThatCannotIsRefusedNotLeftInFlight() {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        w.limits[0] = RelayLimits(maxMessageLength: 16_384)
        w.relays[0].stated = w.limits[0]!
        w.relays[0].maxMessageLength = 16_384
        let notes = (0..<4_210).map { Fixtures.event(w.unix - 90 * 86_400 + Int64($0) * 1_846, content: "n\($0)") }
        w.relays[0].stored = notes.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        for e in notes.prefix(3_789) { w.account.events[e.id] = e }
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        w.start()
        w.run(for: 10_000)
        let missing = notes.filter { w.account.events[$0.id] == nil }
        #expect(missing.isEmpty, "\(missing.count) of 4,210 missing")
        #expect(w.synced(0, "notes"))
        #expect(w.reports.contains { if case .synced(_, "notes", _, let outcome) = $0 { outcome.method == .negentropy } else { false } })
        #expect(w.relays[0].overStatedLimits.isEmpty, "\(w.relays[0].overStatedLimits)")
        #expect((w.relays[0].longestFrame["REQ"] ?? 0) > 12_000, "fetches are filled up to the frame, not cut to a few ids")
        let unsent = w.reports.filter { if case .notice(_, let text) = $0 { text.hasPrefix("cannot send REQ") } else { false } }
        #expect(unsent.isEmpty, "\(unsent)")

        // A subscription whose filter alone is over the frame (300 authors, 20 KB): its live REQ,
        // its ahead REQ and its page cannot be sent. Each is refused in a notice and held nowhere,
        // never synced; the other subscription's live REQ goes apart and its sync is untouched.
        let authors = (0..<300).map { i -> String in
            let hex = String(i, radix: 16)
            return String(repeating: "0", count: 64 - hex.count) + hex
        }
        let crowd = #"{"kinds":[1],"authors":["# + authors.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        w.endProcess()
        w.account.policy.append(("crowd", [crowd], nil))
        w.account.cursors[w.account.key(w.urls[0], "crowd")] = w.unix - 3_600
        let before = w.reports.count
        w.start()
        w.run(for: 10_000)
        let notices: [String] = w.reports[before...].compactMap { if case .notice(_, let text) = $0 { text } else { nil } }
        #expect(w.synced(0, "notes"))
        #expect(!w.synced(0, "crowd"))
        let relay = w.engine.relays[0]
        #expect(relay.subscriptions["notes"]?.live == .registered)
        #expect(
            relay.subscriptions["crowd"]?.pageID == nil && !(relay.connection?.pageOwner.values.contains("crowd") ?? false), "a page left in flight")
        #expect(!relay.requests.open.keys.contains { $0.hasPrefix("crowd") } && !relay.requests.queue.contains { $0.id.hasPrefix("crowd") })
        #expect(relay.connection != nil && !relay.connection!.aheadREQs.values.contains("crowd"))
        #expect(notices.contains { $0.hasPrefix("live feed refused for crowd (not sent:") }, "\(notices)")
        #expect(notices.contains { $0.hasPrefix("crowd: a page cannot be sent") }, "\(notices)")
        #expect(w.relays[0].overStatedLimits.isEmpty, "\(w.relays[0].overStatedLimits)")
    }

    /// How the relay leaves a REQ unanswered in path 3's test.
    enum Unanswered: String, CaseIterable, Sendable {
        /// Nothing at all: a query the relay shed under load (nostr-rs-relay).
        case shed
        /// nostr-relay's bare NOTICE "rate-limited": no id, no CLOSED, no EOSE.
        case bareRateLimitNotice
        /// nostr-rs-relay past its limit (2 here): the NOTICE "Subscription error: Maximum
        /// concurrent subscription count reached", which was not read as a limit.
        case subscriptionCountNotice
    }

    /// Path 3: a REQ that got no answer kept its slot for the life of the connection. Twenty
    /// subscriptions; the relay leaves every `~ahead` REQ unanswered (shed, or met by a bare
    /// NOTICE "rate-limited"), and the first two asks of sub0's page too: fifteen ahead REQs
    /// held the budget of 16 beside the live REQ, no page ever went out, and 0 of 20
    /// subscriptions synced in 10 minutes. Past nostr-rs-relay's limit every REQ it refused held
    /// its slot to the end. Now every one-shot REQ has an EOSE deadline: past it the REQ is
    /// closed, its slot freed, and it is asked again with backoff (an ahead REQ at most
    /// five times); a NOTICE makes the REQs that heard nothing suspects whatever its
    /// text; a page that hit its deadline is asked again, and no subscription is reported synced
    /// while one of its events is missing.
    @Test(arguments: Unanswered.allCases)
    func aREQThatGetsNoAnswerGivesUpItsSlotAtItsDeadlineAndIsAskedAgain(_ way: Unanswered) {
        let w = EngineWorld()
        let ids = (0..<20).map { "sub\($0)" }
        let all = SyncEngineTests.storeConversations(in: w, ids: ids, eventsEach: 10, from: w.unix - 500)
        var shedPages = 0
        switch way {
        case .shed, .bareRateLimitNotice:
            let answer: WireRelay.NoAnswer = way == .shed ? .silence : .notice("rate-limited")
            w.relays[0].noAnswerRule = { id in
                if id.contains("~ahead") { return answer }
                guard id.hasPrefix("sub0~"), id.contains("~p"), shedPages < 2 else { return nil }
                shedPages += 1
                return answer
            }
        case .subscriptionCountNotice:
            w.relays[0].maxSubscriptions = 2
            w.relays[0].subscriptionLimitNotice = "Subscription error: Maximum concurrent subscription count reached"
        }
        var syncedEarly: [String] = []
        w.onReport = { event in
            guard case .synced(_, let sub, _, _) = event else { return }
            if all.contains(where: { $0.content.hasPrefix("\(sub) ") && w.account.events[$0.id] == nil }) { syncedEarly.append(sub) }
        }
        w.start()
        w.run(for: 600_000)
        #expect(!w.runaway)
        let held = all.filter { w.account.events[$0.id] != nil }.count
        #expect(held == 200, "\(held) of 200 held")
        #expect(ids.allSatisfy { w.synced(0, $0) }, "\(ids.filter { !w.synced(0, $0) }.count) of 20 subscriptions not synced")
        #expect(syncedEarly.isEmpty, "reported synced with events missing: \(syncedEarly)")
        // No REQ keeps a slot it was never answered for.
        let stillOpen = w.engine.relays[0].requests.open
        #expect(stillOpen.isEmpty, "\(stillOpen.count) one-shot REQs still open, e.g. \(stillOpen.keys.sorted().prefix(3))")
        if way == .shed {
            // sub0's page went unanswered twice and was asked again each time, under a new id.
            let pages = Set(w.relays[0].requestIDs.filter { $0.hasPrefix("sub0~") && $0.contains("~p") })
            #expect(pages.count >= 3, "\(pages.sorted())")
        }
        // Asked again with backoff, not in a loop: each ahead REQ five times at most
        // (`SyncEngine.refusalTries`), with a few resends in place per try as its doubling wait
        // allows.
        let aheads = w.relays[0].requestIDs.filter { $0.contains("~ahead") }.count
        #expect(aheads <= ids.count * 5 * 5, "\(aheads) ahead REQs")
    }

    /// Path 6: a page the relay kept closing was asked again every second, for ever: the backoff
    /// counted per REQ id and each retry had a new one (1,205 REQs and 1,202 notices in 10
    /// minutes for two subscriptions, whether the relay said `error:`, `rate-limited:` or
    /// `auth-required:`). Now the wait doubles per CLOSED of the same page in a row up to the
    /// reconnect maximum, the window is reported refused at the fifth, one notice per page (and
    /// the refusal); `auth-required:` is not retried on a clock: refused at once by an engine
    /// that does not authenticate, asked again once our AUTH is accepted by one that does.
    @Test(arguments: ["error: query failed", "rate-limited: slow down", "auth-required: sign in first"])
    func aPageClosedAgainAndAgainBacksOffDoublingAndItsWindowIsReportedRefused(closedWith text: String) {
        let w = EngineWorld()
        _ = SyncEngineTests.storeConversations(in: w, ids: ["a", "b"], eventsEach: 10, from: w.unix - 500)
        // When each subscription's page was asked (monotonic ms).
        var asked: [String: [Int64]] = [:]
        w.relays[0].closeRule = { [weak w] id, _ in
            guard id.contains("~p"), let w else { return nil }
            asked[String(id.prefix(1)), default: []].append(w.mono)
            return text
        }
        w.start()
        w.run(for: 600_000)
        #expect(!w.runaway)
        let authRequired = text.hasPrefix("auth-required:")
        for (sub, stem) in [("a", "a~0"), ("b", "b~1")] {
            let times = asked[sub] ?? []
            let notices = w.reports.compactMap { report -> String? in
                guard case .notice(_, let t) = report, t.hasPrefix("\(sub): ") || t.contains("\(stem)~p") else { return nil }
                return t
            }
            let refusals = notices.filter { $0.hasPrefix("\(sub): window refused") }
            #expect(refusals.count == 1, "\(sub): \(notices.prefix(3))")
            #expect(!w.synced(0, sub))
            if authRequired {
                // No AUTH to wait for: asked once, refused at once, not on a clock.
                #expect(times.count == 1, "\(sub): asked \(times.count) times")
                #expect(notices.count == 1, "\(sub): \(notices.count) notices")
            } else {
                let gaps = zip(times, times.dropFirst()).map { $1 - $0 }
                #expect(Array(gaps.prefix(5)) == [1_000, 2_000, 4_000, 8_000, 16_000], "\(sub): \(gaps.prefix(8))")
                #expect(gaps.allSatisfy { $0 <= 300_000 })
                #expect((9...11).contains(times.count), "\(sub): asked \(times.count) times")
                #expect(notices.count == 2, "\(sub): \(notices.count) notices, e.g. \(notices.prefix(3))")
            }
        }
        #expect(w.account.cursors.isEmpty)
        guard authRequired else { return }
        // With an identity, against a relay that wants NIP-42 for history (the challenge comes
        // with its first CLOSED): each page is asked again once the relay accepts our AUTH.
        let authed = EngineWorld()
        let stored = SyncEngineTests.storeConversations(in: authed, ids: ["a", "b"], eventsEach: 10, from: authed.unix - 500)
        authed.relays[0].authRequiredRule = { $0.contains("~p") }
        authed.start { $0.identity = SoftchatIdentity.generate() }
        authed.run(for: 600_000)
        #expect(authed.relays[0].authentications == 1)
        #expect(authed.relays[0].closedForAuthentication.count == 2, "\(authed.relays[0].closedForAuthentication)")
        #expect(stored.allSatisfy { authed.account.events[$0.id] != nil })
        #expect(authed.synced(0, "a") && authed.synced(0, "b"))
    }

    /// Found by the simulator (issue 45): against a relay that wants NIP-42 for reads and
    /// refuses our AUTH, a page closed `auth-required:` *after* the refusal (a page asked again
    /// after its deadline, a reconciliation's fetch falling back to paging) waited for an
    /// accepted AUTH that could not come on this connection, and its window was never reported
    /// refused: the host saw neither `synced` nor why. Now such a page is reported refused at
    /// once (and still asked again if a later AUTH is accepted).
    @Test func aPageClosedForAuthenticationAfterOurAuthWasRefusedIsReportedRefused() {
        let w = EngineWorld()
        _ = SyncEngineTests.storeConversations(in: w, ids: ["a", "b"], eventsEach: 3, from: w.unix - 500)
        // b's first page goes unanswered: it is asked again after its deadline, once a's
        // CLOSED brought the challenge and our AUTH stands refused.
        var silenced = false
        w.relays[0].authRequiredRule = { id in id.contains("~p") && (!id.hasPrefix("b~") || silenced) }
        w.relays[0].acceptsAuthentication = false
        w.relays[0].noAnswerRule = { id in
            guard id.hasPrefix("b~"), id.contains("~p"), !silenced else { return nil }
            silenced = true
            return .silence
        }
        w.start { $0.identity = SoftchatIdentity.generate() }
        w.run(for: 120_000)
        #expect(!w.runaway)
        #expect(silenced)
        #expect(w.relays[0].authentications >= 1)
        for sub in ["a", "b"] {
            let refusals = w.reports.filter { report in
                if case .notice(_, let text) = report { text.hasPrefix("\(sub): window refused") } else { false }
            }
            #expect(refusals.count == 1, "\(sub): \(refusals.count) refusals")
            #expect(!w.synced(0, sub))
        }
    }

    /// Path 12: a relay refused past 5 subscriptions once (a burst limit, a restart) and then
    /// took 32; the budget learned 5 and kept it for the engine's life. Now the next connection
    /// starts again from the default, and pages go out as many at once as the relay takes.
    @Test func aTransientSubscriptionLimitTeachesOnlyItsOwnConnection() {
        let w = EngineWorld()
        w.relays[0].maxSubscriptions = 5
        let all = SyncEngineTests.storeConversations(in: w, ids: (0..<40).map { "sub\($0)" }, eventsEach: 10, from: w.unix - 500)
        w.start()
        w.run(for: 60_000)
        #expect(all.allSatisfy { w.account.events[$0.id] != nil })
        let learned = w.engine.relays[0].requests.limit
        #expect(learned <= 5)
        // The relay takes 32 from now on; new events come for every subscription.
        w.relays[0].maxSubscriptions = 32
        w.relays[0].mostSubscriptions = 0
        w.cut(0)
        w.run(for: 60_000)
        #expect(w.engine.relays[0].requests.limit > learned, "still \(w.engine.relays[0].requests.limit) after a new connection")
        #expect(w.relays[0].mostSubscriptions > 5, "at most \(w.relays[0].mostSubscriptions) REQs open at once on the new connection")
    }

    /// What exists only while a relay is connected (`RelayConnection`: page and ahead-REQ owners,
    /// text held back for a commit, the keepalive) lives in the connection and goes with it:
    /// the state the engine used to reset field by field in `lost` cannot outlive a connection
    /// by a forgotten reset. The relay sheds every ahead REQ, so owners are in flight when the
    /// connection is cut; after the cut there is no connection state at all, and the next
    /// connection starts from its own.
    @Test func whatExistsOnlyWhileConnectedGoesWithTheConnection() {
        let w = EngineWorld()
        _ = SyncEngineTests.storeConversations(in: w, ids: ["a", "b"], eventsEach: 3, from: w.unix - 500)
        w.relays[0].noAnswerRule = { id in id.contains("~ahead") ? .silence : nil }
        w.start()
        w.run(for: 1_000)
        let before = w.engine.relays[0].connection
        #expect(w.engine.relays[0].phase == .connected)
        #expect(before?.aheadREQs.count == 2, "\(String(describing: before?.aheadREQs))")
        w.cut(0)
        #expect(w.engine.relays[0].phase != .connected)
        #expect(w.engine.relays[0].connection == nil, "connection state outlived its connection")
        w.run(for: 60_000)
        #expect(w.engine.relays[0].phase == .connected)
        let after = w.engine.relays[0].connection
        #expect(after != nil)
        #expect(after?.keepalive.lastHeard ?? 0 > before?.keepalive.lastHeard ?? .max, "the new connection keeps its own keepalive")
    }

    /// Path 4: a learned page cap that went down. The relay sent pages of 500 (learned: a page
    /// that long was seen), then capped at 100 (a new configuration, another backend behind the
    /// URL, a cap for clients not authenticated). The next window's first page of 100 was
    /// shorter than the largest seen, taken for the relay's whole answer, and 1,100 of 1,200
    /// were lost with `synced` reported (the deeper resync did the same). Now a short page is
    /// confirmed by one event asked below it; the relay sends one, so paging goes on, and the
    /// next page, capped the same way, makes the cap (100) known.
    @Test func aPageCapThatWentDownIsFoundBelowAShortPageAndLowered() {
        let (w, after) = Self.learnedThenChanged { $0.cap = 100 }
        let missing = after.filter { w.account.events[$0.id] == nil }
        #expect(missing.isEmpty, "\(missing.count) of 1,200 missing")
        #expect(w.synced(0, "notes"))
        #expect(w.engine.relays[0].paging?.pageSize == 100 && w.engine.relays[0].paging?.isCapKnown == true)
        #expect(w.engine.relays[0].subscriptions["notes"]?.sync.paging.pageSize == 100)
    }

    /// Found by the simulator (issue 45): answers cut short while more lies below (a time or byte
    /// budget, events filtered out after `LIMIT`, an event sent after its EOSE) looked like a
    /// lower cap, and each lowered the learned page size: down to 1 event per REQ, where one
    /// event sent after its EOSE reads as the end. Now answers of varying length lower nothing
    /// (a cap answers the same count twice, and never below a page the window brought), and
    /// nothing is lost.
    @Test func answersCutShortByABudgetLowerNoPageSizeAndLoseNothing() {
        let w = EngineWorld()
        w.account.policy = [("notes", [SyncEngineTests.notes], nil)]
        let before = (0..<1_200).map { Fixtures.event(w.unix - 10_000 + Int64($0 / 3), content: "before \($0)") }
        w.relays[0].stored = Self.newestFirst(before)
        // Every answer cut by a budget to fewer events than asked.
        w.relays[0].budgetCutRule = { _ in true }
        w.start()
        w.run(for: 60_000)
        #expect(w.engine.relays[0].paging?.pageSize == 500, "\(String(describing: w.engine.relays[0].paging))")
        let missing = before.filter { w.account.events[$0.id] == nil }
        #expect(missing.isEmpty, "\(missing.count) of 1,200 missing")
        #expect(w.synced(0, "notes"))
    }

    /// A cap learned from answers holds for the connection it was learned on: what answers
    /// behind a URL changes (a new configuration, another backend), so the next connection
    /// starts again from the page size configured (narrowed by NIP-11) and learns it anew.
    @Test func aCapLearnedOnOneConnectionIsLearnedAgainOnTheNext() {
        let w = EngineWorld()
        w.account.policy = [("notes", [SyncEngineTests.notes], nil)]
        let before = (0..<1_200).map { Fixtures.event(w.unix - 10_000 + Int64($0 / 3), content: "before \($0)") }
        w.relays[0].stored = Self.newestFirst(before)
        w.relays[0].cap = 100
        w.start()
        w.run(for: 60_000)
        #expect(w.engine.relays[0].paging?.pageSize == 100, "\(String(describing: w.engine.relays[0].paging))")
        #expect(before.allSatisfy { w.account.events[$0.id] != nil })
        w.relays[0].cap = 500
        w.cut(0)
        w.unix += 600
        w.run(for: 60_000)
        #expect(w.engine.relays[0].paging?.pageSize == 500, "\(String(describing: w.engine.relays[0].paging))")
        #expect(w.engine.relays[0].subscriptions["notes"]?.sync.paging.pageSize == 500)
    }

    /// Path 5: a learned `until` convention that changed. The relay read `until` inclusively
    /// (learned from an event past the `until` asked), then exclusively (another backend behind
    /// the URL): each page boundary inside a second lost the rest of that second, 2 of 1,200 at
    /// three events a second, with `synced` reported. Now a page asked in the inclusive form that
    /// brings back nothing of the second the page before it ended in doubts the convention
    /// (unknown, a revision every subscription of the relay takes) and is asked again in the
    /// exclusive form, right under both readings.
    @Test func anUntilConventionThatChangedIsDoubtedWhenABoundarySecondDoesNotComeBack() {
        let (w, after) = Self.learnedThenChanged { $0.inclusiveUntil = false }
        let missing = after.filter { w.account.events[$0.id] == nil }
        #expect(missing.isEmpty, "\(missing.count) of 1,200 missing")
        #expect(w.synced(0, "notes"))
        // Doubted for the relay, not only for the subscription that saw it (the revision itself
        // is checked in SubscriptionSyncTests).
        #expect(w.engine.relays[0].paging?.until == .unknown, "\(String(describing: w.engine.relays[0].paging))")
        #expect(w.engine.relays[0].subscriptions["notes"]?.sync.paging.until == .unknown)
    }

    /// Path 11: the keepalive counted only whole messages. A 200 KB note pushed on the live REQ
    /// over a link of about 3 KB/s takes a minute to arrive: bytes every second, no whole message,
    /// and the pong of the keepalive's ping queued behind it. At interval + read deadline the
    /// connection was dropped mid-message, and the note was sent again on the next connection.
    /// Now bytes arriving count as life (`.bytesArrived`, which the driver sends at most once a
    /// second for reads that complete no message): no ping, no drop, the note arrives once. The
    /// same minute with whole messages only — all the engine heard before — still drops it.
    @Test func aLargeMessageArrivingSlowlyKeepsItsConnection() {
        func slowNote(reportingBytes: Bool) -> (world: EngineWorld, note: VerifiedEvent, dropped: Bool) {
            let w = EngineWorld()
            w.account.policy = [("notes", [SyncEngineTests.notes], nil)]
            w.start()
            w.run(for: 1_000)
            let note = Fixtures.event(w.unix, content: String(repeating: "x", count: 200_000))
            let frames = w.relays[0].publishFromElsewhere(note)
            #expect(!frames.isEmpty, "the live REQ is open at the relay")
            // A minute on the wire (keepalive 30 s + read deadline 10 s by default).
            for _ in 0..<60 {
                if reportingBytes && w.connected[0] { w.handle(.bytesArrived(relay: 0)) }
                w.advance(1_000)
            }
            let dropped = w.reports.contains {
                if case .notice(_, let text) = $0 { return text.hasPrefix("connection lost: no answer to a keepalive ping") }
                return false
            }
            // Its last byte: the message is whole, ahead of what waited behind it.
            if !dropped { w.inbox[0].insert(contentsOf: frames, at: 0) }
            w.run(for: 10_000)
            return (w, note, dropped)
        }
        let kept = slowNote(reportingBytes: true)
        #expect(!kept.dropped, "dropped mid-message although its bytes kept arriving")
        #expect(kept.world.opens == 1 && kept.world.pings == 0, "opens \(kept.world.opens), pings \(kept.world.pings)")
        #expect(kept.world.account.events[kept.note.id] != nil)
        let wholeOnly = slowNote(reportingBytes: false)
        #expect(wholeOnly.dropped, "a minute without a whole message is silence to the keepalive")
        #expect(wholeOnly.world.opens >= 2 && wholeOnly.world.pings >= 1)
        #expect(wholeOnly.world.account.events[wholeOnly.note.id] != nil, "sent again on the next connection")
    }

    /// Paths 3 and 11 together: the REQ deadline counted only whole messages, as the keepalive
    /// once did. A page whose first event is a large message on a slow link (bytes arriving for
    /// 40 s, twice the REQ deadline) was given up at the deadline while its answer was coming —
    /// closed, and asked again at every deadline, for ever on that link. Now bytes of a message
    /// still arriving keep every REQ waiting; when the message is whole, the page it answers is
    /// still open and takes it. (Without the bytes, the page is given up as before.)
    @Test func aPageWhoseAnswerArrivesSlowlyIsNotGivenUpWhileItsBytesKeepComing() {
        let w = EngineWorld()
        w.account.policy = [("notes", [SyncEngineTests.notes], nil)]
        w.relays[0].noAnswerRule = { id in id.contains("~p") ? .silence : nil }
        w.start()
        w.run(for: 1_000)
        guard let (pageID, _) = w.engine.relays[0].connection?.pageOwner.first(where: { $0.value == "notes" }) else {
            Issue.record("no page in flight")
            return
        }
        let note = Fixtures.event(w.unix - 100, content: String(repeating: "x", count: 200_000))
        for _ in 0..<40 {
            w.handle(.bytesArrived(relay: 0))
            w.advance(1_000)
        }
        #expect(w.engine.relays[0].connection?.pageOwner[pageID] == "notes", "the page was given up while its answer was arriving")
        // The message is whole, and the EOSE follows it.
        w.inbox[0].append(RelayResponseFrame.event(subscriptionID: pageID, event: note).toJSON())
        w.inbox[0].append(RelayResponseFrame.eose(subscriptionID: pageID).toJSON())
        w.run(for: 5_000)
        #expect(w.account.events[note.id] != nil)
        #expect(w.opens == 1)
    }

    /// Path 13: a relay that wants NIP-42 to take events and refuses our AUTH (`restricted:`).
    /// What it answered `auth-required:` after the refusal was held by the session for an AUTH
    /// nobody would send, left at its 15 s deadline as `timeout` (no pause, no retry budget), was
    /// claimed and sent again at once and held again: every ~15 s, for ever, with nothing but the
    /// one "authentication refused" notice. Now the session lets such an answer go at once, and
    /// the engine counts refused tries (one per claim, across connections, until an AUTH is
    /// accepted): at the third the events are rejected (`restricted`, saying why), a notice says
    /// publishing there is refused, and nothing more is sent. A relay that accepts the AUTH takes
    /// them as before.
    @Test func intentsToARelayThatRefusesOurAuthAreRejectedAfterThreeTries() {
        let w = EngineWorld()
        let events = [Fixtures.event(w.unix, content: "one"), Fixtures.event(w.unix, content: "two")]
        let ids = events.flatMap { w.account.enqueue($0, relays: [w.urls[0]]) }
        w.relays[0].eventsNeedAuthentication = true
        w.relays[0].acceptsAuthentication = false
        w.start { $0.identity = SoftchatIdentity.generate() }
        w.run(for: 120_000)
        #expect(!w.runaway)
        for (id, event) in zip(ids, events) {
            let intent = w.account.intents[id]!
            #expect(
                intent.state == DeliveryState.rejected && intent.category == DeliveryCategory.restricted,
                "\(intent.state) \(intent.category): \(intent.message)")
            #expect(intent.message.contains("refused our AUTH (restricted: not on the list)"), "\(intent.message)")
            let sent = w.relays[0].refusedForAuthentication.filter { $0 == event.id }.count
            #expect(sent == AuthenticationMachine.refusedTriesLimit, "sent \(sent) times")
        }
        #expect(w.relays[0].authentications == 1)
        let notices = w.reports.compactMap { report -> String? in if case .notice(_, let text) = report { text } else { nil } }
        #expect(notices.contains { $0.hasPrefix("authentication refused: restricted") }, "\(notices)")
        #expect(notices.filter { $0.hasPrefix("publishing refused:") }.count == 1, "\(notices)")
        // Ended: ten more minutes (keepalive wakeups look for work) send nothing more.
        let answered = w.relays[0].refusedForAuthentication.count
        w.run(for: 600_000)
        #expect(w.relays[0].refusedForAuthentication.count == answered)

        // A relay that accepts our AUTH: the events answered auth-required go out once after it.
        let accepting = EngineWorld()
        let more = [Fixtures.event(accepting.unix, content: "three"), Fixtures.event(accepting.unix, content: "four")]
        let moreIDs = more.flatMap { accepting.account.enqueue($0, relays: [accepting.urls[0]]) }
        accepting.relays[0].eventsNeedAuthentication = true
        accepting.start { $0.identity = SoftchatIdentity.generate() }
        accepting.run(for: 10_000)
        #expect(moreIDs.allSatisfy { accepting.account.intents[$0]!.state == DeliveryState.accepted })
        #expect(accepting.relays[0].authentications == 1 && accepting.relays[0].refusedForAuthentication.count == 2)
        #expect(!accepting.reports.contains { if case .notice(_, let text) = $0 { text.hasPrefix("publishing refused:") } else { false } })
    }

    /// A relay holding 1,200 events at three a second (pages of 500 end inside a second), synced
    /// once: the engine has learned its cap (500) and that it reads `until` inclusively. Then the
    /// connection is cut, `change` alters the relay, 1,200 more events reach it (three a second,
    /// after the cursor), ten minutes pass and the engine reconnects. Returns the new events.
    static func learnedThenChanged(_ change: (inout WireRelay) -> Void) -> (EngineWorld, [VerifiedEvent]) {
        func newestFirst(_ events: [VerifiedEvent]) -> [VerifiedEvent] {
            events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        }
        let w = EngineWorld()
        w.account.policy = [("notes", [SyncEngineTests.notes], nil)]
        let start = w.unix
        let before = (0..<1_200).map { Fixtures.event(start - 10_000 + Int64($0 / 3), content: "before \($0)") }
        w.relays[0].stored = newestFirst(before)
        w.start()
        w.run(for: 2_000)
        #expect(before.allSatisfy { w.account.events[$0.id] != nil })
        let learned = w.engine.relays[0].paging
        #expect(learned?.largestPage == 500 && learned?.until == .inclusive, "learned \(String(describing: learned))")
        let cursor = w.account.cursors[w.account.key(w.urls[0], "notes")] ?? w.unix
        w.cut(0)
        change(&w.relays[0])
        let after = (0..<1_200).map { Fixtures.event(cursor + 1 + Int64($0 / 3), content: "after \($0)") }
        w.relays[0].stored = newestFirst(before + after)
        w.unix += 600
        w.run(for: 60_000)
        return (w, after)
    }

    /// Events newest first, as `WireRelay.stored` holds them.
    static func newestFirst(_ events: [VerifiedEvent]) -> [VerifiedEvent] {
        events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
    }

    /// Every `synced` outcome reported for subscription `id`, in order.
    static func syncedOutcomes(_ w: EngineWorld, _ id: String) -> [SyncOutcome] {
        w.reports.compactMap { if case .synced(_, id, _, let outcome) = $0 { outcome } else { nil } }
    }

    /// Path 10, oversized events under NIP-77: the account lacks 100 of 600 notes, two of them
    /// too big for our frames. They were named only in notices (which the C ABI's queue dropped
    /// first), the `synced` report said the window was whole, and every NIP-77 connection
    /// fetched both again only to skip them again (4 oversized messages over two connections).
    /// Now each connection's `synced` report lists both as skipped for `oversized`, and the
    /// second connection does not ask for them: the relay sends each once.
    @Test func oversizedEventsAreReportedSkippedAndNotFetchedAgainOnTheNextConnection() {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        let notes = (0..<600).map { Fixtures.event(w.unix - 30 * 86_400 + Int64($0) * 4_000, content: "n\($0)") }
        w.relays[0].stored = Self.newestFirst(notes)
        for (i, e) in notes.enumerated() where i % 6 != 0 { w.account.events[e.id] = e }
        // Two of the missing ones, not the newest (the live REQ asks for one stored event).
        let big: Set<String> = [notes[0].id, notes[300].id]
        w.relays[0].overOurBound = big
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        w.start()
        w.run(for: 10_000)
        let fits = notes.filter { !big.contains($0.id) }
        #expect(fits.allSatisfy { w.account.events[$0.id] != nil }, "the 98 that fit are fetched")
        #expect(w.synced(0, "notes"))
        #expect(w.relays[0].seen[.eventOverOurBound, default: 0] == 2)
        let first = Self.syncedOutcomes(w, "notes")
        #expect(first.count == 1)
        #expect(first.first?.method == .negentropy)
        let skipped = first.last?.skipped ?? []
        #expect(skipped.map(\.reason) == [SkipReason.oversized], "\(skipped)")
        #expect(skipped.first?.count == 2)
        #expect(Set(skipped.first?.eventIDs ?? []) == big)

        w.cut(0)
        w.run(for: 30_000)
        let second = Array(Self.syncedOutcomes(w, "notes").dropFirst(first.count))
        #expect(second.count == 1, "\(second)")
        #expect(second.first?.method == .negentropy)
        #expect(w.relays[0].seen[.eventOverOurBound, default: 0] == 2, "the next connection fetched the oversized events again")
        let again = second.last?.skipped ?? []
        #expect(again.map(\.reason) == [SkipReason.oversized], "\(again)")
        #expect(again.first?.count == 2)
        #expect(Set(again.first?.eventIDs ?? []) == big, "still missing from the account, and reported so")
    }

    /// Path 10, ids NIP-77 found that the relay never served: the relay lists 3 of the 60 notes
    /// the account lacks in its reconciliation, then sends none of them when asked by id (deleted
    /// or expired between the two, an index that outlived them). The reconciliation gave them
    /// up — a count in `NegentropySync.givenUp` that nothing read — and the `synced` report said
    /// the window was whole. Now the report lists the three as skipped for `notServed`.
    @Test func idsTheRelayListsButNeverServesAreReportedSkipped() {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        let notes = (0..<300).map { Fixtures.event(w.unix - 30 * 86_400 + Int64($0) * 8_000, content: "n\($0)") }
        w.relays[0].stored = Self.newestFirst(notes)
        for (i, e) in notes.enumerated() where i % 5 != 0 { w.account.events[e.id] = e }
        let withheld: Set<String> = [notes[5].id, notes[100].id, notes[250].id]
        w.relays[0].listedNotServed = withheld
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        w.start()
        w.run(for: 10_000)
        #expect(w.synced(0, "notes"))
        let missing = Set(notes.filter { w.account.events[$0.id] == nil }.map(\.id))
        #expect(missing == withheld, "the other 57 are fetched")
        let outcomes = Self.syncedOutcomes(w, "notes")
        #expect(outcomes.count == 1)
        #expect(outcomes.first?.method == .negentropy)
        let skipped = outcomes.last?.skipped ?? []
        #expect(skipped.map(\.reason) == [SkipReason.notServed], "\(skipped)")
        #expect(skipped.first?.count == 3)
        #expect(Set(skipped.first?.eventIDs ?? []) == withheld)
    }

    /// Path 10, oversized events in pages (a relay without NIP-77, capping pages at 10 without
    /// saying so): every tenth of 60 notes is too big for our frames. Paging went on below each
    /// (it takes its slot), but the six were named only in notices and the `synced` report said
    /// the window was whole. Now the reports list the six as skipped for `oversized`, each once
    /// however often its page was asked.
    @Test func oversizedEventsOfPagesAreReportedSkipped() {
        let w = EngineWorld()
        w.account.policy = [("notes", [#"{"kinds":[1]}"#], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        let events = (0..<60).map { Fixtures.event(w.unix - 3_000 + Int64($0) * 40, content: "n\($0)") }
        w.relays[0].stored = Self.newestFirst(events)
        w.relays[0].cap = 10
        w.relays[0].negentropy = .notice
        let big = Set(events.enumerated().filter { $0.offset % 10 == 0 }.map(\.element.id))
        w.relays[0].overOurBound = big
        w.start()
        w.run(for: 20_000)
        #expect(w.synced(0, "notes"))
        #expect(events.filter { !big.contains($0.id) }.allSatisfy { w.account.events[$0.id] != nil })
        let outcomes = Self.syncedOutcomes(w, "notes")
        #expect(!outcomes.isEmpty)
        let skipped = outcomes.reduce([SkippedEvents]()) { SkippedEvents.merged($0, with: $1.skipped) }
        #expect(skipped.map(\.reason) == [SkipReason.oversized], "\(skipped)")
        #expect(skipped.first?.count == 6)
        #expect(Set(skipped.first?.eventIDs ?? []) == big)
    }
}
