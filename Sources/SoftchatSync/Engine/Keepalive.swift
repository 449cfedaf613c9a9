/// Keepalive of one connection, as a value with its own transitions: an idle connection is
/// pinged on a grid of the interval (so every idle connection of the engine pings in the same
/// wakeup), and a ping unanswered for the read deadline means the connection is gone. "Idle"
/// means no bytes at all, not "no whole message": the bytes of a message still arriving count
/// (issue 45, path 11: a large message on a slow link took longer than interval + deadline, its
/// pong waited behind it, the connection was dropped and the message sent again on the next).
struct Keepalive: Equatable {
    /// When anything last arrived (monotonic ms).
    private(set) var lastHeard: Int64 = 0
    /// When the unanswered ping went out, if one did.
    private(set) var pingSentAt: Int64?

    enum Due: Equatable {
        case nothing
        /// Send a ping now.
        case ping
        /// The ping went unanswered for the read deadline: the connection is gone.
        case lost
    }

    /// Anything arrived (a frame, a pong): the connection is alive.
    mutating func heard(_ now: Int64) {
        lastHeard = now
        pingSentAt = nil
    }

    /// Bytes of a message arrived without completing it (`SyncEngineInput.bytesArrived`): the
    /// relay and the path are alive, as after any frame. An unanswered ping is answered too: its
    /// pong is queued behind the message and cannot come before it; should the bytes stop,
    /// silence is counted again from the last of them.
    mutating func bytesArrived(_ now: Int64) { heard(now) }

    /// When to ping: after at least one interval of silence, on a grid of the interval.
    func pingDue(_ interval: Int64) -> Int64 {
        let interval = max(1, interval)
        return (lastHeard + 2 * interval - 1) / interval * interval
    }

    /// When something is next due.
    func deadline(interval: Int64, readDeadline: Int64) -> Int64 {
        pingSentAt.map { $0 + readDeadline } ?? pingDue(interval)
    }

    /// What is due at `now`; a ping returned counts as sent.
    mutating func poll(now: Int64, interval: Int64, readDeadline: Int64) -> Due {
        if let ping = pingSentAt { return now - ping >= readDeadline ? .lost : .nothing }
        guard now >= pingDue(interval) else { return .nothing }
        pingSentAt = now
        return .ping
    }
}
