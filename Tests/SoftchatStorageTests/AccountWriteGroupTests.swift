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

    @Test func aClosedAccountRefusesAGroup() throws {
        let t = try TestAccount()
        t.account.close()
        #expect(throws: SoftchatError.self) { try t.account.writeGroup("test") { 1 } }
    }
}
