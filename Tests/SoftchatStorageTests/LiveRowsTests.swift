import Foundation
import SoftchatCore
import Testing

@_spi(Benchmarks) @testable import SoftchatStorage

/// Every update a live-rows observation has queued, applied to `rows`; false when a change does
/// not fit.
func drain<Row>(_ observation: RowObservation<Row>, into rows: inout [Row]) -> Bool {
    while let update = observation.poll() {
        switch update {
        case .snapshot(let r), .reload(let r): rows = r
        case .changes(let changes): guard RowWindowChange.apply(changes, to: &rows) else { return false }
        }
    }
    return true
}

@Suite struct LiveRowsTests {
    let alice = StorageKeys.alice, bob = StorageKeys.bob, carol = StorageKeys.carol

    /// An account where alice, bob and carol have inbox lists, unlocked for bob.
    func bobsAccount() throws -> TestAccount {
        let t = try TestAccount()
        _ = try t.account.incoming.ingest(
            [
                inboxList(alice, [StorageKeys.relayA]), inboxList(bob, [StorageKeys.relayB]),
                inboxList(carol, [StorageKeys.relayA, StorageKeys.relayB]),
            ],
            receivedAt: t0)
        try t.account.messages.unlock(bob, now: t0)
        return t
    }

    func wrap(_ text: String, from sender: SoftchatIdentity, to recipients: [SoftchatIdentity], at time: Int64, tags: [[String]] = [], kind: Int = 14)
        throws -> (Rumor, VerifiedEvent)
    {
        let rumor = try Rumor(
            pubkey: sender.publicKeyHex, createdAt: time, kind: kind, tags: recipients.map { ["p", $0.publicKeyHex] } + tags, content: text)
        return (rumor, try GiftWrap.wrap(rumor, from: sender, to: StorageKeys.bob.publicKeyHex, now: time))
    }

