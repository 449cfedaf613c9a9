/// The durable sync state of one subscription on one relay, written in the same transaction as
/// the events it accounts for: the sync engine produces it, the account stores it.
public struct SyncStateRecord: Sendable, Hashable {
    /// The relay the subscription runs on.
    public let relayURL: String
    /// The subscription's id on that relay.
    public let subscriptionID: String
    /// The filters (JSON texts) the state is for: a state for other filters is not resumed.
    public let filtersJSON: [String]
    /// The planner's state (`SubscriptionSync.jsonValue` as text).
    public let stateJSON: String
    /// When set, the subscription's whole window up to this `created_at` is synced: the
    /// account's sync cursor moves to it (never back).
    public let cursor: Int64?

    /// A record from its fields.
    ///
    /// - Parameters:
    ///   - relayURL: The relay the subscription runs on.
    ///   - subscriptionID: The subscription's id on that relay.
    ///   - filtersJSON: The subscription's filters as JSON texts.
    ///   - stateJSON: The planner's state as JSON text.
    ///   - cursor: The `created_at` up to which the whole window is synced, or nil to leave the
    ///     account's cursor where it is.
    public init(relayURL: String, subscriptionID: String, filtersJSON: [String], stateJSON: String, cursor: Int64?) {
        self.relayURL = relayURL
        self.subscriptionID = subscriptionID
        self.filtersJSON = filtersJSON
        self.stateJSON = stateJSON
        self.cursor = cursor
    }
}
