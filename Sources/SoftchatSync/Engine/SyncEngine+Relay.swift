import SoftchatCore
import SoftchatJSON

/// Connections: session setup from NIP-11, open / lost / backoff, keepalive, receive.
extension SyncEngine {
    /// Events awaiting their commit on one relay before its text is held back.
    static let deferAt = 512

    /// True when enough events wait for a commit that the host should run `pollAction()` now
    /// rather than at the end of its round of I/O (it batches commits by rounds otherwise).
    public var wantsFlush: Bool { pendingIngest.count >= 256 || relays.contains { !$0.deferred.isEmpty } }

    /// Feeds text held back while the session was full, after a commit made room.
    func replayDeferred() {
        for r in relays.indices where !relays[r].deferred.isEmpty && relays[r].awaitingCommit < Self.deferAt {
            let texts = relays[r].deferred
            relays[r].deferred.removeAll()
            for (i, text) in texts.enumerated() {
                if relays[r].awaitingCommit >= Self.deferAt {
                    relays[r].deferred = Array(texts[i...])
                    break
                }
                received(r, text)
            }
        }
    }

    /// The seed of a relay's reconnect jitter: `seed` mixed with the relay URL (FNV-1a, then a
    /// SplitMix step), so relays of one engine draw different delays from one host seed.
    static func jitterSeed(_ seed: Int64, relayURL: String) -> Int64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in relayURL.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        var mix = SplitMix64(seed: hash ^ UInt64(bitPattern: seed))
        return Int64(bitPattern: mix.next())
    }

    func startSession(_ r: Int, limits: RelayLimits?) {
        guard relays[r].session == nil, relays[r].phase == .starting else { return }
        relays[r].limits = limits
        if let stated = limits?.maxSubscriptions { relays[r].requests.stated(stated) }
        var config = configuration.session
        switch configuration.eventsBatching {
        case .always: config.supportsEventsBatch = true
        case .never: config.supportsEventsBatch = false
        case .auto: config.supportsEventsBatch = limits?.acceptsEventsBatch ?? false
        }
        // nostr-relay answers EVENTs in order and rejects with an empty id: correlate by order.
        // It also never answers a good AUTH: what waits behind our AUTH goes out after 1 s.
        if let software = limits?.software, software.contains("nostr_relay") {
            config.correlateUnnamedAcknowledgements = true
            config.authenticationWaitSeconds = 1
        }
        config.relayURL = relays[r].url
        // Each relay's reconnect jitter from its own seed: the host's seed (random per client run
        // in the managed transport) mixed with the relay URL, so neither the clients of one relay
        // nor one client's relays reconnect in lockstep.
        config.jitterSeed = Self.jitterSeed(configuration.session.jitterSeed, relayURL: relays[r].url)
        config.answersAuthentication = configuration.identity != nil && answersAuthentication(on: relays[r].url)
        config.acknowledgementTimeoutSeconds = configuration.acknowledgementTimeoutSeconds
        if let limit = limits?.maxMessageLength, Int64(limit) >= RelaySessionConfig.minimumMessageBytes {
            config.maxMessageBytes = Int64(limit)
        }
        do {
            relays[r].session = try RelaySession(config: config)
        } catch {
            report(.notice(relayURL: relays[r].url, "cannot start a session: \(error.code.rawValue): \(error.message)"))
            relays[r].phase = .stopped
            setState(r, .stopped)
            return
        }
        buildSubscriptions(r)
        connect(r)
    }

    /// How long after a NIP-11 fetch that brought nothing a connection asks again.
    static let informationRetryMilliseconds: Int64 = 300_000

    func askInformation(_ r: Int) {
        relays[r].informationAskedAt = now.monotonicMilliseconds
        relays[r].informationPending = true
        push(.action(.fetchInformation(relay: r, url: relays[r].url)))
    }

    /// A NIP-11 document asked for again after the first fetch brought none (the session runs
    /// already): what a running connection can change takes effect now (the REQ budget, the page
    /// size, the `until` convention, NIP-42 and NIP-77 hints); the frame bound and EVENTS batches
    /// are the session's and wait for the next start.
    func informationArrived(_ r: Int, _ limits: RelayLimits?) {
        guard let limits, relays[r].limits == nil else { return }
        relays[r].limits = limits
        if let stated = limits.maxSubscriptions { relays[r].requests.stated(stated) }
        guard var paging = relays[r].paging else { return }
        paging.narrow(maxLimit: limits.maxLimit, untilConvention: limits.untilConvention)
        relays[r].paging = paging
        for id in relays[r].subscriptions.keys { relays[r].subscriptions[id]!.sync.learn(from: paging) }
    }

    /// The policy's subscriptions for relay `r`, each resumed from its durable state when that
    /// state is for the same filters (a changed subscription starts over, without a cursor).
    func buildSubscriptions(_ r: Int) {
        var paging = relays[r].paging ?? configuration.paging(for: relays[r].url)
        if relays[r].paging == nil {
            paging.narrow(maxLimit: relays[r].limits?.maxLimit, untilConvention: relays[r].limits?.untilConvention)
        }
        for entry in relays[r].policy {
            var filters: [RelayFilter] = []
            for text in entry.filtersJSON {
                guard let filter = try? RelayFilter.fromJSON(text) else { continue }
                filters.append(filter)
            }
            guard !filters.isEmpty, filters.count == entry.filtersJSON.count else {
                report(.notice(relayURL: relays[r].url, "subscription \(entry.subscriptionID) has invalid filters; skipped"))
                continue
            }
            let horizon = configuration.horizons[entry.subscriptionID] ?? entry.horizon
            var sync = SubscriptionSync(
                filters: filters, cursor: entry.storedFiltersJSON == nil ? entry.cursor : nil,
                horizon: horizon, paging: paging)
            if let stored = entry.storedStateJSON, entry.storedFiltersJSON == entry.filtersJSON,
                let json = try? JSONReader().parse(stored), let resumed = try? SubscriptionSync(json: json)
            {
                if horizon == nil || resumed.horizon == horizon {
                    // What the stored state learned of the relay, and what the relay's other
                    // subscriptions know, together.
                    sync = resumed
                    paging.learn(from: resumed.paging)
                } else {
                    // Another horizon: keep the cursor, start a new window.
                    sync = SubscriptionSync(filters: filters, cursor: resumed.cursor, horizon: horizon, paging: paging)
                }
            }
            relays[r].subscriptions[entry.subscriptionID] = SubscriptionRuntime(
                id: entry.subscriptionID, filtersJSON: entry.filtersJSON, filters: filters, sync: sync, durable: sync)
        }
        relays[r].paging = paging
        for (k, id) in relays[r].subscriptions.keys.sorted().enumerated() {
            relays[r].subscriptions[id]!.stem = String(id.prefix(40)) + "~\(k)"
        }
        for id in relays[r].subscriptions.keys { relays[r].subscriptions[id]!.sync.learn(from: paging) }
    }

    /// Passes what one subscription's page taught about relay `r`'s paging to the relay and to
    /// its other subscriptions.
    func sharePaging(_ r: Int, from id: String) {
        guard let learned = relays[r].subscriptions[id]?.sync.paging, var paging = relays[r].paging, learned != paging else { return }
        paging.learn(from: learned)
        relays[r].paging = paging
        for other in relays[r].subscriptions.keys where relays[r].subscriptions[other]!.sync.paging != paging {
            relays[r].subscriptions[other]!.sync.learn(from: paging)
        }
    }

    func connect(_ r: Int) {
        guard !stopping, let session = relays[r].session else { return }
        do {
            process(r, try session.connect())
        } catch {
            report(.notice(relayURL: relays[r].url, "connect refused: \(error.message)"))
        }
    }

    func opened(_ r: Int) {
        guard relays[r].phase == .connecting, let session = relays[r].session else { return }
        let mono = now.monotonicMilliseconds
        do {
            process(r, try session.transportConnected(now: now.unixSeconds))
        } catch {
            report(.notice(relayURL: relays[r].url, "transportConnected refused: \(error.message)"))
            return
        }
        if relays[r].everConnected { relays[r].statistics.reconnects += 1 }
        // NIP-11 failed before (a timeout, an error page): ask again, at most every five minutes.
        if configuration.fetchRelayInformation, relays[r].limits == nil, !relays[r].informationPending,
            relays[r].informationAskedAt.map({ mono - $0 >= Self.informationRetryMilliseconds }) ?? true
        {
            askInformation(r)
        }
        relays[r].everConnected = true
        relays[r].phase = .connected
        relays[r].neg.connected()
        let negentropy = wantsNegentropy(r)
        relays[r].keepalive.heard(mono)
        let speaksAuth = relays[r].limits?.supportsAuthentication ?? false
        // Whether this connection will answer a challenge at all (an identity, and the cleartext
        // policy): otherwise neither wait for one nor report "authenticating".
        let answers = configuration.identity != nil && answersAuthentication(on: relays[r].url)
        relays[r].authentication.connected(now: mono, challengeExpected: answers && speaksAuth, grace: configuration.authenticationGraceMilliseconds)
        let authFirst = relays[r].limits?.authenticationRequired == true && answers
        setState(r, authFirst ? .authenticating : .ready)
        // The live REQs of every subscription together, then each one's ahead REQ and its sync's
        // next page, through the REQ budget.
        subscribeLive(r)
        // A cap learned on an earlier connection is learned again on this one, from the page
        // size configured and narrowed by NIP-11 (`RelayPaging.relearnCap(from:)`).
        var start = configuration.paging(for: relays[r].url)
        start.narrow(maxLimit: relays[r].limits?.maxLimit, untilConvention: nil)
        relays[r].paging?.relearnCap(from: start)
        for id in relays[r].subscriptions.keys.sorted() {
            relays[r].subscriptions[id]!.sync.relearnCap(from: start)
            relays[r].subscriptions[id]!.connectedAt = now.unixSeconds
            relays[r].subscriptions[id]!.sync.begin(now: now.unixSeconds, deepResyncInterval: configuration.deepResyncIntervalSeconds)
            let ahead = Self.aheadID(stem: relays[r].subscriptions[id]!.stem, attempt: 1)
            relays[r].aheadREQs[ahead] = id
            request(r, id: ahead, filtersJSON: relays[r].subscriptions[id]!.aheadFilters(now: now.unixSeconds))
            if negentropy { beginNegentropy(r, id) } else { advanceSync(r, id) }
        }
    }

    /// How a page in flight ended without its EOSE.
    enum PageFailure: Equatable {
        /// The relay closed it (`CLOSED`), maybe part-way through its answer.
        case closed(prefix: String?, message: String)
        /// Nothing came for it, or nothing more, within `requestDeadlineMilliseconds`.
        case unanswered
    }

    /// A page the relay closed, maybe part-way through its answer, or left unanswered past its
    /// deadline. The session would send a closed REQ again itself with a `since` of its newest
    /// event, which is a live subscription's rule: a page so narrowed ends short and looks final,
    /// and the rest of the window was skipped. The engine takes it back instead: the page is
    /// asked again whole (same `until`, under a new id; what it brought is kept for duplicates
    /// only), and never counts as ended (the window is not reported synced meanwhile).
    ///
    /// When (issue 45, path 6: each retry had a new id and the session's backoff counted per id,
    /// so a page the relay kept closing was asked every second, for ever):
    /// - `error:`, `rate-limited:`, the relay's limit, or no answer: after
    ///   `retrySchedule.delayMilliseconds(attempt:)` of the failures of the same page in a row —
    ///   the reconnect schedule (`ReconnectBackoff`) without jitter: the reconnect base, doubling
    ///   per failure up to the reconnect maximum, where it stays; at the `refusalTries`-th the
    ///   window is reported refused;
    /// - `auth-required:`: once the relay accepts our AUTH, not on a clock (at once if it already
    ///   has, once); refused when this engine does not authenticate here;
    /// - anything else (`blocked:`, `restricted:`, `invalid:`, no prefix): refused, the window
    ///   open until the next connection.
    ///
    /// One notice per page: at its first failure (and one more when its window is refused).
    func pageFailed(_ r: Int, _ pageID: String, owner: String, _ failure: PageFailure) {
        try? relays[r].session?.unsubscribe(id: pageID)
        requestEnded(r, pageID)
        guard var sub = relays[r].subscriptions[owner] else { return }
        sub.pageID = nil
        sub.sync.restarted()
        sub.pageFailures += 1
        let tries = sub.pageFailures
        let mono = now.monotonicMilliseconds
        let cause: String
        let retryable: Bool
        switch failure {
        case .closed(let prefix, let message):
            cause = "the relay closed a page (\(prefix ?? "no prefix"): \(message))"
            retryable = prefix == "error" || prefix == "rate-limited" || Self.saysTooManySubscriptions(message)
        case .unanswered:
            cause = "no answer to a page within \(requestDeadline) ms"
            retryable = true
        }
        var notice: String?
        var refusal: String?
        if case .closed(let prefix, _) = failure, prefix == "auth-required" {
            if !answersChallenges(r) {
                sub.pageHold = .refused
                refusal = "\(cause), and this engine does not authenticate to it; the window stays open until the next connection"
            } else if !relays[r].authentication.isAccepted {
                sub.pageHold = .authentication
                if tries == 1 { notice = "\(owner): \(cause); it is asked again once the relay accepts our AUTH" }
            } else if !sub.pageAuthReplayed {
                // Our AUTH was accepted before this CLOSED came (a relay that answers out of
                // order): once more, at once.
                sub.pageAuthReplayed = true
                sub.pageHold = .retryAt(mono)
            } else {
                sub.pageHold = .refused
                refusal = "\(cause) although our AUTH was accepted; the window stays open until the next connection"
            }
        } else if retryable {
            let delay = retrySchedule.delayMilliseconds(attempt: tries)
            sub.pageHold = .retryAt(mono + delay)
            if tries == 1 {
                notice = "\(owner): \(cause); it is asked again whole in \(delay) ms, the wait doubling per failure in a row"
            }
            if tries == Self.refusalTries {
                let longest = retrySchedule.delayMilliseconds(attempt: Int.max) / 1_000
                refusal = "\(cause), \(tries) times in a row; not synced, it is asked again every \(longest) s at most"
            }
        } else {
            sub.pageHold = .refused
            refusal = "\(cause); the window stays open until the next connection"
        }
        if let refusal, !sub.refused {
            sub.refused = true
            notice = "\(owner): window refused: \(refusal)"
        }
        relays[r].subscriptions[owner] = sub
        if let notice { report(.notice(relayURL: relays[r].url, notice)) }
    }

    /// Pages due to be asked again after their CLOSED or deadline.
    func retryClosedPages(_ r: Int, _ mono: Int64) {
        guard relays[r].phase == .connected else { return }
        for id in relays[r].subscriptions.keys.sorted() {
            guard let due = relays[r].subscriptions[id]!.pageRetryAt, due <= mono else { continue }
            relays[r].subscriptions[id]!.pageHold = nil
            advanceSync(r, id)
        }
    }

    /// Whether this engine answers relay `r`'s NIP-42 challenges (an identity, and the
    /// cleartext policy).
    func answersChallenges(_ r: Int) -> Bool { configuration.identity != nil && answersAuthentication(on: relays[r].url) }

    /// The relay accepted our AUTH (its OK, or a second of silence): the pages it closed
    /// `auth-required:` are asked again now.
    func authenticationAccepted(_ r: Int) {
        for id in relays[r].subscriptions.keys.sorted() where relays[r].subscriptions[id]!.pageHold == .authentication {
            relays[r].subscriptions[id]!.pageHold = nil
            advanceSync(r, id)
        }
    }

    /// The relay refused our AUTH: the pages waiting for it are reported refused (once each);
    /// they wait on, for an AUTH a later challenge may bring.
    func authenticationRefused(_ r: Int) {
        for id in relays[r].subscriptions.keys.sorted() {
            guard let sub = relays[r].subscriptions[id], sub.pageHold == .authentication, !sub.refused else { continue }
            relays[r].subscriptions[id]!.refused = true
            report(
                .notice(
                    relayURL: relays[r].url,
                    "\(id): window refused: its page needs NIP-42 authentication and the relay refused our AUTH"))
        }
    }

    /// Sends the subscription's next page, or records a completed window.
    func advanceSync(_ r: Int, _ id: String) {
        // A held page is asked again by what it waits for (its clock, an accepted AUTH).
        guard var sub = relays[r].subscriptions[id], sub.pageHold == nil, relays[r].session != nil else { return }
        defer { relays[r].subscriptions[id] = sub }
        switch sub.sync.next() {
        case .idle, .awaitingEndOfStoredEvents:
            return
        case .send(let request):
            sub.pageNumber += 1
            let pageID = sub.stem + "~p\(sub.pageNumber)"
            sub.pageID = pageID
            sub.dirty = true
            relays[r].pageOwner[pageID] = id
            // Stored before it is sent: a REQ the session refuses ends the page at once
            // (`requestNotSent`), and that must not be written over.
            relays[r].subscriptions[id] = sub
            self.request(r, id: pageID, filtersJSON: [request.filter.toJSON()])
            sub = relays[r].subscriptions[id]!
            queueIngestFlush()
        case .synced(let outcome):
            sub.completed = outcome
            sub.dirty = true
            queueIngestFlush()
            if outcome.cursor < sub.connectedAt {
                // A window resumed from an earlier connection ended before this one began:
                // what reached the relay since (live events we were not there for, with any
                // created_at after that window) is the next window's, now.
                sub.sync.begin(now: now.unixSeconds, deepResyncInterval: configuration.deepResyncIntervalSeconds)
                relays[r].subscriptions[id] = sub
                advanceSync(r, id)
                sub = relays[r].subscriptions[id]!
            }
        }
    }

    /// The connection ended (or never opened): the session decides what that means for
    /// deliveries and when to reconnect; every REQ is withdrawn (the next connection sends the
    /// live REQs afresh and asks the pages in flight again).
    func lost(_ r: Int, reason: String) {
        guard relays[r].phase == .connected || relays[r].phase == .connecting, let session = relays[r].session else { return }
        report(.notice(relayURL: relays[r].url, "connection lost: \(reason)"))
        relays[r].delivery.connectionLost()
        relays[r].deferred.removeAll()
        relays[r].keepalive.reset()
        relays[r].authentication.connectionLost()
        do {
            process(r, try session.transportLost(now: now.unixSeconds))
        } catch {
            report(.notice(relayURL: relays[r].url, "transportLost refused: \(error.message)"))
        }
        relays[r].pageOwner.removeAll()
        relays[r].aheadREQs.removeAll()
        negentropyLost(r)
        withdrawRequests(r)
        for id in relays[r].subscriptions.keys.sorted() {
            relays[r].subscriptions[id]!.clearPageFailures()
            relays[r].subscriptions[id]!.live = .notSent
            relays[r].subscriptions[id]!.pageID = nil
            relays[r].subscriptions[id]!.sync.restarted()
        }
    }

    func received(_ r: Int, _ text: String) {
        guard let session = relays[r].session else { return }
        relays[r].keepalive.heard(now.monotonicMilliseconds)
        if Self.isNegentropyFrame(text) {
            receivedNegentropy(r, text)
            return
        }
        // The session holds at most 1,024 events awaiting their commit: past half of that,
        // text waits here (in order) for the next commit instead of being refused.
        if !relays[r].deferred.isEmpty || relays[r].awaitingCommit >= Self.deferAt {
            relays[r].deferred.append(text)
            queueIngestFlush()
            return
        }
        let actions: [RelaySessionAction]
        do {
            // Read, screen, then apply: the screen runs here, not as a callback under the
            // session's lock.
            let frame = try session.read(text)
            if let claimed = frame.claimedEvent, !screen(r, claimed.subscriptionID, claimed.eventID, claimed.createdAt) { return }
            actions = try session.receive(frame, now: now.unixSeconds)
        } catch {
            // Invalid relay text changes nothing; note it and go on.
            report(.notice(relayURL: relays[r].url, "relay sent an invalid frame: \(error.code.rawValue): \(error.message)"))
            return
        }
        process(r, actions)
    }

    /// Before verification: a page counts every event the relay sends for it; ids already held
    /// (the page's own overlap, a copy from another relay) are dropped unverified — here, the
    /// one place duplicates are dropped before the account's own `UNIQUE` id.
    func screen(_ r: Int, _ subscriptionID: String, _ eventID: String, _ createdAt: Int64) -> Bool {
        // An answer is coming, duplicates included: its REQ's deadline moves on.
        requestHeard(r, subscriptionID)
        if let owner = relays[r].pageOwner[subscriptionID] {
            // Not a durable change: what a page in flight has counted is reset when a loaded
            // state asks the page again, so the state is written at page boundaries only (with
            // the events before them), not with every event.
            let disposition = relays[r].subscriptions[owner]!.sync.received(eventID: eventID, createdAt: createdAt)
            if disposition == .new { relays[r].subscriptions[owner]!.windowEvents += 1 }
            if disposition == .duplicate {
                relays[r].statistics.duplicatesSkipped += 1
                return false
            }
        }
        let fetchedFor = relays[r].neg.fetchOwner[subscriptionID]
        if let owner = fetchedFor { relays[r].subscriptions[owner]?.negentropy?.fetchReceived(eventID) }
        if recent.contains(eventID) {
            relays[r].statistics.duplicatesSkipped += 1
            return false
        }
        if let owner = fetchedFor { relays[r].subscriptions[owner]?.windowEvents += 1 }
        return true
    }

    func process(_ r: Int, _ actions: [RelaySessionAction]) {
        for action in actions {
            switch action {
            case .openTransport:
                relays[r].phase = .connecting
                setState(r, .connecting)
                push(.action(.open(relay: r, url: relays[r].url)))
            case .closeTransport:
                break
            case .persistEvent(let subscriptionID, let event):
                requestHeard(r, subscriptionID)
                relays[r].statistics.eventsReceived += 1
                relays[r].awaitingCommit += 1
                recent.insert(event.id)
                pendingIngest.append((r, event))
                queueIngestFlush()
            case .eventRejected(let subscriptionID, let eventID, let reason):
                if let owner = relays[r].pageOwner[subscriptionID] {
                    relays[r].subscriptions[owner]?.sync.forget(eventID: eventID)
                    relays[r].subscriptions[owner]?.windowEvents -= 1
                }
                // A REQ closed before its last 32 closings (the session still takes events of
                // those, verified against their filters): such an event is no news to report.
                guard
                    relays[r].pageOwner[subscriptionID] != nil || relays[r].requests.liveChunks[subscriptionID] != nil
                        || relays[r].aheadREQs[subscriptionID] != nil
                else { continue }
                report(.notice(relayURL: relays[r].url, "event \(eventID) on \(subscriptionID) refused: \(reason)"))
            case .endOfStoredEvents(let subscriptionID):
                requestHeard(r, subscriptionID)
                if relays[r].aheadREQs.removeValue(forKey: subscriptionID) != nil {
                    try? relays[r].session?.unsubscribe(id: subscriptionID)
                    requestEnded(r, subscriptionID)
                    continue
                }
                if fetchEnded(r, subscriptionID) {
                    requestEnded(r, subscriptionID)
                    continue
                }
                if let members = relays[r].requests.liveChunks[subscriptionID] {
                    for id in members { relays[r].subscriptions[id]?.live = .registered }
                    openNegentropy(r)
                    continue
                }
                guard let owner = relays[r].pageOwner.removeValue(forKey: subscriptionID) else { continue }
                try? relays[r].session?.unsubscribe(id: subscriptionID)
                requestEnded(r, subscriptionID)
                relays[r].subscriptions[owner]?.pageID = nil
                relays[r].subscriptions[owner]?.clearPageFailures()
                relays[r].subscriptions[owner]?.sync.endOfStoredEvents()
                relays[r].subscriptions[owner]?.dirty = true
                sharePaging(r, from: owner)
                advanceSync(r, owner)
            case .subscriptionClosed(let subscriptionID, let prefix, let message, let retry):
                let forLimit = relays[r].requests.isOpen(subscriptionID) && Self.saysTooManySubscriptions(message)
                // Refused for the relay's limit: not this REQ's fault; it goes again in turn.
                if forLimit { requestsRefused(r) }
                if let owner = relays[r].pageOwner.removeValue(forKey: subscriptionID) {
                    // Reported by pageFailed, once per page however often the relay closes it.
                    pageFailed(r, subscriptionID, owner: owner, .closed(prefix: prefix, message: message))
                    continue
                }
                let again = retry.map { " (sent again in \($0) ms)" } ?? ""
                report(.notice(relayURL: relays[r].url, "relay closed \(subscriptionID): \(prefix ?? "") \(message)\(again)"))
                if let members = relays[r].requests.liveChunks[subscriptionID] {
                    // A live REQ the session sends again itself (`error:`, `rate-limited:`, an
                    // `auth-required:` once authenticated) is waited for; one it does not send
                    // again will not answer on this connection, and nothing waits for it.
                    if retry == nil { liveRefused(r, members, reason: prefix.map { "\($0): \(message)" } ?? message) }
                    continue
                }
                if forLimit { continue }
                if let owner = relays[r].neg.fetchOwner[subscriptionID] {
                    // A fetch by ids the session would narrow with a `since` of its own (every
                    // older id dropped): the engine asks it again whole, a few times, then pages.
                    let filters = relays[r].requests.filters(of: subscriptionID)
                    try? relays[r].session?.unsubscribe(id: subscriptionID)
                    requestEnded(r, subscriptionID)
                    let tries = relays[r].neg.fetchRetries[subscriptionID, default: 0] + 1
                    relays[r].neg.fetchRetries[subscriptionID] = tries
                    if let filters, tries <= 3, prefix == "error" || prefix == "rate-limited" || prefix == "auth-required" {
                        request(r, id: subscriptionID, filtersJSON: filters)
                    } else {
                        fallBack(r, owner, reason: "fetch closed: \(message)")
                    }
                    continue
                }
                if retry == nil { requestEnded(r, subscriptionID) }
            case .notice(let subscriptionID, _, _, let message, let reason):
                report(.notice(relayURL: relays[r].url, reason ?? message))
                if Self.saysTooManySubscriptions(message) {
                    requestsRefused(r)
                } else if subscriptionID == nil && reason == nil {
                    // A relay NOTICE, whatever its text, may be the only answer to a REQ it
                    // dropped (nostr-relay's bare "rate-limited"): every one-shot that heard
                    // nothing yet is sent again in place if it stays silent.
                    relays[r].requests.suspectUnheard(now: now.monotonicMilliseconds)
                }
                noticeDuringNegentropy(r, reason ?? message)
            case .countResult:
                break
            case .authenticationRequested(let challenge):
                authenticate(r, challenge)
            case .authenticated:
                relays[r].authentication.accepted()
                setState(r, .ready)
                authenticationAccepted(r)
            case .authenticationFailed(_, let prefix, let message):
                relays[r].authentication.refused(prefix.map { "\($0): \(message)" } ?? message)
                report(.notice(relayURL: relays[r].url, "authentication refused: \(prefix ?? "") \(message)"))
                setState(r, .ready)
                authenticationRefused(r)
            case .deliveryChanged(let decision):
                deliveryChanged(r, decision)
            case .scheduleReconnect(let delay, _):
                relays[r].phase = .backingOff(until: now.monotonicMilliseconds + delay)
                setState(r, .backingOff(delayMilliseconds: delay))
            }
        }
    }

    /// The NIP-42 policy for a relay: answered unless the connection is cleartext
    /// (`RelayURL.isCleartext`) to a host other than this machine and the host did not opt in
    /// (`authenticatesOverCleartext`).
    func answersAuthentication(on url: String) -> Bool {
        guard let parsed = try? RelayURL(url) else { return false }
        return !parsed.isCleartext || parsed.isLoopback || configuration.authenticatesOverCleartext
    }

    func authenticate(_ r: Int, _ challenge: String) {
        guard let identity = configuration.identity, let session = relays[r].session else { return }
        guard answersAuthentication(on: relays[r].url) else {
            report(
                .notice(
                    relayURL: relays[r].url,
                    "AUTH not answered: the connection is cleartext to a remote host, where anyone on the path could take the "
                        + "signed answer (SyncEngineConfiguration.authenticatesOverCleartext opts in)"))
            return
        }
        do {
            let auth = try identity.createNip42Authentication(challenge: challenge, relayURL: relays[r].url, createdAt: now.unixSeconds)
            process(r, try session.authenticate(auth, now: now.unixSeconds))
            relays[r].authentication.answered(now: now.monotonicMilliseconds)
            setState(r, .authenticating)
        } catch {
            report(.notice(relayURL: relays[r].url, "cannot answer the challenge: \(error.message)"))
        }
    }

    // MARK: Timers and output

    /// After every input: relay by relay, each timer that expired since `expiredSince` (only for
    /// `.timer`; nil for any other input), then the progress the input may have allowed.
    func service(expiredSince: EngineTime?) {
        for r in relays.indices {
            if let previous = expiredSince {
                for timer in expiredTimers(r, since: previous) { timerExpired(timer, relay: r) }
            }
            makeProgress(r)
        }
    }

    /// Relay `r`'s timers due at `now`, in `EngineTimer.allCases` order: those at or before `now`
    /// in its table as `pollTimeout()` saw it (at `previous`, the clocks of the last input) or as
    /// it stands now (the wall clock may have moved a Unix-second deadline since).
    func expiredTimers(_ r: Int, since previous: EngineTime) -> [EngineTimer] {
        let mono = now.monotonicMilliseconds
        let before = relays[r].timers(now: previous, configuration: configuration)
        let current = relays[r].timers(now: now, configuration: configuration)
        return EngineTimer.allCases.filter { timer in
            before[timer].map { $0 <= mono } == true || current[timer].map { $0 <= mono } == true
        }
    }

    /// Runs what timer `timer` of relay `r` waited for. A handler may find nothing to do (the
    /// state moved since the table was read, or the wall clock is behind a Unix-second deadline:
    /// its entry, converted from the current clocks, then lies ahead); but none leaves its
    /// entry at or before `now`, or the host would call `.timer` again at once, for ever. How
    /// each keeps that is said per case.
    func timerExpired(_ timer: EngineTimer, relay r: Int) {
        let mono = now.monotonicMilliseconds
        switch timer {
        case .reconnect:
            // Moves: `connect` makes the relay `connecting`; one the session refuses backs off
            // again from now.
            guard case .backingOff(let until) = relays[r].phase, mono >= until, !stopping else { return }
            connect(r)
            if case .backingOff(let still) = relays[r].phase, still <= mono {
                relays[r].phase = .backingOff(until: mono + retrySchedule.delayMilliseconds(attempt: 1))
            }
        case .acknowledgement:
            // Moves: `handleTimeout` times out each event past its deadline (or starts one that
            // had none), ends the AUTH wait, queues each due subscription retry (or puts it a base
            // delay later) and offers a waiting challenge, so its `pollTimeout()` lies ahead.
            // Nothing while the wall clock is behind it: the entry lies ahead then.
            guard relays[r].phase == .connected, let session = relays[r].session,
                let due = session.pollTimeout(), now.unixSeconds >= due
            else { return }
            do { process(r, try session.handleTimeout(now: now.unixSeconds)) } catch {
                report(.notice(relayURL: relays[r].url, "handleTimeout refused: \(error.message)"))
            }
        case .authenticationAnswer:
            // Moves: silence taken as acceptance ends the wait.
            guard relays[r].phase == .connected, relays[r].authentication.silentlyAccepted(now: mono) else { return }
            // No answer to our AUTH: some relays stay silent on success (nostr-relay does).
            setState(r, .ready)
            authenticationAccepted(r)
        case .keepalive:
            // Moves: a ping waits for its read deadline; a ping unanswered that long ends the
            // connection (its timers go with it).
            guard relays[r].phase == .connected else { return }
            switch relays[r].keepalive.poll(
                now: mono, interval: configuration.keepaliveIntervalMilliseconds, readDeadline: configuration.readDeadlineMilliseconds)
            {
            case .lost:
                push(.action(.close(relay: r)))
                lost(r, reason: "no answer to a keepalive ping within \(configuration.readDeadlineMilliseconds) ms")
            case .nothing:
                break
            case .ping:
                push(.action(.ping(relay: r)))
                // Intents another process committed to the same account file send no wake to
                // this one: look for work on the keepalive's wakeup (the progress pass claims),
                // so nothing waits for a reconnect.
                relays[r].delivery.needsClaim = true
            }
        case .negentropyAnswer:
            // Moves: each late NEG subscription is given up (closed, its wait forgotten).
            guard relays[r].phase == .connected else { return }
            negentropyDeadlines(r, mono)
        case .deeperResync:
            // Moves: each due subscription opens its deeper window (none is due while one is
            // open, and the next is an interval after this one). Nothing while the wall clock is
            // behind it: the entry lies ahead then.
            guard relays[r].phase == .connected else { return }
            deeperResyncs(r)
        case .requestAnswer:
            // Moves: each overdue one-shot is ended, its deadline with it.
            requestDeadlines(r, mono)
        case .refusedRequestRetry:
            // Moves: each due suspect is sent again (no longer a suspect) or, without room,
            // waits another round from now.
            retrySuspects(r, mono)
        case .closedPageRetry:
            // Moves: each due page's hold is lifted and the page asked again.
            retryClosedPages(r, mono)
        case .requestBackoff:
            // In the table only while ahead: a REQ whose backoff passed goes now if the budget
            // has room, else when a slot frees (`requestEnded`).
            sendQueuedRequests(r)
        case .authenticationGrace:
            // In the table only while ahead: what waited for the window, the progress pass after
            // the timers writes.
            break
        case .claimPause:
            // In the table only while ahead: the progress pass after the timers claims.
            break
        case .leaseRenewal:
            // Moves: the due lease goes to the account, and no renewal is due while one is asked.
            if let claim = relays[r].delivery.renewalDue(now: mono) { push(.account(.renew(claim), .renew(relay: r))) }
        }
    }

    /// What any input may have made ready on a connected relay, none of it on a clock: queued
    /// REQs go as the budget has room (a REQ ended, a NIP-77 session closed); and once the
    /// challenge window allows writing, work is claimed when it waits (`maybeClaim`: a wake, a
    /// decision, an account answer), then the NEG frames and the session's frames are written.
    func makeProgress(_ r: Int) {
        guard relays[r].phase == .connected, relays[r].session != nil else { return }
        // Queued REQs whose backoff ended go as the budget has room.
        sendQueuedRequests(r)
        let mono = now.monotonicMilliseconds
        guard relays[r].authentication.mayWrite(now: mono), relays[r].phase == .connected else { return }
        maybeClaim(r, mono)
        drainNegentropy(r)
        drain(r)
    }

    /// Opens the deeper window of every paged subscription at rest whose interval has passed
    /// while the connection stayed up (at a connection's start `begin` does it).
    func deeperResyncs(_ r: Int) {
        let interval = configuration.deepResyncIntervalSeconds
        guard let due = relays[r].deeperResyncDue(interval: interval), now.unixSeconds >= due else { return }
        for id in relays[r].subscriptions.keys.sorted() {
            guard let sub = relays[r].subscriptions[id], sub.atRest,
                let at = sub.sync.deeperWindowDue(interval: interval), now.unixSeconds >= at
            else { continue }
            relays[r].subscriptions[id]!.sync.begin(now: now.unixSeconds, deepResyncInterval: interval)
            advanceSync(r, id)
        }
    }

    func drain(_ r: Int) {
        guard let session = relays[r].session, relays[r].phase == .connected else { return }
        let frames: [OutboundRelayFrame]
        do { frames = try session.drainOutbound() } catch {
            report(.notice(relayURL: relays[r].url, "drainOutbound refused: \(error.message)"))
            return
        }
        for frame in frames {
            nextToken += 1
            relays[r].delivery.frameQueued(token: nextToken, eventIDs: frame.deliveryEventIDs)
            push(.action(.write(relay: r, text: frame.frame, token: nextToken)))
        }
    }

    func written(_ r: Int, _ token: Int) {
        if relays[r].neg.wrote(token) { return }
        guard let (ids, marks) = relays[r].delivery.frameWritten(token: token, now: now.monotonicMilliseconds) else { return }
        guard !ids.isEmpty else {
            confirmSent(r, [])
            return
        }
        // Durable first: the intents are in flight before the session says so. An event sent
        // again after authentication is already in flight durably.
        for (claim, intentIDs) in marks { push(.account(.markWritten(claim, intentIDs: intentIDs), .markWritten(relay: r))) }
        push(.confirmSent(relay: r, eventIDs: ids))
    }

    func confirmSent(_ r: Int, _ ids: [String]) {
        guard relays[r].phase == .connected, let session = relays[r].session else { return }
        do { try session.confirmSent(ids, now: now.unixSeconds) } catch {
            report(.notice(relayURL: relays[r].url, "confirmSent refused: \(error.message)"))
        }
    }
}
