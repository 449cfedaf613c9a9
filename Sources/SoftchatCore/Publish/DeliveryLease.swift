/// Delivery lease value types: what the account's delivery facet hands out and takes back.
/// They live in the core so the sans-IO sync engine (which does no storage) can carry them in
/// the account requests it returns.

/// A lease over claimed delivery work for one relay. Stale once released, or once it expired
/// and another claim took its work.
public struct DeliveryClaim: Sendable, Hashable {
    public let leaseID: String
    public let relayURL: String
    public let expiresAt: Int64
    public init(leaseID: String, relayURL: String, expiresAt: Int64) {
        self.leaseID = leaseID
        self.relayURL = relayURL
        self.expiresAt = expiresAt
    }
}

/// One claimed intent with the event it delivers.
public struct DeliveryPayload: Sendable, Hashable {
    public let intentID: String
    public let eventID: String
    public let eventJSON: String
    public init(intentID: String, eventID: String, eventJSON: String) {
        self.intentID = intentID
        self.eventID = eventID
        self.eventJSON = eventJSON
    }
}

public struct DeliveryClaimResult: Sendable, Hashable {
    public let claim: DeliveryClaim
    public let payloads: [DeliveryPayload]
    public init(claim: DeliveryClaim, payloads: [DeliveryPayload]) {
        self.claim = claim
        self.payloads = payloads
    }
}

/// A relay's decision for one claimed intent.
public struct DeliveryResult: Sendable, Hashable {
    public let intentID: String
    public let decision: DeliveryDecision
    public init(intentID: String, decision: DeliveryDecision) {
        self.intentID = intentID
        self.decision = decision
    }
}

extension DeliveryClaim {
    /// Rebuilds a claim from its lease id and relay (for a CLI or a facade that kept only
    /// those); whether it is still live is decided by the account, not by `expiresAt`.
    public init(leaseID: String, relayURL: String) {
        self.init(leaseID: leaseID, relayURL: relayURL, expiresAt: 0 as Int64)
    }
}

