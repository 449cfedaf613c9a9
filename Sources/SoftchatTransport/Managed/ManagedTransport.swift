import Dispatch
public import SoftchatCore
import SoftchatJSON
public import SoftchatStorage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SoftchatAccount {
    /// Runs one relay's loop against this account on its own serial thread: claims durable
    /// publish work and publishes it, commits ingestion before `confirmIngested`, persists every
    /// delivery change, answers NIP-42 with `identity`, reconnects on the session's schedule, and
    /// resubscribes from the account's subscription policy and cursors. For a noise:// relay
    /// the client's Noise static key defaults to `<account database>.noise-key`.
    public func startManagedTransport(relayURL: String, identity: SoftchatIdentity?,
                                      policy: ManagedTransportPolicy = ManagedTransportPolicy()) throws(TransportError) -> ManagedTransport {
        let endpoint = try RelayEndpoint(relayURL)
        var policy = policy
        if endpoint.noise != nil && policy.connection.noiseStaticKeyFile == nil && !path.isEmpty && path != ":memory:" {
            policy.connection.noiseStaticKeyFile = path + ".noise-key"
        }
        return ManagedTransport(account: self, endpoint: endpoint, identity: identity, policy: policy)
    }
}

/// A running managed relay connection. `states` reports its lifecycle; `stop()` ends it
/// cleanly (cancel, close, leases released).
public final class ManagedTransport: @unchecked Sendable {
    // @unchecked: everything mutable is confined to the loop's thread, except `control`,
    // which sits behind `controlLock`.
    public let states: AsyncStream<ManagedTransportState>
    private let stateContinuation: AsyncStream<ManagedTransportState>.Continuation
    private let controlLock = Lock()
    private var stopRequested = false
    private var dropRequested = false
    private var lastState: ManagedTransportState = .stopped(reason: "not started")
    private let finished = DispatchSemaphore(value: 0)

    private let loop: TransportLoop

    init(account: SoftchatAccount, endpoint: RelayEndpoint, identity: SoftchatIdentity?, policy: ManagedTransportPolicy) {
        let (stream, continuation) = AsyncStream<ManagedTransportState>.makeStream(bufferingPolicy: .unbounded)
        states = stream
        stateContinuation = continuation
        loop = TransportLoop(account: account, endpoint: endpoint, identity: identity, policy: policy)
        loop.owner = self
        let thread = DispatchQueue(label: "softchat.transport.\(endpoint.host)")
        thread.async { [self] in
            loop.run()
            finished.signal()
        }
    }

    /// The most recent state.
    public var state: ManagedTransportState { controlLock.with { lastState } }

    /// Ends the loop: cancels the session, closes the socket, releases leases. Blocks until the
    /// loop has stopped; idempotent.
    public func stop() {
        let first: Bool = controlLock.with {
            defer { stopRequested = true }
            return !stopRequested
        }
        if first { finished.wait() }
    }

    /// Cuts the connection (as a network failure would), to exercise recovery.
    public func dropConnection() { controlLock.with { dropRequested = true } }

    var isStopRequested: Bool { controlLock.with { stopRequested } }

    func takeDropRequest() -> Bool {
        controlLock.with {
            defer { dropRequested = false }
            return dropRequested
        }
    }

    func publish(_ state: ManagedTransportState) {
        let changed: Bool = controlLock.with {
            guard lastState != state else { return false }
            lastState = state
            return true
        }
        guard changed else { return }
        stateContinuation.yield(state)
        loop.policy.observer?(.state(state))
        if case .stopped = state { stateContinuation.finish() }
    }
}

/// The loop itself, confined to the transport's thread.
final class TransportLoop: @unchecked Sendable {
    let account: SoftchatAccount
    let endpoint: RelayEndpoint
    let identity: SoftchatIdentity?
    var policy: ManagedTransportPolicy
    weak var owner: ManagedTransport?

    var session: RelaySession!
    var socket: WebSocket?
    var information: RelayInformation?

