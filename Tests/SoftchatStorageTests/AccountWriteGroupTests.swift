import SoftchatCore
import SoftchatTestSupport
import Testing

@testable import SoftchatStorage

/// Write groups (`writeGroup`): the managed transport's group commit. The writes of one I/O round
/// commit as one transaction, each write a savepoint that fails alone.
@Suite struct AccountWriteGroupTests {
    @Test func aGroupsWritesBecomeVisibleTogetherWhenItCommits() throws {
        let t = try TestAccount()
        let a = signed(kind: 1, content: "a", createdAt: t0)
        let b = signed(kind: 1, content: "b", createdAt: t0 + 1)
        var seenInside: [String] = []
        let failure: (any Error)? = try t.account.writeGroup("test") {
            do {
                try t.account.incoming.ingest([a], receivedAt: t0)
                // The reader connection sees only committed data: nothing of the group yet.
                seenInside = try t.served()
                try t.account.incoming.ingest([b], receivedAt: t0)
                return nil
            } catch {
                return error
            }
        }
        #expect(failure == nil)
        #expect(seenInside.isEmpty, "a write of the group was visible before the group committed")
        #expect(Set(try t.served()) == [a.id, b.id])
    }

    @Test func aWriteThatFailsInsideAGroupRollsBackOnlyItself() throws {
        let t = try TestAccount()
        let a = signed(kind: 1, content: "a", createdAt: t0)
        let b = signed(kind: 1, content: "b", createdAt: t0 + 1)
        let stale = DeliveryClaim(leaseID: "no-such-lease", relayURL: StorageKeys.relayA, expiresAt: t0 + 60)
        let failure: SoftchatError? = try t.account.writeGroup("test") {
            var failure: SoftchatError?
            do throws(SoftchatError) {
                try t.account.incoming.ingest([a], receivedAt: t0)
                do throws(SoftchatError) {
                    try t.account.delivery.applyResults(
                        stale,
                        results: [
                            DeliveryResult(
                                intentID: "nope", decision: DeliveryDecision(eventID: a.id, state: .accepted, category: .accepted, message: ""))
                        ])
                } catch {
                    failure = error
                }
                try t.account.incoming.ingest([b], receivedAt: t0)
            } catch {
                Issue.record("an ingest inside the group failed: \(error)")
            }
            return failure
        }
        #expect(failure?.code == .invalidDeliveryState)
        #expect(Set(try t.served()) == [a.id, b.id], "the writes around the failed one committed")
        #expect(try t.account.check(now: t0).ok)
    }

    /// Issue 45, path 9: a member that fails with SQLITE_FULL, which SQLite answers by rolling
    /// the whole transaction back. The next member's `SAVEPOINT` then began a transaction of its
    /// own and its `RELEASE` committed it: durable, yet reported failed with the group when the
    /// final COMMIT found no transaction. Now nothing more runs in the group, it fails, and
    /// nothing of it is on disk: what is reported is what is there. (A real SQLITE_FULL: the
    /// file may grow by 40 pages, the 300 KB event needs more.)
    @Test func aWriteAfterWhichSQLiteRolledTheGroupBackEndsItAndNothingOfItIsOnDisk() throws {
        let t = try TestAccount()
        let a = signed(kind: 1, content: "a", createdAt: t0)
        let huge = signed(kind: 1, content: String(repeating: "x", count: 300_000), createdAt: t0 + 1)
        let c = signed(kind: 1, content: "c", createdAt: t0 + 2)
        try t.account.store.write("limit") { db in
            let pages = try db.scalarInt("PRAGMA page_count")
            try db.execute("PRAGMA max_page_count = \(pages + 40)")
        }
        var results: [String] = []
        var groupError: SoftchatError?
        do throws(SoftchatError) {
            try t.account.writeGroup("test") {
                for (name, event) in [("a", a), ("huge", huge), ("c", c)] {
                    do throws(SoftchatError) {
                        _ = try t.account.incoming.ingest([event], receivedAt: t0)
                        results.append("\(name) stored")
                    } catch {
                        results.append("\(name) \(error.code.rawValue)")
                    }
                }
            }
        } catch {
            groupError = error
        }
        #expect(results == ["a stored", "huge account_storage_failed", "c account_storage_failed"], "\(results)")
        #expect(groupError?.code == .accountStorageFailed)
        #expect(groupError?.message.contains("13") == true, "SQLITE_FULL: \(groupError?.message ?? "")")
        #expect(try t.served().isEmpty, "SQLite undid a; c must not have run")
        // The account goes on: a group that fits commits as usual.
        let stored = try t.account.writeGroup("again") { try? t.account.incoming.ingest([a, c], receivedAt: t0) }
        #expect(stored != nil)
        #expect(Set(try t.served()) == [a.id, c.id])
        #expect(try t.account.check(now: t0).ok)
    }

    @Test func aClosedAccountRefusesAGroup() throws {
        let t = try TestAccount()
        t.account.close()
        #expect(throws: SoftchatError.self) { try t.account.writeGroup("test") { 1 } }
    }
}
