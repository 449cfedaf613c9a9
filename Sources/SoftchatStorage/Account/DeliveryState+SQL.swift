import SoftchatCore

/// The delivery state as the `publish_intents.state` column holds it — one type from the SQL
/// column to every facade. The account's SQL spells states from these cases, and a column is
/// read back as a `DeliveryState` or as an error, never a guess: an unknown spelling (a file
/// written by something else) used to read as `pending`, a state no relay said.
extension DeliveryState {
    /// The state as an SQL literal: `'inFlight'`.
    var sql: String { "'\(rawValue)'" }

    /// The states as an SQL list for `state IN …`: `('pending', 'retryable')`.
    static func sql(_ states: DeliveryState...) -> String {
        "(" + states.map { $0.sql }.joined(separator: ", ") + ")"
    }
}

extension Statement {
    /// The delivery state in `column`.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when the column holds a
    ///   spelling that is no `DeliveryState`.
    func deliveryState(_ column: Int32) throws(SoftchatError) -> DeliveryState {
        let spelling = text(column)
        guard let state = DeliveryState(rawValue: spelling) else {
            throw SoftchatError(
                .accountStorageFailed, "publish_intents holds the state \"\(spelling)\", which is no delivery state", operation: .relayPublish)
        }
        return state
    }
}
