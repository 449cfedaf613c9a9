public import SoftchatCore

/// Delivery leases: claim committed work, mark socket writes, apply relay results, release.
/// Only `applyResults` changes durable terminal state; a socket write is never acceptance.
public struct AccountDelivery: Sendable {
    let store: AccountStore

    /// Claims up to `max` (1–256) `pending`/`retryable` intents for `relayURL` — and work whose
    /// lease expired (crash recovery) — under a new lease; nil when there is nothing to do.
    /// Intents that used up the retry budget end `rejected` / `exhausted` instead.
    ///
    /// - Parameters:
    ///   - leaseID: The new lease's id, never used before on this account.
    ///   - relayURL: The relay whose intents to claim.
    ///   - now: The current Unix time, in seconds; the lease expires `leaseSeconds` after it.
    ///   - max: The most intents to claim, 1 to 256.
    /// - Returns: The claim and one payload (intent, event id, event JSON) per intent, in publish
    ///   order; nil when nothing is claimable (no lease is created then).
    /// - Throws: `SoftchatError` with code `invalid_relay_batch` when `max` is outside 1–256,
    ///   `invalid_delivery_state` for an empty or already used `leaseID`, `account_storage_failed`
    ///   when SQLite fails, or `invalid_persistence_result` once the account is closed.
    public func claim(leaseID: String, relayURL: String, now: Int64, max: Int = 256) throws(SoftchatError) -> DeliveryClaimResult? {
        try claim(leaseID: leaseID, relayURL: relayURL, now: now, max: max, owner: nil)
    }

    /// Registers this process as a live owner of delivery leases (see ``DeliveryOwner``): keep the
    /// value for as long as the process delivers, and pass it to
    /// ``claim(leaseID:relayURL:now:max:owner:)``.
    ///
    /// - Parameter id: The owner's id, unique per process run: 1 to 64 letters, digits, `-`, `_`
    ///   or `.`.
    /// - Returns: The owner, holding its lock until it is closed or released.
    /// - Throws: `SoftchatError` with code `invalid_delivery_state` for an invalid id or one a live
    ///   owner holds, `account_storage_failed` when the lock file cannot be made.
    public func registerOwner(id: String) throws(SoftchatError) -> DeliveryOwner {
        try DeliveryOwner.register(id: id, accountPath: store.path)
    }

    /// Claims as ``claim(leaseID:relayURL:now:max:)`` does, for `owner`: the lease records it,
    /// and work under an unexpired lease of an owner that is no longer alive (its process died)
    /// is claimed at once, its leases expired.
    ///
    /// - Parameters:
    ///   - leaseID: The new lease's id, never used before on this account.
    ///   - relayURL: The relay whose intents to claim.
    ///   - now: The current Unix time, in seconds; the lease expires `leaseSeconds` after it.
    ///   - max: The most intents to claim, 1 to 256.
    ///   - owner: The live owner claiming, or nil for a lease that only time ends.
    /// - Returns: The claim and its payloads, in publish order; nil when nothing is claimable.
    /// - Throws: As ``claim(leaseID:relayURL:now:max:)``.
    public func claim(leaseID: String, relayURL: String, now: Int64, max: Int, owner: DeliveryOwner?) throws(SoftchatError)
        -> DeliveryClaimResult?
    {
        guard max >= 1 && max <= RelayWireContract.maxBatchEvents.value else {
            throw .invalidRelayBatch("claim: max must be 1 to \(RelayWireContract.maxBatchEvents.value), not \(max)", operation: .relayPublish)
        }
        guard !leaseID.isEmpty else { throw .invalidDeliveryState("claim: leaseId must not be empty", operation: .relayPublish) }
        // Unsynced (a claim lost in a power cut is claimed again), unless it would end work past
        // its retry budget: that end is reported, so its claim runs again, synced.
        let unsynced = try store.write("claim", synced: false) { db in
            try claim(db, leaseID: leaseID, relayURL: relayURL, now: now, max: max, owner: owner, endingWork: false)
        }
        if case .claimed(let result) = unsynced { return result }
        let synced = try store.write("claim") { db in
            try claim(db, leaseID: leaseID, relayURL: relayURL, now: now, max: max, owner: owner, endingWork: true)
        }
        guard case .claimed(let result) = synced else {
            throw .invalidPersistenceResult("claim: the synced claim asked to be synced", operation: .relayPublish)
        }
        return result
    }

