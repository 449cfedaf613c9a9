public import SoftchatCore
import Synchronization

// Live rows: the chat screen's other reads, observed. A room's messages, the room list and the
// delivery states of the account's own messages are not windows of events but rows the ingest,
// send, delivery and mark-read transactions keep (private_messages, private_rooms,
// publish_intents). The writer's update hook lists the `private_messages` and
// `publish_intents` rows each transaction touches (mark-read, which changes only the WITHOUT
// ROWID `private_rooms`, names its room itself); after the commit the live-query worker finds
// whose rooms and operations those rows belong to and reads again only the observations filed
// under them: a message in one room reads neither the other rooms' windows nor any delivery
// observation. Each read is one bounded query (at most `maxObservedWindow` rows), diffed by key
// against the window before it into ordered changes.

/// A row a live-rows observation holds: its key is unique within one window, and stays the
/// row's while it changes (a room's members, a message's id, an intent's id).
public protocol ObservedRow: Sendable, Equatable {
    /// The row's key within its window.
    var observationKey: String { get }
}

extension PrivateMessage: ObservedRow {
    /// The message's id (its rumor's).
    public var observationKey: String { id }
}

extension PrivateRoom: ObservedRow {
    /// The room's members, joined by commas (as they are sorted, one room has one key).
    public var observationKey: String { PrivateMessageStore.roomKey(members) }
}

extension PublishIntentStatus: ObservedRow {
    /// The intent's id.
    public var observationKey: String { intentID }
}

/// One change to an observed list of rows. Applied in order, each to the list as the changes
/// before it left it, a batch turns the previous list into the new one.
public enum RowWindowChange<Row: ObservedRow>: Sendable, Equatable {
    /// `row` entered the list at index `at`.
    case inserted(row: Row, at: Int)
    /// The row with key `key` left the list from index `at` (deleted, expired, pushed out).
    case removed(key: String, at: Int)
    /// The row with key `key` moved from index `from` to index `to` (a room with a new message
    /// going to the top); an `updated` at `to` follows when it changed too.
    case moved(key: String, from: Int, to: Int)
    /// The row at `at` changed in place: `row` is it now (an unread count, a delivery state).
    case updated(row: Row, at: Int)

    /// Applies `changes` in order to `rows`.
    ///
    /// - Parameters:
    ///   - changes: One batch, as an observation gave it.
    ///   - rows: The list before them; after, the list they describe.
    /// - Returns: False (and `rows` left as far as it got) when a change does not fit the list:
    ///   an index out of range, or a key not at its index.
    @discardableResult
    public static func apply(_ changes: [RowWindowChange], to rows: inout [Row]) -> Bool {
        for change in changes {
            switch change {
            case .inserted(let row, let at):
                guard at >= 0, at <= rows.count else { return false }
                rows.insert(row, at: at)
            case .removed(let key, let at):
                guard at >= 0, at < rows.count, rows[at].observationKey == key else { return false }
                rows.remove(at: at)
            case .moved(let key, let from, let to):
                guard from >= 0, from < rows.count, to >= 0, to < rows.count, rows[from].observationKey == key else { return false }
                rows.insert(rows.remove(at: from), at: to)
            case .updated(let row, let at):
                guard at >= 0, at < rows.count, rows[at].observationKey == row.observationKey else { return false }
                rows[at] = row
            }
        }
        return true
    }

    /// The changes that turn `old` into `new` (each with unique keys): removals first (each
    /// index as the removals before it left the list), then, position by position of `new`,
    /// what is already there (updated if it changed), moved up from further down, or inserted.
    /// Quadratic in the window at worst; a window holds at most `maxObservedWindow` rows.
    static func changes(from old: [Row], to new: [Row]) -> [RowWindowChange] {
        var out: [RowWindowChange] = []
        let keep = Set(new.map(\.observationKey))
        var rows: [Row] = []
        rows.reserveCapacity(new.count)
        for (index, row) in old.enumerated() {
            if keep.contains(row.observationKey) {
                rows.append(row)
            } else {
                out.append(.removed(key: row.observationKey, at: index - (out.count)))
            }
        }
        for (i, row) in new.enumerated() {
            let key = row.observationKey
            if i < rows.count, rows[i].observationKey == key {
                if rows[i] != row {
                    out.append(.updated(row: row, at: i))
                    rows[i] = row
                }
            } else if i < rows.count, let from = rows[(i + 1)...].firstIndex(where: { $0.observationKey == key }) {
                let was = rows.remove(at: from)
                rows.insert(row, at: i)
                out.append(.moved(key: key, from: from, to: i))
                if was != row { out.append(.updated(row: row, at: i)) }
            } else {
                rows.insert(row, at: i)
                out.append(.inserted(row: row, at: i))
            }
        }
        return out
    }
}

