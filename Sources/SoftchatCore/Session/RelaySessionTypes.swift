/// What the host must do next, in order. Actions request work; they never assert that
/// persistence or delivery happened.
public enum RelaySessionActionKind: String, Sendable, Hashable, CaseIterable {
    /// Open the WebSocket to the relay, then call `transportConnected`.
    case openTransport
    /// Close the WebSocket.
    case closeTransport
    /// Commit `event` durably, then call `confirmIngested(event.id)`.
    case persistEvent
    /// An event for `subscriptionID` was refused (`reason`): never persist it.
    case eventRejected
    /// The relay sent all stored events for `subscriptionID` (EOSE).
    case endOfStoredEvents
    /// The relay closed `subscriptionID` (`prefix`, `message`).
    case subscriptionClosed
    /// A relay NOTICE, or an OK that names no event in flight (diagnostic only).
    case notice
    /// A NIP-45 COUNT answer for `subscriptionID`.
    case countResult
    /// The relay asked for NIP-42: sign `createNip42Authentication(challenge:…)` and call `authenticate`.
    case authenticationRequested
    /// The relay accepted our authentication.
    case authenticated
    /// The relay refused our authentication (`prefix`, `message`).
    case authenticationFailed
    /// `decision` changed an event's delivery state: persist it before acting on what follows.
    case deliveryChanged
    /// Reconnect after `delayMilliseconds` (attempt `attempt`), then call `connect`.
    case scheduleReconnect
}

// `RelaySessionAction`, one case per kind with exactly the fields it carries plus the `kind`
// and per-field accessors, is generated from Schema/relay.session.json (a union) into the
// contract surface (SoftchatContractSurface.swift) by the build plugin.

/// A frame handed to the host for writing. Draining is not writing: after the socket write
/// succeeds, call `confirmSent(deliveryEventIDs)` (an empty list for frames that carry no
/// publish); frames not confirmed are queued again when the transport is lost.
public struct OutboundRelayFrame: Sendable, Hashable {
    /// The complete frame text, to write to the WebSocket as one text message.
    public let frame: String
    /// The ids of the published events the frame carries, to pass to
    /// ``RelaySession/confirmSent(_:now:)`` once it is written; empty for a frame without publishes.
    public let deliveryEventIDs: [String]
}

/// Session settings. The defaults are the contract's: EVENTS batches on, backoff 1 s doubling
/// to 5 min, reset after 60 s ready, a 10 s acknowledgement deadline per event.
public struct RelaySessionConfig: Sendable, Hashable {
    /// False for relays without Softchat's EVENTS frame: batches go out as consecutive EVENTs.
    public var supportsEventsBatch: Bool
    /// The first reconnect delay before jitter, doubled per failed attempt; at least 1.
    public var reconnectBaseDelaySeconds: Int64
    /// The cap on the reconnect delay before jitter; at least the base delay.
    public var reconnectMaxDelaySeconds: Int64
    /// How long a connection must stay ready for its loss to start the backoff over; not negative.
    public var reconnectResetAfterSeconds: Int64
    /// Seed of the reconnect jitter, so a replay schedules the same delays.
    public var jitterSeed: Int64
    /// How far before the newest confirmed event a resubscription's `since` starts.
    public var sinceOverlapSeconds: Int64
    /// For relays that answer a connection's EVENTs strictly in order but send rejections with
    /// an empty id (nostr-relay): apply such an OK to the oldest unanswered write (timed-out
    /// ones included, so a late answer never lands on another event). Off by default, because
    /// for other relays an OK without an id names no event.
    public var correlateUnnamedAcknowledgements: Bool
    /// The relay's URL (`ws`, `wss` or `noise`): `authenticate` refuses AUTH events whose
    /// `relay` tag names another relay (compared normalized). Nil skips only that check.
    public var relayURL: String?
    /// The relay's NIP-11 `max_message_length`, when known: every drained frame fits it and
    /// relay.wire's frame bound.
    public var maxMessageBytes: Int64?
    /// How long an event may wait for its `OK` after its own `confirmSent(now:)`.
    public var acknowledgementTimeoutSeconds: Int64
    /// How long frames queued behind our AUTH wait for its `OK` before going out anyway.
    public var authenticationWaitSeconds: Int64
    /// How far an AUTH event's created_at may be from `authenticate`'s `now` (NIP-42: ~10 min).
    public var authenticationWindowSeconds: Int64
    /// Whether the host signs NIP-42 challenges. When false an `auth-required` answer is final
    /// for the connection: the event leaves as retryable at once instead of waiting for an AUTH.
    public var answersAuthentication: Bool

