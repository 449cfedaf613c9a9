// Live queries behind the C ABI: `softchat_account_observe` (a window of events) and the live
// rows (`softchat_account_messages_observe_rooms`, `..._observe_messages`,
// `..._observe_deliveries`, `softchat_account_delivery_observe_intents`) hand their updates to
// the host's callback on a delivery queue of their own, so neither the account's writer nor its
// live-query worker ever waits for the host, and a callback may call back into the account or
// the observation.
import Dispatch
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import Synchronization

/// What an observation handle needs of the account's observations (events or rows).
protocol FFIObservable: AnyObject, Sendable {
    associatedtype Item: Sendable
    associatedtype Update: Sendable
    var window: [Item] { get }
    func poll() -> Update?
    func cancel()
    func whenUpdated(_ wake: @escaping @Sendable () -> Void)
    var isFinished: Bool { get }
}

extension SoftchatStorage.EventObservation: FFIObservable {}
extension RowObservation: FFIObservable {}

/// An observation handle (`EventObservation`, `RoomListObservation`, …). Concurrent (no handle
/// lock): `window()` and `cancel()` are thread-safe, so a callback may call them while another
/// thread is inside `cancel()`.
final class ObservationHandle<Source: FFIObservable, Payload: FFIEncodable>: Sendable {
    private let observation: Source
    private let delivery = FFIDeliveryQueue(label: "softchat.ffi.observation")
    /// Whether a drain is queued and has not started taking updates yet.
    private let scheduled = FFIFlag()
    /// Set once the callback had its final call.
    private let ended = FFIFlag()

    /// - Parameter convert: The update as the schema spells it.
    init(_ observation: Source, updates: FFICallback<Payload>?, convert: @escaping @Sendable (Source.Update) -> Payload) {
        self.observation = observation
        guard let updates else { return }
        // Each wake schedules at most one drain; the drain takes everything queued (the
        // observation's own bound holds what waits for a slow host: past it, one reload).
        let (queue, scheduled, ended) = (delivery.queue, self.scheduled, self.ended)
        observation.whenUpdated { [observation] in
            guard scheduled.set() else { return }
            queue.async {
                scheduled.clear()
                while let update = observation.poll() { updates.call(convert(update)) }
                if observation.isFinished, ended.set() { updates.end() }
            }
        }
    }

    func window() -> [Source.Item] { observation.window }

    /// Ends the observation; the callback's final call (JSON NULL) follows what it was handed
    /// before. After it returns no callback runs again, unless it was called from the callback.
    func cancel() {
        observation.cancel()
        delivery.drainUnlessOnIt()
    }

    func close() { cancel() }

    deinit { cancel() }
}

typealias EventObservationHandle = ObservationHandle<SoftchatStorage.EventObservation, EventWindowUpdate>

// MARK: The live rows' updates as the schema spells them

/// A kind of observed row as its schema unions name it: the field of one row (`room`) and of a
/// list (`rooms`).
protocol FFIObservedRow: ObservedRow, FFIEncodable {
    static var one: String { get }
    static var many: String { get }
}

extension PrivateRoom: FFIObservedRow {
    static let one = "room"
    static let many = "rooms"
}

extension PrivateMessage: FFIObservedRow {
    static let one = "message"
    static let many = "messages"
}

extension PublishIntentStatus: FFIObservedRow {
    static let one = "intent"
    static let many = "intents"
}

/// One codec for the three live-rows unions (`RoomListUpdate`, `RoomMessagesUpdate`,
/// `DeliveryStatesUpdate`, and their changes; CABIRenderer.handWrittenCodecs): they differ only
/// in their row's type and field names.
struct FFIRowsUpdate<Row: FFIObservedRow>: FFIEncodable, Sendable {
    let update: RowWindowUpdate<Row>

    var ffiJSON: JSONValue {
        var o = JSONObject()
        switch update {
        case .snapshot(let rows), .reload(let rows):
            o.append("kind", EventWindowUpdateKind(update).rawValue.ffiJSON)
            o.append(Row.many, rows.ffiJSON)
        case .changes(let changes):
            o.append("kind", EventWindowUpdateKind.changes.rawValue.ffiJSON)
            o.append("changes", .array(changes.map(Self.json)))
        }
        return .object(o)
    }

