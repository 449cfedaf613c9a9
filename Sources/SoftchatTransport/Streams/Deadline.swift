/// One monotonic deadline for a whole blocking exchange (a connect with its TLS or Noise
/// handshake and HTTP upgrade, a NIP-11 fetch): each read waits only for what is left of it.
/// A timeout per read is not a bound at all against a peer that trickles a byte just inside
/// it; this is.
struct Deadline {
    /// Monotonic milliseconds when the exchange must have ended; `Int64.max` for never.
    let at: Int64

    /// A deadline `milliseconds` from now; negative for none.
    init(afterMilliseconds milliseconds: Int32) {
        at = milliseconds < 0 ? .max : IODriver.monotonicMilliseconds() + Int64(milliseconds)
    }

    /// The wait left for the next step, 0 once the deadline has passed, or -1 for none (as
    /// `poll(2)` reads it).
    var remaining: Int32 {
        guard at != .max else { return -1 }
        return Int32(clamping: max(0, at - IODriver.monotonicMilliseconds()))
    }

    var hasPassed: Bool { remaining == 0 }
}
