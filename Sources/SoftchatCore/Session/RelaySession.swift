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

    /// A session with the default ``RelaySessionConfig``.
    public init() {
        machine = Mutex(SessionMachine(config: RelaySessionConfig()))
    }

    /// A session with the given settings, which are checked first.
    ///
    /// - Parameter config: The session's settings.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when a setting is out of range: a
    ///   base delay below 1 s or a maximum below it, a negative reset or overlap, an acknowledgement
    ///   timeout, AUTH wait or AUTH window below 1 s, a `maxMessageBytes` below
    ///   ``RelaySessionConfig/minimumMessageBytes``, or a `relayURL` that is not a relay URL.
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
    ///
    /// - Returns: The one action `openTransport`: open the socket, then call
    ///   ``RelaySession/transportConnected(now:)``.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or
    ///   already connecting or connected.
    public func connect() throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.connect() }
    }

    /// The socket is open: queued subscriptions (with `since` advanced past what was
    /// confirmed) and pending publishes become ready to drain. `now` (Unix seconds) starts
    /// the ready period after which backoff resets.
    ///
    /// - Parameter now: The time in Unix seconds; nil means this connection never resets the backoff.
    /// - Returns: No actions: what to write comes from ``RelaySession/drainOutbound(max:)``.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or not
    ///   connecting; `relay_session_queue_full` when the REQs and COUNTs to send again would not fit
    ///   the outbound bound.
    @discardableResult
    public func transportConnected(now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.transportConnected(now: now) }
    }

    /// The socket closed or failed: returns `deliveryChanged` for events that were in flight
    /// (persist them), then `scheduleReconnect(delay, attempt)`. Pending publishes stay, to go out
    /// on the next connection.
    ///
    /// - Parameter now: The time in Unix seconds; with the time given to `transportConnected`, it
    ///   decides whether the connection stayed ready long enough to reset the backoff.
    /// - Returns: One `deliveryChanged` (`retryable`, `transportLost`) per event in flight or waiting
    ///   for authentication, in publish order, then one `scheduleReconnect`.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or no
    ///   transport is connecting or connected.
    public func transportLost(now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.transportLost(now: now) }
    }

    /// Stops: every delivery the session holds becomes retryable (one `deliveryChanged` each,
    /// in publish order: commit them and re-publish from durable intent), then `closeTransport`
    /// when a transport is active. The session can connect again later.
    ///
    /// - Returns: One `deliveryChanged` (`retryable`, `cancelled`) per held event, in publish order,
    ///   then `closeTransport` when a transport was connecting or connected.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed, or
    ///   there is nothing to cancel: no transport, no backoff and no held delivery.
    public func cancel() throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.cancel() }
    }

    /// Releases the session; every later call fails with `invalid_relay_session`. Idempotent.
    /// While the session still holds deliveries it refuses: call ``RelaySession/cancel()`` first
    /// and commit the changes it returns, so no delivery — and no durable lease behind it — is
    /// orphaned.
    ///
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` while the session holds
    ///   deliveries.
    public func close() throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.close() }
    }

    // MARK: Subscriptions

    /// Adds or replaces subscription `id` (at most 128) with 1–64 filters given as JSON. Its REQ
    /// is queued now when connected, and sent again after every reconnect. A replaced
    /// subscription starts over (no `since` from the old filters). An id used by a pending
    /// COUNT is refused.
    ///
    /// - Parameters:
    ///   - id: The subscription id, 1–64 characters.
    ///   - filtersJSON: The filters, each one JSON object's text.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or `id`
    ///   names a pending COUNT; `invalid_relay_frame` for an id outside 1–64 characters or a REQ over
    ///   the frame limit; `invalid_relay_filter` for no filters, more than 64, or an invalid one;
    ///   `relay_session_queue_full` when 128 subscriptions are open or its frames would pass the
    ///   outbound bound.
    public func subscribe(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.subscribe(id: id, filtersJSON: filtersJSON) }
    }

    /// Removes subscription `id` and queues its CLOSE when its REQ already went out.
    ///
    /// - Parameter id: The subscription's id.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or has
    ///   no subscription `id`; `relay_session_queue_full` when its CLOSE would pass the outbound
    ///   bound.
    public func unsubscribe(id: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.unsubscribe(id: id) }
    }

    /// Queues a NIP-45 COUNT under `id`; the answer arrives as a `countResult` action. It is sent
    /// again after every reconnect until answered, and a second call before it is drained replaces
    /// its filters.
    ///
    /// - Parameters:
    ///   - id: The COUNT's subscription id, 1–64 characters, not a subscription's.
    ///   - filtersJSON: The filters, each one JSON object's text.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed, `id`
    ///   is a subscription's, or a COUNT under `id` went out on this connection and is unanswered or
    ///   was cancelled; `invalid_relay_frame` for an id outside 1–64 characters or a COUNT over the
    ///   frame limit; `invalid_relay_filter` for no filters, more than 64, or an invalid one;
    ///   `relay_session_queue_full` when its frames would pass the outbound bound.
    public func count(id: String, filtersJSON: [String]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.count(id: id, filtersJSON: filtersJSON) }
    }

    /// Cancels the pending COUNT `id`; its CLOSE is queued when the COUNT already went out, and
    /// then a late answer is a notice and `id` is not reused for a COUNT on this connection.
    ///
    /// - Parameter id: The pending COUNT's id.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or has
    ///   no pending COUNT `id`; `relay_session_queue_full` when its CLOSE would pass the outbound
    ///   bound.
    public func cancelCount(id: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.cancelCount(id: id) }
    }

    // MARK: Publishing

    /// Queues 1–256 unique verified events as one batch: one EVENT, or EVENTS frames packed by
    /// bytes so each fits the frame bound and the relay's `maxMessageBytes` (consecutive EVENTs
    /// for relays without EVENTS). At most 1,024 publishes are held (pending or in flight);
    /// retryable and terminal ones leave the session with their decision.
    ///
    /// - Parameter events: The events, each id once.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed;
    ///   `invalid_relay_batch` for no events, more than 256, an id twice, or an event too large for
    ///   any frame; `invalid_delivery_state` for an event the session already holds or this relay
    ///   already answered terminally; `relay_session_queue_full` when more than 1,024 publishes
    ///   would be held.
    public func publish(_ events: [VerifiedEvent]) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.publish(events) }
    }

    /// The decision for an event that no frame to this relay can carry: `rejected`, category
    /// `invalid`, naming the size and the limit (the relay's NIP-11 `max_message_length`, or
    /// relay.wire's frame bound). Nil when the event fits. The limit holds for the session's
    /// life, so such an event can never be published here: a host records this decision instead
    /// of retrying, and publishes the rest of its batch.
    ///
    /// - Parameter event: The event to check.
    /// - Returns: The terminal decision to record, or nil when the event fits one frame.
    public func frameRefusal(for event: VerifiedEvent) -> DeliveryDecision? {
        machine.withLock { $0.frameRefusal(event) }
    }

    /// The largest frame this session drains or lets a call queue, in bytes: relay.wire's frame
    /// bound, lowered to the relay's `maxMessageBytes` when the config has one. The one
    /// definition of a relay's frame: a host sizing what it asks for (REQs packed by bytes, a
    /// fetch by ids, NIP-77 messages) sizes to this. Fixed for the session's life.
    package var frameLimit: Int {
        machine.withLock { $0.frameLimit }
    }

    /// Runs every timer due at `now` (seconds, the clock the host passes everywhere): events
    /// whose own acknowledgement deadline passed become retryable (`timeout`) and leave the
    /// session — a late `OK` still settles them —, a wait for an unanswered AUTH ends, and
    /// closed subscriptions due for a retry are queued again.
    ///
    /// - Parameter now: The time in Unix seconds. An event written without a time starts its
    ///   deadline here.
    /// - Returns: One `deliveryChanged` (`retryable`, `timeout`) per event past its deadline, in
    ///   publish order.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed.
    public func handleTimeout(now: Int64) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.handleTimeout(now: now) }
    }

    /// The earliest time at which `handleTimeout` has work, or nil when no timer is armed.
    ///
    /// - Returns: The earliest deadline in Unix seconds, possibly already past (an event written
    ///   without a time is due at once), or nil.
    public func pollTimeout() -> Int64? {
        machine.withLock { $0.pollTimeout() }
    }

    // MARK: Socket hand-off

    /// Up to `max` (1–256) frames to write, control frames first. Draining is not writing: after
    /// each write succeeds, call ``RelaySession/confirmSent(_:now:)``. Frames queued behind our
    /// AUTH wait for its `OK` (boundedly).
    ///
    /// - Parameter max: The most frames to return, 1–256 (256 by default).
    /// - Returns: The frames in the order to write them; none when no transport is connected.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or
    ///   `max` is outside 1–256.
    public func drainOutbound(max: Int = RelaySessionContract.defaultDrainMax.value) throws(SoftchatError) -> [OutboundRelayFrame] {
        try run { m throws(SoftchatError) in try m.drainOutbound(max: max) }
    }

    /// The socket write of a drained frame succeeded: its events are now in flight, each with
    /// its own acknowledgement deadline from `now`.
    ///
    /// - Parameters:
    ///   - deliveryEventIDs: The written frame's ``OutboundRelayFrame/deliveryEventIDs``, exactly;
    ///     empty for a frame without publishes.
    ///   - now: The time in Unix seconds; nil starts the deadlines at the next `handleTimeout`.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or not
    ///   connected, or no drained frame without events awaits confirmation; `invalid_delivery_state`
    ///   when no drained frame carries exactly these event ids.
    public func confirmSent(_ deliveryEventIDs: [String], now: Int64? = nil) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.confirmSent(deliveryEventIDs, now: now) }
    }

    /// Feeds one complete relay text message; returns the actions it causes, in order. `now`
    /// schedules the session's own retries of subscriptions closed with `error:` or
    /// `rate-limited:`.
    ///
    /// An EVENT that fails verification or matches none of its subscription's filters is an
    /// `eventRejected` action, not an error.
    ///
    /// - Parameters:
    ///   - text: One WebSocket text message from the relay.
    ///   - now: The time in Unix seconds; nil uses the latest time given to any call.
    /// - Returns: The actions the frame causes, in order; often none.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or not
    ///   connected; the relay.wire code of an invalid frame (`invalid_relay_frame`, or
    ///   `invalid_relay_authentication` for a malformed AUTH); `relay_session_queue_full` when an
    ///   event would pass 1,024 awaiting persistence. A frame that throws changes nothing.
    public func receive(_ text: String, now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.receive(text, now: now) }
    }

    /// Reads one relay message — strict JSON, the verb, an EVENT's shape and what it claims —
    /// without applying it: the session's state is not touched. A host that already holds an
    /// EVENT's claimed id (a sync's overlap, a copy from another relay) can drop it here and pay
    /// for the bytes only; ``RelaySession/receive(_:now:)-(IncomingFrame,_)`` applies the rest.
    ///
    /// - Parameter text: One WebSocket text message from the relay.
    /// - Returns: The frame, read.
    /// - Throws: ``SoftchatError`` with the relay.wire code of an invalid frame.
    public func read(_ text: String) throws(SoftchatError) -> IncomingFrame {
        try IncomingFrame(text: text)
    }

    /// Applies a frame `read(_:)` made, as `receive(_:now:)` applies text.
    ///
    /// - Parameters:
    ///   - frame: The frame, from this session's `read(_:)`.
    ///   - now: The time in Unix seconds; nil uses the latest time given to any call.
    /// - Returns: The actions the frame causes, in order; often none.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or not
    ///   connected; the relay.wire code of an invalid frame; `relay_session_queue_full` when an
    ///   event would pass 1,024 awaiting persistence. A frame that throws changes nothing.
    public func receive(_ frame: IncomingFrame, now: Int64?) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.receive(frame, now: now) }
    }

    /// The host committed the event of a `persistEvent` action durably.
    ///
    /// - Parameter eventID: The committed event's id.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed, or the
    ///   event was not handed out for persistence or was already confirmed.
    public func confirmIngested(_ eventID: String) throws(SoftchatError) {
        try run { m throws(SoftchatError) in try m.confirmIngested(eventID) }
    }

    /// The host's commit of a `persistEvent` failed: the event stops counting toward the
    /// events awaiting persistence, so failed commits cannot fill that bound (and refuse every
    /// later event with `relay_session_queue_full`). A copy the relay sends again is verified and
    /// offered again. Unknown ids are ignored.
    ///
    /// - Parameter eventID: The id of an event whose commit failed.
    package func ingestionFailed(_ eventID: String) {
        machine.withLock { (m: inout SessionMachine) in m.ingestionFailed(eventID) }
    }

    /// Sends the host's NIP-42 answer for this connection's challenge, made with
    /// ``SoftchatIdentity/createNip42Authentication(challenge:relayURL:createdAt:)``. Refuses an event
    /// whose `relay` tag is not the configured `relayURL`, whose challenge is not the current one,
    /// or whose created_at is outside `authenticationWindowSeconds` of `now`. Frames queued after it
    /// wait for its `OK`, at most `authenticationWaitSeconds`.
    ///
    /// - Parameters:
    ///   - event: The signed kind-22242 event.
    ///   - now: The time in Unix seconds; nil uses the latest time given to any call. With no time
    ///     at all, `created_at` is not checked and queued frames do not wait for the `OK`.
    /// - Returns: No actions: the AUTH frame is queued ahead of everything else.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_session` when the session is closed or not
    ///   connected; `invalid_relay_authentication` when the relay has not asked on this connection,
    ///   the event is not kind 22242 with one non-empty `relay` and `challenge` tag each, its
    ///   challenge is not the current one, its relay tag names another relay, its `created_at` is
    ///   outside the window, this key already answered this challenge on this connection, or the
    ///   AUTH frame would pass the frame limit; `relay_session_queue_full` when it would pass the
    ///   outbound bound.
    @discardableResult
    public func authenticate(_ event: VerifiedEvent, now: Int64? = nil) throws(SoftchatError) -> [RelaySessionAction] {
        try run { m throws(SoftchatError) in try m.authenticate(event, now: now) }
    }

    /// How many events the session holds for delivery (pending, written, or waiting for an
    /// AUTH): the one record of what the session has, which the engine asks instead of keeping
    /// a copy.
    package var heldDeliveryCount: Int { machine.withLock { $0.deliveries.count } }

    /// How many events the session handed out for persistence and has not heard the end of
    /// (`confirmIngested`, `ingestionFailed`): the one count of them (its bound is
    /// relay.ingestion's `maxAwaitingPersistence`).
    package var awaitingPersistenceCount: Int { machine.withLock { $0.awaiting.count } }

    /// Whether the session holds event `eventID` for delivery.
    package func holdsDelivery(_ eventID: String) -> Bool { machine.withLock { $0.deliveries[eventID] != nil } }

    // MARK: Diagnostics

    /// A redacted diagnostic view (never content, challenges or keys). Works in every state.
    ///
    /// - Returns: The session's counts, ids and state at this moment.
    public func snapshot() -> RelaySessionSnapshot {
        machine.withLock { $0.snapshot() }
    }
}
