import Synchronization

/// A serialized, transport-independent relay session (sans-IO, like quinn-proto, rustls or
/// h11): the host feeds it calls and socket text and executes the ordered actions and frames
/// it returns. It never does I/O, never reads a clock and never sleeps.
///
/// ```text
/// connect -> open transport -> transportConnected -> authenticate if requested
///        -> authenticated -> send queued subscriptions and publishes
/// drain outbound -> socket write succeeds -> confirmSent(event IDs)
/// receive event -> persistEvent -> host transaction commits -> confirmIngested
/// transportLost -> persist delivery/retry state -> schedule reconnect
/// cancel -> close transport -> release session
/// ```
///
/// Calls are serialized by an internal lock, so concurrent use cannot corrupt state; the host
/// should still drive one session from one task, in order. A call that fails leaves the
/// session unchanged. After `close()` every call fails with `invalid_relay_session`.
public final class RelaySession: Sendable {
    private let machine: Mutex<SessionMachine>

    public init() {
        machine = Mutex(SessionMachine(config: RelaySessionConfig()))
    }

    public init(config: RelaySessionConfig) throws(SoftchatError) {
        try config.validate()
        machine = Mutex(SessionMachine(config: config))
    }

    private func run<R>(_ body: (inout SessionMachine) throws(SoftchatError) -> R) throws(SoftchatError) -> R {
        // Every machine method validates completely before it mutates, so a call that throws
        // leaves the state as it was (the model test checks this after every rejected call).
        // No defensive copy: copying the state would make each call cost O(state).
        try machine.withLock { (m: inout SessionMachine) throws(SoftchatError) -> R in try body(&m) }
    }

    // MARK: Lifecycle

    /// Starts (or restarts after backoff or cancel) a connection: returns `openTransport`.
    public func connect() throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.connect() }
    }

    /// The socket is open: queued subscriptions (with `since` advanced past what was
    /// confirmed) and pending publishes become ready to drain. `now` (Unix seconds) starts
    /// the ready period after which backoff resets.
    @discardableResult
    public func transportConnected(now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.transportConnected(now: now) }
    }

    /// The socket closed or failed: returns `deliveryChanged` for events that were in flight
    /// (persist them), then `scheduleReconnect(delay, attempt)`.
    public func transportLost(now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.transportLost(now: now) }
    }

    /// Stops: every delivery the session holds becomes retryable (one `deliveryChanged` each,
    /// in publish order: commit them and re-publish from durable intent), then `closeTransport`
    /// when a transport is active. The session can connect again later.
    public func cancel() throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.cancel() }
    }

    /// Releases the session; every later call fails with `invalid_relay_session`. Idempotent.
    /// While the session still holds deliveries it refuses (`invalid_relay_session`): call
    /// `cancel()` first and commit the changes it returns, so no delivery — and no durable
    /// lease behind it — is orphaned.
    public func close() throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.close() }
    }

    // MARK: Subscriptions

    /// Adds or replaces subscription `id` (at most 128) with 1–64 filters given as JSON. Its REQ
    /// is queued now when connected, and sent again after every reconnect. A replaced
    /// subscription starts over (no `since` from the old filters). An id used by a pending
    /// COUNT is refused.
    public func subscribe(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.subscribe(id: id, filtersJSON: filtersJSON) }
    }

    /// Removes subscription `id` and queues its CLOSE when its REQ already went out.
    public func unsubscribe(id: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.unsubscribe(id: id) }
    }

    /// Queues a NIP-45 COUNT under `id`; the answer arrives as a `countResult` action.
    public func count(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.count(id: id, filtersJSON: filtersJSON) }
    }

    /// Cancels the pending COUNT `id`; its CLOSE is queued when the COUNT already went out, and
    /// then a late answer is a notice and `id` is not reused for a COUNT on this connection.
    public func cancelCount(id: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.cancelCount(id: id) }
    }

    // MARK: Publishing

    /// Queues 1–256 unique verified events as one batch: one EVENT, or EVENTS frames packed by
    /// bytes so each fits the frame bound and the relay's `maxMessageBytes` (consecutive EVENTs
    /// for relays without EVENTS). At most 1,024 publishes are held (pending or in flight);
    /// retryable and terminal ones leave the session with their decision. An event too large
    /// for any frame is refused with `invalid_relay_batch`.
    public func publish(_ events: [VerifiedEvent]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.publish(events) }
    }

    /// Runs every timer due at `now` (seconds, the clock the host passes everywhere): events
    /// whose own acknowledgement deadline passed become retryable (`timeout`) and leave the
    /// session — a late `OK` still settles them —, a wait for an unanswered AUTH ends, and
    /// closed subscriptions due for a retry are queued again.
    public func handleTimeout(now: Int64) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.handleTimeout(now: now) }
    }

    /// The earliest time at which `handleTimeout` has work, or nil when no timer is armed.
    public func pollTimeout() -> Int64? {
        machine.withLock { $0.pollTimeout() }
    }

    // MARK: Socket hand-off

    /// Up to `max` (1–256) frames to write, control frames first. Draining is not writing.
    public func drainOutbound(max: Int = RelaySessionContract.defaultDrainMax.value) throws(SoftchatError) -> [OutboundRelayFrame] {
        try run { m throws(SoftchatError) in try m.drainOutbound(max: max) }
    }

    /// The socket write of a drained frame succeeded: its events are now in flight, each with
    /// its own acknowledgement deadline from `now`.
    public func confirmSent(_ deliveryEventIDs: [String], now: Int64? = nil) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.confirmSent(deliveryEventIDs, now: now) }
    }

    /// Feeds one complete relay text message; returns the actions it causes, in order. `now`
    /// schedules the session's own retries of subscriptions closed with `error:` or
    /// `rate-limited:`.
    public func receive(_ text: String, now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.receive(text, now: now) }
    }

    /// `receive`, with `screen` consulted for every EVENT on a known subscription before the
    /// session's own duplicate checks and before verification, with the subscription id and
    /// the event id and `created_at` the frame claims (unverified). `false` drops the event
    /// without verifying it and without an action: a host that already holds that id (a sync's
    /// overlap, a copy from another relay) pays for the bytes only. `screen` runs under the
    /// session's lock: it must not call back into this session.
    public func receive(_ text: String, now: Int64?, screen: EventScreen) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.receive(text, now: now, screen: screen) }
    }

    /// The host committed the event of a `persistEvent` action durably.
    public func confirmIngested(_ eventID: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.confirmIngested(eventID) }
    }

    /// Sends the host's NIP-42 answer (from `SoftchatIdentity.createNip42Authentication`) for
    /// this connection's challenge. Refuses (`invalid_relay_authentication`) an event whose
    /// `relay` tag is not the configured `relayURL`, whose challenge is not the current one,
    /// or whose created_at is outside `authenticationWindowSeconds` of `now`. Frames queued
    /// after it wait for its `OK`, at most `authenticationWaitSeconds`.
    @discardableResult
    public func authenticate(_ event: VerifiedEvent, now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.authenticate(event, now: now) }
    }

    // MARK: Diagnostics

    /// A redacted diagnostic view (never content, challenges or keys). Works in every state.
    public func snapshot() -> RelaySessionSnapshot {
        machine.withLock { $0.snapshot() }
    }
}