    /// What a claim's transaction did: claimed (or found nothing to claim), or stopped before
    /// ending work past its retry budget, which needs a synced commit.
    enum ClaimStep {
        case claimed(DeliveryClaimResult?)
        case endsWork
    }

    /// The claim, inside the caller's transaction. `endingWork` false: returns `.endsWork`
    /// (having changed nothing the caller reports) when work past its budget would end.
    func claim(
        _ db: SQLiteConnection, leaseID: String, relayURL: String, now: Int64, max: Int, owner: DeliveryOwner?, endingWork: Bool
    ) throws -> ClaimStep {
        let budget = Int64(store.policy.retryBudget)
        let expiresAt = now + store.policy.leaseSeconds
        if try db.statement("SELECT 1 FROM delivery_leases WHERE lease_id = ?").bind(.text(leaseID)).step() {
            throw SoftchatError.invalidDeliveryState("claim: lease \(leaseID) was already used", operation: .relayPublish)
        }
        let owners = store.version >= 7
        if owners { try Self.expireDeadOwners(db, relayURL: relayURL, now: now, except: owner?.id, accountPath: store.path) }
        // Work is claimable when no live lease holds it. Found through the (relay, state) index
        // among the relay's unfinished intents only, each one's lease looked up by key: the
        // relay's finished intents and the leases kept with them grow for ever.
        let ended = "EXISTS (SELECT 1 FROM delivery_leases l WHERE l.lease_id = publish_intents.lease_id AND (l.released = 1 OR l.expires_at <= ?))"
        let claimable = """
            relay_url = ? AND state IN \(DeliveryState.sql(.pending, .retryable, .inFlight)) AND (
              (state IN \(DeliveryState.sql(.pending, .retryable)) AND (lease_id IS NULL OR \(ended)))
              OR (state = \(DeliveryState.inFlight.sql) AND \(ended)))
            """
        // Failures so far, with the answer lost when in-flight work is taken back (below).
        let spent = store.version >= 8 ? "failures + (state = \(DeliveryState.inFlight.sql))" : "attempts"
        let counted = store.version >= 8 ? "failures = \(spent), " : ""
        // Claimable work whose budget is spent: ended rejected/exhausted by this claim.
        let spentWork = "\(spent) >= ? AND \(claimable)"
        if !endingWork {
            let ends = try db.statement("SELECT 1 FROM publish_intents WHERE \(spentWork) LIMIT 1")
                .bind(.int(budget), .text(relayURL), .int(now), .int(now)).step()
            if ends { return .endsWork }
        }
        try db.statement(
            "UPDATE publish_intents SET \(counted)state = \(DeliveryState.rejected.sql), category = 'exhausted', message = 'retry budget of \(budget) failed attempts used', lease_id = NULL, updated_at = ? WHERE \(spentWork)"
        )
        .bind(.int(now), .int(budget), .text(relayURL), .int(now), .int(now)).run()
        let select = try db.statement("SELECT intent_id FROM publish_intents WHERE \(claimable) ORDER BY sequence LIMIT ?")
            .bind(.text(relayURL), .int(now), .int(now), .int(Int64(max)))
        var ids: [String] = []
        while try select.step() { ids.append(select.text(0)) }
        guard !ids.isEmpty else { return .claimed(nil) }
        if store.leasePruneDue(now: now) { try Self.pruneLeases(db, now: now) }
        if owners {
            try db.statement(
                "INSERT INTO delivery_leases (lease_id, relay_url, expires_at, released, created_at, owner) VALUES (?, ?, ?, 0, ?, ?)"
            )
            .bind(.text(leaseID), .text(relayURL), .int(expiresAt), .int(now), .optional(owner?.id)).run()
        } else {
            try db.statement("INSERT INTO delivery_leases (lease_id, relay_url, expires_at, released, created_at) VALUES (?, ?, ?, 0, ?)")
                .bind(.text(leaseID), .text(relayURL), .int(expiresAt), .int(now)).run()
        }
        // A lease whose work is taken again (it expired) is stale from now on: it can no
        // longer write, apply or release anything.
        let supersede = try db.statement(
            "UPDATE delivery_leases SET released = 1 WHERE released = 0 AND lease_id = (SELECT lease_id FROM publish_intents WHERE intent_id = ?)"
        )
        // Work taken back while in flight lost its answer with its owner (a crash, a lease
        // run out): that counts against the budget, so an event that kills its process every
        // time it is sent cannot loop for ever. A live session's timeout does not count.
        let take = try db.statement(
            store.version >= 8
                ? "UPDATE publish_intents SET failures = failures + (state = \(DeliveryState.inFlight.sql)), lease_id = ?, state = \(DeliveryState.pending.sql), updated_at = ? WHERE intent_id = ?"
                : "UPDATE publish_intents SET lease_id = ?, state = \(DeliveryState.pending.sql), updated_at = ? WHERE intent_id = ?")
        let eventOf = try db.statement("SELECT event_id FROM publish_intents WHERE intent_id = ?")
        let json = try db.statement("SELECT json FROM events WHERE \(store.layout.idCondition)")
        var payloads: [DeliveryPayload] = []
        for id in ids {
            try supersede.bind(.text(id)).run()
            supersede.reset()
            try take.bind(.text(leaseID), .int(now), .text(id)).run()
            take.reset()
            try eventOf.bind(.text(id))
            guard try eventOf.step() else { continue }
            let eventID = eventOf.text(0)
            eventOf.reset()
            try json.bind(.int(EventLayout.idKey(eventID)), .text(eventID))
            guard try json.step() else { continue }
            payloads.append(DeliveryPayload(intentID: id, eventID: eventID, eventJSON: json.text(0)))
            json.reset()
        }
        return .claimed(DeliveryClaimResult(claim: DeliveryClaim(leaseID: leaseID, relayURL: relayURL, expiresAt: expiresAt), payloads: payloads))
    }

