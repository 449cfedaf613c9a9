import SoftchatJSON

/// A frame a client sends to a relay: NIP-01's EVENT, REQ and CLOSE, NIP-42's AUTH, NIP-45's
/// COUNT, and Softchat's flat batch `["EVENTS", event1, event2, …]` (1–256 unique events).
///
/// Every event inside is a `VerifiedEvent`, so a parsed frame is trustworthy as a whole.
public enum ClientRelayFrame: Sendable, Hashable {
    case event(VerifiedEvent)
    case req(subscriptionID: String, filters: [RelayFilter])
    case close(subscriptionID: String)
    case auth(VerifiedEvent)
    case count(subscriptionID: String, filters: [RelayFilter])
    case events([VerifiedEvent])

    public var verb: String {
        switch self {
        case .event: "EVENT"
        case .req: "REQ"
        case .close: "CLOSE"
        case .auth: "AUTH"
        case .count: "COUNT"
        case .events: "EVENTS"
        }
    }

    /// The frame as compact JSON text, ready for a WebSocket text message.
    public func toJSON() -> String {
        var elements: [JSONValue] = [.string(verb)]
        switch self {
        case .event(let e), .auth(let e): elements.append(e.jsonValue)
        case .req(let id, let filters), .count(let id, let filters):
            elements.append(.string(id))
            elements += filters.map { .object($0.json) }
        case .close(let id): elements.append(.string(id))
        case .events(let events): elements += events.map(\.jsonValue)
        }
        return JSONValue.array(elements).jsonText
    }
}

/// Validates a client frame: size bound before parsing, strict JSON, verb, arity, filters and
/// every event's id and signature. Errors: `invalid_relay_frame`, `invalid_relay_filter`,
/// `invalid_relay_authentication` (AUTH), `invalid_relay_batch` (EVENTS).
public func parseClientRelayFrame(_ text: String) throws(SoftchatError) -> ClientRelayFrame {
    let r = try FrameReader(text: text, direction: "client")
    switch r.verb {
    case "EVENT":
        try r.arity(2, "[\"EVENT\", event]")
        return .event(try r.event(1, code: .invalidRelayFrame, what: "EVENT event"))
    case "REQ":
        guard r.elements.count >= 2 else { throw .invalidRelayFrame("REQ frame needs a subscription id and filters") }
        return .req(subscriptionID: try r.subscriptionID(1), filters: try r.filters(from: 2))
    case "COUNT":
        guard r.elements.count >= 2 else { throw .invalidRelayFrame("COUNT frame needs a subscription id and filters") }
        return .count(subscriptionID: try r.subscriptionID(1), filters: try r.filters(from: 2))
    case "CLOSE":
        try r.arity(2, "[\"CLOSE\", subscription id]")
        return .close(subscriptionID: try r.subscriptionID(1))
    case "AUTH":
        try r.arity(2, "[\"AUTH\", event]")
        let event = try r.event(1, code: .invalidRelayAuthentication, what: "AUTH event")
        do throws(EventIssue) {
            try Nip42.checkShape(event)
        } catch {
            throw .invalidRelayAuthentication("AUTH event \(event.id): \(error.message)")
        }
        return .auth(event)
    case "EVENTS":
        return .events(try parseEventsBatch(r))
    default:
        throw .invalidRelayFrame("unknown client verb \"\(r.verb)\"")
    }
}

/// The EVENTS batch: flat, 1–256 events, unique ids, every event verified. Shape, bound and
/// duplicate checks run before any signature work.
private func parseEventsBatch(_ r: FrameReader) throws(SoftchatError) -> [VerifiedEvent] {
    let count = r.elements.count - 1
    try RelayWireContract.maxBatchEvents.check(count, "EVENTS batch")
    var unverified: [UnverifiedEvent] = []
    unverified.reserveCapacity(count)
    var seen = Set<String>(minimumCapacity: count)
    for i in 1...count {
        if case .array = r.elements[i] {
            throw .invalidRelayBatch("EVENTS element \(i) is an array; the batch is flat: [\"EVENTS\", event1, event2, …]")
        }
        let event: UnverifiedEvent
        do throws(EventIssue) {
            event = try r.unverifiedEvent(i)
        } catch {
            throw .invalidRelayBatch("EVENTS element \(i): \(error.message)")
        }
        guard seen.insert(event.id).inserted else {
            throw .invalidRelayBatch("EVENTS element \(i): duplicate event id \(event.id)")
        }
        unverified.append(event)
    }
    let results = EventVerifier.verifyInParallel(unverified)
    var verified: [VerifiedEvent] = []
    verified.reserveCapacity(count)
    for (k, result) in results.enumerated() {
        switch result {
        case .success(let e): verified.append(e)
        case .failure(let issue):
            throw .invalidRelayBatch("EVENTS element \(k + 1) (event \(unverified[k].id)): \(issue.message)")
        }
    }
    return verified
}
