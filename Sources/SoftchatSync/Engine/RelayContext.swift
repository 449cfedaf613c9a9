import SoftchatCore

/// What a relay's methods reach of the engine that holds the relay: the clocks and the
/// configuration, the queue their actions and account work join (in order), and the little the
/// relays share — the recent-ids filter and the events waiting for one commit, the frame tokens
/// and lease ids (unique per engine), the connection states the overall state sums.
///
/// Never another relay: the engine routes each input to the relay it is for
/// (`SyncEngine.withRelay(_:_:)`, its one indexing of `relays`), whose methods then work on
/// their own state as `self` — as quinn-proto's `Endpoint` hands a datagram to its
/// `Connection`. Touching `engine.relays` from here would be an overlapping access (Swift's
/// exclusivity check stops it at run time), so nothing here does.
struct RelayContext {
    unowned let engine: SyncEngine

    var configuration: SyncEngineConfiguration { engine.configuration }
    /// The clocks of the input being handled.
    var now: EngineTime { engine.now }
    var stopping: Bool { engine.stopping }
    var retrySchedule: ReconnectBackoff { engine.retrySchedule }
    var requestDeadline: Int64 { engine.requestDeadline }

    /// Queues a step after everything queued before it.
    func push(_ step: SyncEngine.Step) { engine.push(step) }
    /// Queues a report for the host.
    func report(_ event: ManagedTransportEvent) { engine.report(event) }
    func queueIngestFlush() { engine.queueIngestFlush() }
    func queueDeliveryFlush() { engine.queueDeliveryFlush() }
    func answersAuthentication(on url: String) -> Bool { engine.answersAuthentication(on: url) }
    /// Records and reports relay `relay`'s connection state, and the overall state it changes.
    func setState(_ relay: Int, _ state: RelayConnectionState) { engine.setState(relay, state) }

    /// Whether event `id` was committed or is on its way to a commit, from any relay.
    func isRecent(_ id: String) -> Bool { engine.recent.contains(id) }
    /// Takes a verified event from relay `relay` for the next commit.
    func ingest(_ event: VerifiedEvent, from relay: Int) {
        engine.recent.insert(event.id)
        engine.pendingIngest.append((relay, event))
    }

    /// A write token no other write of this engine carries.
    func newToken() -> Int {
        engine.nextToken += 1
        return engine.nextToken
    }
    /// Runs `body` with the engine's token counter (for a machine that numbers its own writes).
    func withTokens<T>(_ body: (inout Int) -> T) -> T { body(&engine.nextToken) }
    /// A lease id no other claim of this process run carries: `<leasePrefix>-<n>`.
    func newLeaseID() -> String {
        engine.leaseCounter += 1
        return "\(engine.configuration.leasePrefix)-\(engine.leaseCounter)"
    }
}