    /// When work for `relayURL` that another live lease holds becomes claimable: the earliest
    /// expiry among the unexpired, unreleased leases holding its unfinished intents; nil when no
    /// such lease holds any. A claim that found nothing asks again then, instead of waiting for
    /// the next keepalive.
    ///
    /// - Parameters:
    ///   - relayURL: The relay whose intents to look at.
    ///   - now: The current Unix time, in seconds.
    /// - Returns: The Unix time at which the first such lease expires, or nil.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func heldUntil(relayURL: String, now: Int64) throws(SoftchatError) -> Int64? {
        try store.read("heldUntil") { db in
            let s = try db.statement(
                """
                SELECT MIN(l.expires_at) FROM delivery_leases l
                WHERE l.relay_url = ? AND l.released = 0 AND l.expires_at > ?
                  AND EXISTS (SELECT 1 FROM publish_intents i WHERE i.lease_id = l.lease_id AND i.state IN \(DeliveryState.sql(.pending, .retryable, .inFlight)))
                """
            ).bind(.text(relayURL), .int(now))
            guard try s.step(), !s.isNull(0) else { return nil }
            return s.int64(0)
        }
    }

    /// Expires, as of `now`, the unexpired leases for `relayURL` whose owner is no longer alive
    /// (see ``DeliveryOwner``), so their work is claimable at once.
    static func expireDeadOwners(_ db: SQLiteConnection, relayURL: String, now: Int64, except mine: String?, accountPath: String) throws {
        guard DeliveryOwner.folder(forAccount: accountPath) != nil else { return }
        let owners = try db.statement(
            "SELECT DISTINCT owner FROM delivery_leases WHERE relay_url = ? AND released = 0 AND expires_at > ? AND owner IS NOT NULL"
        ).bind(.text(relayURL), .int(now))
        var dead: [String] = []
        while try owners.step() {
            let id = owners.text(0)
            if id != mine, !DeliveryOwner.isAlive(id: id, accountPath: accountPath) { dead.append(id) }
        }
        let expire = try db.statement("UPDATE delivery_leases SET expires_at = ? WHERE owner = ? AND released = 0 AND expires_at > ?")
        for id in dead {
            try expire.bind(.int(now), .text(id), .int(now)).run()
            expire.reset()
        }
    }

    /// The socket write of these claimed intents succeeded: `pending` → `inFlight`, one attempt
    /// counted each. All or nothing: a stale claim, or an intent not pending under it, fails the
    /// call and changes nothing.
    ///
    /// - Parameters:
    ///   - claim: The live claim that holds the intents.
    ///   - intentIDs: The intents the written frame carried, each `pending` under `claim`.
    /// - Throws: `SoftchatError` with code `invalid_delivery_state` for a stale or unknown claim or
    ///   an intent that is unknown, held by another lease or not `pending`;
    ///   `account_storage_failed` when SQLite fails; `invalid_persistence_result` once the account
    ///   is closed.
    public func markSocketWritten(_ claim: DeliveryClaim, intentIDs: [String]) throws(SoftchatError) {
        try store.write("markSocketWritten", synced: false) { db in
            try Self.requireLive(db, claim)
            try Self.requireHeld(db, claim, intentIDs, states: [.pending], call: "markSocketWritten")
            let update = try db.statement(
                "UPDATE publish_intents SET state = \(DeliveryState.inFlight.sql), attempts = attempts + 1 WHERE intent_id = ?")
            for id in intentIDs {
                try update.bind(.text(id)).run()
                update.reset()
            }
        }
    }

    /// Applies relay decisions in one transaction: accepted/rejected are terminal; retryable
    /// returns the intent to the pool (or ends it `rejected` / `exhausted` past the budget).
    ///
    /// - Parameters:
    ///   - claim: The live claim that holds the intents.
    ///   - results: One terminal or retryable decision per intent, each intent once, for intents
    ///     `pending` or `inFlight` under `claim`.
    /// - Throws: `SoftchatError` with code `invalid_delivery_state` for a stale or unknown claim, an
    ///   intent named twice, a `pending` or `inFlight` decision, or an intent that is unknown, held
    ///   by another lease or already decided (nothing is applied then); `account_storage_failed`
    ///   when SQLite fails; `invalid_persistence_result` once the account is closed.
    public func applyResults(_ claim: DeliveryClaim, results: [DeliveryResult]) throws(SoftchatError) {
        let budget = Int64(store.policy.retryBudget)
        try store.write("applyResults") { db in
            try Self.requireLive(db, claim)
            guard Set(results.map(\.intentID)).count == results.count else {
                throw SoftchatError.invalidDeliveryState("applyResults: an intent appears twice", operation: .relayPublish)
            }
            for r in results where r.decision.state == .pending || r.decision.state == .inFlight {
                throw SoftchatError.invalidDeliveryState(
                    "applyResults: intent \(r.intentID) has non-result state \(r.decision.state.rawValue)", operation: .relayPublish)
            }
            try Self.requireHeld(db, claim, results.map(\.intentID), states: [.inFlight, .pending], call: "applyResults")
            let terminal = try db.statement("UPDATE publish_intents SET state = ?, category = ?, message = ?, lease_id = NULL WHERE intent_id = ?")
            // The budget counts failures the relay reported (`error:`, an unknown prefix), not a
            // rate limit, an auth-required, a timeout, a lost connection or a cancel: those say
            // "later", and an event must not run out of tries because a relay was busy or away.
            let retry = try db.statement(
                store.version >= 8
                    ? """
                    UPDATE publish_intents SET
                      failures = failures + ?1,
                      state = CASE WHEN failures + ?1 >= ?2 THEN \(DeliveryState.rejected.sql) ELSE \(DeliveryState.retryable.sql) END,
                      category = CASE WHEN failures + ?1 >= ?2 THEN 'exhausted' ELSE ?3 END,
                      message = ?4, lease_id = NULL WHERE intent_id = ?5
                    """
                    : """
                    UPDATE publish_intents SET
                      state = CASE WHEN attempts >= ?2 THEN \(DeliveryState.rejected.sql) ELSE \(DeliveryState.retryable.sql) END,
                      category = CASE WHEN attempts >= ?2 THEN 'exhausted' ELSE ?3 END,
                      message = ?4, lease_id = NULL WHERE intent_id = ?5
                    """)
            for r in results {
                if r.decision.state.isTerminal {
                    try terminal.bind(
                        .text(r.decision.state.rawValue), .text(r.decision.category.rawValue), .text(r.decision.message),
                        .text(r.intentID)
                    ).run()
                    terminal.reset()
                } else {
                    let failed: Int64 = r.decision.category.spendsRetryBudget ? 1 : 0
                    try retry.bind(.int(failed), .int(budget), .text(r.decision.category.rawValue), .text(r.decision.message), .text(r.intentID))
                        .run()
                    retry.reset()
                }
            }
        }
    }

    /// Extends a live claim's lease to `now` + the account's lease duration, so work that stays
    /// in flight longer than one lease (a slow relay, a long backoff) is not taken by another
    /// claim meanwhile. A stale claim is refused.
    ///
    /// - Parameters:
    ///   - claim: The claim to extend; not released, and its work not claimed again.
    ///   - now: The current Unix time, in seconds.
    /// - Returns: The claim with its new `expiresAt`.
    /// - Throws: `SoftchatError` with code `invalid_delivery_state` for a stale or unknown claim,
    ///   `account_storage_failed` when SQLite fails, or `invalid_persistence_result` once the
    ///   account is closed.
    public func renew(_ claim: DeliveryClaim, now: Int64) throws(SoftchatError) -> DeliveryClaim {
        let expiresAt = now + store.policy.leaseSeconds
        try store.write("renew") { db in
            try Self.requireLive(db, claim)
            try db.statement("UPDATE delivery_leases SET expires_at = ? WHERE lease_id = ?").bind(.int(expiresAt), .text(claim.leaseID)).run()
        }
        return DeliveryClaim(leaseID: claim.leaseID, relayURL: claim.relayURL, expiresAt: expiresAt)
    }

    /// Gives the claim's unfinished work back (`pending`) and ends the lease.
    ///
    /// - Parameter claim: The live claim to end.
    /// - Throws: `SoftchatError` with code `invalid_delivery_state` for a stale or unknown claim
    ///   (nothing is released), `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func release(_ claim: DeliveryClaim) throws(SoftchatError) {
        try store.write("release") { db in
            try Self.requireLive(db, claim)
            try db.statement(
                "UPDATE publish_intents SET state = \(DeliveryState.pending.sql), lease_id = NULL WHERE lease_id = ? AND state IN \(DeliveryState.sql(.pending, .inFlight, .retryable))"
            )
            .bind(.text(claim.leaseID)).run()
            try db.statement("UPDATE delivery_leases SET released = 1 WHERE lease_id = ?").bind(.text(claim.leaseID)).run()
        }
    }

    /// How long a lease row outlives its claim: a reused lease id is refused for that long.
    static let leaseRetentionSeconds: Int64 = 86_400

    /// How often a process prunes leases (an hour): the prune reads every lease, so a claim
    /// runs it at most this often, not once per claim.
    static let leasePruneSeconds: Int64 = 3_600

    /// Removes leases that ended (released or expired) more than a day after they began and that
    /// no intent names: one row per claim would otherwise grow for ever. An intent keeps its
    /// last lease, so the account's history and checks still find it.
    static func pruneLeases(_ db: SQLiteConnection, now: Int64) throws {
        try db.statement(
            """
            DELETE FROM delivery_leases WHERE created_at < ? AND (released = 1 OR expires_at <= ?)
              AND NOT EXISTS (SELECT 1 FROM publish_intents WHERE publish_intents.lease_id = delivery_leases.lease_id)
            """
        )
        .bind(.int(now - leaseRetentionSeconds), .int(now)).run()
    }

    /// The lease exists for this relay and was not released.
    static func requireLive(_ db: SQLiteConnection, _ claim: DeliveryClaim) throws {
        let s = try db.statement("SELECT relay_url, released FROM delivery_leases WHERE lease_id = ?").bind(.text(claim.leaseID))
        guard try s.step(), s.text(0) == claim.relayURL else {
            throw SoftchatError.invalidDeliveryState("claim \(claim.leaseID) does not exist for \(claim.relayURL)", operation: .relayPublish)
        }
        guard s.int64(1) == 0 else {
            throw SoftchatError.invalidDeliveryState(
                "claim \(claim.leaseID) was released, or expired and its work was claimed again; it is stale", operation: .relayPublish)
        }
    }

    /// Every intent is still held by this lease (not reclaimed after expiry) and in `states`.
    static func requireHeld(_ db: SQLiteConnection, _ claim: DeliveryClaim, _ intentIDs: [String], states: Set<DeliveryState>, call: String) throws {
        let s = try db.statement("SELECT lease_id, state FROM publish_intents WHERE intent_id = ?")
        for id in intentIDs {
            try s.bind(.text(id))
            guard try s.step() else {
                throw SoftchatError.invalidDeliveryState("\(call): no intent \(id)", operation: .relayPublish)
            }
            guard s.optionalText(0) == claim.leaseID else {
                throw SoftchatError.invalidDeliveryState(
                    "\(call): intent \(id) is not held by claim \(claim.leaseID) (stale claim)",
                    operation: .relayPublish)
            }
            let state = try s.deliveryState(1)
            guard states.contains(state) else {
                throw SoftchatError.invalidDeliveryState("\(call): intent \(id) is \(state)", operation: .relayPublish)
            }
            s.reset()
        }
    }
}