    /// Delivery bookkeeping: which claim holds each event's intent right now.
    var claims: [String: DeliveryClaim] = [:]
    var holder: [String: (lease: String, intent: String)] = [:]
    /// Events whose intent is durably in flight (markSocketWritten done) under their claim.
    var written: Set<String> = []
    /// Events the session holds as pending or in flight (it reports every change).
    var inSession: Set<String> = []
    /// Terminal answers that came after the event's retryable decision was already applied (a
    /// late OK after a timeout): applied to the intent when it is claimed again, instead of
    /// publishing it again (the session refuses to re-publish a settled event).
    var lateTerminal: [String: DeliveryDecision] = [:]
    var sentAt: [String: Int64] = [:]
    var leaseCounter = 0
    /// Until then (Unix ms), wait for a NIP-42 challenge before publishing.
    var authWindowEnds: Int64 = 0
    /// When our AUTH went out; some relays (nostr-relay) never acknowledge a good one.
    var authSentAt: Int64?
    /// No new claim before this time (Unix ms) after retryable answers, and the current pause.
    var claimPausedUntil: Int64 = 0
    var retryPause: Int64 = 0

    /// Backfill paging per subscription.
    struct Page {
        var original: [String]
        var oldest: Int64?
        var newest: Int64?
        var newInPage = 0
        var total = 0
        var paging = false
        /// Stored events arrive newest first: the durable cursor may only move once the
        /// subscription has been synced to its end, or a crash mid-sync would skip older events.
        var complete = false
    }
    var pages: [String: Page] = [:]

    init(account: SoftchatAccount, endpoint: RelayEndpoint, identity: SoftchatIdentity?, policy: ManagedTransportPolicy) {
        self.account = account
        self.endpoint = endpoint
        self.identity = identity
        self.policy = policy
    }

    static func now() -> Int64 { Int64(time(nil)) }

    static func nowMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    func emit(_ event: ManagedTransportEvent) { policy.observer?(event) }

    func run() {
        var reason = "stopped by the host"
        defer { owner?.publish(.stopped(reason: reason)) }
        if policy.fetchRelayInformation, let info = try? RelayInformation.fetch(endpoint, options: policy.connection) {
            information = info
            emit(.relayInformation(info))
        }
        var config = policy.session
        switch policy.eventsBatch {
        case .always: config.supportsEventsBatch = true
        case .never: config.supportsEventsBatch = false
        case .auto: config.supportsEventsBatch = information?.acceptsEventsBatch ?? false
        }
        // nostr-relay answers EVENTs in order and rejects with an empty id: correlate by order.
        // It also never answers a good AUTH: what waits behind our AUTH goes out after 1 s.
        if let software = information?.document["software"]?.stringValue, software.contains("nostr_relay") {
            config.correlateUnnamedAcknowledgements = true
            config.authenticationWaitSeconds = 1
        }
        config.relayURL = endpoint.url
        config.answersAuthentication = identity != nil
        config.acknowledgementTimeoutSeconds = policy.acknowledgementTimeoutSeconds
        if let limit = information?.maxMessageLength, Int64(limit) >= RelaySessionConfig.minimumMessageBytes {
            config.maxMessageBytes = Int64(limit)
        }
        do {
            session = try RelaySession(config: config)
            try subscribeFromPolicy()
        } catch {
            reason = "cannot start: \(error)"
            return
        }
        while !(owner?.isStopRequested ?? true) {
            owner?.publish(.connecting)
            do {
                _ = try session.connect()
                let ws = try WebSocketClient.connect(endpoint, options: policy.connection)
                socket = ws
                try session.transportConnected(now: Self.now())
                // A relay that speaks NIP-42 may challenge right away: give it a moment before
                // writing anything, so the AUTH goes ahead of the first REQ or EVENT.
                authWindowEnds = identity != nil && information?.supportedNIPs.contains(42) == true ? Self.nowMilliseconds() + 300 : 0
                authSentAt = nil
                owner?.publish(information?.authRequired == true && identity != nil ? .authenticating : .ready)
                try connected(ws)
            } catch let error as TransportError {
                emit(.connectionFailed(error.description))
            } catch {
                emit(.notice("loop error: \(error)"))
            }
            socket?.close(waitMilliseconds: 0)
            socket = nil
            if owner?.isStopRequested ?? true { break }
            guard let delay = lost() else { break }
            let until = Self.nowMilliseconds() + delay
            owner?.publish(.backingOff(untilMilliseconds: until))
            while Self.nowMilliseconds() < until && !(owner?.isStopRequested ?? true) { usleep(20_000) }
        }
        shutdown()
    }

