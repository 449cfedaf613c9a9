import SoftchatCore

/// One relay's publishing as the engine keeps it between the account and the session: the
/// claims held and their leases, which claim holds each event's intent, what was marked in
/// flight under each claim, and the decisions waiting for their commit. What the session holds
/// is the session's to say (`RelaySession.holdsDelivery(_:)`, `heldDeliveryCount`): the machine
/// is told, it keeps no copy.
///
/// A value type with its own transitions; each returns what the engine must do about it (an
/// account request, a report), and the engine does it. Tested alone in `DeliveryMachineTests`.
struct DeliveryMachine {
    /// Claims held, by lease id.
    private(set) var claims: [String: DeliveryClaim] = [:]
    /// When each lease is renewed (monotonic ms, at half its duration).
    private(set) var renewAt: [String: Int64] = [:]
    /// Which claim holds each event's intent right now.
    private(set) var holder: [String: (lease: String, intent: String)] = [:]
    /// Events whose intent is durably in flight under their claim.
    private(set) var written: Set<String> = []
    /// Terminal answers that came after the event's retryable decision was applied (a late OK):
    /// applied when the intent is claimed again instead of publishing it again.
    private(set) var lateTerminal: [String: DeliveryDecision] = [:]
    /// Results waiting for the next delivery flush, per lease.
    private(set) var pendingResults: [String: [DeliveryResult]] = [:]
    /// Leases with a release queued.
    private(set) var releasing: Set<String> = []
    /// Work may be waiting in the account: claim when the rest allows.
    var needsClaim = true
    private(set) var claiming = false
    /// The lease whose renewal is with the account, if any (one at a time).
    private(set) var renewing: String?
    /// No claim before this (monotonic ms): the relay said "later", a claim failed, or the
    /// work is held under another live lease until then.
    private(set) var claimPausedUntil: Int64 = 0
    /// The current "later" pause, doubling per consecutive answer up to 60 s.
    private(set) var retryPause: Int64 = 0
    /// The most intents one claim takes, as TCP paces a connection: it starts at
    /// ``initialSendWindow`` and grows by one per acceptance (doubling per claim) until a relay
    /// first answers `rate-limited:`; from then each such claim halves it and it grows by one
    /// per window of acceptances. A relay that limits by rate gets about what it takes instead
    /// of bursts it answers "later" (nostr-relay also slows every later message on the
    /// connection).
    private(set) var sendWindow = DeliveryMachine.initialSendWindow
    /// Still doubling: no `rate-limited:` answer yet.
    private(set) var slowStart = true
    /// Acceptances counted toward the next growth, after slow start.
    private var growth = 0
    /// The configured batch, the window's ceiling.
    private var batchCap = Int.max
    /// The claim whose "later" answers already slowed claiming (once per claim).
    private var slowedFor: String?
    /// Intents taken per held claim.
    private var claimedCount: [String: Int] = [:]
    /// Write token → the events its frame carries.
    private(set) var writes: [Int: [String]] = [:]
    /// When each event's frame was written (monotonic ms), for latency.
    private(set) var sentAt: [String: Int64] = [:]

    /// The first claim's size, before the relay showed what it takes.
    static let initialSendWindow = 16

    /// The longest pause after "later" answers.
    static let longestRetryPauseMilliseconds: Int64 = 60_000

    // MARK: Claims

    /// Whether a claim may go out now: one at a time, and only once the session's queue
    /// (`sessionIdle`: it holds no delivery) and the results of the last one are drained, so the
    /// session's queue stays bounded.
    func mayClaim(now: Int64, sessionIdle: Bool) -> Bool {
        needsClaim && !claiming && sessionIdle && now >= claimPausedUntil && pendingResults.isEmpty
    }

    /// How many intents to claim now, at most `batch` (the window never grows past it).
    mutating func claimSize(batch: Int) -> Int {
        batchCap = batch
        sendWindow = max(1, min(sendWindow, batch))
        return sendWindow
    }

    /// A claim went out at `now`. Once a relay has answered `rate-limited:`, claims are paced
    /// `pace` milliseconds apart, so the window is what it takes per `pace` — until the window
    /// is back at the whole batch.
    mutating func claimSent(now: Int64 = 0, pace: Int64 = 0) {
        claiming = true
        if paced { claimPausedUntil = max(claimPausedUntil, now + pace) }
    }

    /// Claims are spaced: a relay answered `rate-limited:` and the window has not grown back.
    var paced: Bool { !slowStart && sendWindow < batchCap }

    /// The account answered the claim (or failed it); `pauseUntil` when no claim may follow
    /// before then (the work is held under another live lease, or the claim failed).
    mutating func claimAnswered(pauseUntil: Int64? = nil) {
        claiming = false
        if let pauseUntil { claimPausedUntil = pauseUntil }
    }

