// The managed transport behind the C ABI: `softchat_account_start_managed_transport` starts
// SoftchatClient's transport for the account and hands its state changes and activity to the
// host's two callbacks on a delivery thread of its own, so the I/O thread never waits for the
// host and a callback never runs inside the engine (it may call back into the account or the
// transport). Also the account reads whose Swift spelling differs from the schema's.
import Dispatch
import SoftchatClient
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatSync
import SoftchatTransport
import Synchronization

/// `void (*)(void *context, const char *json)`, as the header declares every callback.
public typealias FFICallbackFunction = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void

/// A host callback and its context: called with one value's JSON, valid only during the call.
struct FFICallback<Payload: FFIEncodable>: @unchecked Sendable {
    // @unchecked: the context is the host's; the C contract says the host may receive calls on
    // the library's delivery thread, and this type only ever calls it there.
    let function: FFICallbackFunction
    let context: UnsafeMutableRawPointer?

    /// nil when the host passed no function (it wants no calls).
    init?(_ function: FFICallbackFunction?, context: UnsafeMutableRawPointer?) {
        guard let function else { return nil }
        self.function = function
        self.context = context
    }

    func call(_ value: Payload) {
        value.ffiJSON.jsonText.withCString { function(context, $0) }
    }

    /// The final call (JSON NULL): nothing follows, and the host may let its context go.
    func end() { function(context, nil) }
}

/// The serial queue on which one handle's host callbacks run. It knows whether the current thread
/// runs it (each queue has its own token), so a handle's ending call from one of its own
/// callbacks does not wait for the queue it runs on, while a callback of one handle that ends
/// another still waits for that one's.
final class FFIDeliveryQueue: Sendable {
    let queue: DispatchQueue
    private static let key = DispatchSpecificKey<UInt64>()
    private static let tokens = Atomic<UInt64>(0)
    private let token: UInt64

    init(label: String) {
        queue = DispatchQueue(label: label)
        token = Self.tokens.add(1, ordering: .relaxed).newValue
        queue.setSpecific(key: Self.key, value: token)
    }

    /// Waits for everything queued so far, unless called from this queue itself.
    func drainUnlessOnIt() {
        if DispatchQueue.getSpecific(key: Self.key) != token { queue.sync {} }
    }
}

/// A flag a handle shares with the closures that run its callbacks.
final class FFIFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    /// Sets it; true for the call that set it first.
    func set() -> Bool { !value.exchange(true, ordering: .acquiringAndReleasing) }
    func clear() { value.store(false, ordering: .releasing) }
}

/// The schema's `IntentStateCount` (only inside `AccountCheckReport`, whose codec is hand-written).
struct IntentStateCountFFI: Sendable {
    var state: DeliveryState
    var count: Int
}

/// The `ManagedTransport` handle. Concurrent (no handle lock): every member is thread-safe, so
/// a callback may call `relays()` or `stop()` while another thread is inside `stop()`.
final class ManagedTransportHandle: Sendable {
    private let transport: SoftchatClient.ManagedTransport
    private let delivery = FFIDeliveryQueue(label: "softchat.ffi.delivery")
    /// Set by the first stop(): no update is queued for the host after it.
    private let closed = FFIFlag()
    private let states: FFICallback<ManagedTransportStateChange>?
    private let events: FFICallback<ManagedTransportActivity>?
    /// What waits for the host's callbacks, bounded in count and bytes.
    private let updates: FFIUpdateQueue

    init(
        account: SoftchatAccount, context: ManagedTransportContext, identity: SoftchatIdentity?,
        states: FFICallback<ManagedTransportStateChange>?, events: FFICallback<ManagedTransportActivity>?
    ) throws(SoftchatError) {
        var policy = try ManagedTransportPolicy(context)
        self.states = states
        self.events = events
        let closed = self.closed
        // Bounded, so a slow listener cannot grow memory without end (FFIUpdateQueue).
        let updates = FFIUpdateQueue(queue: delivery.queue) { update in
            switch update {
            case .state(let change): states?.call(change)
            case .activity(let activity): events?.call(activity)
            }
        }
        self.updates = updates
        // The host reads the callbacks, never `ManagedTransport.events`: nothing is kept there.
        policy.eventBufferLimit = 0
        // Called on the I/O thread: queue the report for the host; never call the host here.
        policy.observer = { event in
            guard !closed.isSet else { return }
            if states != nil, let change = event.stateChange { updates.push(.state(change)) }
            if events != nil, let activity = event.activity { updates.push(.activity(activity)) }
        }
        for url in context.relayURLs { _ = try RelayURL(url) }  // invalid_relay_url, before anything starts
        do {
            transport = try account.startManagedTransport(relays: context.relayURLs, identity: identity, policy: policy)
        } catch {
            throw .invalidRelaySession("startManagedTransport: \(error.message)")
        }
    }

    enum Update {
        case state(ManagedTransportStateChange)
        case activity(ManagedTransportActivity)
    }

    func relays() -> [ManagedRelayStatus] { transport.relays }

    func dropConnection(relayURL: String?) { transport.dropConnection(relayURL: relayURL) }

    /// Stops the transport, then lets the delivery thread hand over what was queued before (the
    /// last update is the overall `stopped` state), then makes each callback's final call (JSON
    /// NULL). After it returns no callback runs again — unless it was called from a callback,
    /// which cannot wait for the queue it runs on: then the rest follows once that call returns.
    func stop() {
        transport.stop()
        // A relay's flood of notices still queued is not worth the host's wait.
        updates.discardNotices()
        if closed.set() {
            let (states, events) = (self.states, self.events)
            delivery.queue.async {
                states?.end()
                events?.end()
            }
        }
        delivery.drainUnlessOnIt()
    }

    func close() { stop() }

    deinit {
        // A handle freed without stop(): stop, so no thread outlives it. Its callbacks' queue is
        // drained first, since the host's contexts go away with the handle.
        stop()
    }
}

// MARK: SoftchatAccount as the schema spells it

extension SoftchatAccount {
    func startManagedTransport(
        context: ManagedTransportContext, identity: IdentityHandle?,
        states: FFICallback<ManagedTransportStateChange>?,
        events: FFICallback<ManagedTransportActivity>?
    ) throws(SoftchatError) -> ManagedTransportHandle {
        try ManagedTransportHandle(account: self, context: context, identity: try identity?.current(), states: states, events: events)
    }

    func subscriptions(relayURL: String?) throws(SoftchatError) -> [SubscriptionPolicyEntry] {
        try subscriptions(for: relayURL)
    }
}

extension AccountCheckReport: FFIEncodable {
    var ffiJSON: JSONValue {
        let counts = DeliveryState.allCases.compactMap { state in intentsByState[state].map { IntentStateCountFFI(state: state, count: $0) }
        }
        return .object(
            JSONObject([
                "ok": .bool(ok), "problems": .array(problems.map(JSONValue.string)), "events": .integer(Int64(events)),
                "quarantined": .integer(Int64(quarantined)), "receipts": .integer(Int64(receipts)),
                "intents": .array(counts.map { .object(JSONObject(["state": .string($0.state.rawValue), "count": .integer(Int64($0.count))])) }),
                "liveLeases": .integer(Int64(liveLeases)),
            ]))
    }
}
