/// Verified events a host applies in one authoritative transaction.
public struct IngestionBatch: Sendable, Hashable {
    /// The events to commit, each from a `persistEvent` action.
    public let events: [VerifiedEvent]
    /// A batch of the given events.
    ///
    /// - Parameter events: The events to commit in one transaction, each id once.
    public init(events: [VerifiedEvent]) { self.events = events }
}

/// What the host's transaction did with each event of a batch: every id exactly once.
public struct IngestionResult: Sendable, Hashable {
    /// Ids of the events the transaction newly stored.
    public var accepted: [String]
    /// Ids of the events the store already held.
    public var alreadyPresent: [String]
    /// Ids of the events the store refused.
    public var rejected: [String]

    /// A result from its three lists of event ids.
    ///
    /// - Parameters:
    ///   - accepted: Ids of the events newly stored; none by default.
    ///   - alreadyPresent: Ids of the events the store already held; none by default.
    ///   - rejected: Ids of the events the store refused; none by default.
    public init(accepted: [String] = [], alreadyPresent: [String] = [], rejected: [String] = []) {
        self.accepted = accepted
        self.alreadyPresent = alreadyPresent
        self.rejected = rejected
    }
}

/// Checks that `result` is total and disjoint for `batch` — every event id of the batch is
/// accepted, already present or rejected exactly once, and nothing else is named — before any
/// session state advances.
///
/// - Parameters:
///   - batch: The events the host's transaction applied.
///   - result: What the transaction reports it did with each of them.
/// - Throws: ``SoftchatError`` with code `invalid_persistence_result`, naming the first offending
///   id, when the batch holds an id twice, or the result names an id outside the batch, names one
///   twice or leaves one out.
public func validateIngestionResult(batch: IngestionBatch, result: IngestionResult) throws(SoftchatError) {
    var expected = Set<String>(minimumCapacity: batch.events.count)
    for e in batch.events where !expected.insert(e.id).inserted {
        throw .invalidPersistenceResult("batch holds event \(e.id) twice")
    }
    var seen: [String: String] = [:]
    for (name, ids) in [("accepted", result.accepted), ("alreadyPresent", result.alreadyPresent), ("rejected", result.rejected)] {
        for id in ids {
            guard expected.contains(id) else {
                throw .invalidPersistenceResult("\(name) names event \(id), which is not in the batch")
            }
            if let other = seen[id] {
                throw .invalidPersistenceResult("event \(id) is both \(other) and \(name)")
            }
            seen[id] = name
        }
    }
    if seen.count != expected.count {
        let missing = batch.events.first { seen[$0.id] == nil }!.id
        throw .invalidPersistenceResult("event \(missing) is missing from the result (\(seen.count) of \(expected.count) accounted for)")
    }
}