    /// The account's subscription policy for this relay, each resuming from its cursor.
    func subscribeFromPolicy() throws(SoftchatError) {
        for entry in try account.subscriptions(for: endpoint.url) {
            var filters = entry.filtersJSON
            if let cursor = try account.syncCursor(relayURL: endpoint.url, subscriptionID: entry.subscriptionID) {
                let since = cursor - policy.session.sinceOverlapSeconds
                filters = try filters.map { text throws(SoftchatError) in try RelayFilter.fromJSON(text).withSince(since).toJSON() }
            }
            pages[entry.subscriptionID] = Page(original: filters)
            try session.subscribe(id: entry.subscriptionID, filtersJSON: filters)
        }
    }

    /// The connected phase: publish, write, read, handle; returns when the connection ends.
    func connected(_ ws: WebSocket) throws {
        while true {
            if owner?.isStopRequested ?? true { return }
            if owner?.takeDropRequest() == true {
                ws.stream.close()
                throw TransportError(.closed, "connection dropped on request")
            }
            if Self.nowMilliseconds() >= authWindowEnds {
                try claimAndPublish()
                try flush(ws)
            }
            try checkAcknowledgementDeadline()
            if let sent = authSentAt, Self.nowMilliseconds() - sent > 1000 {
                // No answer to our AUTH: the relay stays silent on success (nostr-relay does).
                authSentAt = nil
                owner?.publish(.ready)
            }
            let message: WebSocket.Message
            do {
                message = try ws.receive(timeoutMilliseconds: 25)
            } catch {
                if error.kind == .timeout { continue }
                throw error
            }
            guard case .text(let text) = message else {
                throw TransportError(.closed, "the relay closed the connection")
            }
            let actions: [RelaySessionAction]
            do {
                actions = try session.receive(text)
            } catch {
                // Invalid relay text changes nothing; note it and go on.
                emit(.notice("relay sent an invalid frame: \(error.code.rawValue): \(error.message)"))
                continue
            }
            try handle(actions)
        }
    }

    // MARK: Publishing

    func claimAndPublish() throws {
        // One claim at a time keeps the session's queue bounded; claim again when it drains.
        guard inSession.isEmpty, Self.nowMilliseconds() >= claimPausedUntil else { return }
        leaseCounter += 1
        let lease = "\(endpoint.host)-\(getpid())-\(Self.nowMilliseconds())-\(leaseCounter)"
        guard let result = try account.delivery.claim(leaseID: lease, relayURL: endpoint.url, now: Self.now(), max: policy.claimBatch)
        else { return }
        claims[lease] = result.claim
        var fresh: [VerifiedEvent] = []
        var settled: [DeliveryResult] = []
        for payload in result.payloads {
            if let decision = lateTerminal.removeValue(forKey: payload.eventID) {
                settled.append(DeliveryResult(intentID: payload.intentID, decision: decision))
                continue
            }
            holder[payload.eventID] = (lease, payload.intentID)
            written.remove(payload.eventID)
            if inSession.contains(payload.eventID) { continue }
            fresh.append(try VerifiedEvent(storedJSON: payload.eventJSON))
        }
        if !settled.isEmpty {
            try account.delivery.applyResults(result.claim, results: settled)
            for r in settled { emit(.delivery(intentID: r.intentID, decision: r.decision)) }
        }
        if fresh.isEmpty { releaseFinishedClaims() }
        guard !fresh.isEmpty else { return }
        try session.publish(fresh)
        for e in fresh { inSession.insert(e.id) }
    }

    func flush(_ ws: WebSocket) throws {
        for frame in try session.drainOutbound() {
            try ws.send(text: frame.frame)
            if !frame.deliveryEventIDs.isEmpty {
                // Durable first: the intents are in flight before the session says so.
                var byLease: [String: [String]] = [:]
                // An event re-sent after authentication is already in flight durably.
                for id in frame.deliveryEventIDs where !written.contains(id) {
                    if let h = holder[id] { byLease[h.lease, default: []].append(h.intent) }
                    written.insert(id)
                }
                for (lease, intents) in byLease { if let claim = claims[lease] { try account.delivery.markSocketWritten(claim, intentIDs: intents) } }
                let now = Self.now()
                for id in frame.deliveryEventIDs { sentAt[id] = now }
            }
            try session.confirmSent(frame.deliveryEventIDs, now: Self.now())
        }
    }

