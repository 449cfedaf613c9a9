import SoftchatCore
import SoftchatJSON

/// Connections: session setup from NIP-11, open / lost / backoff, keepalive, receive.
extension SyncEngine {
    /// Events awaiting their commit on one relay before its text is held back.
    static let deferAt = 512

    /// True when enough events wait for a commit that the host should run `pollAction()` now
    /// rather than at the end of its round of I/O (it batches commits by rounds otherwise).
    public var wantsFlush: Bool { pendingIngest.count >= 256 || relays.contains { $0.connection?.deferred.isEmpty == false } }

    /// Feeds text held back while the session was full, after a commit made room.
    func replayDeferred() {
        for r in relays.indices { withRelay(r) { $0.replayDeferred($1) } }
    }

    /// The seed of a relay's reconnect jitter: `seed` mixed with the relay URL (FNV-1a, then a
    /// SplitMix step), so relays of one engine draw different delays from one host seed.
    static func jitterSeed(_ seed: Int64, relayURL: String) -> Int64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in relayURL.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        var mix = SplitMix64(seed: hash ^ UInt64(bitPattern: seed))
        return Int64(bitPattern: mix.next())
    }

    /// How long after a NIP-11 fetch that brought nothing a connection asks again.
    static let informationRetryMilliseconds: Int64 = 300_000

    /// How a page in flight ended without its EOSE.
    enum PageFailure: Equatable {
        /// The relay closed it (`CLOSED`), maybe part-way through its answer.
        case closed(prefix: String?, message: String)
        /// Nothing came for it, or nothing more, within `requestDeadlineMilliseconds`.
        case unanswered
    }

    /// The NIP-42 policy for a relay: answered unless the connection is cleartext
    /// (`RelayURL.isCleartext`) to a host other than this machine and the host did not opt in
    /// (`authenticatesOverCleartext`).
    func answersAuthentication(on url: String) -> Bool {
        guard let parsed = try? RelayURL(url) else { return false }
        return !parsed.isCleartext || parsed.isLoopback || configuration.authenticatesOverCleartext
    }

    // MARK: Timers and output

    /// After every input: relay by relay, each timer that expired since `expiredSince` (only for
    /// `.timer`; nil for any other input), then the progress the input may have allowed.
    func service(expiredSince: EngineTime?) {
        for r in relays.indices {
            withRelay(r) { relay, cx in
                if let previous = expiredSince {
                    for timer in relay.expiredTimers(cx, since: previous) { relay.timerExpired(cx, timer) }
                }
                relay.makeProgress(cx)
            }
        }
    }
}

extension RelayRuntime {
    /// Feeds text held back while the session was full, as far as the room a commit made.
    mutating func replayDeferred(_ cx: RelayContext) {
        guard let texts = connection?.deferred, !texts.isEmpty, awaitingCommit < SyncEngine.deferAt else { return }
        connection?.deferred.removeAll()
        for (i, text) in texts.enumerated() {
            // Stops when the session is full again, or when a replayed text ended the connection.
            guard phase == .connected else { break }
            if awaitingCommit >= SyncEngine.deferAt {
                connection?.deferred = Array(texts[i...])
                break
            }
            received(cx, text)
        }
    }