    @Test func theChangesBetweenTwoListsTurnTheFirstIntoTheSecondWithMovesAndUpdates() {
        struct R: ObservedRow {
            let key: String
            let n: Int
            var observationKey: String { key }
        }
        var rng = StorageRNG(seed: 7)
        for round in 0..<2_000 {
            let keys = (0..<8).map { "k\($0)" }
            func list() -> [R] {
                keys.shuffled(using: &rng).prefix(Int(rng.next() % 7)).map { R(key: $0, n: Int(rng.next() % 2)) }
            }
            let (old, new) = (list(), list())
            var rows = old
            let changes = RowWindowChange.changes(from: old, to: new)
            #expect(RowWindowChange.apply(changes, to: &rows), "round \(round)")
            #expect(rows == new, "round \(round)")
            // Nothing said twice: a row that stays in place and is unchanged has no change.
            if old == new { #expect(changes.isEmpty) }
        }
        // A room going to the top is one move, then its update.
        let a = R(key: "a", n: 0)
        let b = R(key: "b", n: 0)
        let c = R(key: "c", n: 0)
        let c2 = R(key: "c", n: 1)
        #expect(RowWindowChange.changes(from: [a, b, c], to: [c2, a, b]) == [.moved(key: "c", from: 2, to: 0), .updated(row: c2, at: 0)])
    }

    /// A message sent is in its room's window and at the top of the room list when `send`
    /// returns; a received one follows its commit; marking read sets the unread count to 0.
    @Test func aSentMessageIsInItsRoomAndTheRoomListWhenSendReturnsAndAReceivedOneFollowsItsCommit() throws {
        let t = try bobsAccount()
        let clock = TestClock()
        let rooms = try t.account.messages.observeRooms(ownerKey: bob.publicKeyHex, clock: clock.read)
        let room = try t.account.messages.observeMessages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], clock: clock.read)
        #expect(rooms.poll() == .snapshot(rows: []))
        #expect(room.poll() == .snapshot(rows: []))
        let sent = try t.account.messages.send(to: [alice.publicKeyHex], text: "hi alice", signer: bob, now: t0)
        #expect(room.poll() == .changes(changes: [.inserted(row: sent.message, at: 0)]))
        guard case .changes(let first)? = rooms.poll(), case .inserted(let row, 0)? = first.first else {
            Issue.record("the room list did not get the room")
            return
        }
        #expect(row.latest == sent.message && row.unread == 0 && row.messages == 1)
        // Received: ingestion hands over and returns; the worker's change follows.
        let (_, w) = try wrap("hi bob", from: alice, to: [bob], at: t0 + 1)
        _ = try t.account.incoming.ingest([w], receivedAt: t0 + 1)
        t.account.store.settleLiveQueries()
        let fresh = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0)
        #expect(room.poll() == .changes(changes: [.inserted(row: fresh[0], at: 0)]))
        #expect(rooms.poll() == .changes(changes: [.updated(row: try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0)[0], at: 0)]))
        #expect(rooms.window.first?.unread == 1)
        // Marked read: the room list's count goes to 0 when the call returns; the room is unchanged.
        try t.account.messages.markRead(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex])
        guard case .changes(let read)? = rooms.poll(), case .updated(let after, 0)? = read.first else {
            Issue.record("marking read did not reach the room list")
            return
        }
        #expect(after.unread == 0)
        #expect(room.poll() == nil)
        // A message in another room leaves this room's window alone.
        let (_, c) = try wrap("hi from carol", from: carol, to: [bob], at: t0 + 2)
        _ = try t.account.incoming.ingest([c], receivedAt: t0 + 2)
        t.account.store.settleLiveQueries()
        #expect(room.poll() == nil)
        guard case .changes(let moved)? = rooms.poll(), case .inserted(_, 0)? = moved.first else {
            Issue.record("carol's room did not enter the list at the top")
            return
        }
    }

    /// Each change of a sent message's intents reaches its delivery observation: claimed
    /// (in flight), then each relay's answer, exactly as stored.
    @Test func aSentMessagesDeliveryStatesFollowEachClaimAndAnswer() throws {
        let t = try bobsAccount()
        let sent = try t.account.messages.send(to: [carol.publicKeyHex], text: "to carol", signer: bob, now: t0)
        let deliveries = try t.account.messages.observeDeliveries(of: sent.message)
        func fresh() throws -> [PublishIntentStatus] {
            try [carol.publicKeyHex, bob.publicKeyHex].sorted().map { "dm:\(sent.message.id):\($0)" }.flatMap {
                try t.account.delivery.intents(operationID: $0)
            }
        }
        var rows: [PublishIntentStatus] = []
        #expect(drain(deliveries, into: &rows))
        #expect(try rows == fresh() && rows.count == 3)
        #expect(rows.allSatisfy { $0.state == .pending })
        let claim = try #require(try t.account.delivery.claim(leaseID: "L1", relayURL: StorageKeys.relayA, now: t0))
        try t.account.delivery.markSocketWritten(claim.claim, intentIDs: claim.payloads.map(\.intentID))
        t.account.store.settleLiveQueries()
        #expect(drain(deliveries, into: &rows))
        #expect(try rows == fresh())
        #expect(rows.filter { $0.state == .inFlight }.map(\.relayURL) == [StorageKeys.relayA])
        try t.account.delivery.applyResults(
            claim.claim, results: claim.payloads.map { DeliveryResult(intentID: $0.intentID, decision: decision(.accepted, for: $0.eventID)) })
        t.account.store.settleLiveQueries()
        #expect(drain(deliveries, into: &rows))
        #expect(try rows == fresh())
        #expect(rows.filter { $0.state == .accepted }.map(\.relayURL) == [StorageKeys.relayA])
        #expect(throws: SoftchatError.self) { try t.account.delivery.observeIntents(operationIDs: []) }
        #expect(throws: SoftchatError.self) {
            try t.account.delivery.observeIntents(operationIDs: (0...AccountDelivery.maxObservedOperations).map { "op\($0)" })
        }
    }

    @Test func badKeysAndLimitsAreRefusedWithTheirCode() throws {
        let t = try bobsAccount()
        for (owner, members, limit) in [
            ("nothex", [String](), 10), (bob.publicKeyHex, ["BAD"], 10), (bob.publicKeyHex, [], 0), (bob.publicKeyHex, [], 501),
        ] {
            let error = #expect(throws: SoftchatError.self) {
                try t.account.messages.observeMessages(ownerKey: owner, members: members, limit: limit)
            }
            #expect(error?.code == .invalidPrivateMessage)
            guard members.isEmpty else { continue }
            #expect(throws: SoftchatError.self) { try t.account.messages.observeRooms(ownerKey: owner, limit: limit) }
        }
    }

    /// A reader that never reads holds at most the backlog bound, then one reload equal to a
    /// fresh read.
    @Test func aRoomReaderThatNeverReadsGetsOneReloadEqualToAFreshRead() throws {
        let t = try bobsAccount()
        let room = try t.account.messages.observeMessages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], limit: 500)
        _ = room.poll()
        var wraps: [VerifiedEvent] = []
        for i in 0..<(EventObservation.maxLimit + 100) { wraps.append(try wrap("m\(i)", from: alice, to: [bob], at: t0 + Int64(i)).1) }
        // One commit each: more changes than the backlog holds.
        for w in wraps { _ = try t.account.incoming.ingest([w], receivedAt: t0) }
        t.account.store.settleLiveQueries()
        #expect(room.rows.queue.depth.changes <= EventObservation.maxBacklog)
        let fresh = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: Int64(time(nil)), limit: 500)
        var got: [PrivateMessage] = []
        #expect(drain(room, into: &got))
        #expect(got == fresh)
        #expect(got.count == 500, "\(got.count) of \(wraps.count)")
    }

    /// The oracle: random private messages received (through this connection and a second one),
    /// sent, deleted by their authors, expiring; rooms marked read; intents claimed and answered;
    /// time passing. After every round, the room list, each room's window and each sent
    /// message's delivery states, as held and as built from the changes, equal a fresh read.
    /// 300 rounds in the test command; SOFTCHAT_LIVE_ORACLE_ROUNDS=N for a longer soak.
    @Test func everyRoomListRoomAndDeliveryWindowEqualsAFreshReadAfterEveryRound() throws {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["SOFTCHAT_LIVE_ORACLE_ROUNDS"].flatMap(Int.init).map { $0 / 2 } ?? 300
        let seed = environment["SOFTCHAT_LIVE_ORACLE_SEED"].flatMap(UInt64.init) ?? 17
        let t = try bobsAccount()
        let other = try SoftchatAccount.open(path: t.path)
        defer { other.close() }
        try other.messages.unlock(bob, now: t0)
        let clock = TestClock()
        var rng = StorageRNG(seed: seed)
        let me = bob.publicKeyHex
        let rooms: [[SoftchatIdentity]] = [[alice], [carol], [alice, carol]]
        let list = try t.account.messages.observeRooms(ownerKey: me, limit: 2, clock: clock.read)
        var builtList: [PrivateRoom] = []
        let windows = try rooms.map { members in
            try t.account.messages.observeMessages(ownerKey: me, members: members.map(\.publicKeyHex), limit: 4, clock: clock.read)
        }
        var built = Array(repeating: [PrivateMessage](), count: rooms.count)
        var received: [(Rumor, SoftchatIdentity)] = []
        var deliveries: [(PrivateMessage, RowObservation<PublishIntentStatus>, [PublishIntentStatus])] = []
        var leases = 0
        var changesSeen = 0
        for round in 0..<total {
            let writer = rng.next() % 4 == 0 ? other : t.account
            let now = clock.read()
            var advanced = false
            let room = rooms[Int(rng.next() % 3)]
            switch rng.next() % 10 {
            case 0:
                clock.advance(Int64(1 + rng.next() % 30))
                advanced = true
            case 1 where !received.isEmpty:
                // The author deletes one of their messages.
                let (target, author) = received[Int(rng.next() % UInt64(received.count))]
                let (_, deletion) = try wrap("", from: author, to: [bob], at: now, tags: [["e", target.id]], kind: 5)
                _ = try writer.incoming.ingest([deletion], receivedAt: now)
            case 2:
                try writer.messages.markRead(ownerKey: me, members: room.map(\.publicKeyHex))
            case 3:
                let sent = try t.account.messages.send(
                    to: room.map(\.publicKeyHex), text: "r\(round)", signer: bob, now: now - Int64(rng.next() % 100))
                if deliveries.count < 4 {
                    let observation = try t.account.messages.observeDeliveries(of: sent.message)
                    deliveries.append((sent.message, observation, []))
                }
            case 4:
                // A relay takes some intents and answers some of them.
                leases += 1
                let relay = rng.next() % 2 == 0 ? StorageKeys.relayA : StorageKeys.relayB
                if let claim = try writer.delivery.claim(leaseID: "L\(leases)", relayURL: relay, now: now, max: 3) {
                    let answered = claim.payloads.filter { _ in rng.next() % 3 != 0 }
                    let states: [DeliveryState] = [.accepted, .rejected, .retryable]
                    try writer.delivery.applyResults(
                        claim.claim,
                        results: answered.map {
                            DeliveryResult(intentID: $0.intentID, decision: decision(states[Int(rng.next() % 3)], for: $0.eventID))
                        })
                    if rng.next() % 2 == 0 { try writer.delivery.release(claim.claim) }
                }
            default:
                let sender = room[Int(rng.next() % UInt64(room.count))]
                let tags = rng.next() % 5 == 0 ? [["expiration", String(now + Int64(rng.next() % 40))]] : []
                let (rumor, w) = try wrap(
                    "r\(round)", from: sender, to: [bob] + room.filter { $0 !== sender }, at: now - Int64(rng.next() % 200), tags: tags)
                _ = try writer.incoming.ingest([w], receivedAt: now)
                received.append((rumor, sender))
            }
            if writer === other || advanced || rng.next() % 5 == 0 {
                try t.account.store.tickLiveQueries()
            } else {
                t.account.store.settleLiveQueries()
            }
            let at = clock.read()
            #expect(drain(list, into: &builtList), "round \(round): a room-list change did not fit")
            let freshList = try t.account.messages.rooms(ownerKey: me, now: at, limit: 2)
            #expect(builtList == freshList && list.window == freshList, "round \(round): the room list")
            for (i, members) in rooms.enumerated() {
                let fresh = try t.account.messages.messages(ownerKey: me, members: members.map(\.publicKeyHex), now: at, limit: 4)
                #expect(drain(windows[i], into: &built[i]), "round \(round), room \(i): a change did not fit")
                #expect(built[i] == fresh && windows[i].window == fresh, "round \(round), room \(i)")
            }
            for i in deliveries.indices {
                let (message, observation, _) = deliveries[i]
                let fresh = try message.room.flatMap {
                    try t.account.delivery.intents(operationID: "dm:\(message.id):\($0)")
                }
                #expect(drain(observation, into: &deliveries[i].2), "round \(round), delivery \(i)")
                #expect(deliveries[i].2 == fresh, "round \(round), delivery \(i)")
                changesSeen += fresh.filter { $0.state != .pending }.count
            }
        }
        // The rounds did move every kind of window.
        #expect(!builtList.isEmpty && built.allSatisfy { !$0.isEmpty } && changesSeen > 0)
    }
}