/// One update of an observed list of rows: its snapshot, the changes that followed, or the
/// whole list again.
public enum RowWindowUpdate<Row: ObservedRow>: Sendable, Equatable, LiveUpdate {
    /// The list when the observation started: always the first update.
    case snapshot(rows: [Row])
    /// The changes one commit (or several, merged) made, in order.
    case changes(changes: [RowWindowChange<Row>])
    /// The whole list again, in place of changes the reader did not take in time (more than
    /// ``EventObservation/maxBacklog`` waited) or of more changes than the list holds.
    case reload(rows: [Row])

    /// Its changes, or its list's rows.
    public var extent: LiveUpdateExtent {
        switch self {
        case .changes(let c): .changes(c.count)
        case .snapshot(let r), .reload(let r): .window(r.count)
        }
    }
    /// The list again, as ``reload(rows:)``.
    public static func reload(_ window: [Row]) -> RowWindowUpdate { .reload(rows: window) }
}

/// A live list of rows over the account: a room's messages
/// (``AccountMessages/observeMessages(ownerKey:members:limit:clock:)``), the room list
/// (``AccountMessages/observeRooms(ownerKey:limit:clock:)``) or the delivery states of the
/// account's own messages (``AccountDelivery/observeIntents(operationIDs:)``). Read it as an
/// `AsyncSequence` (one reader) or with ``poll()``; ``cancel()`` (or letting it go) ends it.
///
/// Memory: the list (at most `maxObservedWindow` rows) and the changes waiting for the reader
/// (at most ``EventObservation/maxBacklog``; past that, one reload carrying the list).
public final class RowObservation<Row: ObservedRow>: AsyncSequence, Sendable {
    /// Each update of this observation, in order.
    public typealias Element = RowWindowUpdate<Row>

    let id: Int
    let rows: LiveRows<Row>
    private weak let hub: LiveQueryHub?

    init(id: Int, hub: LiveQueryHub, rows: LiveRows<Row>) {
        self.id = id
        self.hub = hub
        self.rows = rows
    }

    deinit { hub?.removeRows(id) }

    /// The list as this observation has it now (the updates not yet read included).
    public var window: [Row] { rows.window.withLock { $0 } }

    /// The next update if one waits, without waiting.
    public func poll() -> RowWindowUpdate<Row>? { rows.queue.take() }

    /// Ends the observation: no update follows, and a reader waiting gets the end of the sequence.
    public func cancel() {
        hub?.removeRows(id)
        rows.queue.finish()
    }

    /// Waits for each update in turn.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: LiveUpdateQueue<RowWindowUpdate<Row>>
        /// The next update; nil once the observation was cancelled (or its task was).
        public mutating func next() async -> RowWindowUpdate<Row>? { await queue.next() }
    }

    /// An iterator over the updates; one reader at a time.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: rows.queue) }

    /// Calls `wake` after each update is queued and once the observation ends (and once now),
    /// so a reader that is not a task takes them with ``poll()``. `wake` runs on the queuing
    /// thread: it must only schedule the reading.
    package func whenUpdated(_ wake: @escaping @Sendable () -> Void) { rows.queue.whenUpdated(wake) }

    /// Whether the observation ended (nothing more will be queued).
    package var isFinished: Bool { rows.queue.isFinished }
}

/// One observed list: its read, the list it last gave and the reader's queue. The list is set
/// only on the live-query worker; the lock is for ``RowObservation/window`` readers.
final class LiveRows<Row: ObservedRow>: Sendable {
    /// Reads the list as it is at `now`, and when time next changes it (an expiry), if ever.
    typealias Read = @Sendable (SQLiteConnection, Int64) throws -> (rows: [Row], wakeAt: Int64?)