    func checkAcknowledgementDeadline() throws {
        let now = Self.now()
        guard let due = session.pollTimeout(), now >= due else { return }
        try handle(try session.handleTimeout(now: now))
    }

    // MARK: Actions

    func handle(_ actions: [RelaySessionAction]) throws {
        var toPersist: [(String, VerifiedEvent)] = []
        for action in actions {
            switch action.kind {
            case .persistEvent:
                if let e = action.event, let sub = action.subscriptionID { toPersist.append((sub, e)) }
            case .deliveryChanged:
                if let decision = action.decision { try persist(decision) }
            case .authenticationRequested:
                guard let identity, let challenge = action.challenge else { continue }
                let auth = try identity.createNip42Authentication(challenge: challenge, relayURL: endpoint.url, createdAt: Self.now())
                try session.authenticate(auth, now: Self.now())
                authWindowEnds = 0
                authSentAt = Self.nowMilliseconds()
                owner?.publish(.authenticating)
            case .authenticated:
                authSentAt = nil
                owner?.publish(.ready)
            case .authenticationFailed:
                emit(.notice("authentication refused: \(action.prefix ?? "") \(action.message ?? "")"))
                owner?.publish(.ready)
            case .endOfStoredEvents:
                if let sub = action.subscriptionID { try endOfStoredEvents(sub) }
            case .subscriptionClosed:
                emit(.notice("relay closed \(action.subscriptionID ?? "?"): \(action.prefix ?? "") \(action.message ?? "")"))
            case .notice, .eventRejected, .countResult:
                emit(.notice("\(action.kind.rawValue): \(action.reason ?? action.message ?? "")"))
            case .openTransport, .closeTransport, .scheduleReconnect:
                break
            }
        }
        if !toPersist.isEmpty { try persist(toPersist) }
    }

    /// Commits received events in one transaction, then confirms them to the session and
    /// advances the cursors: never confirm before the commit returned.
    func persist(_ received: [(String, VerifiedEvent)]) throws {
        let events = received.map(\.1)
        let outcome = try account.incoming.ingest(events, receivedAt: Self.now())
        try validateIngestionResult(batch: IngestionBatch(events: events), result: outcome.receipt.ingestionResult)
        for e in events { try session.confirmIngested(e.id) }
        var newest: [String: Int64] = [:]
        let inserted = Set(outcome.receipt.insertedEventIDs)
        for (id, e) in received {
            let sub = liveSubscription(of: id)
            newest[sub] = max(newest[sub] ?? Int64.min, e.createdAt)
            if var page = pages[sub] {
                page.total += 1
                // Page accounting counts stored events (pages, and the live REQ until its EOSE),
                // not live ones arriving after the subscription is synced.
                if id != sub || !page.complete {
                    if inserted.contains(e.id) { page.newInPage += 1 }
                    page.oldest = min(page.oldest ?? e.createdAt, e.createdAt)
                }
                page.newest = max(page.newest ?? e.createdAt, e.createdAt)
                pages[sub] = page
            }
        }
        let now = Self.now()
        for (sub, createdAt) in newest where pages[sub]?.complete == true {
            try account.advanceSyncCursor(relayURL: endpoint.url, subscriptionID: sub, createdAt: createdAt, now: now)
        }
        emit(.ingested(outcome.receipt))
    }

