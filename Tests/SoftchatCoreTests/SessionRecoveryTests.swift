import SoftchatCore
import SoftchatTestSupport
import Testing

/// Recovery: resubscribing after a reconnect with `since` advanced past what was confirmed, and
/// the reconnect backoff (doubling, capped, jittered per seed, reset only after a long ready).
@Suite struct SessionRecoveryTests {
    typealias F = SessionFixtures

    // MARK: Reconnect with since advanced

    @Test func reconnectResubscribesWithSinceAdvancedToTheNewestConfirmedEventMinusTheOverlap() throws {
        let session = try RelaySession.connected()
        let filters = [F.kind1, #"{"kinds":[1],"since":1700000095}"#, #"{"since":1600000000,"kinds":[1]}"#]
        try session.subscribe(id: "chat", filtersJSON: filters)
        #expect(try session.sendAll() == [#"["REQ","chat",\#(filters.joined(separator: ","))]"#])
        let older = F.note(1, createdAt: F.baseTime + 50)
        let newer = F.note(2, createdAt: F.baseTime + 100)
        let unconfirmed = F.note(3, createdAt: F.baseTime + 500)
        for e in [newer, older, unconfirmed] { #expect(try session.receive(F.event("chat", e)).kinds == [.persistEvent]) }
        try session.confirmIngested(newer.id)
        try session.confirmIngested(older.id)
        try session.reconnect()
        // newest confirmed 1700000100 − 10 s; a later own since is kept; an earlier one is raised in place
        #expect(
            try session.sendAll() == [
                #"["REQ","chat",{"kinds":[1],"since":1700000090},{"kinds":[1],"since":1700000095},{"since":1700000090,"kinds":[1]}]"#
            ])
    }

    /// Issue 44, finding 12: an event dated 2^63 − 1 (or just ahead of the clock) is confirmed
    /// like any other, but the since it justifies is no later than its arrival; before, the
    /// resubscription asked only for events after 2^63 − 11, so nothing written in between came.
    @Test func anEventDatedAfterItsArrivalMovesTheResubscriptionSinceOnlyToTheArrival() throws {
        let session = try RelaySession.connected(now: F.baseTime)
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.sendAll()
        let pinned = F.note(1, createdAt: Int64.max)
        let ahead = F.note(2, createdAt: F.baseTime + 3_600)
        #expect(try session.receive(F.event("chat", pinned), now: F.baseTime + 100).kinds == [.persistEvent])
        #expect(try session.receive(F.event("chat", ahead), now: F.baseTime + 200).kinds == [.persistEvent])
        try session.confirmIngested(pinned.id)
        try session.confirmIngested(ahead.id)
        try session.reconnect(readyAt: F.baseTime + 300)
        // arrival of `ahead` (1700000200) − the 10 s overlap
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[1],"since":1700000190}]"#])
        // An event that arrived without a clock keeps the old rule: its own date.
        let clockless = try RelaySession.connected()
        try clockless.subscribe(id: "chat", filtersJSON: [F.kind1])
        try clockless.sendAll()
        _ = try clockless.receive(F.event("chat", ahead))
        try clockless.confirmIngested(ahead.id)
        try clockless.reconnect()
        #expect(try clockless.sendAll() == [#"["REQ","chat",{"kinds":[1],"since":1700003590}]"#])
    }

    @Test func sinceUsesTheConfiguredOverlapNeverGoesBelowZeroAndStartsAfreshWhenReplaced() throws {
        let session = try RelaySession.connected(RelaySessionConfig(sinceOverlapSeconds: 0))
        try session.subscribe(id: "chat", filtersJSON: [F.kind1])
        try session.subscribe(id: "old", filtersJSON: [F.kind1])
        try session.sendAll()
        let e = F.note(1, createdAt: F.baseTime + 100)
        _ = try session.receive(F.event("chat", e))
        try session.confirmIngested(e.id)
        let ancient = F.note(2, createdAt: 5)
        _ = try session.receive(F.event("old", ancient))
        try session.confirmIngested(ancient.id)
        try session.reconnect()
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[1],"since":1700000100}]"#, #"["REQ","old",{"kinds":[1],"since":5}]"#])
        try session.subscribe(id: "chat", filtersJSON: [#"{"kinds":[7]}"#])
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[7]}]"#])
        try session.reconnect()
        #expect(try session.sendAll() == [#"["REQ","chat",{"kinds":[7]}]"#, #"["REQ","old",{"kinds":[1],"since":5}]"#])

        let overlapping = try RelaySession.connected()
        try overlapping.subscribe(id: "old", filtersJSON: [F.kind1])
        _ = try overlapping.receive(F.event("old", ancient))
        try overlapping.confirmIngested(ancient.id)
        try overlapping.reconnect()
        #expect(try overlapping.sendAll() == [#"["REQ","old",{"kinds":[1],"since":0}]"#])
    }

    // MARK: Backoff

    /// The scheduleReconnect of `n` losses in a row (each from connecting).
    static func delays(seed: Int64, losses: Int) throws -> [RelaySessionAction] {
        let session = try RelaySession(config: RelaySessionConfig(jitterSeed: seed))
        return try (0..<losses).map { _ in
            _ = try session.connect()
            return try #require(session.transportLost(now: nil).last)
        }
    }

    @Test func reconnectDelaysDoubleUpToTheCapWithJitterInTheUpperHalf() throws {
        #expect(RelayRecoveryContract.reconnectBaseDelaySeconds.value == 1 && RelayRecoveryContract.reconnectMaxDelaySeconds.value == 300)
        let actions = try Self.delays(seed: 42, losses: 14)
        var nominal: Int64 = 1000
        for (i, a) in actions.enumerated() {
            #expect(a.kind == .scheduleReconnect && a.attempt == i + 1)
            let delay = try #require(a.delayMilliseconds)
            #expect(delay >= nominal / 2 && delay <= nominal, "attempt \(i + 1): \(delay) ms outside [\(nominal / 2), \(nominal)]")
            nominal = min(nominal * 2, 300_000)
        }
        let capped = actions[9...].compactMap(\.delayMilliseconds)
        #expect(capped.allSatisfy { $0 >= 150_000 && $0 <= 300_000 })
        #expect(Set(capped).count > 1, "jitter varies the capped delay")
    }

    @Test func jitterIsDeterministicPerSeed() throws {
        let a = try Self.delays(seed: 7, losses: 12).map(\.delayMilliseconds)
        #expect(try Self.delays(seed: 7, losses: 12).map(\.delayMilliseconds) == a)
        #expect(try Self.delays(seed: 8, losses: 12).map(\.delayMilliseconds) != a)
    }

    @Test func backoffResetsOnlyAfterTheConnectionStayedReadyLongEnough() throws {
        #expect(RelaySessionConfig().reconnectResetAfterSeconds == 60)
        let session = RelaySession()
        func cycle(ready: Int64?, lost: Int64?) throws -> RelaySessionAction {
            _ = try session.connect()
            try session.transportConnected(now: ready)
            return try #require(session.transportLost(now: lost).last)
        }
        #expect(try cycle(ready: 1000, lost: 1010).attempt == 1)
        #expect(try cycle(ready: 2000, lost: 2059).attempt == 2, "59 s ready is not long enough")
        let reset = try cycle(ready: 3000, lost: 3060)
        #expect(reset.attempt == 1 && (500...1000).contains(reset.delayMilliseconds ?? 0), "60 s ready: the delay starts over")
        #expect(try cycle(ready: nil, lost: 9000).attempt == 2, "no ready time: never resets")
        #expect(try cycle(ready: 4000, lost: nil).attempt == 3, "no loss time: never resets")
        _ = try session.connect()
        #expect(try session.transportLost(now: 99_999).last?.attempt == 4, "never ready: never resets")
        #expect(session.snapshot().reconnectAttempt == 4)
    }

    @Test func invalidBackoffConfigurationIsRejected() {
        for config in [
            RelaySessionConfig(reconnectBaseDelaySeconds: 0), RelaySessionConfig(reconnectBaseDelaySeconds: 10, reconnectMaxDelaySeconds: 9),
            RelaySessionConfig(reconnectResetAfterSeconds: -1), RelaySessionConfig(sinceOverlapSeconds: -1),
        ] {
            expectSoftchatError(.invalidRelaySession) { _ = try RelaySession(config: config) }
        }
    }
}