    /// Settings with the contract's defaults for whatever is not given; ``RelaySession/init(config:)``
    /// checks them.
    ///
    /// - Parameters:
    ///   - supportsEventsBatch: Whether the relay takes Softchat's EVENTS frame (default true).
    ///   - reconnectBaseDelaySeconds: The first reconnect delay before jitter (default 1 s).
    ///   - reconnectMaxDelaySeconds: The cap on the reconnect delay before jitter (default 300 s).
    ///   - reconnectResetAfterSeconds: How long a connection must stay ready for the backoff to
    ///     start over (default 60 s).
    ///   - jitterSeed: The seed of the reconnect jitter (default 0).
    ///   - sinceOverlapSeconds: How far before the newest confirmed event a resubscription's
    ///     `since` starts (default 10 s).
    ///   - correlateUnnamedAcknowledgements: Whether an `OK` with an empty id applies to the oldest
    ///     unanswered write (default false).
    ///   - relayURL: The relay's URL, which AUTH events must name; nil skips that check (default).
    ///   - maxMessageBytes: The relay's NIP-11 `max_message_length`, at least
    ///     ``RelaySessionConfig/minimumMessageBytes``; nil when unknown (default).
    ///   - acknowledgementTimeoutSeconds: How long an event may wait for its `OK` after its write
    ///     (default `relay.publish.acknowledgementTimeoutSeconds`, 15 s).
    ///   - authenticationWaitSeconds: How long frames behind our AUTH wait for its `OK` (default 5 s).
    ///   - authenticationWindowSeconds: How far an AUTH event's `created_at` may be from `now`
    ///     (default ``Nip42/defaultWindowSeconds``).
    ///   - answersAuthentication: Whether the host signs NIP-42 challenges (default true).
    public init(
        supportsEventsBatch: Bool = true,
        reconnectBaseDelaySeconds: Int64 = Int64(RelayRecoveryContract.reconnectBaseDelaySeconds.value),
        reconnectMaxDelaySeconds: Int64 = Int64(RelayRecoveryContract.reconnectMaxDelaySeconds.value),
        reconnectResetAfterSeconds: Int64 = Int64(RelayRecoveryContract.reconnectResetAfterSeconds.value),
        jitterSeed: Int64 = 0,
        sinceOverlapSeconds: Int64 = 10,
        correlateUnnamedAcknowledgements: Bool = false,
        relayURL: String? = nil,
        maxMessageBytes: Int64? = nil,
        acknowledgementTimeoutSeconds: Int64 = Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value),
        authenticationWaitSeconds: Int64 = 5,
        authenticationWindowSeconds: Int64 = Nip42.defaultWindowSeconds,
        answersAuthentication: Bool = true
    ) {
        self.supportsEventsBatch = supportsEventsBatch
        self.reconnectBaseDelaySeconds = reconnectBaseDelaySeconds
        self.reconnectMaxDelaySeconds = reconnectMaxDelaySeconds
        self.reconnectResetAfterSeconds = reconnectResetAfterSeconds
        self.jitterSeed = jitterSeed
        self.sinceOverlapSeconds = sinceOverlapSeconds
        self.correlateUnnamedAcknowledgements = correlateUnnamedAcknowledgements
        self.relayURL = relayURL
        self.maxMessageBytes = maxMessageBytes
        self.acknowledgementTimeoutSeconds = acknowledgementTimeoutSeconds
        self.authenticationWaitSeconds = authenticationWaitSeconds
        self.authenticationWindowSeconds = authenticationWindowSeconds
        self.answersAuthentication = answersAuthentication
    }

    func validate() throws(SoftchatError) {
        guard reconnectBaseDelaySeconds >= 1 else {
            throw .invalidRelaySession("reconnectBaseDelaySeconds must be at least 1, not \(reconnectBaseDelaySeconds)")
        }
        guard reconnectMaxDelaySeconds >= reconnectBaseDelaySeconds else {
            throw .invalidRelaySession("reconnectMaxDelaySeconds (\(reconnectMaxDelaySeconds)) is below the base delay")
        }
        guard reconnectResetAfterSeconds >= 0, sinceOverlapSeconds >= 0 else {
            throw .invalidRelaySession("reconnectResetAfterSeconds and sinceOverlapSeconds must not be negative")
        }
        guard acknowledgementTimeoutSeconds >= 1, authenticationWaitSeconds >= 1, authenticationWindowSeconds >= 1 else {
            throw .invalidRelaySession(
                "acknowledgementTimeoutSeconds, authenticationWaitSeconds and authenticationWindowSeconds must be at least 1")
        }
        if let maxMessageBytes, maxMessageBytes < Self.minimumMessageBytes {
            throw .invalidRelaySession("maxMessageBytes must be at least \(Self.minimumMessageBytes), not \(maxMessageBytes)")
        }
        if let relayURL {
            do throws(SoftchatError) {
                _ = try RelayURL(relayURL)
            } catch {
                throw .invalidRelaySession("relayURL: \(error.message)")
            }
        }
    }

    /// Below this a relay could not take even a small REQ or AUTH frame.
    public static let minimumMessageBytes: Int64 = 1024
}

