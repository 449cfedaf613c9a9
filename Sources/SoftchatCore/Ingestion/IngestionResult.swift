/// Verified events a host applies in one authoritative transaction.
public struct IngestionBatch: Sendable, Hashable {
    public let events: [VerifiedEvent]
    public init(events: [VerifiedEvent]) { self.events = events }
}

/// What the host's transaction did with each event of a batch: every id exactly once.
public struct IngestionResult: Sendable, Hashable {
    public var accepted: [String]
    public var alreadyPresent: [String]
    public var rejected: [String]

    public init(accepted: [String] = [], alreadyPresent: [String] = [], rejected: [String] = []) {
        self.accepted = accepted
        self.alreadyPresent = alreadyPresent
        self.rejected = rejected
    }
}

/// Checks that `result` is total and disjoint for `batch` — every event id of the batch is
/// accepted, already present or rejected exactly once, and nothing else is named — before any
/// session state advances. Otherwise `invalid_persistence_result` naming the first offending id.
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