    /// Nothing to claim: wait for a wake (`needsClaim`).
    mutating func nothingToClaim() { needsClaim = false }

    /// A claim is held from now; its lease is renewed at `renewAt`.
    mutating func hold(_ claim: DeliveryClaim, renewAt due: Int64) {
        claims[claim.leaseID] = claim
        renewAt[claim.leaseID] = due
    }

    /// What a claimed payload calls for.
    enum Payload: Equatable {
        /// A terminal answer came for it after its retryable decision: apply it, do not publish.
        case settled(DeliveryResult)
        /// The session already has it (a claim after a retryable decision): nothing to publish.
        case inSession
        /// Publish it.
        case publish
    }

    /// Takes one payload of the claim `lease`; `inSession` when the session still holds its
    /// event (a claim after a retryable decision the session has not let go of).
    mutating func claimed(_ payload: DeliveryPayload, lease: String, inSession: Bool = false) -> Payload {
        if let decision = lateTerminal.removeValue(forKey: payload.eventID) {
            return .settled(DeliveryResult(intentID: payload.intentID, decision: decision))
        }
        holder[payload.eventID] = (lease, payload.intentID)
        claimedCount[lease, default: 0] += 1
        written.remove(payload.eventID)
        return inSession ? .inSession : .publish
    }

    /// The event will not be published under its claim (it does not read back, or the session
    /// refused it): its claim no longer waits for it.
    mutating func letGo(_ eventID: String) { holder[eventID] = nil }

    /// Results decided without the relay (a frame no relay can carry, a late terminal answer),
    /// committed at the next flush.
    mutating func queue(_ results: [DeliveryResult], lease: String) {
        guard !results.isEmpty else { return }
        pendingResults[lease, default: []] += results
    }

    /// The session refused the batch: its events are let go, and no claim follows before `until`.
    mutating func publishRefused(_ eventIDs: [String], pauseUntil: Int64) {
        for id in eventIDs { holder[id] = nil }
        claimPausedUntil = pauseUntil
    }

    // MARK: Decisions

    /// What a decision of the session came to.
    struct Decided: Equatable {
        /// Publish → OK milliseconds, for an answered event.
        var latency: Int64?
        /// A result was queued for the next flush.
        var queued = false
    }

    /// The session changed an event's delivery state: terminal and retryable decisions become
    /// results of the claim that holds the event's intent. A retryable one the relay itself
    /// asked for ("later": rate-limited, error) pauses claiming, doubling per consecutive one.
    mutating func decided(_ decision: DeliveryDecision, now: Int64, retryDelayMilliseconds: Int64) -> Decided {
        let id = decision.eventID
        var out = Decided()
        switch decision.state {
        case .pending, .inFlight:
            return out
        case .accepted, .rejected, .retryable:
            break
        }
        if let sent = sentAt.removeValue(forKey: id), decision.state != .retryable { out.latency = now - sent }
        let lease = holder[id]?.lease
        if decision.state == .accepted {
            retryPause = 0
            if slowStart {
                sendWindow += 1
            } else {
                growth += 1
                if growth >= sendWindow { (sendWindow, growth) = (sendWindow + 1, 0) }
            }
        } else if decision.state == .retryable && decision.category != .transportLost && decision.category != .timeout
            && decision.category != .cancelled, lease == nil || lease != slowedFor
        {
            // The relay itself said "later": once per claim (a burst answered "later" is one
            // answer), the pause doubles, and for `rate-limited:` the send window halves. A
            // timeout is already spaced by the acknowledgement deadline, and a lost connection
            // by the reconnect.
            slowedFor = lease
            retryPause = retryPause == 0 ? retryDelayMilliseconds : min(retryPause * 2, Self.longestRetryPauseMilliseconds)
            claimPausedUntil = now + retryPause
            if decision.category == .rateLimited {
                let sent = lease.flatMap { claimedCount[$0] } ?? sendWindow
                (sendWindow, growth, slowStart) = (max(1, min(sendWindow, sent) / 2), 0, false)
            }
        }
        if decision.state == .retryable { needsClaim = true }
        written.remove(id)
        guard let h = holder.removeValue(forKey: id), claims[h.lease] != nil else {
            // No claim holds it any more: a late terminal answer after its retryable decision.
            if decision.state.isTerminal { lateTerminal[id] = decision }
            return out
        }
        pendingResults[h.lease, default: []].append(DeliveryResult(intentID: h.intent, decision: decision))
        out.queued = true
        return out
    }

