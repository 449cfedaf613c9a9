import SoftchatCore

// What the writer's update hook records of each transaction, for the live queries
// (LiveQueries.swift, LiveRows.swift).

/// The rowids of the `events` rows the writer's current transaction touched (the update hook
/// fills it; the commit empties it). Bounded: past `maxRows` it stops listing and says so, and
/// the observations are read again instead.
final class RowChangeLog: @unchecked Sendable {
    // @unchecked: used only by the thread that holds the writer connection.
    static let maxRows = 65_536
    var enabled = false
    var rows: [Int64] = []
    var overflowed = false
    /// The events this transaction inserted, by rowid: verified before they were written, so
    /// the live queries need not read and decode their rows again.
    var inserted: [Int64: VerifiedEvent] = [:]
    /// The `private_messages` and `publish_intents` rows it touched, and the live-rows keys
    /// its writes named themselves (mark-read's room: `private_rooms` has no rowid to report).
    var rowChanges = RowChanges()

    func record(_ rowid: Int64) {
        guard enabled else { return }
        if rows.count < Self.maxRows { rows.append(rowid) } else { overflowed = true }
    }

    func recordMessage(_ rowid: Int64) {
        guard enabled else { return }
        if rowChanges.count < Self.maxRows { rowChanges.messages.append(rowid) } else { overflowed = true }
    }

    func recordIntent(_ rowid: Int64) {
        guard enabled else { return }
        if rowChanges.count < Self.maxRows { rowChanges.intents.append(rowid) } else { overflowed = true }
    }

    /// Names a live-rows key the transaction changed without a rowid row to show it.
    func note(_ key: LiveRowsKey) {
        guard enabled else { return }
        rowChanges.keys.insert(key)
    }

    func noteInserted(_ rowid: Int64, _ event: VerifiedEvent) {
        guard enabled, !overflowed, inserted.count < Self.maxRows else { return }
        inserted[rowid] = event
    }

    func take() -> (rows: [Int64], overflowed: Bool, inserted: [Int64: VerifiedEvent], rowChanges: RowChanges) {
        defer {
            rows = []
            overflowed = false
            inserted = [:]
            rowChanges = RowChanges()
        }
        return (rows, overflowed, inserted, rowChanges)
    }
}

/// What commits changed for the live-rows observations: `private_messages` and
/// `publish_intents` rowids, and keys named outright.
struct RowChanges {
    var messages: [Int64] = []
    var intents: [Int64] = []
    var keys: Set<LiveRowsKey> = []

    var isEmpty: Bool { messages.isEmpty && intents.isEmpty && keys.isEmpty }
    var count: Int { messages.count + intents.count + keys.count }

    mutating func merge(_ other: RowChanges) {
        messages += other.messages
        intents += other.intents
        keys.formUnion(other.keys)
    }
}
