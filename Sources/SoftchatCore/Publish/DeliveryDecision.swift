/// Where one event stands in its delivery to one relay. `pending` → `inFlight` (the socket
/// write was confirmed) → `accepted` | `rejected` | `retryable`; `retryable` → `pending` when
/// the host publishes it again. Sending bytes is not delivery: only a relay `OK` (or the
/// session's own timeout and transport-loss rules) moves an event past `inFlight`.
public enum DeliveryState: String, Sendable, Hashable, CaseIterable {
    case pending, inFlight, accepted, rejected, retryable

    public var isTerminal: Bool { self == .accepted || self == .rejected }
}

/// Why a delivery is in its state: the relay's machine-readable prefix, or a session-made
/// reason. Hosts branch on state and category; relay prose is diagnostic only.
public enum DeliveryCategory: String, Sendable, Hashable, CaseIterable {
    case accepted, duplicate
    case invalid, pow, blocked, restricted, replaced, deleted, mute
    case rateLimited = "rate-limited", error, authRequired = "auth-required", unknown
    case timeout, transportLost = "transport-lost", cancelled, exhausted
}

/// The outcome of one acknowledgement (or of a session rule) for one event.
public struct DeliveryDecision: Sendable, Hashable {
    public let eventID: String
    public let state: DeliveryState
    public let category: DeliveryCategory
    /// The relay's human text (or the session's), for logs only.
    public let message: String

    public init(eventID: String, state: DeliveryState, category: DeliveryCategory, message: String) {
        self.eventID = eventID
        self.state = state
        self.category = category
        self.message = message
    }
}

/// Classifies a relay `OK` into a delivery decision, reading the prefix after a leading
/// `ERROR: `:
/// - `true` → accepted (category `duplicate` when the prefix says so, else `accepted`);
/// - `false` + `duplicate` → accepted / duplicate (the relay has it: that is delivery);
/// - `invalid`, `pow`, `blocked`, `restricted`, `replaced`, `deleted`, `mute` → rejected;
/// - `rate-limited`, `error`, `auth-required` → retryable;
/// - any other or no prefix → retryable / unknown.
/// An `OK` without an event id (some relays send `""` with rejections) names no event and
/// cannot be classified: `invalid_relay_frame`.
public func classifyDeliveryAcknowledgement(_ ok: RelayResponseFrame) throws(SoftchatError) -> DeliveryDecision {
    guard case .ok(let eventID, let accepted, let message) = ok else {
        throw .invalidRelayFrame("classifyDeliveryAcknowledgement needs an OK frame, got \(ok.verb)", operation: .relayPublish)
    }
    guard let eventID else {
        throw .invalidRelayFrame("OK without an event id names no event and cannot be classified", operation: .relayPublish)
    }
    return classify(eventID: eventID, accepted: accepted, message: message)
}

func classify(eventID: String, accepted: Bool, message: RelayMessage) -> DeliveryDecision {
    let prefix = message.prefix
    let text = message.text
    if accepted || prefix == "duplicate" {
        return DeliveryDecision(eventID: eventID, state: .accepted, category: prefix == "duplicate" ? .duplicate : .accepted, message: text)
    }
    switch prefix {
    case "invalid": return DeliveryDecision(eventID: eventID, state: .rejected, category: .invalid, message: text)
    case "pow": return DeliveryDecision(eventID: eventID, state: .rejected, category: .pow, message: text)
    case "blocked": return DeliveryDecision(eventID: eventID, state: .rejected, category: .blocked, message: text)
    case "restricted": return DeliveryDecision(eventID: eventID, state: .rejected, category: .restricted, message: text)
    case "replaced": return DeliveryDecision(eventID: eventID, state: .rejected, category: .replaced, message: text)
    case "deleted": return DeliveryDecision(eventID: eventID, state: .rejected, category: .deleted, message: text)
    case "mute": return DeliveryDecision(eventID: eventID, state: .rejected, category: .mute, message: text)
    case "rate-limited": return DeliveryDecision(eventID: eventID, state: .retryable, category: .rateLimited, message: text)
    case "error": return DeliveryDecision(eventID: eventID, state: .retryable, category: .error, message: text)
    case "auth-required": return DeliveryDecision(eventID: eventID, state: .retryable, category: .authRequired, message: text)
    default: return DeliveryDecision(eventID: eventID, state: .retryable, category: .unknown, message: text)
    }
}