    mutating func startSession(_ cx: RelayContext, limits: RelayLimits?) {
        guard session == nil, phase == .starting else { return }
        self.limits = limits
        if let stated = limits?.maxSubscriptions { requests.stated(stated) }
        var config = cx.configuration.session
        switch cx.configuration.eventsBatching {
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
        config.relayURL = url
        // Each relay's reconnect jitter from its own seed: the host's seed (random per client run
        // in the managed transport) mixed with the relay URL, so neither the clients of one relay
        // nor one client's relays reconnect in lockstep.
        config.jitterSeed = SyncEngine.jitterSeed(cx.configuration.session.jitterSeed, relayURL: url)
        config.answersAuthentication = cx.configuration.identity != nil && cx.answersAuthentication(on: url)
        config.acknowledgementTimeoutSeconds = cx.configuration.acknowledgementTimeoutSeconds
        if let limit = limits?.maxMessageLength, Int64(limit) >= RelaySessionConfig.minimumMessageBytes {
            config.maxMessageBytes = Int64(limit)
        }
        do {
            session = try RelaySession(config: config)
        } catch {
            cx.report(.notice(relayURL: url, "cannot start a session: \(error.code.rawValue): \(error.message)"))
            phase = .stopped
            setState(cx, .stopped)
            return
        }
        buildSubscriptions(cx)
        connect(cx)
    }

    mutating func askInformation(_ cx: RelayContext) {
        informationAskedAt = cx.now.monotonicMilliseconds
        informationPending = true
        cx.push(.action(.fetchInformation(relay: index, url: url)))
    }

    /// A NIP-11 document asked for again after the first fetch brought none (the session runs
    /// already): what a running connection can change takes effect cx.now (the REQ budget, the page
    /// size, the `until` convention, NIP-42 and NIP-77 hints); the frame bound and EVENTS batches
    /// are the session's and wait for the next start.
    mutating func informationArrived(_ cx: RelayContext, _ limits: RelayLimits?) {
        guard let limits, self.limits == nil else { return }
        self.limits = limits
        if let stated = limits.maxSubscriptions { requests.stated(stated) }
        guard var paging = paging else { return }
        paging.narrow(maxLimit: limits.maxLimit, untilConvention: limits.untilConvention)
        self.paging = paging
        for id in subscriptions.keys { subscriptions[id]!.sync.learn(from: paging) }
    }

    /// The policy's subscriptions for relay `r`, each resumed from its durable state when that
    /// state is for the same filters (a changed subscription starts over, without a cursor).
    mutating func buildSubscriptions(_ cx: RelayContext) {
        var paging = paging ?? cx.configuration.paging(for: url)
        if self.paging == nil {
            paging.narrow(maxLimit: limits?.maxLimit, untilConvention: limits?.untilConvention)
        }
        for entry in policy {
            var filters: [RelayFilter] = []
            for text in entry.filtersJSON {
                guard let filter = try? RelayFilter.fromJSON(text) else { continue }
                filters.append(filter)
            }
            guard !filters.isEmpty, filters.count == entry.filtersJSON.count else {
                cx.report(.notice(relayURL: url, "subscription \(entry.subscriptionID) has invalid filters; skipped"))
                continue
            }
            let horizon = cx.configuration.horizons[entry.subscriptionID] ?? entry.horizon
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
            subscriptions[entry.subscriptionID] = SubscriptionRuntime(
                id: entry.subscriptionID, filtersJSON: entry.filtersJSON, filters: filters, sync: sync, durable: sync)
        }
        self.paging = paging
        for (k, id) in subscriptions.keys.sorted().enumerated() {
            subscriptions[id]!.stem = String(id.prefix(40)) + "~\(k)"
        }
        for id in subscriptions.keys { subscriptions[id]!.sync.learn(from: paging) }
    }

    /// Passes what one subscription's page taught about relay `r`'s paging to the relay and to
    /// its other subscriptions.
    mutating func sharePaging(_ cx: RelayContext, from id: String) {
        guard let learned = subscriptions[id]?.sync.paging, var paging = paging, learned != paging else { return }
        paging.learn(from: learned)
        self.paging = paging
        for other in subscriptions.keys where subscriptions[other]!.sync.paging != paging {
            subscriptions[other]!.sync.learn(from: paging)
        }
    }

    mutating func connect(_ cx: RelayContext) {
        guard !cx.stopping, let session = session else { return }
        do {
            process(cx, try session.connect())
        } catch {
            cx.report(.notice(relayURL: url, "connect refused: \(error.message)"))
        }
    }

    mutating func opened(_ cx: RelayContext) {
        guard phase == .connecting, let session = session else { return }
        let mono = cx.now.monotonicMilliseconds
        do {
            process(cx, try session.transportConnected(now: cx.now.unixSeconds))
        } catch {
            cx.report(.notice(relayURL: url, "transportConnected refused: \(error.message)"))
            return
        }
        if everConnected { statistics.reconnects += 1 }
        // NIP-11 failed before (a timeout, an error page): ask again, at most every five minutes.
        if cx.configuration.fetchRelayInformation, limits == nil, !informationPending,
            informationAskedAt.map({ mono - $0 >= SyncEngine.informationRetryMilliseconds }) ?? true
        {
            askInformation(cx)
        }
        everConnected = true
        phase = .connected
        connection = RelayConnection(openedAt: mono)
        neg.connected()
        let negentropy = wantsNegentropy(cx)
        let speaksAuth = limits?.supportsAuthentication ?? false
        // Whether this connection will answer a challenge at all (an identity, and the cleartext
        // policy): otherwise neither wait for one nor cx.report "authenticating".
        let answers = cx.configuration.identity != nil && cx.answersAuthentication(on: url)
        authentication.connected(now: mono, challengeExpected: answers && speaksAuth, grace: cx.configuration.authenticationGraceMilliseconds)
        let authFirst = limits?.authenticationRequired == true && answers
        setState(cx, authFirst ? .authenticating : .ready)
        // The live REQs of every subscription together, then each one's ahead REQ and its sync's
        // next page, through the REQ budget.
        subscribeLive(cx)
        // A cap learned on an earlier connection is learned again on this one, from the page
        // size configured and narrowed by NIP-11 (`RelayPaging.relearnCap(from:)`).
        var start = cx.configuration.paging(for: url)
        start.narrow(maxLimit: limits?.maxLimit, untilConvention: nil)
        paging?.relearnCap(from: start)
        for id in subscriptions.keys.sorted() {
            subscriptions[id]!.sync.relearnCap(from: start)
            subscriptions[id]!.connectedAt = cx.now.unixSeconds
            subscriptions[id]!.sync.begin(now: cx.now.unixSeconds, deepResyncInterval: cx.configuration.deepResyncIntervalSeconds)
            let ahead = SyncEngine.aheadID(stem: subscriptions[id]!.stem, attempt: 1)
            connection?.aheadREQs[ahead] = id
            request(cx, id: ahead, filtersJSON: subscriptions[id]!.aheadFilters(now: cx.now.unixSeconds))
            if negentropy { beginNegentropy(cx, id) } else { advanceSync(cx, id) }
        }
    }

    /// Whether this engine answers relay `r`'s NIP-42 challenges (an identity, and the
    /// cleartext policy).
    func answersChallenges(_ cx: RelayContext) -> Bool { cx.configuration.identity != nil && cx.answersAuthentication(on: url) }

    /// The relay accepted our AUTH (its OK, or a second of silence): the pages it closed
    /// `auth-required:` are asked again cx.now.
    mutating func authenticationAccepted(_ cx: RelayContext) {
        for id in subscriptions.keys.sorted() where subscriptions[id]!.pageHold == .authentication {
            subscriptions[id]!.pageHold = nil
            advanceSync(cx, id)
        }
    }

    /// The relay refused our AUTH: the pages waiting for it are reported refused (once each);
    /// they wait on, for an AUTH a later challenge may bring.
    mutating func authenticationRefused(_ cx: RelayContext) {
        for id in subscriptions.keys.sorted() {
            guard let sub = subscriptions[id], sub.pageHold == .authentication, !sub.refused else { continue }
            subscriptions[id]!.refused = true
            cx.report(
                .notice(
                    relayURL: url,
                    "\(id): window refused: its page needs NIP-42 authentication and the relay refused our AUTH"))
        }
    }

    /// The connection ended (or never opened): the session decides what that means for
    /// deliveries and when to reconnect; every REQ is withdrawn (the next connection sends the
    /// live REQs afresh and asks the pages in flight again).
    mutating func lost(_ cx: RelayContext, reason: String) {
        guard phase == .connected || phase == .connecting, let session = session else { return }
        cx.report(.notice(relayURL: url, "connection lost: \(reason)"))
        delivery.connectionLost()
        authentication.connectionLost()
        do {
            process(cx, try session.transportLost(now: cx.now.unixSeconds))
        } catch {
            cx.report(.notice(relayURL: url, "transportLost refused: \(error.message)"))
        }
        // The session schedules the reconnect, which drops the connection's state with the
        // `connected` phase; one that refused to hear of the loss backs off all the same.
        if phase == .connected { phase = .backingOff(until: cx.now.monotonicMilliseconds + cx.retrySchedule.delayMilliseconds(attempt: 1)) }
        negentropyLost(cx)
        withdrawRequests(cx)
        for id in subscriptions.keys.sorted() {
            subscriptions[id]!.clearPageFailures()
            subscriptions[id]!.live = .notSent
            subscriptions[id]!.pageID = nil
            subscriptions[id]!.sync.restarted()
        }
    }

    mutating func received(_ cx: RelayContext, _ text: String) {
        guard let session = session else { return }
        connection?.keepalive.heard(cx.now.monotonicMilliseconds)
        if SyncEngine.isNegentropyFrame(text) {
            receivedNegentropy(cx, text)
            return
        }
        // The session holds at most 1,024 events awaiting their commit: past half of that,
        // text waits here (in order) for the next commit instead of being refused.
        if connection?.deferred.isEmpty == false || awaitingCommit >= SyncEngine.deferAt {
            connection?.deferred.append(text)
            cx.queueIngestFlush()
            return
        }
        let actions: [RelaySessionAction]
        do {
            // Read, screen, then apply: the screen runs here, not as a callback under the
            // session's lock.
            let frame = try session.read(text)
            if let claimed = frame.claimedEvent, !screen(cx, claimed.subscriptionID, claimed.eventID, claimed.createdAt) { return }
            actions = try session.receive(frame, now: cx.now.unixSeconds)
        } catch {
            // Invalid relay text changes nothing; note it and go on.
            cx.report(.notice(relayURL: url, "relay sent an invalid frame: \(error.code.rawValue): \(error.message)"))
            return
        }
        process(cx, actions)
    }

    /// Before verification: a page counts every event the relay sends for it; ids already held
    /// (the page's own overlap, a copy from another relay) are dropped unverified — here, the
    /// one place duplicates are dropped before the account's own `UNIQUE` id.
    mutating func screen(_ cx: RelayContext, _ subscriptionID: String, _ eventID: String, _ createdAt: Int64) -> Bool {
        // An answer is coming, duplicates included: its REQ's deadline moves on.
        requestHeard(cx, subscriptionID)
        if let owner = connection?.pageOwner[subscriptionID] {
            // Not a durable change: what a page in flight has counted is reset when a loaded
            // state asks the page again, so the state is written at page boundaries only (with
            // the events before them), not with every event.
            let disposition = subscriptions[owner]!.sync.received(eventID: eventID, createdAt: createdAt)
            if disposition == .new { subscriptions[owner]!.windowEvents += 1 }
            if disposition == .duplicate {
                statistics.duplicatesSkipped += 1
                return false
            }
        }
        let fetchedFor = neg.fetchOwner[subscriptionID]
        if let owner = fetchedFor { subscriptions[owner]?.negentropy?.fetchReceived(eventID) }
        if cx.isRecent(eventID) {
            statistics.duplicatesSkipped += 1
            return false
        }
        if let owner = fetchedFor { subscriptions[owner]?.windowEvents += 1 }
        return true
    }

    mutating func process(_ cx: RelayContext, _ actions: [RelaySessionAction]) {
        for action in actions {
            switch action {
            case .openTransport:
                phase = .connecting
                setState(cx, .connecting)
                cx.push(.action(.open(relay: index, url: url)))
            case .closeTransport:
                break
            case .persistEvent(let subscriptionID, let event):
                requestHeard(cx, subscriptionID)
                statistics.eventsReceived += 1
                cx.ingest(event, from: index)
                cx.queueIngestFlush()
            case .eventRejected(let subscriptionID, let eventID, let reason):
                if let owner = connection?.pageOwner[subscriptionID] {
                    subscriptions[owner]?.sync.forget(eventID: eventID)
                    subscriptions[owner]?.windowEvents -= 1
                }
                // A REQ closed before its last 32 closings (the session still takes events of
                // those, verified against their filters): such an event is no news to cx.report.
                guard
                    connection?.pageOwner[subscriptionID] != nil || requests.liveChunks[subscriptionID] != nil
                        || connection?.aheadREQs[subscriptionID] != nil
                else { continue }
                cx.report(.notice(relayURL: url, "event \(eventID) on \(subscriptionID) refused: \(reason)"))
            case .endOfStoredEvents(let subscriptionID):
                requestHeard(cx, subscriptionID)
                if connection?.aheadREQs.removeValue(forKey: subscriptionID) != nil {
                    try? session?.unsubscribe(id: subscriptionID)
                    requestEnded(cx, subscriptionID)
                    continue
                }
                if fetchEnded(cx, subscriptionID) {
                    requestEnded(cx, subscriptionID)
                    continue
                }
                if let members = requests.liveChunks[subscriptionID] {
                    for id in members { subscriptions[id]?.live = .registered }
                    openNegentropy(cx)
                    continue
                }
                // A page, or a one-shot nothing here waits for any more (a REQ the session sent
                // again after our AUTH was accepted, when the engine had already asked again
                // under a new id): either is closed at its EOSE, or it holds one of the relay's
                // subscription slots for the life of the connection, and a relay that takes two
                // has no room left for pages (found by the simulator, issue 45).
                let owner = connection?.pageOwner.removeValue(forKey: subscriptionID)
                try? session?.unsubscribe(id: subscriptionID)
                requestEnded(cx, subscriptionID)
                guard let owner else { continue }
                subscriptions[owner]?.pageID = nil
                subscriptions[owner]?.clearPageFailures()
                subscriptions[owner]?.sync.endOfStoredEvents()
                subscriptions[owner]?.dirty = true
                sharePaging(cx, from: owner)
                advanceSync(cx, owner)
            case .subscriptionClosed(let subscriptionID, let prefix, let message, let retry):
                let forLimit = requests.isOpen(subscriptionID) && SyncEngine.saysTooManySubscriptions(message)
                // Refused for the relay's limit: not this REQ's fault; it goes again in turn.
                if forLimit { requestsRefused(cx) }
                if let owner = connection?.pageOwner.removeValue(forKey: subscriptionID) {
                    // Reported by pageFailed, once per page however often the relay closes it.
                    pageFailed(cx, subscriptionID, owner: owner, .closed(prefix: prefix, message: message))
                    continue
                }
                let again = retry.map { " (sent again in \($0) ms)" } ?? ""
                cx.report(.notice(relayURL: url, "relay closed \(subscriptionID): \(prefix ?? "") \(message)\(again)"))
                if let members = requests.liveChunks[subscriptionID] {
                    // A live REQ the session sends again itself (`error:`, `rate-limited:`, an
                    // `auth-required:` once authenticated) is waited for; one it does not send
                    // again will not answer on this connection, and nothing waits for it.
                    if retry == nil { liveRefused(cx, members, reason: prefix.map { "\($0): \(message)" } ?? message) }
                    continue
                }
                if forLimit { continue }
                if let owner = neg.fetchOwner[subscriptionID] {
                    // A fetch by ids the session would narrow with a `since` of its own (every
                    // older id dropped): the engine asks it again whole, a few times, then pages.
                    let filters = requests.filters(of: subscriptionID)
                    try? session?.unsubscribe(id: subscriptionID)
                    requestEnded(cx, subscriptionID)
                    let tries = neg.fetchRetries[subscriptionID, default: 0] + 1
                    neg.fetchRetries[subscriptionID] = tries
                    if let filters, tries <= 3, prefix == "error" || prefix == "rate-limited" || prefix == "auth-required" {
                        request(cx, id: subscriptionID, filtersJSON: filters)
                    } else {
                        fallBack(cx, owner, reason: "fetch closed: \(message)")
                    }
                    continue
                }
                if retry == nil { requestEnded(cx, subscriptionID) }
            case .notice(let subscriptionID, _, _, let message, let reason):
                cx.report(.notice(relayURL: url, reason ?? message))
                if SyncEngine.saysTooManySubscriptions(message) {
                    requestsRefused(cx)
                } else if subscriptionID == nil && reason == nil {
                    // A relay NOTICE, whatever its text, may be the only answer to a REQ it
                    // dropped (nostr-relay's bare "rate-limited"): every one-shot that heard
                    // nothing yet is sent again in place if it stays silent.
                    requests.suspectUnheard(now: cx.now.monotonicMilliseconds)
                }
                noticeDuringNegentropy(cx, reason ?? message)
            case .countResult:
                break
            case .authenticationRequested(let challenge):
                authenticate(cx, challenge)
            case .authenticated:
                authentication.accepted()
                setState(cx, .ready)
                authenticationAccepted(cx)
            case .authenticationFailed(_, let prefix, let message):
                authentication.refused(prefix.map { "\($0): \(message)" } ?? message)
                cx.report(.notice(relayURL: url, "authentication refused: \(prefix ?? "") \(message)"))
                setState(cx, .ready)
                authenticationRefused(cx)
            case .deliveryChanged(let decision):
                deliveryChanged(cx, decision)
            case .scheduleReconnect(let delay, _):
                phase = .backingOff(until: cx.now.monotonicMilliseconds + delay)
                setState(cx, .backingOff(delayMilliseconds: delay))
            }
        }
    }

    mutating func authenticate(_ cx: RelayContext, _ challenge: String) {
        guard let identity = cx.configuration.identity, let session = session else { return }
        guard cx.answersAuthentication(on: url) else {
            cx.report(
                .notice(
                    relayURL: url,
                    "AUTH not answered: the connection is cleartext to a remote host, where anyone on the path could take the "
                        + "signed answer (SyncEngineConfiguration.authenticatesOverCleartext opts in)"))
            return
        }
        do {
            let auth = try identity.createNip42Authentication(challenge: challenge, relayURL: url, createdAt: cx.now.unixSeconds)
            process(cx, try session.authenticate(auth, now: cx.now.unixSeconds))
            authentication.answered(now: cx.now.monotonicMilliseconds)
            setState(cx, .authenticating)
        } catch {
            cx.report(.notice(relayURL: url, "cannot answer the challenge: \(error.message)"))
        }
    }
}
