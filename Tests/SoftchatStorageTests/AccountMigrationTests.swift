import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

@_spi(OldLayouts) @testable import SoftchatStorage

/// Versioned migrations (`PRAGMA user_version`): an upgrade from every earlier version keeps
/// the data and makes every table usable; a newer database fails cleanly; an up-to-date one
/// is left alone; the writer runs WAL, synchronous=FULL, foreign keys and a busy timeout.
@Suite struct AccountMigrationTests {
    @Test func thereAreEarlierVersionsToUpgradeFrom() {
        #expect(SoftchatAccount.latestSchemaVersion == Migrations.steps.count)
        #expect(SoftchatAccount.latestSchemaVersion >= 3)
    }

    /// A step that has shipped runs on every account still below it, so its SQL never changes:
    /// a later build must upgrade from it exactly as the build that wrote it. Steps read some
    /// definitions at run time (the id key, the conversation tags, the kind classes); a change
    /// there shows here, and the old text then goes into the step.
    @Test func theStepsAlreadyShippedNeverChange() {
        let digests = Migrations.steps.map { Hex.encode(SHA256.hash(Array($0.utf8))).prefix(16) }
        #expect(digests == Self.shipped, "\(digests)")
    }

    /// The first 16 hex digits of each step's SHA-256, steps 1 to 13.
    static let shipped: [Substring] = [
        "8807cf8bc5d0df9d", "b1928d6101f78b91", "1e2ae84c77dad12e", "0908939bdc12d1a7", "922f7abe738a28ea", "9b2a082f95ed83f7",
        "10a3f411105083a2", "c1c154acca519510", "32fdebf0e3e4b3d9", "da58a1ca476a4934", "17db4fd369edb924",
        "77dfa307b84f8e8d", "c7f0b795ef409082",
    ]

    @Test(arguments: 0..<SoftchatAccount.latestSchemaVersion)
    func anAccountAtAnEarlierVersionUpgradesWithItsDataIntact(from version: Int) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("account.sqlite")
        let note = signed(tags: [["t", "kept"]], content: "written at version \(version)")
        let outgoing = signed(kind: 14, tags: [["p", StorageKeys.bob.publicKeyHex]], content: "queued at version \(version)")
        var intents: [String] = []

        // Build the old database with what that version can hold.
        let old = try SoftchatAccount.open(path: path, version: version)
        #expect(try old.schemaVersion() == version)
        if version >= 1 {
            #expect(try old.incoming.ingest([note], receivedAt: t0).receipt.insertedEventIDs == [note.id])
        } else {
            // Version 0 has no tables at all.
            expectSoftchatError(.accountStorageFailed, mentioning: ["no such table"]) {
                _ = try old.incoming.ingest([note], receivedAt: t0)
            }
        }
        if version >= 2 {
            intents = try old.outgoing.enqueueSigned(operationID: "op", events: [outgoing], relayURLs: [StorageKeys.relayA], now: t0)
            let claim = try #require(try old.delivery.claim(leaseID: "old-lease", relayURL: StorageKeys.relayA, now: t0)).claim
            try old.delivery.markSocketWritten(claim, intentIDs: intents)
        } else if version == 1 {
            expectSoftchatError(.accountStorageFailed, mentioning: ["no such table", "publish_operations"]) {
                _ = try old.outgoing.enqueueSigned(operationID: "op", events: [outgoing], relayURLs: [StorageKeys.relayA], now: t0)
            }
        }
        if version >= 3 {
            try old.setSubscription(id: "chat", filtersJSON: [#"{"kinds":[14]}"#])
            try old.advanceSyncCursor(relayURL: StorageKeys.relayA, subscriptionID: "chat", createdAt: t0, now: t0)
        }
        old.close()

        // Reopen with the current build: upgraded, data intact, every table usable.
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(try account.schemaVersion() == SoftchatAccount.latestSchemaVersion)
        let all = try account.events(matching: [RelayFilter.fromJSON("{}")], now: t0)
        if version >= 1 {
            #expect(all.contains(note))
            #expect(try account.events(matching: [RelayFilter.fromJSON(##"{"#t":["kept"]}"##)], now: t0).map(\.id) == [note.id])
            // With a limit the tag's time index answers: the upgrade filled it for old events.
            #expect(try account.events(matching: [RelayFilter.fromJSON(##"{"#t":["kept"],"limit":5}"##)], now: t0).map(\.id) == [note.id])
            #expect(try account.incoming.ingest([note], receivedAt: t0 + 1).receipt.duplicateEventIDs == [note.id])
        }
        if version >= 2 {
            #expect(try account.delivery.stateCounts() == [.inFlight: 1])
            // The old lease expires like any other and its work is reclaimed.
            let reclaimed = try #require(try account.delivery.claim(leaseID: "new-lease", relayURL: StorageKeys.relayA, now: t0 + 60))
            #expect(reclaimed.payloads.map(\.intentID) == intents)
            #expect(try account.outgoing.enqueueSigned(operationID: "op", events: [outgoing], relayURLs: [StorageKeys.relayA], now: t0) == intents)
        } else {
            let ids = try account.outgoing.enqueueSigned(operationID: "op", events: [outgoing], relayURLs: [StorageKeys.relayA], now: t0)
            let claim = try #require(try account.delivery.claim(leaseID: "new-lease", relayURL: StorageKeys.relayA, now: t0))
            #expect(claim.payloads.map(\.intentID) == ids)
            try account.delivery.markSocketWritten(claim.claim, intentIDs: ids)
            try account.delivery.applyResults(claim.claim, results: [DeliveryResult(intentID: ids[0], decision: decision(.accepted))])
        }
        if version >= 3 {
            #expect(try account.subscriptions().map(\.subscriptionID) == ["chat"])
            #expect(try account.syncCursor(relayURL: StorageKeys.relayA, subscriptionID: "chat") == t0)
        } else {
            try account.setSubscription(id: "chat", filtersJSON: [#"{"kinds":[14]}"#])
            try account.advanceSyncCursor(relayURL: StorageKeys.relayA, subscriptionID: "chat", createdAt: t0, now: t0)
            #expect(try account.syncCursor(relayURL: StorageKeys.relayA, subscriptionID: "chat") == t0)
        }
        let report = try account.check(now: t0 + 60)
        #expect(report.ok, "\(report.problems)")
    }

    @Test func anUpgradeRunsOneStepAtATimeFromEveryIntermediateVersion() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("account.sqlite")
        for version in 0...SoftchatAccount.latestSchemaVersion {
            let account = try SoftchatAccount.open(path: path, version: version)
            #expect(try account.schemaVersion() == version)
            account.close()
        }
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(try account.check(now: t0).ok)
    }

    @Test func aDatabaseNewerThanThisBuildFailsCleanlyAndIsLeftUntouched() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("account.sqlite")
        let account = try SoftchatAccount.open(path: path)
        try account.incoming.ingest([signed(content: "from the future")], receivedAt: t0)
        account.close()
        let newer = SoftchatAccount.latestSchemaVersion + 1
        try SQLiteConnection(path: path).execute("PRAGMA user_version = \(newer)")

        let error = expectSoftchatError(.invalidPersistenceResult, mentioning: ["version \(newer)", "newer than this build"]) {
            _ = try SoftchatAccount.open(path: path)
        }
        #expect(error?.retryRule == .permanent, "retrying cannot help: a newer build is needed")
        let raw = try SQLiteConnection(path: path)
        #expect(try raw.scalarInt("PRAGMA user_version") == Int64(newer))
        #expect(try raw.scalarInt("SELECT COUNT(*) FROM events") == 1)
        // An older target version than the file holds is not a downgrade either.
        expectSoftchatError(.invalidPersistenceResult) { _ = try SoftchatAccount.open(path: path, version: 1) }
    }

    @Test func reopeningAnUpToDateAccountIsANoOp() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("account.sqlite")
        let first = try SoftchatAccount.open(path: path)
        try first.incoming.ingest([signed(content: "one")], receivedAt: t0)
        let schema = try schemaText(path)
        first.close()
        for _ in 0..<3 {
            let again = try SoftchatAccount.open(path: path)
            #expect(try again.schemaVersion() == SoftchatAccount.latestSchemaVersion)
            #expect(try again.check(now: t0).events == 1)
            again.close()
        }
        #expect(try schemaText(path) == schema)
        // A second account open at the same time is fine too (one writer at a time).
        let a = try SoftchatAccount.open(path: path)
        let b = try SoftchatAccount.open(path: path)
        try a.incoming.ingest([signed(content: "from a")], receivedAt: t0)
        try b.incoming.ingest([signed(content: "from b")], receivedAt: t0)
        #expect(try a.check(now: t0).events == 3)
        #expect(try b.check(now: t0).events == 3)
        a.close()
        b.close()
    }

