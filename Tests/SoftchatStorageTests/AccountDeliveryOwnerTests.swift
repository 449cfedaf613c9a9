import Foundation
import SoftchatCore
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// A process that dies (a crash, a SIGKILL) leaves leases that run for a minute; its owner lock
/// dies with it, so another process's claim takes the work at once. A live owner's work is never
/// taken, and a claim that finds work under a live lease learns when it expires.
@Suite struct AccountDeliveryOwnerTests {
    let relayA = StorageKeys.relayA
    let relayB = StorageKeys.relayB

    func events(_ n: Int) -> [VerifiedEvent] {
        (0..<n).map { signed(content: "owner test \($0)", createdAt: t0 + Int64($0)) }
    }

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    @Test func anOwnerHoldsALockFileOnlyItsUserCanReadAndOneIDOnce() throws {
        let t = try TestAccount()
        let owner = try t.account.delivery.registerOwner(id: "123-456")
        let file = t.path + ".owners/123-456"
        #expect(Self.mode(t.path + ".owners") == 0o700)
        #expect(Self.mode(file) == 0o600)
        #expect(DeliveryOwner.isAlive(id: "123-456", accountPath: t.path))
        expectSoftchatError(.invalidDeliveryState, mentioning: ["already registered"]) {
            _ = try t.account.delivery.registerOwner(id: "123-456")
        }
        for bad in ["", "../x", "a/b", ".", String(repeating: "a", count: 65), "a b", "a\u{0}b"] {
            expectSoftchatError(.invalidDeliveryState) { _ = try t.account.delivery.registerOwner(id: bad) }
        }
        owner.close()
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(!DeliveryOwner.isAlive(id: "123-456", accountPath: t.path))
        // A file left behind by a process that died holds no lock: dead, and removed.
        FileManager.default.createFile(atPath: file, contents: nil)
        #expect(!DeliveryOwner.isAlive(id: "123-456", accountPath: t.path))
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// `<account>.owners/` was trusted as found: another user's 0777 folder, or a symlink, was
    /// used, and that user could delete live lock files so that another process of the account
    /// took a live owner's work and delivered it twice.
    @Test func anOwnersFolderOthersCanWriteOrASymlinkIsRefusedAndProvesNoDeath() throws {
        let t = try TestAccount()
        let folder = t.path + ".owners"
        #expect(mkdir(folder, 0o777) == 0 && chmod(folder, 0o777) == 0)
        expectSoftchatError(.accountStorageFailed, mentioning: ["not trusted", "mode 777"]) {
            _ = try t.account.delivery.registerOwner(id: "run-1")
        }
        // A lock file nobody holds, in a folder others can write: not taken as a death.
        FileManager.default.createFile(atPath: folder + "/run-0", contents: nil)
        #expect(DeliveryOwner.isAlive(id: "run-0", accountPath: t.path))
        #expect(FileManager.default.fileExists(atPath: folder + "/run-0"), "nothing removed from a folder not ours")
        // A symlink to a private folder elsewhere is not followed.
        try FileManager.default.removeItem(atPath: folder)
        let elsewhere = t.path + ".elsewhere"
        #expect(mkdir(elsewhere, 0o700) == 0)
        #expect(symlink(elsewhere, folder) == 0)
        expectSoftchatError(.accountStorageFailed, mentioning: ["cannot open the folder"]) {
            _ = try t.account.delivery.registerOwner(id: "run-1")
        }
        #expect(DeliveryOwner.isAlive(id: "run-0", accountPath: t.path))
        try FileManager.default.removeItem(atPath: folder)
        // Another user's private folder (only root can make one here).
        if geteuid() == 0 {
            #expect(mkdir(folder, 0o700) == 0 && chown(folder, 65534, 65534) == 0)
            expectSoftchatError(.accountStorageFailed, mentioning: ["belongs to user 65534"]) {
                _ = try t.account.delivery.registerOwner(id: "run-1")
            }
            try FileManager.default.removeItem(atPath: folder)
        }
        // Its own folder again: registered, and a live owner is seen alive.
        let owner = try t.account.delivery.registerOwner(id: "run-1")
        #expect(DeliveryOwner.isAlive(id: "run-1", accountPath: t.path))
        owner.close()
        #expect(!DeliveryOwner.isAlive(id: "run-1", accountPath: t.path))
    }

    @Test func aDeadOwnersUnexpiredLeaseIsTakenAtOnceAndItsLostAnswerCounted() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(3), relayURLs: [relayA], now: t0)
        let dead = try t.account.delivery.registerOwner(id: "run-1")
        let first = try #require(try t.account.delivery.claim(leaseID: "run-1-1", relayURL: relayA, now: t0, max: 256, owner: dead))
        try t.account.delivery.markSocketWritten(first.claim, intentIDs: [ids[0], ids[1]])
        // The process dies: its lock goes; its lease still runs for a minute.
        dead.close()
        let next = try t.account.delivery.registerOwner(id: "run-2")
        let taken = try #require(try t.account.delivery.claim(leaseID: "run-2-1", relayURL: relayA, now: t0 + 1, max: 256, owner: next))
        #expect(taken.payloads.map(\.intentID) == ids)
        #expect(try t.scalar("SELECT SUM(failures) FROM publish_intents") == 2, "the two answers lost in flight")
        // The dead lease is stale: it can no longer apply anything.
        expectSoftchatError(.invalidDeliveryState) {
            try t.account.delivery.applyResults(first.claim, results: [DeliveryResult(intentID: ids[2], decision: decision(.accepted))])
        }
        #expect(try t.account.check(now: t0 + 1).ok)
    }

    @Test func aLiveOwnersWorkIsNeverTakenAndItsExpiryIsToldInstead() throws {
        let t = try TestAccount()
        let ids = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA, relayB], now: t0)
        let alive = try t.account.delivery.registerOwner(id: "alive")
        let held = try #require(try t.account.delivery.claim(leaseID: "alive-1", relayURL: relayA, now: t0, max: 256, owner: alive))
        #expect(held.claim.expiresAt == t0 + 60)
        let other = try t.account.delivery.registerOwner(id: "other")
        #expect(try t.account.delivery.claim(leaseID: "other-1", relayURL: relayA, now: t0 + 5, max: 256, owner: other) == nil)
        #expect(try t.account.delivery.heldUntil(relayURL: relayA, now: t0 + 5) == t0 + 60)
        // Another relay's work is free, and nothing holds relay B's after it is taken.
        #expect(try t.account.delivery.heldUntil(relayURL: relayB, now: t0 + 5) == nil)
        let b = try #require(try t.account.delivery.claim(leaseID: "other-2", relayURL: relayB, now: t0 + 5, max: 256, owner: other))
        #expect(b.payloads.count == 2)
        // Released work holds nothing.
        try t.account.delivery.release(held.claim)
        #expect(try t.account.delivery.heldUntil(relayURL: relayA, now: t0 + 6) == nil)
        _ = ids
        withExtendedLifetime(alive) {}
    }

    /// Issue 45, path 8: the account opened through a symlink found no lock in
    /// `<symlink>.owners/`, took the live owner's unexpired lease and charged it a failure;
    /// the live owner's next renewal was stale. Owners are found beside the canonical path now,
    /// and a second hard link (which no path tells apart) is refused at open.
    @Test func aLiveOwnerIsFoundThroughASymlinkAndAHardLinkedAccountIsRefused() throws {
        let t = try TestAccount()
        _ = try t.account.outgoing.enqueueSigned(operationID: "op", events: events(2), relayURLs: [relayA], now: t0)
        let alive = try t.account.delivery.registerOwner(id: "alive")
        let held = try #require(try t.account.delivery.claim(leaseID: "alive-1", relayURL: relayA, now: t0, max: 256, owner: alive))
        let alias = t.directory.file("link.sqlite")
        #expect(symlink(t.path, alias) == 0)
        let viaLink = try SoftchatAccount.open(path: alias)
        defer { viaLink.close() }
        #expect(DeliveryOwner.isAlive(id: "alive", accountPath: alias))
        let other = try viaLink.delivery.registerOwner(id: "other")
        #expect(try viaLink.delivery.claim(leaseID: "other-1", relayURL: relayA, now: t0 + 5, max: 256, owner: other) == nil)
        #expect(try viaLink.delivery.heldUntil(relayURL: relayA, now: t0 + 5) == t0 + 60)
        // The live owner's lease is still its own.
        #expect(try t.account.delivery.renew(held.claim, now: t0 + 30).expiresAt == t0 + 90)

        let hard = t.directory.file("hard.sqlite")
        #expect(link(t.path, hard) == 0)
        expectSoftchatError(.accountStorageFailed, mentioning: ["2 hard links", "one name"]) {
            _ = try SoftchatAccount.open(path: hard)
        }
        withExtendedLifetime((alive, other)) {}
    }
}