    /// Backfill: while a page brings new events, ask for the next older page with `until`;
    /// when one brings nothing new, resume the live subscription and report the sync done.
    func endOfStoredEvents(_ id: String) throws {
        let live = liveSubscription(of: id)
        guard var page = pages[live] else { return }
        let isPage = id != live
        if policy.backfill, page.newInPage > 0, let oldest = page.oldest {
            // More may lie beyond the relay's cap: ask for the next older page under a separate
            // id, so the live subscription (and live events already in flight) stay untouched.
            page.paging = true
            page.newInPage = 0
            pages[live] = page
            let older = try page.original.map { text throws(SoftchatError) -> String in
                var members = try RelayFilter.fromJSON(text).json.members
                members.removeAll { $0.key == "until" || $0.key == "since" }
                members.append(JSONObject.Member(key: "until", value: .integer(oldest)))
                return JSONValue.object(JSONObject(members: members)).jsonText
            }
            try session.subscribe(id: pageID(live), filtersJSON: older)
            return
        }
        if isPage || page.paging {
            try session.unsubscribe(id: pageID(live))
        }
        // Synced to the end: now the cursor may move to the newest event received.
        page.paging = false
        page.complete = true
        pages[live] = page
        if let newest = page.newest {
            try account.advanceSyncCursor(relayURL: endpoint.url, subscriptionID: live, createdAt: newest, now: Self.now())
        }
        emit(.synced(subscriptionID: live, events: page.total))
    }

    /// The id backfill pages use for `live` (within the 64-character limit).
    func pageID(_ live: String) -> String { String(live.prefix(58)) + "~page" }

    func liveSubscription(of id: String) -> String {
        guard id.hasSuffix("~page") else { return id }
        return pages.keys.first { pageID($0) == id } ?? id
    }

    /// Persists one delivery decision against the claim that holds the event's intent.
    func persist(_ decision: DeliveryDecision) throws {
        let id = decision.eventID
        switch decision.state {
        case .pending:
            inSession.insert(id)
            return
        case .inFlight:
            return
        case .accepted, .rejected, .retryable:
            inSession.remove(id)
            sentAt[id] = nil
        }
        if decision.state == .accepted {
            retryPause = 0
        } else if decision.state == .retryable && decision.category != .transportLost && decision.category != .timeout {
            // The relay itself said "later" (rate-limited, auth-required, error): back off.
            // Timeouts and lost connections already waited or are handled by reconnecting.
            retryPause = retryPause == 0 ? policy.retryDelaySeconds * 1000 : min(retryPause * 2, 60_000)
            claimPausedUntil = Self.nowMilliseconds() + retryPause
        }
        written.remove(id)
        guard let h = holder.removeValue(forKey: id), let claim = claims[h.lease] else {
            // No claim holds it any more: a late terminal answer after its retryable decision.
            if decision.state.isTerminal { lateTerminal[id] = decision }
            return
        }
        do {
            try account.delivery.applyResults(claim, results: [DeliveryResult(intentID: h.intent, decision: decision)])
            emit(.delivery(intentID: h.intent, decision: decision))
        } catch {
            // A stale claim (its lease expired and another claim took the work) decides nothing.
            emit(.notice("delivery result for \(id) not applied: \(error.message)"))
        }
        releaseFinishedClaims()
    }

    func releaseFinishedClaims() {
        let held = Set(holder.values.map(\.lease))
        for (lease, claim) in claims where !held.contains(lease) {
            try? account.delivery.release(claim)
            claims[lease] = nil
        }
    }

    /// After the connection ended: persist what the session says changed, return the delay.
    func lost() -> Int64? {
        sentAt.removeAll()
        // The next connection re-sends each REQ; its stored events are a new sync to complete
        // (and page past a cap) before the cursor moves again. Pages in progress start over.
        for (id, var page) in pages {
            if page.paging { try? session.unsubscribe(id: pageID(id)) }
            page.complete = false
            page.paging = false
            page.newInPage = 0
            page.oldest = nil
            pages[id] = page
        }
        guard let actions = try? session.transportLost(now: Self.now()) else { return nil }
        var delay: Int64 = 1000
        for action in actions {
            if action.kind == .deliveryChanged, let d = action.decision { try? persist(d) }
            if action.kind == .scheduleReconnect, let ms = action.delayMilliseconds { delay = ms }
        }
        return delay
    }

    /// Stop: cancel the session, close the socket, give every claim's work back.
    func shutdown() {
        if let actions = try? session?.cancel() {
            for action in actions where action.kind == .deliveryChanged {
                if let d = action.decision { try? persist(d) }
            }
        }
        socket?.close()
        socket = nil
        for claim in claims.values { try? account.delivery.release(claim) }
        claims.removeAll()
        holder.removeAll()
        written.removeAll()
        try? session?.close()
    }
}