/// A redacted diagnostic view of the session: counts, ids and state, never event content,
/// challenges or keys. Never restore delivery state from it.
public struct RelaySessionSnapshot: Sendable, Hashable, CustomStringConvertible {
    /// The lifecycle state's name (`idle`, `connecting`, `authenticating`, `ready`, `backingOff`,
    /// `cancelled` or `closed`): diagnostic text, not a value to branch on.
    public let state: String
    /// The current subscriptions' ids, in the order they were added (a replaced one keeps its place).
    public let subscriptionIDs: [String]
    /// Control frames queued plus frames drained and not yet confirmed written; publishes not yet
    /// framed are not counted.
    public let outboundFrames: Int
    /// Published events the session holds: pending, in flight, or held for an auth-required resend.
    public let pendingPublishes: Int
    /// Events handed out with `persistEvent` and not yet confirmed with
    /// ``RelaySession/confirmIngested(_:)``.
    public let awaitingPersistence: Int
    /// The attempt number of the latest `scheduleReconnect`: 0 until the transport is first lost;
    /// the count starts again at 1 only when a connection that stayed ready long enough is lost.
    public let reconnectAttempt: Int
    /// Whether the relay accepted our NIP-42 authentication on this connection.
    public let authenticated: Bool

    /// The snapshot on one line, for logs.
    public var description: String {
        "RelaySession(state: \(state), subscriptions: \(subscriptionIDs), outbound: \(outboundFrames), "
            + "pendingPublishes: \(pendingPublishes), awaitingPersistence: \(awaitingPersistence), "
            + "reconnectAttempt: \(reconnectAttempt), authenticated: \(authenticated))"
    }
}

/// One relay message read (strict JSON, the verb, the shape of an EVENT) but not yet applied to
/// the session: ``RelaySession/read(_:)`` makes it without touching the session's state, and
/// ``RelaySession/receive(_:now:)-(IncomingFrame,_)`` applies it. Between the two the host may look at what an
/// EVENT claims and drop it before any signature work (an id it already holds) — without a
/// callback into the host while the session holds its lock.
public struct IncomingFrame: Sendable {
    let reader: FrameReader
    /// For an EVENT: its subscription id and the event as read (unverified), so applying the
    /// frame reads neither again; nil for every other verb.
    let event: (subscriptionID: String, unverified: UnverifiedEvent)?

    /// For an EVENT: its subscription id, and the id and `created_at` the event claims
    /// (unverified); nil for every other verb.
    public var claimedEvent: ClaimedEvent? {
        event.map { ClaimedEvent(subscriptionID: $0.subscriptionID, eventID: $0.unverified.id, createdAt: $0.unverified.createdAt) }
    }

    /// What an EVENT frame claims before verification.
    public struct ClaimedEvent: Sendable, Hashable {
        /// The subscription the relay sent it for.
        public let subscriptionID: String
        /// The id it claims.
        public let eventID: String
        /// The `created_at` it claims.
        public let createdAt: Int64
    }

    /// The frame's verb (`EVENT`, `OK`, `EOSE`, …).
    public var verb: String { reader.verb }

    init(text: String) throws(SoftchatError) {
        reader = try FrameReader(text: text, direction: "relay")
        guard reader.verb == "EVENT" else {
            event = nil
            return
        }
        try reader.arity(3, "[\"EVENT\", subscription id, event]")
        let subscriptionID = try reader.subscriptionID(1)
        let unverified: UnverifiedEvent
        do throws(EventIssue) {
            unverified = try reader.unverifiedEvent(2)
        } catch {
            throw .invalidRelayFrame("EVENT event: \(error.message)")
        }
        event = (subscriptionID, unverified)
    }
}
