import SoftchatJSON

/// A frame a relay sends to a client: EVENT, OK, EOSE, CLOSED, NOTICE, AUTH, COUNT, and NIP-77's
/// NEG-MSG and NEG-ERR.
public enum RelayResponseFrame: Sendable, Hashable {
    /// `["EVENT", id, event]`: a verified event for subscription `subscriptionID`.
    case event(subscriptionID: String, event: VerifiedEvent)
    /// `["OK", id, accepted, message]`: the relay's answer to a published event. `eventID` is nil
    /// for the empty id some relays send with a rejection.
    case ok(eventID: String?, accepted: Bool, message: RelayMessage)
    /// `["EOSE", id]`: every stored event of the subscription was sent; later ones are live.
    case eose(subscriptionID: String)
    /// `["CLOSED", id, message]`: the relay ended the subscription (or COUNT), saying why.
    case closed(subscriptionID: String, message: RelayMessage)
    /// `["NOTICE", message]`: human-readable text from the relay.
    case notice(RelayMessage)
    /// `["AUTH", challenge]`: the relay asks for NIP-42 authentication with a non-empty challenge.
    case auth(challenge: String)
    /// `["COUNT", id, result]`: the NIP-45 answer to a COUNT.
    case count(subscriptionID: String, result: CountResult)
    /// `["NEG-MSG", id, hex]`: the responder's negentropy message, as bytes.
    case negMessage(subscriptionID: String, message: [UInt8])
    /// `["NEG-ERR", id, reason]` (a 4th element, the record limit of a `blocked`, is read and
    /// not kept): the reconciliation is closed.
    case negError(subscriptionID: String, message: RelayMessage)

    /// The frame's verb, element 0 of its JSON array (`EVENT`, `OK`, `NEG-ERR`, …).
    public var verb: String {
        switch self {
        case .event: "EVENT"
        case .ok: "OK"
        case .eose: "EOSE"
        case .closed: "CLOSED"
        case .notice: "NOTICE"
        case .auth: "AUTH"
        case .count: "COUNT"
        case .negMessage: "NEG-MSG"
        case .negError: "NEG-ERR"
        }
    }

    /// The frame as compact JSON text, as a relay writes it.
    ///
    /// - Returns: The JSON array text; an `OK` without an event id has `""` in its place.
    public func toJSON() -> String {
        let elements: [JSONValue]
        switch self {
        case .event(let id, let e): elements = ["EVENT", .string(id), e.jsonValue]
        case .ok(let id, let accepted, let m): elements = ["OK", .string(id ?? ""), .bool(accepted), .string(m.text)]
        case .eose(let id): elements = ["EOSE", .string(id)]
        case .closed(let id, let m): elements = ["CLOSED", .string(id), .string(m.text)]
        case .notice(let m): elements = ["NOTICE", .string(m.text)]
        case .auth(let c): elements = ["AUTH", .string(c)]
        case .count(let id, let r): elements = ["COUNT", .string(id), r.jsonValue]
        case .negMessage(let id, let m): elements = ["NEG-MSG", .string(id), .string(Hex.encode(m))]
        case .negError(let id, let m): elements = ["NEG-ERR", .string(id), .string(m.text)]
        }
        return JSONValue.array(elements).jsonText
    }
}

/// Validates a relay frame: size bound, strict JSON, verb and arity, and for EVENT the event's
/// id and signature.
///
/// - Parameter text: One WebSocket text message from a relay.
/// - Returns: The frame; an EVENT's event is verified.
/// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` for an AUTH that is not
///   `["AUTH", non-empty challenge string]`; `invalid_relay_frame` for everything else that is
///   wrong: text over the frame bound, bad JSON, an unknown verb, wrong arity or element types, a
///   bad subscription id, an `OK` id that is neither 64 lowercase hex nor empty, a malformed
///   COUNT result or NEG- message, or an EVENT event that is malformed or does not verify.
public func parseRelayResponseFrame(_ text: String) throws(SoftchatError) -> RelayResponseFrame {
    try parseRelayResponseFrame(try FrameReader(text: text, direction: "relay"))
}

/// The same, from a frame already read (the session reads once, then dispatches on the verb).
func parseRelayResponseFrame(_ r: FrameReader) throws(SoftchatError) -> RelayResponseFrame {
    switch r.verb {
    case "EVENT":
        try r.arity(3, "[\"EVENT\", subscription id, event]")
        let id = try r.subscriptionID(1)
        return .event(subscriptionID: id, event: try r.event(2, code: .invalidRelayFrame, what: "EVENT event"))
    case "OK":
        try r.arity(4, "[\"OK\", event id, accepted, message]")
        let id = try r.string(1, "event id")
        guard id.isEmpty || Hex.isLowercase(id, count: 64) else {
            throw .invalidRelayFrame("OK element 1 (event id) must be 64 lowercase hex characters or empty")
        }
        guard case .bool(let accepted) = r.elements[2] else {
            throw .invalidRelayFrame("OK element 2 (accepted) must be true or false, not \(r.elements[2].typeName)")
        }
        return .ok(eventID: id.isEmpty ? nil : id, accepted: accepted, message: RelayMessage(try r.string(3, "message")))
    case "EOSE":
        try r.arity(2, "[\"EOSE\", subscription id]")
        return .eose(subscriptionID: try r.subscriptionID(1))
    case "CLOSED":
        try r.arity(3, "[\"CLOSED\", subscription id, message]")
        return .closed(subscriptionID: try r.subscriptionID(1), message: RelayMessage(try r.string(2, "message")))
    case "NOTICE":
        try r.arity(2, "[\"NOTICE\", message]")
        return .notice(RelayMessage(try r.string(1, "message")))
    case "AUTH":
        guard r.elements.count == 2, case .string(let challenge) = r.elements[1], !challenge.isEmpty else {
            throw .invalidRelayAuthentication("relay AUTH must be [\"AUTH\", non-empty challenge string]")
        }
        return .auth(challenge: challenge)
    case "COUNT":
        try r.arity(3, "[\"COUNT\", subscription id, {\"count\": n}]")
        return .count(subscriptionID: try r.subscriptionID(1), result: try CountResult(json: r.elements[2]))
    case "NEG-MSG":
        try r.arity(3, "[\"NEG-MSG\", subscription id, message]")
        return .negMessage(subscriptionID: try r.subscriptionID(1), message: try r.negentropyMessage(2))
    case "NEG-ERR":
        guard r.elements.count == 3 || r.elements.count == 4 else {
            throw .invalidRelayFrame(
                "NEG-ERR frame must be [\"NEG-ERR\", subscription id, reason] or with a record limit (3 or 4 elements), got \(r.elements.count)")
        }
        if r.elements.count == 4, case .integer = r.elements[3] {
        } else if r.elements.count == 4 {
            throw .invalidRelayFrame("NEG-ERR element 3 (record limit) must be an integer, not \(r.elements[3].typeName)")
        }
        return .negError(subscriptionID: try r.subscriptionID(1), message: RelayMessage(try r.string(2, "reason")))
    default:
        throw .invalidRelayFrame("unknown relay verb \"\(r.verb)\"")
    }
}
