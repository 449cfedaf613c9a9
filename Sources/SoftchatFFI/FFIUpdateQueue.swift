import Dispatch
import SoftchatCore
import Synchronization

/// The updates of one managed transport on their way to the host's callbacks, in order, on one
/// delivery thread, and bounded: a listener slower than the transport (a busy UI thread, a host
/// paused in a debugger) must not make the library's memory grow without end, and must never
/// stall the I/O thread (its keepalives would fail).
///
/// Past `bound` queued updates, or `maxBytes` of them (`Update.bytes`: a relay's text is bounded
/// by the engine, but 4,096 of them still add up):
/// - a state change replaces the one still queued for the same relay (or for the transport as a
///   whole), so the host always ends up with every relay's latest phase;
/// - a delivery decision or a `synced` report is never dropped (issue 45, path 10: they were
///   dropped like notices, and a host that reads its reports lost what was skipped and which
///   intents were decided). It is coalesced with the one still queued for the same intent (the
///   later decision replaces it) or the same relay and subscription (one report for both
///   windows: events added, seconds and skipped events merged), else it takes the place of the
///   oldest queued activity that may be dropped, else it is queued past the bound. Coalescing
///   keeps what is queued past the bound to one decision per intent and one report per relay and
///   subscription;
/// - any other activity (a notice, a connection failure, an ingestion report) is dropped and
///   counted; once the queue has drained, one `notice` activity (relay URL "") says how many
///   were dropped. Every event is durable in the account, which the host reads for the truth.
final class FFIUpdateQueue: Sendable {
    enum Update: Sendable {
        case state(ManagedTransportStateChange)
        case activity(ManagedTransportActivity)

        /// About what the update holds in memory: its texts' bytes and 8 per number or id slot,
        /// plus a fixed 64.
        var bytes: Int {
            switch self {
            case .state(.relay(let url, _, _)): 64 + url.utf8.count
            case .state(.overall(_, _, let reason)): 64 + (reason?.utf8.count ?? 0)
            case .activity(.delivery(let url, let intent, let decision)):
                64 + url.utf8.count + intent.utf8.count + decision.eventID.utf8.count + decision.message.utf8.count
            case .activity(.ingested(let url, let result)):
                64 + url.utf8.count + 72 * (result.accepted.count + result.alreadyPresent.count + result.rejected.count)
            case .activity(.synced(let url, let id, _, let seconds, let skipped, let refused)):
                64 + url.utf8.count + id.utf8.count + 8 * seconds.count + skipped.reduce(0) { $0 + 16 + 72 * $1.eventIDs.count }
                    + (refused?.utf8.count ?? 0)
            case .activity(.notice(let url, let message)), .activity(.connectionFailed(let url, let message)):
                64 + url.utf8.count + message.utf8.count
            }
        }

        /// A delivery decision or a `synced` report: never dropped, only coalesced.
        var mustDeliver: Bool {
            switch self {
            case .activity(.delivery), .activity(.synced): true
            case .state, .activity(.ingested), .activity(.notice), .activity(.connectionFailed): false
            }
        }

        /// An activity that may be dropped past the bound (a notice, a connection failure, an
        /// ingestion report).
        var droppable: Bool {
            if case .activity = self { !mustDeliver } else { false }
        }
    }

    /// The default bound: far above what a host that keeps up ever has queued.
    static let defaultBound = 4_096
    /// The default byte bound of what is queued: 4 MiB.
    static let defaultMaxBytes = 4 << 20

    struct Pending {
        var updates: [Update] = []
        var head = 0
        var dropped = 0
        /// `Update.bytes` of what is queued.
        var bytes = 0
        var draining = false
        /// The most updates queued at once.
        var peak = 0
        /// Queued updates that may be dropped (`Update.droppable`).
        var droppable = 0

        var count: Int { updates.count - head }
    }

    let bound: Int
    let maxBytes: Int
    private let pending = Mutex(Pending())
    private let queue: DispatchQueue
    private let deliver: @Sendable (Update) -> Void

    /// - Parameters:
    ///   - bound: The most updates queued before activities are dropped or coalesced (at least 1).
    ///   - maxBytes: The most `Update.bytes` queued before activities are dropped or coalesced.
    ///   - queue: The serial queue the host's callbacks run on.
    ///   - deliver: Calls the host's callback; runs on `queue`.
    init(
        bound: Int = defaultBound, maxBytes: Int = defaultMaxBytes, queue: DispatchQueue,
        deliver: @escaping @Sendable (Update) -> Void
    ) {
        self.bound = max(1, bound)
        self.maxBytes = max(1, maxBytes)
        self.queue = queue
        self.deliver = deliver
    }

    /// The most updates that were queued at once, activities dropped and not yet reported, and
    /// the bytes queued now.
    var statistics: (peak: Int, dropped: Int, bytes: Int) { pending.withLock { ($0.peak, $0.dropped, $0.bytes) } }

