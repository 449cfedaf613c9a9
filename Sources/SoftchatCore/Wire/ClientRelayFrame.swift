import SoftchatJSON

/// A frame a client sends to a relay: NIP-01's EVENT, REQ and CLOSE, NIP-42's AUTH, NIP-45's
/// COUNT, Softchat's flat batch `["EVENTS", event1, event2, …]` (1–256 unique events), and NIP-77's
/// NEG-OPEN, NEG-MSG and NEG-CLOSE (their negentropy messages as bytes).
///
/// Every event inside is a `VerifiedEvent`, so a parsed frame is trustworthy as a whole.
public enum ClientRelayFrame: Sendable, Hashable {
    /// `["EVENT", event]`: publish one event.
    case event(VerifiedEvent)
    /// `["REQ", id, filter…]`: subscribe with 1–64 filters.
    case req(subscriptionID: String, filters: [RelayFilter])
    /// `["CLOSE", id]`: end a subscription (or a COUNT).
    case close(subscriptionID: String)
    /// `["AUTH", event]`: answer the relay's NIP-42 challenge with a kind-22242 event.
    case auth(VerifiedEvent)
    /// `["COUNT", id, filter…]`: ask for a NIP-45 count of the events 1–64 filters match.
    case count(subscriptionID: String, filters: [RelayFilter])
    /// `["EVENTS", event…]`: Softchat's flat batch of 1–256 events with unique ids, one `OK` each.
    case events([VerifiedEvent])
    /// `["NEG-OPEN", id, filter, hex]`: one filter and the initiator's first message.
    case negOpen(subscriptionID: String, filter: RelayFilter, message: [UInt8])
    /// `["NEG-MSG", id, hex]`.
    case negMessage(subscriptionID: String, message: [UInt8])
    /// `["NEG-CLOSE", id]`.
    case negClose(subscriptionID: String)

    /// The frame's verb, element 0 of its JSON array (`EVENT`, `REQ`, `NEG-OPEN`, …).
    public var verb: String {
        switch self {
        case .event: "EVENT"
        case .req: "REQ"
        case .close: "CLOSE"
        case .auth: "AUTH"
        case .count: "COUNT"
        case .events: "EVENTS"
        case .negOpen: "NEG-OPEN"
        case .negMessage: "NEG-MSG"
        case .negClose: "NEG-CLOSE"
        }
    }

    /// The frame as compact JSON text, ready for a WebSocket text message.
    ///
    /// - Returns: The JSON array text; negentropy messages are written as lowercase hex.
    public func toJSON() -> String {
        var elements: [JSONValue] = [.string(verb)]
        switch self {
        case .event(let e), .auth(let e): elements.append(e.jsonValue)
        case .req(let id, let filters), .count(let id, let filters):
            elements.append(.string(id))
            elements += filters.map { .object($0.json) }
        case .close(let id), .negClose(let id): elements.append(.string(id))
        case .events(let events): elements += events.map { $0.jsonValue }
        case .negOpen(let id, let filter, let message): elements += [.string(id), .object(filter.json), .string(Hex.encode(message))]
        case .negMessage(let id, let message): elements += [.string(id), .string(Hex.encode(message))]
        }
        return JSONValue.array(elements).jsonText
    }
}

/// Validates a client frame: size bound before parsing, strict JSON, verb, arity, filters and
/// every event's id and signature. A NEG- message must be non-empty lowercase hex; its
/// negentropy content is not decoded here.
///
/// - Parameter text: One WebSocket text message from a client.
/// - Returns: The frame, every event in it verified.
/// - Throws: ``SoftchatError`` with code `invalid_relay_frame` for text over the frame bound, bad
///   JSON, an unknown verb, wrong arity or element types, a bad subscription id or NEG- message,
///   or an EVENT event that is malformed or does not verify; `invalid_relay_filter` for a bad
///   filter (REQ, COUNT, NEG-OPEN), none, or more than 64; `invalid_relay_authentication` for an
///   AUTH event that is malformed, does not verify or lacks NIP-42's kind and tags;
///   `invalid_relay_batch` for an EVENTS batch that is nested, outside 1–256 events, repeats an
///   id or holds an event that is malformed or does not verify.
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
    case "NEG-OPEN":
        try r.arity(4, "[\"NEG-OPEN\", subscription id, filter, message]")
        let id = try r.subscriptionID(1)
        let filter = try RelayFilter(json: r.elements[2], index: 0)
        return .negOpen(subscriptionID: id, filter: filter, message: try r.negentropyMessage(3))
    case "NEG-MSG":
        try r.arity(3, "[\"NEG-MSG\", subscription id, message]")
        return .negMessage(subscriptionID: try r.subscriptionID(1), message: try r.negentropyMessage(2))
    case "NEG-CLOSE":
        try r.arity(2, "[\"NEG-CLOSE\", subscription id]")
        return .negClose(subscriptionID: try r.subscriptionID(1))
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
