import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// `incoming.ingest`: one transaction per batch with a total, disjoint receipt; NIP-01
/// replaceable/addressable rules, NIP-09 deletions, NIP-40 expiry, quarantine with reasons,
/// exact text round-trips, and failures that change nothing and say what SQLite said.
@Suite struct AccountIngestTests {
    // MARK: Receipts

    @Test func receiptIsTotalAndDisjointAndNamesRepeatsInsideABatchOnce() throws {
        let t = try TestAccount()
        let a = signed(content: "a")
        let b = signed(content: "b")
        let c = signed(content: "c")
        let expired = signed(tags: [["expiration", "\(t0 - 1)"]], content: "gone")
        try t.account.incoming.ingest([a], receivedAt: t0)

        let outcome = try t.account.incoming.ingest([b, a, b, c, expired, c, expired], receivedAt: t0)
        let r = outcome.receipt
        #expect(r.insertedEventIDs == [b.id, c.id])
        #expect(r.duplicateEventIDs == [a.id])
        #expect(r.quarantinedEventIDs == [expired.id])
        #expect(r.total == 4)
        let named = r.insertedEventIDs + r.duplicateEventIDs + r.quarantinedEventIDs
        #expect(Set(named).count == named.count)
        #expect(Set(named) == Set([a, b, c, expired].map(\.id)))
        #expect(r.ingestionResult.accepted == [b.id, c.id])
        #expect(r.ingestionResult.alreadyPresent == [a.id])
        #expect(r.ingestionResult.rejected == [expired.id])

        // One receipt row per batch, each total.
        #expect(try t.scalar("SELECT COUNT(*) FROM ingest_receipts") == 2)
        #expect(try t.scalar("SELECT total FROM ingest_receipts ORDER BY batch DESC LIMIT 1") == 4)
        #expect(try t.scalar("SELECT COUNT(*) FROM ingest_receipts WHERE inserted + duplicates + quarantined != total") == 0)
        #expect(try t.account.check(now: t0).ok)
    }

    @Test func anEventSeenInAnEarlierBatchIsADuplicateAndStoredOnce() throws {
        let t = try TestAccount()
        let e = signed(tags: [["t", "x"], ["p", StorageKeys.bob.publicKeyHex]])
        #expect(try t.account.incoming.ingest([e], receivedAt: t0).receipt.insertedEventIDs == [e.id])
        // A second signature over the same fields is the same event (same id).
        let again = signed(tags: [["t", "x"], ["p", StorageKeys.bob.publicKeyHex]])
        #expect(again.id == e.id)
        let r = try t.account.incoming.ingest([again], receivedAt: t0 + 5).receipt
        #expect(r.duplicateEventIDs == [e.id])
        #expect(r.insertedEventIDs.isEmpty)
        #expect(try t.scalar("SELECT COUNT(*) FROM events") == 1)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags") == 2)
        #expect(try t.served() == [e.id])
    }

    // MARK: Closing

