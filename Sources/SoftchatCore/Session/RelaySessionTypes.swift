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

/// One ordered host action; which optional fields are set depends on `kind`.
public struct RelaySessionAction: Sendable, Hashable {
    public let kind: RelaySessionActionKind
    public var subscriptionID: String?
    public var event: VerifiedEvent?
    public var eventID: String?
    public var reason: String?
    public var prefix: String?
    public var message: String?
    public var challenge: String?
    public var count: CountResult?
    public var decision: DeliveryDecision?
    public var delayMilliseconds: Int64?
    public var attempt: Int?

    init(_ kind: RelaySessionActionKind) { self.kind = kind }

    static func with(_ kind: RelaySessionActionKind, _ fill: (inout RelaySessionAction) -> Void) -> RelaySessionAction {
        var a = RelaySessionAction(kind)
        fill(&a)
        return a
    }
}

/// A frame handed to the host for writing. Draining is not writing: after the socket write
/// succeeds, call `confirmSent(deliveryEventIDs)` (an empty list for frames that carry no
/// publish); frames not confirmed are queued again when the transport is lost.
public struct OutboundRelayFrame: Sendable, Hashable {
    public let frame: String
    public let deliveryEventIDs: [String]
}

/// Session settings. The defaults are the contract's: EVENTS batches on, backoff 1 s doubling
/// to 5 min, reset after 60 s ready.
public struct RelaySessionConfig: Sendable, Hashable {
    /// False for relays without Softchat's EVENTS frame: batches go out as consecutive EVENTs.
    public var supportsEventsBatch: Bool
    public var reconnectBaseDelaySeconds: Int64
    public var reconnectMaxDelaySeconds: Int64
    public var reconnectResetAfterSeconds: Int64
    /// Seed of the reconnect jitter, so a replay schedules the same delays.
    public var jitterSeed: Int64
    /// How far before the newest confirmed event a resubscription's `since` starts.
    public var sinceOverlapSeconds: Int64
    /// For relays that answer a connection's EVENTs strictly in order but send rejections with
    /// an empty id (nostr-relay): apply such an OK to the oldest event in flight. Off by
    /// default, because for other relays an OK without an id names no event.
    public var correlateUnnamedAcknowledgements: Bool

    public init(
        supportsEventsBatch: Bool = true,
        reconnectBaseDelaySeconds: Int64 = Int64(RelayRecoveryContract.reconnectBaseDelaySeconds.value),
        reconnectMaxDelaySeconds: Int64 = Int64(RelayRecoveryContract.reconnectMaxDelaySeconds.value),
        reconnectResetAfterSeconds: Int64 = Int64(RelayRecoveryContract.reconnectResetAfterSeconds.value),
        jitterSeed: Int64 = 0,
        sinceOverlapSeconds: Int64 = 10,
        correlateUnnamedAcknowledgements: Bool = false
    ) {
        self.supportsEventsBatch = supportsEventsBatch
        self.reconnectBaseDelaySeconds = reconnectBaseDelaySeconds
        self.reconnectMaxDelaySeconds = reconnectMaxDelaySeconds
        self.reconnectResetAfterSeconds = reconnectResetAfterSeconds
        self.jitterSeed = jitterSeed
        self.sinceOverlapSeconds = sinceOverlapSeconds
        self.correlateUnnamedAcknowledgements = correlateUnnamedAcknowledgements
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
    }
}

/// A redacted diagnostic view of the session: counts, ids and state, never event content,
/// challenges or keys. Never restore delivery state from it.
public struct RelaySessionSnapshot: Sendable, Hashable, CustomStringConvertible {
    public let state: String
    public let subscriptionIDs: [String]
    public let outboundFrames: Int
    public let pendingPublishes: Int
    public let awaitingPersistence: Int
    public let reconnectAttempt: Int
    public let authenticated: Bool

    public var description: String {
        "RelaySession(state: \(state), subscriptions: \(subscriptionIDs), outbound: \(outboundFrames), "
            + "pendingPublishes: \(pendingPublishes), awaitingPersistence: \(awaitingPersistence), "
            + "reconnectAttempt: \(reconnectAttempt), authenticated: \(authenticated))"
    }
}
