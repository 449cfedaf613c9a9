public import SoftchatJSON

// The JSON forms of session values: what `softchat replay` prints and what the facades'
// C ABI carries. Keys are the schema's neutral names (subscriptionId, eventId, …).

extension DeliveryDecision {
    /// The decision as JSON: `{"eventId", "state", "category", "message"}`.
    public var jsonValue: JSONValue {
        .object(
            JSONObject([
                "eventId": .string(eventID), "state": .string(state.rawValue),
                "category": .string(category.rawValue), "message": .string(message),
            ]))
    }
}

extension RelaySessionAction {
    /// The action as JSON: its `kind` and the fields it carries, under the schema's names
    /// (`subscriptionId`, `eventId`, `delayMilliseconds`, …).
    public var jsonValue: JSONValue {
        var o = JSONObject()
        o.append("kind", .string(kind.rawValue))
        if let subscriptionID { o.append("subscriptionId", .string(subscriptionID)) }
        if let event { o.append("event", event.jsonValue) }
        if let eventID { o.append("eventId", .string(eventID)) }
        if let reason { o.append("reason", .string(reason)) }
        if let prefix { o.append("prefix", .string(prefix)) }
        if let message { o.append("message", .string(message)) }
        if let challenge { o.append("challenge", .string(challenge)) }
        if let count { o.append("count", count.jsonValue) }
        if let decision { o.append("decision", decision.jsonValue) }
        if let delayMilliseconds { o.append("delayMilliseconds", .integer(delayMilliseconds)) }
        if let attempt { o.append("attempt", .integer(Int64(attempt))) }
        if let retryDelayMilliseconds { o.append("retryDelayMilliseconds", .integer(retryDelayMilliseconds)) }
        return .object(o)
    }
}

extension OutboundRelayFrame {
    /// The frame as JSON: `{"frame", "deliveryEventIds"}`.
    public var jsonValue: JSONValue {
        .object(JSONObject(["frame": .string(frame), "deliveryEventIds": .array(deliveryEventIDs.map(JSONValue.string))]))
    }
}

extension RelaySessionSnapshot {
    /// The snapshot as JSON, under the schema's names (`subscriptionIds`, `outboundFrames`, …).
    public var jsonValue: JSONValue {
        .object(
            JSONObject([
                "state": .string(state), "subscriptionIds": .array(subscriptionIDs.map(JSONValue.string)),
                "outboundFrames": .integer(Int64(outboundFrames)), "pendingPublishes": .integer(Int64(pendingPublishes)),
                "awaitingPersistence": .integer(Int64(awaitingPersistence)), "reconnectAttempt": .integer(Int64(reconnectAttempt)),
                "authenticated": .bool(authenticated),
            ]))
    }
}