extension AccountDelivery {
    /// The intents a claim holds, with their event ids and states.
    ///
    /// - Parameter claim: The claim; whether it is still live is not checked.
    /// - Returns: The intent id, event id and state of each intent whose lease is the claim's, in
    ///   publish order.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func heldIntents(_ claim: DeliveryClaim) throws(SoftchatError) -> [(intentID: String, eventID: String, state: DeliveryState)] {
        try store.read("heldIntents") { db in
            let s = try db.statement("SELECT intent_id, event_id, state FROM publish_intents WHERE lease_id = ? ORDER BY sequence")
                .bind(.text(claim.leaseID))
            var out: [(String, String, DeliveryState)] = []
            while try s.step() { out.append((s.text(0), s.text(1), try s.deliveryState(2))) }
            return out
        }
    }

    /// Counts of the given intents per state (ids the account does not hold are not counted),
    /// so a caller waits for its own intents, not for everything the account ever queued.
    ///
    /// - Parameter intentIDs: The intents to count, as `enqueueSigned` returned them.
    /// - Returns: The number of those intents in each state; states with none are absent.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func stateCounts(intentIDs: [String]) throws(SoftchatError) -> [DeliveryState: Int] {
        try store.read("stateCounts") { db in
            var out: [DeliveryState: Int] = [:]
            var offset = 0
            while offset < intentIDs.count {
                let chunk = Array(intentIDs[offset..<min(offset + 500, intentIDs.count)])
                offset += chunk.count
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let s = try db.statement("SELECT state, COUNT(*) FROM publish_intents WHERE intent_id IN (\(marks)) GROUP BY state")
                    .bind(chunk.map { SQLValue.text($0) })
                while try s.step() { out[try s.deliveryState(0), default: 0] += Int(s.int64(1)) }
            }
            return out
        }
    }

    /// Counts of intents per state, optionally for one relay.
    ///
    /// - Parameter relayURL: The relay to count for; nil for every relay.
    /// - Returns: The number of intents in each state; states with none are absent.
    /// - Throws: `SoftchatError` with code `account_storage_failed` when SQLite fails, or
    ///   `invalid_persistence_result` once the account is closed.
    public func stateCounts(relayURL: String? = nil) throws(SoftchatError) -> [DeliveryState: Int] {
        try store.read("stateCounts") { db in
            let s = try db.statement("SELECT state, COUNT(*) FROM publish_intents WHERE ? IS NULL OR relay_url = ? GROUP BY state")
                .bind(.optional(relayURL), .optional(relayURL))
            var out: [DeliveryState: Int] = [:]
            while try s.step() { out[try s.deliveryState(0)] = Int(s.int64(1)) }
            return out
        }
    }
}
