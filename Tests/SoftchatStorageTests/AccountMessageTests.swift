import Foundation
import SoftchatCore
import Testing

@testable import SoftchatStorage

/// A signer that refuses every call the way a remote signer can: denied, timed out, or gone.
final class RefusingSigner: SoftchatSigner {
    let publicKeyHex: String
    let answer: SignerOutcome<Never>
    init(_ identity: SoftchatIdentity, _ answer: SignerOutcome<Never>) {
        publicKeyHex = identity.publicKeyHex
        self.answer = answer
    }
    private func refuse<T>() -> SignerOutcome<T> {
        switch answer {
        case .denied: .denied
        case .timedOut: .timedOut
        default: .unavailable
        }
    }
    func sign(_ draft: UnsignedEvent, timeoutMilliseconds: Int) -> SignerOutcome<VerifiedEvent> { refuse() }
    func nip44Encrypt(_ plaintext: String, to recipient: String, timeoutMilliseconds: Int) -> SignerOutcome<Result<String, Nip44Failure>> { refuse() }
    func nip44Decrypt(_ batch: [SignerDecryption], timeoutMilliseconds: Int) -> SignerOutcome<[Result<String, Nip44Failure>]> { refuse() }
}

/// A kind-10050 inbox list.
func inboxList(_ identity: SoftchatIdentity, _ relays: [String], at time: Int64 = t0 - 100) -> VerifiedEvent {
    signed(identity, kind: 10050, tags: relays.map { ["relay", $0] }, content: "", createdAt: time)
}

@Suite struct AccountMessageTests {
    let alice = StorageKeys.alice, bob = StorageKeys.bob, carol = StorageKeys.carol

    func wrap(_ text: String, from sender: SoftchatIdentity, to recipients: [SoftchatIdentity], for target: SoftchatIdentity, at time: Int64 = t0)
        throws -> VerifiedEvent
    {
        let rumor = try Rumor(pubkey: sender.publicKeyHex, createdAt: time, kind: 14, tags: recipients.map { ["p", $0.publicKeyHex] }, content: text)
        return try GiftWrap.wrap(rumor, from: sender, to: target.publicKeyHex, now: time)
    }

