import CSQLite
import Foundation
import SoftchatCore
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// The account file is the user's whole message history: only its owner reads it, and a file
/// that is not a Softchat account (or is crafted) is refused with a stable code, never migrated
/// into one and never a trap.
@Suite struct AccountFileSecurityTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    /// A plain SQLite file made with the sqlite3 C API, as another program would.
    static func foreignDatabase(_ path: String, _ sql: String) {
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
    }

    @Test func aNewAccountAndItsWALAndSHMAreReadableByTheOwnerOnly() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("me.db")
        let previous = umask(0o022)  // the usual default, which made the files 0644
        defer { umask(previous) }
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        let note = try StorageKeys.alice.sign(UnsignedEvent(createdAt: t0, kind: 1, tags: [], content: "private"))
        _ = try account.incoming.ingest([note], receivedAt: t0)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(Self.mode(file) == 0o600, "\(file): \(String(Self.mode(file) ?? 0, radix: 8))")
        }
    }

    @Test func anExistingAccountReadableByOthersIsTightenedOnOpen() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("old.db")
        try SoftchatAccount.open(path: path).close()
        #expect(chmod(path, 0o644) == 0)
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(Self.mode(path) == 0o600)
    }

    @Test(arguments: [-1, Int32.min, 1_000_000])
    func aCraftedSchemaVersionIsAStableErrorNotATrap(version: Int32) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("crafted.db")
        try SoftchatAccount.open(path: path).close()
        Self.foreignDatabase(path, "PRAGMA user_version = \(version)")
        expectSoftchatError(.invalidPersistenceResult, mentioning: ["version \(version)"]) { _ = try SoftchatAccount.open(path: path) }
    }

    @Test func anSQLiteFileOfAnotherProgramIsRefusedAndLeftAsItWas() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("notes.db")
        Self.foreignDatabase(path, "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine'); PRAGMA user_version = 0")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        expectSoftchatError(.invalidPersistenceResult, mentioning: ["not a Softchat account"]) { _ = try SoftchatAccount.open(path: path) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        // Another program's application_id is refused too, even on an empty file.
        let other = dir.file("other.db")
        Self.foreignDatabase(other, "PRAGMA application_id = 1234")
        expectSoftchatError(.invalidPersistenceResult, mentioning: ["application_id 1234"]) { _ = try SoftchatAccount.open(path: other) }
    }

    @Test func anAccountIsMarkedWithSoftchatsApplicationIDAndReopens() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("me.db")
        try SoftchatAccount.open(path: path).close()
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        #expect(try account.store.write("test") { db in try db.scalarInt("PRAGMA application_id") } == Int64(AccountStore.applicationID))
    }

    @Test func theConnectionsAreDefensiveAndDoNotTrustTheSchema() throws {
        let dir = TemporaryDirectory()
        let account = try SoftchatAccount.open(path: dir.file("me.db"))
        defer { account.close() }
        #expect(try account.store.write("test") { db in try db.scalarInt("PRAGMA trusted_schema") } == 0)
        // SQLITE_DBCONFIG_DEFENSIVE: even with writable_schema the schema table cannot be written.
        let refused = try account.store.write("test") { db -> Bool in
            try db.execute("PRAGMA writable_schema = ON")
            do {
                try db.execute("UPDATE sqlite_schema SET sql = 'CREATE TABLE x(y)' WHERE name = 'events'")
                return false
            } catch {
                return true
            }
        }
        #expect(refused)
    }

    @Test func aRelayURLThatCouldInjectIsNeverStored() throws {
        let dir = TemporaryDirectory()
        let account = try SoftchatAccount.open(path: dir.file("me.db"))
        defer { account.close() }
        let note = try StorageKeys.alice.sign(UnsignedEvent(createdAt: t0, kind: 1, tags: [], content: "x"))
        expectSoftchatError(.invalidRelayUrl, mentioning: ["enqueueSigned", "control character"]) {
            _ = try account.outgoing.enqueueSigned(
                operationID: "op", events: [note], relayURLs: ["wss://ok.example", "wss://r.example/\r\nX-Injected: 1"], now: t0)
        }
        expectSoftchatError(.invalidRelayUrl, mentioning: ["setSubscription"]) {
            try account.setSubscription(id: "s", filtersJSON: ["{}"], relayURL: "wss://r.example/ x")
        }
        #expect(try account.store.write("test") { db in try db.scalarInt("SELECT COUNT(*) FROM publish_intents") } == 0)
        #expect(try account.store.write("test") { db in try db.scalarInt("SELECT COUNT(*) FROM subscription_policy") } == 0)
    }
}

/// What the account trusts on read-back: a file edited behind its back (a tampered or imported
/// account) cannot pass `check` as an account of verified events.
@Suite struct AccountTamperTests {
    @Test func checkReportsAStoredEventWhoseSignatureNoLongerVerifies() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("me.db")
        let notes = (0..<5).map { signed(content: "note \($0)", createdAt: t0 + Int64($0)) }
        do {
            let account = try SoftchatAccount.open(path: path)
            defer { account.close() }
            _ = try account.incoming.ingest(notes, receivedAt: t0)
            #expect(try account.check(now: t0).ok)
        }
        // Another program swaps one event's signature for another event's: its id still matches
        // its fields, so only the signature check can tell.
        let victim = notes[2]
        let forged = victim.jsonText.replacingOccurrences(of: victim.sig, with: notes[3].sig)
        #expect(forged != victim.jsonText)
        var raw: OpaquePointer?
        #expect(sqlite3_open(path, &raw) == SQLITE_OK)
        let update = "UPDATE events SET json = '\(forged.replacingOccurrences(of: "'", with: "''"))' WHERE id = '\(victim.id)'"
        #expect(sqlite3_exec(raw, update, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(raw)
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        let report = try account.check(now: t0)
        #expect(!report.ok)
        #expect(
            report.problems.contains { $0.contains("1 stored events fail id or signature verification") && $0.contains(victim.id) },
            "\(report.problems)")
    }
}

/// Opening an account waits for a lock another process holds (a reader recovering the WAL after
/// a crash, a writer) instead of failing at once: the busy timeout is set before the first
/// statement. (It was set after the identity check and the journal mode, so an app restarted
/// after a crash failed to open its account now and then.)
@Suite struct AccountOpenLockTests {
    @Test func openingWaitsForALockAnotherConnectionHoldsBriefly() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("locked.db")
        try SoftchatAccount.open(path: path).close()
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        // Exclusive locking mode plus a write: every other connection is locked out, readers too.
        #expect(sqlite3_exec(db, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE held (x); COMMIT;", nil, nil, nil) == SQLITE_OK)
        let holder = UInt(bitPattern: db)
        let release = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            let handle = OpaquePointer(bitPattern: holder)
            sqlite3_close(handle)
        }
        release.start()
        let started = Date()
        let account = try SoftchatAccount.open(path: path)
        #expect(Date().timeIntervalSince(started) >= 0.2, "the open waited for the lock")
        account.close()
    }
}
