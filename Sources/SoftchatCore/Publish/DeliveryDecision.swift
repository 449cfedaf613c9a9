/// Where one event stands in its delivery to one relay. `pending` → `inFlight` (the socket
/// write was confirmed) → `accepted` | `rejected` | `retryable`; `retryable` → `pending` when
/// the host publishes it again. Sending bytes is not delivery: only a relay `OK` (or the
/// session's own timeout and transport-loss rules) moves an event past `inFlight`.
public enum DeliveryState: String, Sendable, Hashable, CaseIterable {
    /// Committed and queued, not yet written to the socket.
    case pending
    /// Written to the socket and waiting for the relay's `OK`.
    case inFlight
    /// Terminal; the relay has the event, possibly as a duplicate.
    case accepted
    /// Terminal; the relay refused the event, or its retry budget ran out.
    case rejected
    /// Not delivered; publishing it again makes it `pending`.
    case retryable

    /// True for `accepted` and `rejected`, which no later answer changes.
    public var isTerminal: Bool { self == .accepted || self == .rejected }
}

/// Why a delivery is in its state: the relay's machine-readable prefix, or a session-made
/// reason. Hosts branch on state and category; relay prose is diagnostic only.
public enum DeliveryCategory: String, Sendable, Hashable, CaseIterable {
    /// State `accepted`: an `OK` true without a `duplicate:` prefix.
    case accepted
    /// State `accepted`: the relay already had the event (an `OK` true or false with the
    /// `duplicate:` prefix).
    case duplicate
    /// State `rejected`: the relay found the event invalid (`invalid:`).
    case invalid
    /// State `rejected`: too little proof of work (`pow:`).
    case pow
    /// State `rejected`: the relay blocks the event or its author (`blocked:`).
    case blocked
    /// State `rejected`: the author may not write to this relay (`restricted:`).
    case restricted
    /// State `rejected`: a newer replaceable event superseded it (`replaced:`).
    case replaced
    /// State `rejected`: a NIP-09 deletion removed it (`deleted:`).
    case deleted
    /// State `rejected`: the relay mutes the author (`mute:`).
    case mute
    /// State `retryable`: the relay is limiting the rate (`rate-limited:`).
    case rateLimited = "rate-limited"
    /// State `retryable`: a relay error (`error:`).
    case error
    /// State `retryable`: the relay wants NIP-42 authentication (`auth-required:`); the session
    /// also makes it when the relay refuses our AUTH.
    case authRequired = "auth-required"
    /// State `retryable`: no prefix, or a prefix not listed here.
    case unknown
    /// Made by the session, state `retryable`: no `OK` before the acknowledgement deadline.
    case timeout
    /// Made by the session, state `retryable`: the transport was lost while the event was in flight.
    case transportLost = "transport-lost"
    /// Made by the session, state `retryable`: the session was cancelled first.
    case cancelled
    /// Made by the account, state `rejected`: the intent's retry budget ran out.
    case exhausted

    /// Whether a `retryable` decision of this category uses up one of the intent's retry budget:
    /// only a failure the relay reported (`error:`, or a prefix not listed). A rate limit, an
    /// `auth-required`, a timeout, a lost connection or a cancel means "later", not "failed".
    public var spendsRetryBudget: Bool { self == .error || self == .unknown }
}

/// The outcome of one acknowledgement (or of a session rule) for one event.
public struct DeliveryDecision: Sendable, Hashable {
    /// The id of the event the decision applies to.
    public let eventID: String
    /// The delivery state to commit.
    public let state: DeliveryState
    /// Why: the relay's prefix or the rule that decided, stable across relays.
    public let category: DeliveryCategory
    /// The relay's human text (or the session's), for logs only.
    public let message: String

    /// A decision from its fields.
    ///
    /// - Parameters:
    ///   - eventID: The id of the event the decision applies to.
    ///   - state: The delivery state to commit.
    ///   - category: Why the event is in that state.
    ///   - message: The relay's text (or the session's), for logs only.
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
///
/// - Parameter ok: An `OK` frame from the relay.
/// - Returns: The decision for the event the `OK` names, with the relay's text as its message.
/// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when `ok` is not an `OK` frame, or is
///   an `OK` without an event id (some relays send `""` with rejections), which names no event and
///   cannot be classified.
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