    @Test func aWrapIngestedIntoAnUnlockedAccountIsUnwrappedInTheSameTransactionAndNeverDecryptedAgain() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let w = try wrap("hi bob", from: alice, to: [bob], for: bob)
        let outcome = try t.account.incoming.ingest([w], receivedAt: t0)
        #expect(outcome.receipt.insertedEventIDs == [w.id])
        #expect(t.account.messages.decryptions == 1)
        let list = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0)
        #expect(list.map(\.content) == ["hi bob"])
        #expect(list[0].sender == alice.publicKeyHex && list[0].wrapID == w.id)
        // The same wrap again (a relay resending it) is a duplicate: nothing is decrypted.
        _ = try t.account.incoming.ingest([w], receivedAt: t0 + 1)
        #expect(t.account.messages.decryptions == 1)
        // Reopened: listing decrypts nothing, and unlocking finds nothing pending.
        let path = t.path
        t.account.close()
        let again = try SoftchatAccount.open(path: path)
        defer { again.close() }
        #expect(try again.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0).map(\.content) == ["hi bob"])
        #expect(try again.messages.rooms(ownerKey: bob.publicKeyHex, now: t0).map(\.latest?.content) == ["hi bob"])
        #expect(try again.messages.unlock(bob, now: t0) == 0)
        #expect(again.messages.decryptions == 0)
    }

    @Test func wrapsStoredWhileLockedWaitAndTheNextUnlockUnwrapsThemOnce() throws {
        let t = try TestAccount()
        let wraps = try (0..<3).map { try wrap("m\($0)", from: alice, to: [bob], for: bob, at: t0 + Int64($0)) }
        _ = try t.account.incoming.ingest(wraps, receivedAt: t0)
        #expect(t.account.messages.decryptions == 0)
        #expect(try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0).isEmpty)
        #expect(try t.account.messages.unlock(bob, now: t0 + 10) == 3)
        #expect(t.account.messages.decryptions == 3)
        #expect(try t.account.messages.unlock(bob, now: t0 + 11) == 0)
        #expect(t.account.messages.decryptions == 3)
        #expect(try t.account.check(now: t0 + 20).problems == [])
        let page = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 20)
        #expect(page.map(\.content) == ["m2", "m1", "m0"])
    }

    @Test(arguments: [SignerOutcome<Never>.denied, .timedOut, .unavailable])
    func aSignerThatRefusesLeavesEveryWrapStoredAndPendingAndRecordsNoFailure(_ answer: SignerOutcome<Never>) throws {
        let t = try TestAccount()
        try t.account.messages.unlock(RefusingSigner(bob, answer), now: t0)
        let w = try wrap("later", from: alice, to: [bob], for: bob)
        #expect(try t.account.incoming.ingest([w], receivedAt: t0).receipt.insertedEventIDs == [w.id])
        #expect(try t.account.messages.failedWraps(ownerKey: bob.publicKeyHex).isEmpty)
        #expect(try t.served(["{\"kinds\":[1059]}"]) == [w.id])
        #expect(throws: SoftchatError.self) { try t.account.messages.unlock(RefusingSigner(bob, answer), now: t0) }
        #expect(try t.account.messages.unlock(bob, now: t0 + 1) == 1)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0).map(\.content) == ["later"])
    }

    @Test func aWrapThatFailsIsKeptWithItsCodeAndNotDecryptedAgain() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        // A seal signed by carol around a rumor claiming to be alice's.
        let rumor = try Rumor(pubkey: alice.publicKeyHex, createdAt: t0, kind: 14, tags: [["p", bob.publicKeyHex]], content: "forged")
        let sealContent = try carol.nip44Encrypt(rumor.jsonText, to: bob.publicKeyHex)
        let seal = try carol.sign(UnsignedEvent(createdAt: t0, kind: 13, content: sealContent))
        let oneTime = SoftchatIdentity.generate()
        let forged = try oneTime.sign(
            UnsignedEvent(
                createdAt: t0, kind: 1059, tags: [["p", bob.publicKeyHex]], content: try oneTime.nip44Encrypt(seal.jsonText, to: bob.publicKeyHex)))
        // A wrap for bob whose content is encrypted to someone else.
        let misaddressed = try oneTime.sign(
            UnsignedEvent(
                createdAt: t0, kind: 1059, tags: [["p", bob.publicKeyHex]], content: try oneTime.nip44Encrypt(seal.jsonText, to: carol.publicKeyHex)))
        // A wrap whose content is not NIP-44 at all.
        let garbage = try oneTime.sign(UnsignedEvent(createdAt: t0, kind: 1059, tags: [["p", bob.publicKeyHex]], content: "not a payload"))
        let good = try wrap("real", from: alice, to: [bob], for: bob)
        let outcome = try t.account.incoming.ingest([forged, misaddressed, garbage, good], receivedAt: t0)
        #expect(outcome.receipt.insertedEventIDs.count == 4)
        #expect(t.account.messages.decryptions == 4)
        let failed = try t.account.messages.failedWraps(ownerKey: bob.publicKeyHex)
        #expect(Set(failed.map(\.wrapID)) == [forged.id, misaddressed.id, garbage.id])
        #expect(failed.allSatisfy { $0.reason.hasPrefix("invalid_private_message: ") })
        #expect(failed.first { $0.wrapID == forged.id }?.reason == "invalid_private_message: rumor: pubkey is not the seal's signer")
        #expect(failed.first { $0.wrapID == misaddressed.id }?.reason == "invalid_private_message: wrap: nip44: invalid MAC")
        #expect(failed.first { $0.wrapID == garbage.id }?.reason == "invalid_private_message: wrap: nip44: invalid payload length")
        #expect(try t.account.messages.unlock(bob, now: t0 + 1) == 0)
        #expect(t.account.messages.decryptions == 4)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0).map(\.content) == ["real"])
        // Nothing names the text or a key.
        let secret = try bob.exportSecretHex()
        #expect(!failed.contains { $0.reason.contains("forged") || $0.reason.contains(secret) })
    }

    @Test func aFailureReasonQuotingWhatTheSenderWroteIsKeptShort() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        // A rumor with a 20,000-character field name, sealed and wrapped properly by alice.
        let rumorText =
            #"{"pubkey":"\#(alice.publicKeyHex)","created_at":1,"kind":14,"tags":[],"content":"x","\#(String(repeating: "k", count: 20_000))":1}"#
        let seal = try alice.sign(UnsignedEvent(createdAt: t0, kind: 13, content: try alice.nip44Encrypt(rumorText, to: bob.publicKeyHex)))
        let oneTime = SoftchatIdentity.generate()
        let wrap = try oneTime.sign(
            UnsignedEvent(
                createdAt: t0, kind: 1059, tags: [["p", bob.publicKeyHex]], content: try oneTime.nip44Encrypt(seal.jsonText, to: bob.publicKeyHex)))
        _ = try t.account.incoming.ingest([wrap], receivedAt: t0)
        let failed = try t.account.messages.failedWraps(ownerKey: bob.publicKeyHex)
        #expect(failed.count == 1)
        #expect(failed.first?.reason.hasPrefix("invalid_private_message: rumor: unknown field") == true)
        #expect((failed.first?.reason.count ?? .max) <= PrivateMessageStore.maxFailureCharacters)
    }

    @Test func sendingWithoutAnInboxListIsRefusedAndQueuesNothing() throws {
        let t = try TestAccount()
        _ = try t.account.incoming.ingest([inboxList(alice, [StorageKeys.relayA])], receivedAt: t0)
        do {
            _ = try t.account.messages.send(to: [bob.publicKeyHex], text: "hello", signer: alice, now: t0)
            Issue.record("a send without the recipient's inbox list was queued")
        } catch {
            #expect(error.code == .recipientHasNoInboxRelays)
            #expect(error.message.contains(bob.publicKeyHex))
        }
        // The sender needs one too, for the self-copy.
        let u = try TestAccount()
        _ = try u.account.incoming.ingest([inboxList(bob, [StorageKeys.relayB])], receivedAt: t0)
        #expect(throws: SoftchatError.self) { try u.account.messages.send(to: [bob.publicKeyHex], text: "hello", signer: alice, now: t0) }
        for account in [t, u] {
            #expect(try account.scalar("SELECT COUNT(*) FROM publish_intents") == 0)
            #expect(try account.scalar("SELECT COUNT(*) FROM private_messages") == 0)
            #expect(try account.served(["{\"kinds\":[1059]}"]).isEmpty)
        }
    }

    @Test func aSendQueuesEachWrapToItsRecipientsInboxRelaysOnlyAndEveryRecipientAndTheSecondDeviceReadsIt() throws {
        let sender = try TestAccount()
        let lists = [
            inboxList(alice, [StorageKeys.relayA]), inboxList(bob, [StorageKeys.relayB, "wss://bob2.example"]),
            inboxList(carol, ["wss://carol.example"]),
        ]
        _ = try sender.account.incoming.ingest(lists, receivedAt: t0)
        let sent = try sender.account.messages.send(to: [bob.publicKeyHex, carol.publicKeyHex], text: "group hello", signer: alice, now: t0)
        #expect(sent.deliveries.map(\.recipient) == [bob.publicKeyHex, carol.publicKeyHex, alice.publicKeyHex])
        #expect(sent.deliveries.map(\.relayURLs) == [[StorageKeys.relayB, "wss://bob2.example"], ["wss://carol.example"], [StorageKeys.relayA]])
        #expect(try sender.scalar("SELECT COUNT(*) FROM publish_intents") == 4)
        // Every intent's relay is in its wrap's recipient's list, and nowhere else.
        for d in sent.deliveries {
            #expect(d.intentIDs.count == d.relayURLs.count)
            let relays = try sender.account.store.read("t") { db in
                let s = try db.statement("SELECT relay_url FROM publish_intents WHERE event_id = ? ORDER BY relay_url").bind(.text(d.wrapID))
                var out: [String] = []
                while try s.step() { out.append(s.text(0)) }
                s.reset()
                return out
            }
            #expect(relays == d.relayURLs.sorted())
        }
        // The sender's room shows it at once, unread 0; nothing was decrypted to show it.
        let room = try sender.account.messages.rooms(ownerKey: alice.publicKeyHex, now: t0)
        #expect(room.map(\.members) == [[alice.publicKeyHex, bob.publicKeyHex, carol.publicKeyHex].sorted()])
        #expect(room.first?.unread == 0 && room.first?.latest?.content == "group hello")
        #expect(sender.account.messages.decryptions == 0)
        // The wraps as the relays would hand them out.
        let wraps = try sender.account.events(matching: [RelayFilter.fromJSON("{\"kinds\":[1059]}")], limit: nil, now: t0)
        #expect(wraps.count == 3)
        // No wrap reveals the sender or the time: one-time keys, backdated up to two days.
        #expect(wraps.allSatisfy { $0.pubkey != alice.publicKeyHex && $0.createdAt <= t0 && $0.createdAt >= t0 - GiftWrap.backdatingSeconds })
        #expect(Set(wraps.map(\.pubkey)).count == 3)
        for (who, account) in [(bob, try TestAccount()), (carol, try TestAccount()), (alice, try TestAccount())] {
            try account.account.messages.unlock(who, now: t0)
            _ = try account.account.incoming.ingest(wraps, receivedAt: t0 + 5)
            #expect(account.account.messages.decryptions == 1, "only the wrap addressed to the reader is decrypted")
            let others = [alice, bob, carol].filter { $0 !== who }.map(\.publicKeyHex)
            let got = try account.account.messages.messages(ownerKey: who.publicKeyHex, members: others, now: t0 + 5)
            #expect(got.map(\.content) == ["group hello"])
            #expect(got.first?.id == sent.message.id && got.first?.sender == alice.publicKeyHex)
            #expect(got.first?.recipients == [bob.publicKeyHex, carol.publicKeyHex].sorted())
        }
    }

    @Test func roomsAreOrderedByTheirNewestMessageCountUnreadAndPageNewestFirst() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        var wraps: [VerifiedEvent] = []
        for i in 0..<5 { wraps.append(try wrap("a\(i)", from: alice, to: [bob], for: bob, at: t0 + Int64(i))) }
        wraps.append(try wrap("c0", from: carol, to: [bob], for: bob, at: t0 + 2))
        _ = try t.account.incoming.ingest(wraps, receivedAt: t0 + 100)
        var rooms = try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 100)
        #expect(rooms.map(\.latest?.content) == ["a4", "c0"])
        #expect(rooms.map(\.unread) == [5, 1])
        try t.account.messages.markRead(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex])
        rooms = try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 100)
        #expect(rooms.map(\.unread) == [0, 1])
        let first = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 100, limit: 2)
        #expect(first.map(\.content) == ["a4", "a3"])
        let second = try t.account.messages.messages(
            ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 100, limit: 2, before: first.last?.cursor)
        #expect(second.map(\.content) == ["a2", "a1"])
        let third = try t.account.messages.messages(
            ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 100, limit: 2, before: second.last?.cursor)
        #expect(third.map(\.content) == ["a0"])
    }

    @Test func anExpiringMessageIsNotShownOnceItsTimeHasPassed() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let rumor = try Rumor(
            pubkey: alice.publicKeyHex, createdAt: t0, kind: 14, tags: [["p", bob.publicKeyHex], ["expiration", "\(t0 + 60)"]], content: "brief")
        _ = try t.account.incoming.ingest([try GiftWrap.wrap(rumor, from: alice, to: bob.publicKeyHex, now: t0)], receivedAt: t0)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 59).map(\.content) == ["brief"])
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 60).isEmpty)
        #expect(try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 60).first?.latest == nil)
    }

    @Test func theRoomListAndARoomPageAreIndexedReads() throws {
        let t = try TestAccount()
        _ = try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0)
        _ = try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0)
        let rooms = try t.plan("SELECT room, messages, read_seq FROM private_rooms WHERE owner = ? ORDER BY latest_at DESC, room LIMIT ?")
        #expect(rooms.contains { $0.contains("private_rooms_latest") } && !rooms.contains { $0.contains("TEMP B-TREE") })
        let page = try t.plan(
            "SELECT wrap_id, rumor FROM private_messages WHERE owner = ? AND room = ? AND deleted = 0 AND kind IN \(PrivateMessageStore.shownKindsSQL) AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, rumor_id DESC LIMIT ?"
        )
        #expect(page.contains { $0.contains("private_messages_room") } && !page.contains { $0.contains("TEMP B-TREE") })
        let unread = try t.plan(
            "SELECT COUNT(*) FROM private_messages WHERE owner = ? AND room = ? AND seq > ? AND sender != ? AND deleted = 0 AND kind IN \(PrivateMessageStore.shownKindsSQL)"
        )
        #expect(unread.contains { $0.contains("private_messages_unread") && $0.contains("seq>?") }, "\(unread)")
    }

    /// A rumor of `kind` from `sender` to `recipients`, wrapped for `target`.
    func wrapRumor(
        kind: Int, from sender: SoftchatIdentity, to recipients: [SoftchatIdentity], for target: SoftchatIdentity, tags: [[String]] = [],
        content: String = "", at time: Int64 = t0
    ) throws -> (Rumor, VerifiedEvent) {
        let rumor = try Rumor(
            pubkey: sender.publicKeyHex, createdAt: time, kind: kind, tags: recipients.map { ["p", $0.publicKeyHex] } + tags, content: content)
        return (rumor, try GiftWrap.wrap(rumor, from: sender, to: target.publicKeyHex, now: time))
    }

    @Test func aWrappedDeletionRemovesItsAuthorsMessageNowAndWhenItArrivesLaterButNoOneElses() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let (first, w1) = try wrapRumor(kind: 14, from: alice, to: [bob], for: bob, content: "oops", at: t0)
        let (second, w2) = try wrapRumor(kind: 14, from: alice, to: [bob], for: bob, content: "late", at: t0 + 1)
        let (carols, w3) = try wrapRumor(kind: 14, from: carol, to: [bob], for: bob, content: "carol's", at: t0 + 2)
        _ = try t.account.incoming.ingest([w1, w3], receivedAt: t0 + 5)
        #expect(try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 5).map(\.unread) == [1, 1])
        // Alice deletes her two messages (one not yet arrived) and, in vain, carol's.
        let (_, deletion) = try wrapRumor(
            kind: 5, from: alice, to: [bob], for: bob, tags: [["e", first.id], ["e", second.id], ["e", carols.id]], at: t0 + 3)
        _ = try t.account.incoming.ingest([deletion], receivedAt: t0 + 6)
        _ = try t.account.incoming.ingest([w2], receivedAt: t0 + 7)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 10).isEmpty)
        #expect(
            try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [carol.publicKeyHex], now: t0 + 10).map(\.content) == ["carol's"])
        let rooms = try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 10)
        let aliceRoom = rooms.first { $0.members.contains(alice.publicKeyHex) }
        #expect(aliceRoom?.latest == nil && aliceRoom?.messages == 0 && aliceRoom?.unread == 0)
        #expect(rooms.first { $0.members.contains(carol.publicKeyHex) }?.unread == 1)
        #expect(try t.account.messages.failedWraps(ownerKey: bob.publicKeyHex).isEmpty)
        #expect(try t.account.check(now: t0 + 10).problems == [])
        // The check sees a room whose count is not its messages.
        _ = try t.scalar("UPDATE private_rooms SET messages = messages + 1 WHERE messages = 1 RETURNING 0")
        #expect(try t.account.check(now: t0 + 10).problems == ["1 private rooms' counts are not their messages"])
    }

    @Test func aReactionIsKeptButNotShownAsAMessage() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let (message, w1) = try wrapRumor(kind: 14, from: alice, to: [bob], for: bob, content: "hi", at: t0)
        let (_, reaction) = try wrapRumor(kind: 7, from: alice, to: [bob], for: bob, tags: [["e", message.id]], content: "+", at: t0 + 1)
        _ = try t.account.incoming.ingest([w1, reaction], receivedAt: t0 + 2)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 2).map(\.content) == ["hi"])
        #expect(try t.scalar("SELECT COUNT(*) FROM private_messages WHERE kind = 7") == 1)
        #expect(try t.account.messages.rooms(ownerKey: bob.publicKeyHex, now: t0 + 2).first?.messages == 1)
    }

    @Test func aSealsExpirationMakesTheMessageDisappear() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let rumor = try Rumor(pubkey: alice.publicKeyHex, createdAt: t0, kind: 14, tags: [["p", bob.publicKeyHex]], content: "sealed brief")
        let sealContent = try alice.nip44Encrypt(rumor.jsonText, to: bob.publicKeyHex)
        let seal = try alice.sign(UnsignedEvent(createdAt: t0, kind: 13, tags: [["expiration", "\(t0 + 30)"]], content: sealContent))
        let oneTime = SoftchatIdentity.generate()
        let wrap = try oneTime.sign(
            UnsignedEvent(
                createdAt: t0, kind: 1059, tags: [["p", bob.publicKeyHex]], content: try oneTime.nip44Encrypt(seal.jsonText, to: bob.publicKeyHex)))
        _ = try t.account.incoming.ingest([wrap], receivedAt: t0)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 29).count == 1)
        #expect(try t.account.messages.messages(ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: t0 + 30).isEmpty)
    }

    @Test func unlockingKeepsTheKeysWrapsSyncedAndSendingWatchesTheRecipientsListsEvenWhenRefused() throws {
        let t = try TestAccount()
        try t.account.messages.unlock(bob, now: t0)
        let inbox = try t.account.subscriptions().first { $0.subscriptionID == AccountMessages.inboxSubscriptionID }
        #expect(
            inbox?.filtersJSON == [##"{"kinds":[1059],"#p":["\##(bob.publicKeyHex)"]}"##, #"{"kinds":[10050],"authors":["\#(bob.publicKeyHex)"]}"#])
        #expect(inbox?.relayURL == nil)
        // Refused for want of carol's list, but her list is watched from now on.
        #expect(throws: SoftchatError.self) { try t.account.messages.send(to: [carol.publicKeyHex], text: "hi", signer: bob, now: t0) }
        func lists() throws -> [String] {
            try t.account.subscriptions().first { $0.subscriptionID == AccountMessages.inboxListsSubscriptionID }?.filtersJSON ?? []
        }
        #expect(try lists() == [#"{"kinds":[10050],"authors":["\#(carol.publicKeyHex)"]}"#])
        // Watching again adds nothing twice; more than 500 keys take another filter.
        let many = (0..<600).map { Hex.encode(SHA256.hash(Array("key \($0)".utf8))) }
        try t.account.messages.watchInboxLists(publicKeys: [carol.publicKeyHex] + many)
        let filters = try lists().map { try RelayFilter.fromJSON($0) }
        #expect(filters.count == 2)
        #expect(try lists().joined().components(separatedBy: "\"").filter { $0.count == 64 }.count == 601)
        #expect(throws: SoftchatError.self) { try t.account.messages.watchInboxLists(publicKeys: ["not hex"]) }
        #expect(try lists().count == 2)
    }
}
