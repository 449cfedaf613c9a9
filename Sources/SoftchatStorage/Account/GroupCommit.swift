import Dispatch
import SoftchatCore
import Synchronization

// Group commit for senders: concurrent `enqueueSigned`/`messages.send` calls share one
// transaction, so one `fdatasync` makes a group of messages durable, not one each. One sender at
// a time leads: once the writer is free it takes every write waiting (at most `maxGroupCommit`),
// runs each in a savepoint of its own (a failing one rolls back alone), commits once and wakes
// their senders, each of whom returns only then. A leader whose own write is done hands the lead
// to the oldest waiting sender.

extension AccountStore {
    /// A sender's write (`enqueueSigned`, `messages.send`): as ``write(_:observed:_:)``, but
    /// committed together with every other sender's write waiting for the writer (inside a
    /// write group on this thread, a savepoint of the group's, as any write).
    func senderWrite<R>(_ call: String, _ body: @escaping (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        if groupThread.load(ordering: .acquiring) == Self.currentThread, groupSlot.db != nil {
            return try write(call, observed: true, body)
        }
        return try groupedWrite(call, observed: true, body)
    }

    /// A sender's write waiting to join the next group commit (``senderWrite(_:_:)``).
    final class CommitMember: @unchecked Sendable {
        // @unchecked: `result` is written by the thread that leads the member's group, before it
        // signals `wake`; the member's own thread reads it after waiting on `wake` (or after
        // committing it itself).
        let call: String
        let run: (SQLiteConnection) -> Result<Any, SoftchatError>
        var result: Result<Any, SoftchatError>?
        /// Signalled once `result` is set, or when this member is to lead the next group.
        let wake = DispatchSemaphore(value: 0)

        init(call: String, run: @escaping (SQLiteConnection) -> Result<Any, SoftchatError>) {
            self.call = call
            self.run = run
        }
    }

    /// The senders' writes waiting for a group commit, and whether a sender leads (commits
    /// groups) now.
    struct CommitQueue {
        var waiting: [CommitMember] = []
        var leading = false
    }

    /// The most writes one group commit takes.
    static let maxGroupCommit = 256

    /// The senders' write: queued, then committed with every sender's write waiting, so
    /// concurrent senders share one `fdatasync`. It returns only after the transaction holding
    /// it committed; a write that fails rolls back only itself.
    func groupedWrite<R>(_ call: String, observed: Bool, _ body: @escaping (SQLiteConnection) throws -> R) throws(SoftchatError) -> R {
        let member = CommitMember(call: call) { db in Self.mapped(call) { try db.savepoint { try body(db) as Any } } }
        let leads: Bool = commitQueue.withLock { q in
            q.waiting.append(member)
            guard !q.leading else { return false }
            q.leading = true
            return true
        }
        if !leads { member.wake.wait() }
        if member.result == nil {
            // Leading: commit groups, oldest first, until this one's write is in one; then hand on.
            while member.result == nil { commitGroup(leader: member) }
            commitQueue.withLock { q in
                if let next = q.waiting.first { next.wake.signal() } else { q.leading = false }
            }
        }
        let result = member.result!
        if observed, result.isSuccess { live.settle() }
        switch result {
        case .success(let value): return value as! R
        case .failure(let error): throw error
        }
    }

    /// Commits the oldest writes waiting when the writer comes free (at most `maxGroupCommit`)
    /// in one transaction and wakes their senders (the leader's own thread needs no waking).
    func commitGroup(leader: CommitMember) {
        // Taken once the writer is free: everything that queued while it was busy joins.
        let group: [CommitMember] = writer.with { db in
            let group: [CommitMember] = commitQueue.withLock { q in
                let group = Array(q.waiting.prefix(Self.maxGroupCommit))
                q.waiting.removeFirst(group.count)
                return group
            }
            guard let db else {
                let closed = SoftchatError.invalidPersistenceResult("\(leader.call): the account is closed", operation: .relayIngestion)
                for m in group { m.result = .failure(closed) }
                return group
            }
            var ended: SoftchatError?
            let committed = Self.mapped(leader.call) {
                try db.transaction(leader.call) {
                    for m in group {
                        if let ended {
                            m.result = .failure(Self.notRun(m.call, after: ended))
                            continue
                        }
                        m.result = m.run(db)
                        // SQLite rolled the whole transaction back itself: nothing more runs in it.
                        if case .failure(let error) = m.result!, !db.inTransaction { ended = error }
                    }
                    if let ended { throw ended }
                }
            }
            if case .failure(let error) = committed {
                for m in group where m.result?.isSuccess != false { m.result = .failure(error) }
            }
            afterTransaction(db, committed: committed.isSuccess)
            return group
        }
        for m in group where m !== leader { m.wake.signal() }
    }

    /// How many senders' writes wait for a group commit (tests).
    var waitingWrites: Int { commitQueue.withLock { $0.waiting.count } }
}
