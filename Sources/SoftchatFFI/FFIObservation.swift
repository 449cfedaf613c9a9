// Live queries behind the C ABI: `softchat_account_observe` observes a window of the account
// and hands its updates to the host's callback on a delivery queue of its own, so neither the
// account's writer nor its live-query worker ever waits for the host, and a callback may call
// back into the account or the observation.
import Dispatch
import SoftchatCore
import SoftchatStorage
import Synchronization

/// The `EventObservation` handle. Concurrent (no handle lock): `window()` and `cancel()` are
/// thread-safe, so a callback may call them while another thread is inside `cancel()`.
final class EventObservationHandle: Sendable {
    private let observation: SoftchatStorage.EventObservation
    private let delivery: Delivery
    /// Which handle's delivery queue the current thread runs, so `cancel()` from a callback does
    /// not wait for the queue it runs on.
    private static let onDelivery = DispatchSpecificKey<UInt64>()
    private static let tokens = Atomic<UInt64>(0)
    private let token: UInt64

    /// The queue the callback runs on, and its drain's state.
    final class Delivery: Sendable {
        let queue = DispatchQueue(label: "softchat.ffi.observation")
        /// Whether a drain is queued and has not started taking updates yet.
        let scheduled = Atomic<Bool>(false)
        /// Set once the callback had its final call.
        let ended = Atomic<Bool>(false)
    }

    init(_ observation: SoftchatStorage.EventObservation, updates: FFICallback<EventWindowUpdate>?) {
        self.observation = observation
        let delivery = Delivery()
        self.delivery = delivery
        token = Self.tokens.add(1, ordering: .relaxed).newValue
        delivery.queue.setSpecific(key: Self.onDelivery, value: token)
        guard let updates else { return }
        // Each wake schedules at most one drain; the drain takes everything queued (the
        // observation's own bound holds what waits for a slow host: past it, one reload).
        observation.whenUpdated { [observation] in
            guard !delivery.scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
            delivery.queue.async {
                delivery.scheduled.store(false, ordering: .releasing)
                while let update = observation.poll() { updates.call(update) }
                if observation.isFinished, !delivery.ended.exchange(true, ordering: .acquiringAndReleasing) { updates.end() }
            }
        }
    }

    func window() -> [VerifiedEvent] { observation.window }

    /// Ends the observation; the callback's final call (JSON NULL) follows what it was handed
    /// before. After it returns no callback runs again, unless it was called from the callback.
    func cancel() {
        observation.cancel()
        if DispatchQueue.getSpecific(key: Self.onDelivery) != token { delivery.queue.sync {} }
    }

    func close() { cancel() }

    deinit { cancel() }
}

// MARK: SoftchatAccount as the schema spells it

extension SoftchatAccount {
    func observe(filtersJSON: [String], limit: Int, updates: FFICallback<EventWindowUpdate>?) throws(SoftchatError) -> EventObservationHandle {
        var filters: [RelayFilter] = []
        for json in filtersJSON { filters.append(try RelayFilter.fromJSON(json)) }
        return EventObservationHandle(try observe(filters, limit: limit), updates: updates)
    }
}
