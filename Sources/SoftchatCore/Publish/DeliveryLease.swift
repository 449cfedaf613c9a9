/// Delivery lease value types: what the account's delivery facet hands out and takes back.
/// They live in the core so the sans-IO sync engine (which does no storage) can carry them in
/// the account requests it returns.

/// A lease over claimed delivery work for one relay. Stale once released, or once it expired
/// and another claim took its work.
public struct DeliveryClaim: Sendable, Hashable {
    /// The host-chosen id naming the lease.
    public let leaseID: String
    /// The relay the claimed intents are for.
    public let relayURL: String
    /// When the lease expires, in Unix seconds; the next claim may then take its work. 0 in a claim
    /// rebuilt with ``DeliveryClaim/init(leaseID:relayURL:)``.
    public let expiresAt: Int64
    /// A claim from its fields, as the account makes it.
    ///
    /// - Parameters:
    ///   - leaseID: The host-chosen id naming the lease.
    ///   - relayURL: The relay the claimed intents are for.
    ///   - expiresAt: When the lease expires, in Unix seconds.
    public init(leaseID: String, relayURL: String, expiresAt: Int64) {
        self.leaseID = leaseID
        self.relayURL = relayURL
        self.expiresAt = expiresAt
    }
}

/// One claimed intent with the event it delivers.
public struct DeliveryPayload: Sendable, Hashable {
    /// The durable id of the (event, relay) publish intent.
    public let intentID: String
    /// The id of the event to publish.
    public let eventID: String
    /// The signed event as JSON text, as the account stored it (``VerifiedEvent/init(text:)`` reads it).
    public let eventJSON: String
    /// A payload from its fields.
    ///
    /// - Parameters:
    ///   - intentID: The durable id of the publish intent.
    ///   - eventID: The id of the event to publish.
    ///   - eventJSON: The signed event as JSON text.
    public init(intentID: String, eventID: String, eventJSON: String) {
        self.intentID = intentID
        self.eventID = eventID
        self.eventJSON = eventJSON
    }
}

/// What a successful claim hands out: the lease and the work it holds.
public struct DeliveryClaimResult: Sendable, Hashable {
    /// The lease, to pass back when marking writes, applying results and releasing.
    public let claim: DeliveryClaim
    /// The claimed intents with their events, in publish order.
    public let payloads: [DeliveryPayload]
    /// A claim result from its parts.
    ///
    /// - Parameters:
    ///   - claim: The lease.
    ///   - payloads: The claimed intents with their events, in publish order.
    public init(claim: DeliveryClaim, payloads: [DeliveryPayload]) {
        self.claim = claim
        self.payloads = payloads
    }
}

/// A relay's decision for one claimed intent.
public struct DeliveryResult: Sendable, Hashable {
    /// The intent the decision settles.
    public let intentID: String
    /// The relay's decision, from a `deliveryChanged` action or ``classifyDeliveryAcknowledgement(_:)``.
    public let decision: DeliveryDecision
    /// A result from its parts.
    ///
    /// - Parameters:
    ///   - intentID: The intent the decision settles.
    ///   - decision: The relay's decision for it.
    public init(intentID: String, decision: DeliveryDecision) {
        self.intentID = intentID
        self.decision = decision
    }
}

extension DeliveryClaim {
    /// Rebuilds a claim from its lease id and relay (for a CLI or a facade that kept only
    /// those); whether it is still live is decided by the account, not by `expiresAt`.
    ///
    /// - Parameters:
    ///   - leaseID: The lease's id, as the claim carried it.
    ///   - relayURL: The relay the claim is for.
    public init(leaseID: String, relayURL: String) {
        self.init(leaseID: leaseID, relayURL: relayURL, expiresAt: 0 as Int64)
    }
}