    /// Queues an update; never blocks. Past the bound it scans what is queued (to coalesce, or to
    /// find the oldest activity that may be dropped): linear in the queue, and only then.
    func push(_ update: Update) {
        let size = update.bytes
        let start = pending.withLock { p -> Bool in
            if p.count >= bound || p.bytes + size > maxBytes {
                switch update {
                case .state(let change):
                    let key = Self.key(change)
                    if let i = p.updates[p.head...].lastIndex(where: { if case .state(let c) = $0 { Self.key(c) == key } else { false } }) {
                        p.bytes += size - p.updates[i].bytes
                        p.updates[i] = update
                        return false
                    }
                case .activity(let activity) where update.mustDeliver:
                    if let i = p.updates[p.head...].lastIndex(where: { Self.coalesces($0, with: activity) }),
                        case .activity(let queued) = p.updates[i]
                    {
                        let merged = Update.activity(Self.coalesced(queued, activity))
                        p.bytes += merged.bytes - p.updates[i].bytes
                        p.updates[i] = merged
                        return false
                    }
                    // Room from what may be dropped, oldest first; with none left, past the bound.
                    while p.count >= bound || p.bytes + size > maxBytes, p.droppable > 0,
                        let i = p.updates[p.head...].firstIndex(where: \.droppable)
                    {
                        p.bytes -= p.updates[i].bytes
                        p.updates.remove(at: i)
                        p.droppable -= 1
                        p.dropped += 1
                    }
                case .activity:
                    p.dropped += 1
                    // An idle queue still reports the drop: start the drain that will.
                    guard !p.draining else { return false }
                    p.draining = true
                    return true
                }
            }
            p.bytes += size
            p.updates.append(update)
            if update.droppable { p.droppable += 1 }
            p.peak = max(p.peak, p.count)
            guard !p.draining else { return false }
            p.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    /// Hands every queued update to the host, then the dropped count, then stops until the next
    /// push.
    private func drain() {
        while let next = take() { deliver(next) }
    }

    private func take() -> Update? {
        pending.withLock { p -> Update? in
            if p.head < p.updates.count {
                let update = p.updates[p.head]
                p.head += 1
                p.bytes -= update.bytes
                if update.droppable { p.droppable -= 1 }
                if p.head >= 1_024 && p.head * 2 >= p.updates.count {
                    p.updates.removeFirst(p.head)
                    p.head = 0
                }
                return update
            }
            p.updates.removeAll(keepingCapacity: true)
            p.head = 0
            if p.dropped > 0 {
                let n = p.dropped
                p.dropped = 0
                return .activity(
                    .notice(
                        relayURL: "",
                        message: "\(n) activity updates were dropped: the listener was slower than the transport "
                            + "(past \(bound) updates or \(maxBytes) bytes queued, notices, connection failures and ingestion "
                            + "reports are dropped, and notices queued at stop; delivery decisions and synced reports are never "
                            + "dropped, only coalesced); the account holds every event"))
            }
            p.draining = false
            return nil
        }
    }

    /// Drops the notices still queued, counting them as dropped: at stop, a host must not wait
    /// for a slow listener to read a relay's flood of text. States and the other activities
    /// stay, in order.
    func discardNotices() {
        pending.withLock { p in
            let kept = p.updates[p.head...].filter { if case .activity(.notice) = $0 { false } else { true } }
            p.dropped += p.count - kept.count
            p.updates = Array(kept)
            p.head = 0
            p.bytes = kept.reduce(0) { $0 + $1.bytes }
            p.droppable = kept.reduce(0) { $0 + ($1.droppable ? 1 : 0) }
        }
    }

    /// Whether `activity` (a decision or a `synced` report) may be coalesced with `queued`: a
    /// decision for the same intent on the same relay, a report for the same relay and
    /// subscription.
    private static func coalesces(_ queued: Update, with activity: ManagedTransportActivity) -> Bool {
        guard case .activity(let old) = queued else { return false }
        switch (old, activity) {
        case (.delivery(let u1, let i1, _), .delivery(let u2, let i2, _)): return u1 == u2 && i1 == i2
        case (.synced(let u1, let s1, _, _, _, _), .synced(let u2, let s2, _, _, _, _)): return u1 == u2 && s1 == s2
        default: return false
        }
    }

    /// One activity for a queued one and a later one that `coalesces`: the later decision (the
    /// account holds it too), or one report for both windows (events added, the seconds and the
    /// skipped events of both).
    private static func coalesced(_ queued: ManagedTransportActivity, _ later: ManagedTransportActivity) -> ManagedTransportActivity {
        guard case .synced(let url, let id, let events, let seconds, let skipped, _) = queued,
            case .synced(_, _, let laterEvents, let laterSeconds, let laterSkipped, let laterRefused) = later
        else { return later }
        // The live feed as the later report found it.
        return .synced(
            relayURL: url, subscriptionID: id, events: events + laterEvents,
            incompleteSeconds: seconds + laterSeconds.filter { !seconds.contains($0) },
            skipped: SkippedEvents.merged(skipped, with: laterSkipped), liveFeedRefused: laterRefused)
    }

    /// What a state change is about: one relay, or the transport as a whole ("").
    private static func key(_ change: ManagedTransportStateChange) -> String {
        switch change {
        case .relay(let url, _, _): url
        case .overall: ""
        }
    }
}