    let read: Read
    let window = Mutex<[Row]>([])
    let queue = LiveUpdateQueue<RowWindowUpdate<Row>>()

    init(read: @escaping Read) { self.read = read }

    /// Reads the list again (on the worker) and queues the changes from the last one, or the
    /// snapshot the first time. Returns when time next changes it.
    func refresh(_ db: SQLiteConnection, now: Int64, first: Bool) throws -> Int64? {
        let (rows, wakeAt) = try read(db, now)
        let old = window.withLock { w in
            defer { w = rows }
            return w
        }
        if first {
            queue.push(.snapshot(rows: rows), window: [])
        } else if old != rows {
            let changes = RowWindowChange.changes(from: old, to: rows)
            queue.push(changes.count > Swift.max(rows.count, 1) ? .reload(rows: rows) : .changes(changes: changes), window: rows)
        }
        return wakeAt
    }
}

/// The commits a live-rows observation is read again after: one touching a room of an owner,
/// any room of an owner (the room list), or a publish operation.
enum LiveRowsKey: Hashable {
    case room(owner: String, room: String)
    case rooms(owner: String)
    case operation(String)
}

// MARK: What the account observes

extension AccountMessages {
    /// Observes the room list of `owner`: as ``rooms(ownerKey:now:limit:)`` reads it (the room
    /// with the newest message first, each with its newest shown message, message count and
    /// unread count), at most `limit` rooms. It yields the list, then the changes each commit
    /// makes to it (a room moving to the top, an unread count going up or to 0), and those time
    /// makes (a latest message expiring). A message sent or a room marked read is in the list
    /// when the call returns; received messages follow within milliseconds of their commit,
    /// another process's within about `LiveQueryHub.pollMilliseconds`.
    ///
    /// - Parameters:
    ///   - owner: The public key whose rooms to list.
    ///   - limit: At most this many rooms, 1 to `maxObservedWindow` (500).
    ///   - clock: The current Unix time in seconds, which decides expiry as a read's `now` does;
    ///     nil: the system's.
    /// - Returns: The observation; keep it while the screen shows the list.
    /// - Throws: `invalid_private_message` for a key that is not 64 lowercase hex characters or
    ///   a `limit` out of range; `account_storage_failed` when SQLite fails.
    public func observeRooms(ownerKey owner: String, limit: Int = 100, clock: (@Sendable () -> Int64)? = nil)
        throws(SoftchatError) -> RowObservation<PrivateRoom>
    {
        try Self.checkObserved(owner, [], limit: limit, call: "observeRooms")
        return try store.observeRows("observeRooms", keys: [.rooms(owner: owner)], clock: clock) { db, now in
            let rooms = try PrivateMessageStore.rooms(db, owner: owner, now: now, limit: limit)
            // Time changes a room when its newest shown message expires.
            var wake: Int64?
            for room in rooms {
                guard let latest = room.latest else { continue }
                let due = try PrivateMessageStore.nextExpiry(
                    db, owner: owner, room: PrivateMessageStore.roomKey(room.members), through: latest.cursor, now: now)
                if let due { wake = Swift.min(wake ?? due, due) }
            }
            return (rooms, wake)
        }
    }

    /// Observes a room's newest messages: as ``messages(ownerKey:members:now:limit:before:)``
    /// reads its first page (newest first, deleted and expired ones never in it), at most
    /// `limit`. It yields the page, then the changes each commit makes to it (a message
    /// received, sent, deleted) and those time makes (an expiry). A message sent is in it when
    /// ``send(to:text:signer:now:tags:)`` returns.
    ///
    /// - Parameters:
    ///   - owner: The public key whose room it is.
    ///   - members: The room's members (the owner may be included or not; order does not matter).
    ///   - limit: At most this many messages, 1 to `maxObservedWindow` (500).
    ///   - clock: The current Unix time in seconds, which decides expiry; nil: the system's.
    /// - Returns: The observation; keep it while the screen shows the room.
    /// - Throws: `invalid_private_message` for a key that is not 64 lowercase hex characters or
    ///   a `limit` out of range; `account_storage_failed` when SQLite fails.
    public func observeMessages(ownerKey owner: String, members: [String], limit: Int = 50, clock: (@Sendable () -> Int64)? = nil)
        throws(SoftchatError) -> RowObservation<PrivateMessage>
    {
        try Self.checkObserved(owner, members, limit: limit, call: "observeMessages")
        let room = PrivateMessageStore.roomKey(Set(members + [owner]).sorted())
        return try store.observeRows("observeMessages", keys: [.room(owner: owner, room: room)], clock: clock) { db, now in
            let page = try PrivateMessageStore.page(db, owner: owner, room: room, now: now, before: nil, limit: limit)
            let wake = try page.last.map { try PrivateMessageStore.nextExpiry(db, owner: owner, room: room, through: $0.cursor, now: now) } ?? nil
            return (page, wake)
        }
    }

