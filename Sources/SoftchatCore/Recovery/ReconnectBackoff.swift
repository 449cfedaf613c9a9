/// The reconnect schedule: exponential backoff with jitter, capped, reset only after the
/// connection stayed ready long enough. Deterministic for a given seed, so a replayed session
/// schedules the same delays; the host owns the timer.
///
/// The one definition of the schedule's base, doubling and cap: the session reconnects on it
/// (with jitter) and retries closed subscriptions on it, and the sync engine asks its pages and
/// REQs again on it (`delayMilliseconds(attempt:)`, without jitter).
package struct ReconnectBackoff: Sendable, Hashable {
    let baseMilliseconds: Int64
    let maxMilliseconds: Int64
    let resetAfterSeconds: Int64
    private(set) var attempt = 0
    private var rng: SplitMix64

    init(baseSeconds: Int64, maxSeconds: Int64, resetAfterSeconds: Int64, seed: Int64) {
        baseMilliseconds = baseSeconds * 1000
        maxMilliseconds = maxSeconds * 1000
        self.resetAfterSeconds = resetAfterSeconds
        rng = SplitMix64(seed: UInt64(bitPattern: seed))
    }

    /// The schedule a session with `config` reconnects on: its base and maximum delay, its reset,
    /// its jitter seed.
    package init(config: RelaySessionConfig) {
        self.init(
            baseSeconds: config.reconnectBaseDelaySeconds, maxSeconds: config.reconnectMaxDelaySeconds,
            resetAfterSeconds: config.reconnectResetAfterSeconds, seed: config.jitterSeed)
    }

    /// Forgets past failures when the connection was ready for at least `resetAfterSeconds`.
    mutating func connectionEnded(readySince: Int64?, now: Int64?) {
        if let readySince, let now, now - readySince >= resetAfterSeconds { attempt = 0 }
    }

    /// The next attempt number and its delay: base·2^(attempt-1) capped, with "equal jitter"
    /// (half fixed, half random), so the delay never exceeds the cap and never collapses to 0.
    mutating func next() -> (delayMilliseconds: Int64, attempt: Int) {
        attempt += 1
        let delay = delayMilliseconds(attempt: attempt)
        let half = delay / 2
        let jitter = half > 0 ? Int64(rng.next() % UInt64(half + 1)) : 0
        return (delay - half + jitter, attempt)
    }

    /// The `attempt`-th delay before jitter, in milliseconds (attempt counts from 1; 1 or less is
    /// the base): base·2^(attempt-1), capped at the maximum. Reads nothing of past attempts.
    package func delayMilliseconds(attempt: Int) -> Int64 {
        Self.cappedDoubling(base: baseMilliseconds, max: maxMilliseconds, attempt: attempt)
    }

    /// base·2^(attempt-1), capped at `max` (attempt counts from 1), without overflowing (a delay
    /// past half the cap goes to the cap): the schedule of reconnects and of the session's
    /// retries of closed subscriptions.
    static func cappedDoubling(base: Int64, max: Int64, attempt: Int) -> Int64 {
        var delay = base
        var k = 1
        while k < attempt && delay < max {
            delay = delay > max / 2 ? max : delay * 2
            k += 1
        }
        return Swift.min(delay, max)
    }
}
