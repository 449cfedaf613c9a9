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
    private let delivery = FFIDeliveryQueue(label: "softchat.ffi.observation")
    /// Whether a drain is queued and has not started taking updates yet.
    private let scheduled = FFIFlag()
    /// Set once the callback had its final call.
    private let ended = FFIFlag()

    init(_ observation: SoftchatStorage.EventObservation, updates: FFICallback<EventWindowUpdate>?) {
        self.observation = observation
        guard let updates else { return }
        // Each wake schedules at most one drain; the drain takes everything queued (the
        // observation's own bound holds what waits for a slow host: past it, one reload).
        let (queue, scheduled, ended) = (delivery.queue, self.scheduled, self.ended)
        observation.whenUpdated { [observation] in
            guard scheduled.set() else { return }
            queue.async {
                scheduled.clear()
                while let update = observation.poll() { updates.call(update) }
                if observation.isFinished, ended.set() { updates.end() }
            }
        }
    }

    func window() -> [VerifiedEvent] { observation.window }

    /// Ends the observation; the callback's final call (JSON NULL) follows what it was handed
    /// before. After it returns no callback runs again, unless it was called from the callback.
    func cancel() {
        observation.cancel()
        delivery.drainUnlessOnIt()
    }

    func close() { cancel() }

    deinit { cancel() }
}

// MARK: SoftchatAccount as the schema spells it

extension SoftchatAccount {
    func observe(filtersJSON: [String], limit: Int, updates: FFICallback<EventWindowUpdate>?) throws(SoftchatError) -> EventObservationHandle {
        EventObservationHandle(try observe(filtersJSON: filtersJSON, limit: limit), updates: updates)
    }
}