    /// Observes the delivery states of the private message `message` this account sent:
    /// ``observeDeliveries(messageID:room:)`` of its id and room.
    ///
    /// - Parameter message: The message, as ``send(to:text:signer:now:tags:)`` returned it or an
    ///   observed room holds it.
    /// - Returns: The observation: empty for a message this account did not send.
    /// - Throws: `account_storage_failed` when SQLite fails.
    public func observeDeliveries(of message: PrivateMessage) throws(SoftchatError) -> RowObservation<PublishIntentStatus> {
        try observeDeliveries(messageID: message.id, room: message.room)
    }

    /// Observes the delivery states of the private message `messageID` this account sent in
    /// `room`: each of its wraps' intents (one per member and inbox relay, the members in sorted
    /// order, the self-copy's among them), as ``AccountDelivery/observeIntents(operationIDs:)``
    /// gives them.
    ///
    /// - Parameters:
    ///   - messageID: The message's id (its rumor's).
    ///   - room: Its members, as ``PrivateMessage/room`` has them (the sender included).
    /// - Returns: The observation: empty for a message this account did not send.
    /// - Throws: `invalid_relay_filter` for no member or more than
    ///   ``AccountDelivery/maxObservedOperations``; `account_storage_failed` when SQLite fails.
    public func observeDeliveries(messageID: String, room: [String]) throws(SoftchatError) -> RowObservation<PublishIntentStatus> {
        try AccountDelivery(store: store).observeIntents(operationIDs: Set(room).sorted().map { "dm:\(messageID):\($0)" })
    }

    /// Refuses an observation's bad key, members or limit before anything is read.
    static func checkObserved(_ owner: String, _ members: [String], limit: Int, call: String) throws(SoftchatError) {
        for key in [owner] + members where !Hex.isLowercase(key, count: 64) {
            throw .invalidPrivateMessage("\(call): key \(key.prefix(80)) is not 64 lowercase hex characters", operation: .relayIngestion)
        }
        guard (1...EventObservation.maxLimit).contains(limit) else {
            throw .invalidPrivateMessage("\(call): limit must be 1 to \(EventObservation.maxLimit), not \(limit)", operation: .relayIngestion)
        }
    }
}

extension AccountDelivery {
    /// Observes the intents of the publish operations `operationIDs`: each operation's as
    /// ``intents(operationID:)`` reads them, the operations in the order given, at most
    /// `maxObservedWindow` (500) intents in all (the first). It yields them, then each change
    /// of state the account commits (claimed, written, answered, retried), from this process
    /// or, within about `LiveQueryHub.pollMilliseconds`, another: a chat screen's delivery
    /// ticks, exactly as the relays' answers left them.
    ///
    /// - Parameter operationIDs: 1 to 128 operation ids, as given to `enqueueSigned` (a private
    ///   message's: ``AccountMessages/observeDeliveries(of:)``). An unknown one adds nothing
    ///   until it is enqueued.
    /// - Returns: The observation; keep it while the screen shows the states.
    /// - Throws: `invalid_relay_filter` for no id or more than 128; `account_storage_failed`
    ///   when SQLite fails.
    public func observeIntents(operationIDs: [String]) throws(SoftchatError) -> RowObservation<PublishIntentStatus> {
        guard (1...Self.maxObservedOperations).contains(operationIDs.count) else {
            throw .invalidRelayFilter(
                "observeIntents: \(operationIDs.count) operations; observe 1 to \(Self.maxObservedOperations)", operation: .relayPublish)
        }
        var ids: [String] = []
        for id in operationIDs where !ids.contains(id) { ids.append(id) }
        let unique = ids
        let limit = EventObservation.maxLimit
        return try store.observeRows("observeIntents", keys: unique.map(LiveRowsKey.operation), clock: nil) { db, _ in
            var out: [PublishIntentStatus] = []
            for id in unique where out.count < limit { out += try Self.intents(db, operationID: id, limit: limit - out.count) }
            return (out, nil)
        }
    }