    static func json(_ change: RowWindowChange<Row>) -> JSONValue {
        var o = JSONObject()
        switch change {
        case .inserted(let row, let at), .updated(let row, let at):
            o.append("kind", RowChangeKind(change).rawValue.ffiJSON)
            o.append(Row.one, row.ffiJSON)
            o.append("at", at.ffiJSON)
        case .removed(let key, let at):
            o.append("kind", RowChangeKind.removed.rawValue.ffiJSON)
            o.append("key", key.ffiJSON)
            o.append("at", at.ffiJSON)
        case .moved(let key, let from, let to):
            o.append("kind", RowChangeKind.moved.rawValue.ffiJSON)
            o.append("key", key.ffiJSON)
            o.append("from", from.ffiJSON)
            o.append("at", to.ffiJSON)
        }
        return .object(o)
    }
}

extension EventWindowUpdateKind {
    /// The schema's kind of a live-rows update.
    init<Row>(_ update: RowWindowUpdate<Row>) {
        switch update {
        case .snapshot: self = .snapshot
        case .changes: self = .changes
        case .reload: self = .reload
        }
    }
}

extension RowChangeKind {
    /// The schema's kind of a live-rows change.
    init<Row>(_ change: RowWindowChange<Row>) {
        switch change {
        case .inserted: self = .inserted
        case .removed: self = .removed
        case .moved: self = .moved
        case .updated: self = .updated
        }
    }
}

// MARK: The account as the schema spells it

typealias RoomListObservationHandle = ObservationHandle<RowObservation<PrivateRoom>, FFIRowsUpdate<PrivateRoom>>
typealias RoomMessagesObservationHandle = ObservationHandle<RowObservation<PrivateMessage>, FFIRowsUpdate<PrivateMessage>>
typealias DeliveryStatesObservationHandle = ObservationHandle<RowObservation<PublishIntentStatus>, FFIRowsUpdate<PublishIntentStatus>>

extension SoftchatAccount {
    func observe(filtersJSON: [String], limit: Int, updates: FFICallback<EventWindowUpdate>?) throws(SoftchatError) -> EventObservationHandle {
        EventObservationHandle(try observe(filtersJSON: filtersJSON, limit: limit), updates: updates) { $0 }
    }
}

extension AccountMessages {
    func observeRooms(ownerKey: String, limit: Int, updates: FFICallback<FFIRowsUpdate<PrivateRoom>>?) throws(SoftchatError)
        -> RoomListObservationHandle
    {
        RoomListObservationHandle(try observeRooms(ownerKey: ownerKey, limit: limit), updates: updates, convert: FFIRowsUpdate.init)
    }

    func observeMessages(ownerKey: String, members: [String], limit: Int, updates: FFICallback<FFIRowsUpdate<PrivateMessage>>?) throws(SoftchatError)
        -> RoomMessagesObservationHandle
    {
        RoomMessagesObservationHandle(
            try observeMessages(ownerKey: ownerKey, members: members, limit: limit), updates: updates, convert: FFIRowsUpdate.init)
    }

    func observeDeliveries(messageID: String, room: [String], updates: FFICallback<FFIRowsUpdate<PublishIntentStatus>>?) throws(SoftchatError)
        -> DeliveryStatesObservationHandle
    {
        DeliveryStatesObservationHandle(
            try observeDeliveries(messageID: messageID, room: room), updates: updates, convert: FFIRowsUpdate.init)
    }
}

extension AccountDelivery {
    func observeIntents(operationIDs: [String], updates: FFICallback<FFIRowsUpdate<PublishIntentStatus>>?) throws(SoftchatError)
        -> DeliveryStatesObservationHandle
    {
        DeliveryStatesObservationHandle(try observeIntents(operationIDs: operationIDs), updates: updates, convert: FFIRowsUpdate.init)
    }
}