    /// Results the account did not apply: their terminal decisions are kept for the next claim
    /// of the same intents.
    mutating func notApplied(_ results: [DeliveryResult]) {
        for r in results { lateTerminal[r.decision.eventID] = r.decision.state.isTerminal ? r.decision : nil }
    }

    /// Every result waiting, one batch per held lease in lease order; the rest is dropped (its
    /// claim is gone).
    mutating func takeResults() -> [(claim: DeliveryClaim, results: [DeliveryResult])] {
        defer { pendingResults.removeAll() }
        return pendingResults.keys.sorted().compactMap { lease in
            guard let results = pendingResults[lease], !results.isEmpty, let claim = claims[lease] else { return nil }
            return (claim, results)
        }
    }

    /// Claims that hold nothing more and wait for no result: each released once.
    mutating func finishedClaims() -> [DeliveryClaim] {
        let held = Set(holder.values.map { $0.lease })
        var out: [DeliveryClaim] = []
        for lease in claims.keys.sorted() where !held.contains(lease) && pendingResults[lease] == nil && !releasing.contains(lease) {
            releasing.insert(lease)
            out.append(claims[lease]!)
        }
        return out
    }

    /// Stopping: every claim not yet being released, to release; nothing is held any more.
    mutating func releaseAll() -> [DeliveryClaim] {
        holder.removeAll()
        var out: [DeliveryClaim] = []
        for claim in claims.values.sorted(by: { $0.leaseID < $1.leaseID }) where !releasing.contains(claim.leaseID) {
            releasing.insert(claim.leaseID)
            out.append(claim)
        }
        return out
    }

    /// The lease ended (released, or found stale).
    mutating func released(_ leaseID: String) {
        claimedCount[leaseID] = nil
        claims[leaseID] = nil
        renewAt[leaseID] = nil
        releasing.remove(leaseID)
    }

    // MARK: Leases

    /// The lease due for renewal at `now`, if any and none is being renewed.
    mutating func renewalDue(now: Int64) -> DeliveryClaim? {
        guard renewing == nil, let (lease, due) = renewAt.min(by: { $0.value < $1.value }), now >= due, let claim = claims[lease] else {
            return nil
        }
        renewing = lease
        return claim
    }

    /// The renewal was answered: the renewed claim, renewed again at `due`.
    mutating func renewed(_ claim: DeliveryClaim, renewAt due: Int64) {
        renewing = nil
        guard claims[claim.leaseID] != nil else { return }
        hold(claim, renewAt: due)
    }

    /// The renewal failed, and is never asked again inside the handle that reported it (that
    /// spun the I/O thread: 100,000 failure notices in one pump). A `stale` lease (its work was
    /// claimed again after it expired: a process frozen past its lease) is dropped with what it
    /// held, which is the other claim's work now; any other failure is retried at `retryAt`.
    mutating func renewalFailed(stale: Bool, retryAt: Int64) {
        guard let lease = renewing else { return }
        renewing = nil
        guard claims[lease] != nil else { return }
        if stale {
            holder = holder.filter { $0.value.lease != lease }
            pendingResults[lease] = nil
            released(lease)
        } else {
            renewAt[lease] = retryAt
        }
    }

    // MARK: Writes

    /// A frame carrying these events was handed to the transport under `token`.
    mutating func frameQueued(token: Int, eventIDs: [String]) { writes[token] = eventIDs }

    /// The frame `token` was written at `now`: its events (nil for no frame of ours), and the
    /// intents to mark durably in flight, per claim — each event once, however often written.
    mutating func frameWritten(token: Int, now: Int64) -> (eventIDs: [String], marks: [(claim: DeliveryClaim, intentIDs: [String])])? {
        guard let ids = writes.removeValue(forKey: token) else { return nil }
        var byLease: [String: [String]] = [:]
        for id in ids where !written.contains(id) {
            if let h = holder[id] { byLease[h.lease, default: []].append(h.intent) }
            written.insert(id)
        }
        for id in ids { sentAt[id] = now }
        let marks = byLease.keys.sorted().compactMap { lease in claims[lease].map { ($0, byLease[lease]!) } }
        return (ids, marks)
    }

    /// The connection ended: writes in progress and send times are gone (the session makes
    /// their events retryable).
    mutating func connectionLost() {
        writes.removeAll()
        sentAt.removeAll()
    }

    // MARK: Deadlines

    /// When claiming resumes after a pause, if something waits for it.
    func claimPauseDeadline(now: Int64, publishes: Bool, sessionIdle: Bool) -> Int64? {
        publishes && needsClaim && sessionIdle && !claiming && claimPausedUntil > now ? claimPausedUntil : nil
    }

    /// When the next lease is renewed.
    var renewalDeadline: Int64? { !claims.isEmpty && renewing == nil ? renewAt.values.min() : nil }
}