    /// The most operations one ``observeIntents(operationIDs:)`` observes.
    public static let maxObservedOperations = 128
}

// MARK: The hub's side

extension LiveQueryHub {
    /// Which live-rows observations a drain reads again.
    enum RowsSelection {
        case all
        case due
        case keys(Set<LiveRowsKey>)
    }

    /// Reads the first list of a live-rows observation on the worker and files it under `keys`:
    /// every hand-over after this one that touches a key reads it again.
    func registerRows<Row>(_ rows: LiveRows<Row>, keys: [LiveRowsKey], clock: @escaping @Sendable () -> Int64) throws -> Int {
        let refresh: @Sendable (SQLiteConnection, Int64, Bool) throws -> Int64? = { db, now, first in
            try rows.refresh(db, now: now, first: first)
        }
        let result: Result<Int, any Error> = worker.sync {
            Result {
                let db = try workerConnection()
                let wakeAt = try db.snapshot { try refresh(db, clock(), true) }
                return state.withLock { s in
                    let id = s.next
                    s.next += 1
                    s.rowEntries[id] = RowsEntry(keys: keys, clock: clock, refresh: refresh, wakeAt: wakeAt)
                    for key in keys { s.rowIndex[key, default: []].insert(id) }
                    isEmpty.store(false, ordering: .releasing)
                    return id
                }
            }
        }
        return try result.get()
    }

    /// Ends live-rows observation `id`.
    func removeRows(_ id: Int) {
        state.withLock { s in
            guard let entry = s.rowEntries.removeValue(forKey: id) else { return }
            for key in entry.keys {
                s.rowIndex[key]?.remove(id)
                if s.rowIndex[key]?.isEmpty == true { s.rowIndex[key] = nil }
            }
            isEmpty.store(s.isEmpty, ordering: .releasing)
        }
    }

    /// The keys the rows `changes` lists belong to, read on the worker's connection: a
    /// message's room and its owner's room list, an intent's operation.
    func rowKeys(_ db: SQLiteConnection, _ changes: RowChanges) throws -> Set<LiveRowsKey> {
        var keys = changes.keys
        if !changes.messages.isEmpty {
            let room = try db.statement("SELECT owner, room FROM private_messages WHERE seq = ?")
            for seq in Set(changes.messages) {
                _ = try room.bind([.int(seq)])
                defer { room.reset() }
                guard try room.step() else { continue }
                keys.insert(.room(owner: room.text(0), room: room.text(1)))
                keys.insert(.rooms(owner: room.text(0)))
            }
        }
        if !changes.intents.isEmpty {
            let operation = try db.statement("SELECT operation_id FROM publish_intents WHERE rowid = ?")
            for rowid in Set(changes.intents) {
                _ = try operation.bind([.int(rowid)])
                defer { operation.reset() }
                guard try operation.step() else { continue }
                keys.insert(.operation(operation.text(0)))
            }
        }
        return keys
    }

    /// Reads again the live-rows observations `selection` names, each queueing its changes.
    func refreshRows(_ db: SQLiteConnection, _ selection: RowsSelection) throws {
        let chosen: [(Int, RowsEntry)] = state.withLock { s in
            switch selection {
            case .all:
                return s.rowEntries.map { ($0.key, $0.value) }
            case .due:
                return s.rowEntries.filter { _, e in e.isDue }.map { ($0.key, $0.value) }
            case .keys(let keys):
                var ids: Set<Int> = []
                for key in keys { ids.formUnion(s.rowIndex[key] ?? []) }
                return ids.compactMap { id in s.rowEntries[id].map { (id, $0) } }
            }
        }
        for (id, entry) in chosen {
            let wakeAt = try entry.refresh(db, entry.clock(), false)
            state.withLock { s in s.rowEntries[id]?.wakeAt = wakeAt }
        }
    }
}
