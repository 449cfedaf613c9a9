public import SoftchatCore

// The engine's reports in the schema's vocabulary. Schema/relay.recovery.json declares what a
// managed transport reports to an app (`ManagedTransportStateChange`, `ManagedTransportActivity`,
// `RelayPhase`), generated into SoftchatCore; the engine's own types say the same things with
// Swift's associated values, and here, once, each says which report it is. The C ABI and every
// binding hand these on as they are.

extension RelayConnectionState {
    /// The state's phase, as the schema names it.
    public var phase: RelayPhase {
        switch self {
        case .fetchingInformation: .fetchingInformation
        case .connecting: .connecting
        case .authenticating: .authenticating
        case .ready: .ready
        case .backingOff: .backingOff
        case .stopped: .stopped
        }
    }

    /// How long until the next connection attempt, when backing off; otherwise nil.
    public var delayMilliseconds: Int64? {
        if case .backingOff(let ms) = self { return ms }
        return nil
    }
}

extension ManagedTransportState {
    /// The overall state as the schema's state change.
    public var stateChange: ManagedTransportStateChange {
        switch self {
        case .connecting: .overall(phase: .connecting, delayMilliseconds: nil, reason: nil)
        case .authenticating: .overall(phase: .authenticating, delayMilliseconds: nil, reason: nil)
        case .ready: .overall(phase: .ready, delayMilliseconds: nil, reason: nil)
        case .backingOff(let ms): .overall(phase: .backingOff, delayMilliseconds: ms, reason: nil)
        case .stopped(let reason): .overall(phase: .stopped, delayMilliseconds: nil, reason: reason)
        }
    }
}

extension ManagedTransportEvent {
    /// The report as the schema's state change, when it is one (the transport's or a relay's).
    public var stateChange: ManagedTransportStateChange? {
        switch self {
        case .state(let state): state.stateChange
        case .relayState(let url, let state): .relay(relayURL: url, phase: state.phase, delayMilliseconds: state.delayMilliseconds)
        default: nil
        }
    }

    /// The report as the schema's activity, when it is one. A relay's NIP-11 reading is neither:
    /// it shows in the relay's status, not as activity.
    public var activity: ManagedTransportActivity? {
        switch self {
        case .delivery(let url, let intentID, let decision): .delivery(relayURL: url, intentID: intentID, decision: decision)
        case .ingested(let url, let result): .ingested(relayURL: url, result: result)
        case .synced(let url, let subscriptionID, let count, let outcome):
            .synced(
                relayURL: url, subscriptionID: subscriptionID, events: count, incompleteSeconds: outcome.incompleteSeconds,
                skipped: outcome.skipped, liveFeedRefused: outcome.liveFeedRefused)
        case .notice(let url, let text): .notice(relayURL: url, message: text)
        case .connectionFailed(let url, let text): .connectionFailed(relayURL: url, message: text)
        case .state, .relayState, .relayInformation: nil
        }
    }
}