    /// A closed account is one file holding every commit: the last connection to close
    /// checkpoints the write-ahead log into the database and removes it. (The reader connection
    /// is read-only and cannot checkpoint; closed last, it left the log behind, and a copy of the
    /// database file, as a backup or the negentropy benchmark takes, lacked the newest events.)
    @Test func aClosedAccountIsOneFileWithEveryCommitInIt() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("me.db")
        let account = try SoftchatAccount.open(path: path)
        let notes = (0..<300).map { signed(content: "note \($0)", createdAt: t0 + Int64($0)) }
        try account.incoming.ingest(notes, receivedAt: t0)
        // A read, so the reader connection is open too.
        #expect(try account.events(matching: [RelayFilter.fromJSON("{}")], now: t0).count == 300)
        account.close()
        #expect(access(path + "-wal", F_OK) != 0, "the write-ahead log outlived the account")
        // The database file alone, copied elsewhere, holds all 300.
        let copy = dir.file("copy.db")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let reopened = try SoftchatAccount.open(path: copy)
        defer { reopened.close() }
        #expect(try reopened.events(matching: [RelayFilter.fromJSON("{}")], now: t0).count == 300)
    }

    @Test func anAccountLetGoWithoutClosingIsOneFileToo() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("me.db")
        do {
            let account = try SoftchatAccount.open(path: path)
            try account.incoming.ingest((0..<50).map { signed(content: "note \($0)", createdAt: t0 + Int64($0)) }, receivedAt: t0)
            #expect(try account.events(matching: [RelayFilter.fromJSON("{}")], now: t0).count == 50)
        }
        #expect(access(path + "-wal", F_OK) != 0, "the write-ahead log outlived the account")
    }

    // MARK: Replaceable and addressable kinds

    @Test(arguments: [0, 3, 10_000, 10_002, 19_999])
    func replaceableKindsKeepOnlyTheNewestPerAuthorAndKind(kind: Int) throws {
        let t = try TestAccount()
        let old = signed(kind: kind, content: "old", createdAt: t0)
        let new = signed(kind: kind, content: "new", createdAt: t0 + 10)
        let other = signed(StorageKeys.bob, kind: kind, content: "bob's", createdAt: t0 + 1)
        #expect(try t.account.incoming.ingest([old, other], receivedAt: t0 + 20).receipt.insertedEventIDs == [old.id, other.id])
        #expect(try t.account.incoming.ingest([new], receivedAt: t0 + 20).receipt.insertedEventIDs == [new.id])
        #expect(try t.served(["{\"kinds\":[\(kind)]}"], now: t0 + 30) == [new.id, other.id])
        // The replaced event is gone; its tags went with it.
        #expect(try t.scalar("SELECT COUNT(*) FROM events WHERE id = '\(old.id)'") == 0)

        // An older arrival is a duplicate of history, not an error, and is not stored.
        let older = signed(kind: kind, content: "older", createdAt: t0 + 5)
        let r = try t.account.incoming.ingest([older, old], receivedAt: t0 + 20).receipt
        #expect(r.duplicateEventIDs == [older.id, old.id])
        #expect(r.insertedEventIDs.isEmpty && r.quarantinedEventIDs.isEmpty)
        #expect(try t.served(["{\"kinds\":[\(kind)]}"], now: t0 + 30) == [new.id, other.id])
    }

    @Test func regularAndEphemeralKindsAreNotReplaced() throws {
        let t = try TestAccount()
        let events = [1, 1, 9_999, 40_000].enumerated().map { i, k in signed(kind: k, content: "r\(i)", createdAt: t0 + Int64(i)) }
        #expect(try t.account.incoming.ingest(events, receivedAt: t0 + 10).receipt.insertedEventIDs.count == 4)
        #expect(try t.served().count == 4)
    }

    @Test func aReplaceableTieOnCreatedAtKeepsTheLowestID() throws {
        let t = try TestAccount()
        let pair = [signed(kind: 0, content: "tie one", createdAt: t0), signed(kind: 0, content: "tie two", createdAt: t0)]
        let low = pair.min { $0.id < $1.id }!
        let high = pair.max { $0.id < $1.id }!
        // Higher id first, then the lower id replaces it.
        #expect(try t.account.incoming.ingest([high], receivedAt: t0).receipt.insertedEventIDs == [high.id])
        #expect(try t.account.incoming.ingest([low], receivedAt: t0).receipt.insertedEventIDs == [low.id])
        #expect(try t.served() == [low.id])

        // Lower id first: the higher id is a duplicate of history.
        let t2 = try TestAccount()
        #expect(try t2.account.incoming.ingest([low, high], receivedAt: t0).receipt.duplicateEventIDs == [high.id])
        #expect(try t2.served() == [low.id])
    }

    @Test func addressableKindsKeepTheNewestPerAuthorKindAndDTag() throws {
        let t = try TestAccount()
        let a1 = signed(kind: 30_023, tags: [["d", "post-a"]], content: "a v1", createdAt: t0)
        let a2 = signed(kind: 30_023, tags: [["d", "post-a"]], content: "a v2", createdAt: t0 + 10)
        let b1 = signed(kind: 30_023, tags: [["d", "post-b"]], content: "b v1", createdAt: t0 + 1)
        let noD = signed(kind: 30_023, tags: [], content: "no d", createdAt: t0 + 2)
        let emptyD = signed(kind: 30_023, tags: [["d", ""]], content: "empty d", createdAt: t0 + 3)
        let otherKind = signed(kind: 30_024, tags: [["d", "post-a"]], content: "other kind", createdAt: t0 + 1)
        let bobs = signed(StorageKeys.bob, kind: 30_023, tags: [["d", "post-a"]], content: "bob", createdAt: t0 + 1)
        let r = try t.account.incoming.ingest([a2, a1, b1, noD, emptyD, otherKind, bobs], receivedAt: t0 + 20).receipt
        #expect(r.insertedEventIDs == [a2.id, b1.id, noD.id, emptyD.id, otherKind.id, bobs.id])
        #expect(r.duplicateEventIDs == [a1.id])
        // A missing d tag is the empty identifier: the later "d":"" replaced it.
        #expect(Set(try t.served(now: t0 + 30)) == Set([a2.id, b1.id, emptyD.id, otherKind.id, bobs.id]))
        #expect(!(try t.served(now: t0 + 30)).contains(noD.id))
    }

    // MARK: NIP-09 deletions

    @Test func aDeletionHidesTheAuthorsEventsByIDButNeverAnotherAuthors() throws {
        let t = try TestAccount()
        let mine = signed(content: "mine")
        let bobs = signed(StorageKeys.bob, content: "bob's")
        try t.account.incoming.ingest([mine, bobs], receivedAt: t0)
        let deletion = signed(kind: 5, tags: [["e", mine.id], ["e", bobs.id]], content: "oops", createdAt: t0 + 1)
        // Bob's own deletion of alice's event does nothing either.
        let bobDeletesAlice = signed(StorageKeys.bob, kind: 5, tags: [["e", mine.id]], content: "", createdAt: t0 + 1)
        #expect(try t.account.incoming.ingest([deletion, bobDeletesAlice], receivedAt: t0 + 1).receipt.insertedEventIDs.count == 2)
        let served = try t.served(["{\"kinds\":[1]}"], now: t0 + 2)
        #expect(served == [bobs.id])
        // The deletion request itself is an ordinary stored event.
        #expect(try t.served(["{\"kinds\":[5]}"], now: t0 + 2).count == 2)
        // A hidden event is still stored: its id is a duplicate, not new.
        #expect(try t.account.incoming.ingest([mine], receivedAt: t0 + 3).receipt.duplicateEventIDs == [mine.id])
    }

    @Test func aDeletionHidesATargetThatArrivesAfterIt() throws {
        let t = try TestAccount()
        let later = signed(content: "arrives later", createdAt: t0)
        let address = "30023:\(StorageKeys.alice.publicKeyHex):essay"
        let deletion = signed(kind: 5, tags: [["e", later.id], ["a", address]], content: "", createdAt: t0 + 100)
        try t.account.incoming.ingest([deletion], receivedAt: t0 + 100)
        let essayBefore = signed(kind: 30_023, tags: [["d", "essay"]], content: "v1", createdAt: t0 + 50)
        let bobsCopy = signed(StorageKeys.bob, content: "arrives later", createdAt: t0)
        #expect(try t.account.incoming.ingest([later, essayBefore, bobsCopy], receivedAt: t0 + 101).receipt.insertedEventIDs.count == 3)
        #expect(try t.served(["{\"kinds\":[1,30023]}"], now: t0 + 200) == [bobsCopy.id])

        // A version newer than the deletion is served again (NIP-09: created_at ≤ deletion only).
        let essayAfter = signed(kind: 30_023, tags: [["d", "essay"]], content: "v2", createdAt: t0 + 150)
        try t.account.incoming.ingest([essayAfter], receivedAt: t0 + 151)
        #expect(try t.served(["{\"kinds\":[30023]}"], now: t0 + 200) == [essayAfter.id])
    }

    @Test func anAddressDeletionHidesVersionsUpToItsCreatedAtOnly() throws {
        let t = try TestAccount()
        let v1 = signed(kind: 30_023, tags: [["d", "x"]], content: "v1", createdAt: t0 + 10)
        try t.account.incoming.ingest([v1], receivedAt: t0 + 10)
        let address = "30023:\(StorageKeys.alice.publicKeyHex):x"
        let sameSecond = signed(kind: 5, tags: [["a", address]], content: "", createdAt: t0 + 10)
        try t.account.incoming.ingest([sameSecond], receivedAt: t0 + 11)
        #expect(try t.served(["{\"kinds\":[30023]}"], now: t0 + 20).isEmpty)
        // Another author's address deletion names alice's address but cannot touch it.
        let v2 = signed(kind: 30_023, tags: [["d", "x"]], content: "v2", createdAt: t0 + 12)
        let bobs = signed(StorageKeys.bob, kind: 5, tags: [["a", address]], content: "", createdAt: t0 + 30)
        try t.account.incoming.ingest([bobs, v2], receivedAt: t0 + 31)
        #expect(try t.served(["{\"kinds\":[30023]}"], now: t0 + 40) == [v2.id])
    }

    /// NIP-09 deletes a replaceable event (kinds 0, 3, 10000–19999) by the address
    /// `kind:pubkey:` with an empty identifier. Those rows are stored without a `d` tag, so the
    /// deletion used to match nothing, whether it came before or after the event.
    @Test(arguments: [0, 3, 10_002])
    func anAddressDeletionHidesAReplaceableEventWhicheverArrivesFirst(kind: Int) throws {
        let t = try TestAccount()
        let address = "\(kind):\(StorageKeys.alice.publicKeyHex):"
        let filter = "{\"kinds\":[\(kind)]}"
        let profile = signed(kind: kind, content: "v1", createdAt: t0 + 10)
        try t.account.incoming.ingest([profile], receivedAt: t0 + 10)
        let deletion = signed(kind: 5, tags: [["a", address]], content: "", createdAt: t0 + 20)
        try t.account.incoming.ingest([deletion], receivedAt: t0 + 20)
        #expect(try t.served([filter], now: t0 + 30).isEmpty, "a deletion after the event hides it")

        // Another account: the deletion first, then an older version of the event.
        let u = try TestAccount()
        try u.account.incoming.ingest([deletion], receivedAt: t0 + 20)
        try u.account.incoming.ingest([profile], receivedAt: t0 + 21)
        #expect(try u.served([filter], now: t0 + 30).isEmpty, "a deletion before the event hides it")
        // A newer version than the deletion is served (NIP-09: created_at ≤ deletion only).
        let newer = signed(kind: kind, content: "v2", createdAt: t0 + 40)
        try u.account.incoming.ingest([newer], receivedAt: t0 + 41)
        #expect(try u.served([filter], now: t0 + 50) == [newer.id])
    }

    @Test func deletingADeletionHasNoEffect() throws {
        let t = try TestAccount()
        let note = signed(content: "note")
        let deletion = signed(kind: 5, tags: [["e", note.id]], content: "", createdAt: t0 + 1)
        let undelete = signed(kind: 5, tags: [["e", deletion.id]], content: "", createdAt: t0 + 2)
        try t.account.incoming.ingest([note, deletion, undelete], receivedAt: t0 + 3)
        #expect(try t.served(now: t0 + 3) == [undelete.id, deletion.id])
    }

    // MARK: NIP-40 expiration

    @Test func anEventExpiredOnArrivalIsQuarantinedWithItsReason() throws {
        let t = try TestAccount()
        let atArrival = signed(tags: [["expiration", "\(t0 + 100)"]], content: "expires exactly at arrival")
        let before = signed(tags: [["expiration", "\(t0 + 50)"]], content: "expired before")
        let outcome = try t.account.incoming.ingest([atArrival, before], receivedAt: t0 + 100)
        #expect(outcome.receipt.quarantinedEventIDs == [atArrival.id, before.id])
        #expect(outcome.quarantined.map(\.eventID) == [atArrival.id, before.id])
        #expect(outcome.quarantined.allSatisfy { $0.reason.contains("NIP-40") && $0.reason.contains("expired") })
        #expect(try t.scalar("SELECT COUNT(*) FROM quarantine") == 2)
        #expect(try t.scalar("SELECT COUNT(*) FROM events") == 0)
        // Quarantined again on a second arrival; never served.
        #expect(try t.account.incoming.ingest([before], receivedAt: t0 + 101).receipt.quarantinedEventIDs == [before.id])
        #expect(try t.scalar("SELECT COUNT(*) FROM quarantine") == 2)
        #expect(try t.served(now: t0).isEmpty)
    }

    @Test func anEventThatExpiresLaterIsServedUntilNowPassesIt() throws {
        let t = try TestAccount()
        let expiring = signed(tags: [["expiration", "\(t0 + 100)"]], content: "short-lived")
        let lasting = signed(content: "lasting", createdAt: t0 - 1)
        #expect(try t.account.incoming.ingest([expiring, lasting], receivedAt: t0).receipt.insertedEventIDs.count == 2)
        #expect(try t.served(now: t0) == [expiring.id, lasting.id])
        #expect(try t.served(now: t0 + 99) == [expiring.id, lasting.id])
        #expect(try t.served(now: t0 + 100) == [lasting.id])
        #expect(try t.served(now: t0 + 1_000) == [lasting.id])
    }

    // MARK: Raw lines

    @Test func rawLinesThatDoNotParseOrVerifyAreQuarantinedWithReasons() throws {
        let t = try TestAccount()
        let good = signed(content: "good")
        let victim = signed(content: "signed by alice, sig forged")
        let forgedSig = victim.jsonValue.setting("sig", .string(flip(victim.sig, at: 77))).jsonText
        let tampered = signed(content: "to tamper")
        let tamperedText = tampered.jsonValue.setting("content", .string("tampered!")).jsonText
        let lines = [good.jsonText, "not json at all", forgedSig, tamperedText, #"{"kind":1}"#, "not json at all"]
        let outcome = try t.account.incoming.ingest(lines: lines, receivedAt: t0)
        let r = outcome.receipt
        #expect(r.insertedEventIDs == [good.id])
        #expect(r.duplicateEventIDs.isEmpty)
        // Lines with a readable id are named by it; the others by a hash of the line, a repeat once.
        #expect(r.quarantinedEventIDs.count == 4)
        #expect(r.quarantinedEventIDs.contains(victim.id))
        #expect(r.quarantinedEventIDs.contains(tampered.id))
        #expect(r.quarantinedEventIDs.filter { $0.hasPrefix("line:") }.count == 2)
        let reasons = Dictionary(uniqueKeysWithValues: outcome.quarantined.map { ($0.eventID, $0.reason) })
        #expect(reasons[tampered.id]?.contains("id does not match") == true)
        #expect(reasons[victim.id]?.contains("signature does not verify") == true)
        #expect(reasons.values.allSatisfy { $0.hasPrefix("invalid_relay_frame") })
        #expect(reasons.values.contains { $0.contains("not JSON") })
        #expect(reasons.values.contains { $0.contains("missing field") })
        // Quarantine keeps the raw text and the reason; none of it is served.
        #expect(try t.scalar("SELECT COUNT(*) FROM quarantine WHERE reason != '' AND raw != ''") == 4)
        #expect(try t.scalar("SELECT COUNT(*) FROM quarantine WHERE event_id IS NULL") == 2)
        #expect(try t.served() == [good.id])

        // The genuine event arriving later is stored and served; the forgery stays in quarantine.
        #expect(try t.account.incoming.ingest(lines: [victim.jsonText], receivedAt: t0 + 1).receipt.insertedEventIDs == [victim.id])
        #expect(Set(try t.served()) == [good.id, victim.id])
    }

    @Test func aForgedCopyAheadOfTheGenuineEventInOneBatchDoesNotSuppressIt() throws {
        let t = try TestAccount()
        let genuine = signed(content: "genuine")
        let forged = genuine.jsonValue.setting("sig", .string(flip(genuine.sig, at: 5))).jsonText
        let r = try t.account.incoming.ingest(lines: [forged, genuine.jsonText, forged], receivedAt: t0).receipt
        #expect(r.insertedEventIDs == [genuine.id])
        #expect(r.total == 1)
        #expect(try t.served() == [genuine.id])
        // After it, a forged copy of a stored event is quarantined (it conflicts with stored data).
        let again = try t.account.incoming.ingest(lines: [forged], receivedAt: t0 + 1).receipt
        #expect(again.quarantinedEventIDs == [genuine.id])
        #expect(try t.served() == [genuine.id])
    }

    // MARK: Text round-trips

    @Test func textWithNulAndNonBMPCharactersRoundTripsExactly() throws {
        let t = try TestAccount()
        let content = "a\u{0}b \u{1F600} \u{10FFFF} \u{0}\u{0} é e\u{301} \u{FEFF}\u{7}\"\\\n"
        let e = signed(tags: [["t", "nul\u{0}tag"], ["t", "\u{1F4AC}"]], content: content)
        try t.account.incoming.ingest([e], receivedAt: t0)
        let back = try #require(try t.account.events(matching: [RelayFilter.fromJSON("{}")], now: t0).first)
        #expect(back.id == e.id)
        #expect(back.content == content)
        #expect(Array(back.content.utf8) == Array(content.utf8))
        #expect(back.tags == e.tags)
        #expect(back.jsonText == e.jsonText)
        // Tag values with U+0000 and non-BMP characters are indexed whole.
        let f = try RelayFilter(json: .object(JSONObject(["#t": .array([.string("nul\u{0}tag")])])))
        #expect(try t.account.events(matching: [f], now: t0).map(\.id) == [e.id])
        let emoji = try RelayFilter(json: .object(JSONObject(["#t": .array([.string("\u{1F4AC}")])])))
        #expect(try t.account.events(matching: [emoji], now: t0).map(\.id) == [e.id])
        let cut = try RelayFilter(json: .object(JSONObject(["#t": .array([.string("nul")])])))
        #expect(try t.account.events(matching: [cut], now: t0).isEmpty)
    }

    // MARK: Failures

    @Test func aClosedAccountRefusesABatchAndItChangesNothing() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(content: "before")], receivedAt: t0)
        t.account.close()
        expectSoftchatError(.invalidPersistenceResult, mentioning: ["closed"]) {
            _ = try t.account.incoming.ingest([signed(content: "after")], receivedAt: t0)
        }
        t.account.close()  // idempotent
        let reopened = try SoftchatAccount.open(path: t.path)
        defer { reopened.close() }
        #expect(try reopened.events(matching: [RelayFilter.fromJSON("{}")], now: t0).map(\.content) == ["before"])
        #expect(try reopened.check(now: t0).receipts == 1)
    }

    @Test func aSQLiteFailureInsideABatchRollsBackEverythingAndNamesCodeAndOperation() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(content: "before")], receivedAt: t0)
        // A trigger on a second connection fails the third insert of the next batch.
        let raw = try SQLiteConnection(path: t.path)
        try raw.execute(
            """
            CREATE TRIGGER fail_poison BEFORE INSERT ON events WHEN NEW.json LIKE '%poison%'
            BEGIN SELECT RAISE(ABORT, 'injected failure'); END
            """)
        let counts = try t.tableCounts()
        let batch = [
            signed(tags: [["t", "x"]], content: "one"), signed(kind: 5, tags: [["e", "00"]], content: "two"),
            signed(content: "poison"), signed(content: "four"),
        ]
        let error = expectSoftchatError(.accountStorageFailed, mentioning: ["ingest", "SQLite error 19", "injected failure", "INSERT INTO events"]) {
            _ = try t.account.incoming.ingest(batch, receivedAt: t0)
        }
        #expect(error?.retryRule == .retryable)
        #expect(try t.tableCounts() == counts)
        try raw.execute("DROP TRIGGER fail_poison")
        // The same batch then goes through whole.
        #expect(try t.account.incoming.ingest(batch, receivedAt: t0).receipt.insertedEventIDs.count == 4)
    }

    @Test func aFullDiskInsideABatchRollsBackAndSaysSQLiteError13() throws {
        let t = try TestAccount()
        let pages = try t.scalar("PRAGMA page_count")
        try t.account.store.write("limit") { db in try db.execute("PRAGMA max_page_count = \(pages + 2)") }
        let counts = try t.tableCounts()
        let big = (0..<40).map { signed(content: String(repeating: "x\($0)", count: 2_000)) }
        let error = expectSoftchatError(.accountStorageFailed, mentioning: ["ingest", "SQLite error 13"]) {
            _ = try t.account.incoming.ingest(big, receivedAt: t0)
        }
        #expect(error?.message.contains("full") == true)
        #expect(try t.tableCounts() == counts)
        #expect(try t.account.check(now: t0).ok)
    }

    @Test func openingInAMissingDirectoryFailsWithSQLiteError14AndTheOperation() {
        let dir = TemporaryDirectory()
        expectSoftchatError(.accountStorageFailed, mentioning: ["open", "SQLite error 14", dir.file("missing/account.sqlite")]) {
            _ = try SoftchatAccount.open(path: dir.file("missing/account.sqlite"))
        }
    }

    @Test func sqliteErrorsDescribeCodeExtendedCodeNameAndOperation() {
        let e = SQLiteError(code: 5, extendedCode: 517, message: "database is locked", operation: "ingest")
        #expect(e.description == "SQLite error 5/517 (database is locked) in ingest: database is locked")
        #expect(e.isBusy)
        #expect(!e.isDiskFull)
    }

    private func flip(_ hex: String, at index: Int) -> String {
        var chars = Array(hex)
        chars[index] = chars[index] == "0" ? "1" : "0"
        return String(chars)
    }
}
