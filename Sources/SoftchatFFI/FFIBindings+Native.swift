// The native-only half of the hand-written C ABI: the schema's names for the account's and the
// managed transport's Swift types (entry points over them are generated into
// SoftchatFFIExports+Native.swift; the WebAssembly build has neither).
import SoftchatClient
import SoftchatCore
import SoftchatStorage

extension FFI {
    typealias AccountOutgoing = SoftchatStorage.AccountOutgoing
    typealias AccountDelivery = SoftchatStorage.AccountDelivery
    typealias SoftchatAccount = SoftchatStorage.SoftchatAccount
    typealias IngestionReceipt = SoftchatStorage.IngestionReceipt
    typealias QuarantinedEvent = SoftchatStorage.QuarantinedEvent
    typealias IngestionOutcome = SoftchatStorage.IngestionOutcome
    typealias AccountIncoming = SoftchatStorage.AccountIncoming
    typealias EventCursor = SoftchatStorage.EventCursor
    typealias EventPage = SoftchatStorage.EventPage
    typealias SubscriptionPolicyEntry = SoftchatStorage.SubscriptionPolicyEntry
    typealias PublishIntentStatus = SoftchatStorage.PublishIntentStatus
    typealias IntentStateCount = IntentStateCountFFI
    typealias AccountCheckReport = SoftchatStorage.AccountCheckReport
    typealias AccountMessages = SoftchatStorage.AccountMessages
    typealias PrivateMessage = SoftchatStorage.PrivateMessage
    typealias PrivateMessageCursor = SoftchatStorage.PrivateMessageCursor
    typealias PrivateRoom = SoftchatStorage.PrivateRoom
    typealias PrivateMessageDelivery = SoftchatStorage.PrivateMessageDelivery
    typealias SentPrivateMessage = SoftchatStorage.SentPrivateMessage
    typealias FailedWrap = SoftchatStorage.FailedWrap
    typealias ManagedTransportContext = SoftchatCore.ManagedTransportContext
    typealias ManagedRelayStatus = SoftchatCore.ManagedRelayStatus
    typealias ManagedTransport = ManagedTransportHandle
    typealias EventObservation = EventObservationHandle
    typealias RoomListChange = RowWindowChange<PrivateRoom>
    typealias RoomListUpdate = FFIRowsUpdate<PrivateRoom>
    typealias RoomListObservation = RoomListObservationHandle
    typealias RoomMessagesChange = RowWindowChange<PrivateMessage>
    typealias RoomMessagesUpdate = FFIRowsUpdate<PrivateMessage>
    typealias RoomMessagesObservation = RoomMessagesObservationHandle
    typealias DeliveryStatesChange = RowWindowChange<PublishIntentStatus>
    typealias DeliveryStatesUpdate = FFIRowsUpdate<PublishIntentStatus>
    typealias DeliveryStatesObservation = DeliveryStatesObservationHandle
}