    @Test func theWriterRunsWALWithSynchronousFullForeignKeysAndABusyTimeout() throws {
        let t = try TestAccount(policy: AccountPolicy(busyTimeoutMilliseconds: 1_234))
        let pragmas = try t.account.store.write("pragmas") { db in
            let journal = try db.statement("PRAGMA journal_mode")
            _ = try journal.step()
            return (
                journal: journal.text(0),
                synchronous: try db.scalarInt("PRAGMA synchronous"),
                foreignKeys: try db.scalarInt("PRAGMA foreign_keys"),
                busyTimeout: try db.scalarInt("PRAGMA busy_timeout")
            )
        }
        #expect(pragmas.journal == "wal")
        #expect(pragmas.synchronous == 2, "FULL")
        #expect(pragmas.foreignKeys == 1)
        #expect(pragmas.busyTimeout == 1_234)
        #expect(try t.account.store.read("busy") { db in try db.scalarInt("PRAGMA busy_timeout") } == 1_234)
        // WAL is a property of the file: a fresh connection sees it too.
        let raw = try SQLiteConnection(path: t.path)
        let mode = try raw.statement("PRAGMA journal_mode")
        #expect(try mode.step() && mode.text(0) == "wal")
        // Foreign keys are enforced: an intent of an operation that is not stored is refused.
        expectSoftchatError(.accountStorageFailed, mentioning: ["SQLite error 19", "FOREIGN KEY"]) {
            try t.account.store.write("orphan intent") { db in
                try db.execute("INSERT INTO publish_operations (operation_id, fingerprint, created_at) VALUES ('op', 'f', 0)")
                try db.execute(
                    """
                    INSERT INTO publish_intents (intent_id, operation_id, event_id, relay_url, state, attempts, sequence, updated_at)
                    VALUES ('i', 'another op', 'missing', 'wss://r', 'pending', 0, 1, 0)
                    """)
            }
        }
        #expect(try t.scalar("SELECT COUNT(*) FROM publish_operations") == 0, "the failed transaction rolled back whole")
    }

    func schemaText(_ path: String) throws -> String {
        let raw = try SQLiteConnection(path: path, readOnly: true)
        let s = try raw.statement("SELECT type || ' ' || name || ' ' || IFNULL(sql, '') FROM sqlite_schema ORDER BY name")
        var rows: [String] = []
        while try s.step() { rows.append(s.text(0)) }
        return rows.joined(separator: "\n") + "\nuser_version \(try raw.scalarInt("PRAGMA user_version"))"
    }
}
