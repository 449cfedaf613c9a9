import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
import SoftchatStorage

/// `softchat-dev torture --db FILE --seed N [--steps K] [--now T]`: the child process of
/// the crash harness (scripts/harness/crash-harness). A deterministic loop — every choice comes from
/// the seed — of ingest batches, enqueueSigned, claim, markSocketWritten, applyResults,
/// release and sync-cursor calls, with `now` advancing so leases expire. After each call
/// returns (its transaction committed), one acknowledgement line is printed and flushed, so a
/// SIGKILL at any point leaves a prefix of acknowledgements that must all hold on reopen.
enum AccountTortureCommand {
    static let help = """
        usage: softchat-dev torture --db FILE --seed N [--steps K] [--now T]

        Runs K (default 400) deterministic steps against the account at FILE, choices from seed
        N, starting at Unix time T (default 1700000000 + N * 1000000; give increasing T to runs
        on the same FILE so earlier leases have expired). After each call returns, one line,
        flushed at once:
          {"ack":"ingest","inserted":[…],"duplicates":[…],"quarantined":[…],"replaceable":[{"id","kind","pubkey","d","createdAt"}]}
          {"ack":"enqueue","operation":…,"events":[…],"relays":[…],"intents":[…]}   (events × relays, in order)
          {"ack":"claim","lease":…,"relay":…,"expiresAt":…,"intents":[…]}           (intents [] and no lease when nothing)
          {"ack":"written","lease":…,"intents":[…]}
          {"ack":"apply","lease":…,"results":[{"intentId":…,"state":"accepted|rejected|retryable"}]}
          {"ack":"release","lease":…}    {"ack":"cursor","relay":…,"subscription":…,"createdAt":…}
        A call refused as expected (a stale claim, a conflicting operation id) prints
        {"nack":CALL,"code":…}. A broken expectation prints {"violation":…} and exits 1.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--db", "--seed", "--steps", "--now"], switches: ["--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard let path = parsed.options["--db"] else { throw UsageError("torture needs --db FILE") }
        guard let seed = try parsed.int("--seed"), seed >= 0 else { throw UsageError("torture needs --seed N (N ≥ 0)") }
        let steps = try parsed.int("--steps") ?? 400
        let now = try parsed.int("--now") ?? 1_700_000_000 + seed * 1_000_000
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        var torture = Torture(account: account, seed: UInt64(seed), now: now)
        torture.emit(["start": .object(JSONObject(["seed": .integer(seed), "now": .integer(now), "steps": .integer(steps)]))])
        for step in 0..<Int(max(0, steps)) {
            try torture.step(step)
            if torture.violated { return .inputRejected }
        }
        torture.emit(["done": .integer(steps)])
        return .success
    }
}

extension SplitMix64 {
    /// The torture's choices: SplitMix64 is its only source of them, so a seed replays a run.
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}

struct Torture {
    let account: SoftchatAccount
    let seed: UInt64
    var now: Int64
    var rng: SplitMix64
    var violated = false

    // The same identities in every run, so replaceable rules and deletions meet across runs.
    static let authors = (0..<4).map { identity("torture author \($0)") }
    static let me = identity("torture self")
    static let relays = ["wss://t1.example", "wss://t2.example", "wss://t3.example"]

    static func identity(_ label: String) -> SoftchatIdentity {
        try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array(label.utf8))))
    }

    /// Events of this run, for duplicates and deletion targets.
    var history: [VerifiedEvent] = []
    /// Operations enqueued in this run: (id, events, relays, intents).
    var operations: [(id: String, events: [VerifiedEvent], relays: [String], intents: [String])] = []
    /// Claims of this run and the intents each still holds, with their state (pending or inFlight).
    var claims: [(claim: DeliveryClaim, intents: [String: DeliveryState])] = []
    var counter = 0

    init(account: SoftchatAccount, seed: UInt64, now: Int64) {
        self.account = account
        self.seed = seed
        self.now = now
        rng = SplitMix64(seed: seed &* 0x2545_F491_4F6C_DD1D ^ 0x7041_CCE5)
    }

    func emit(_ pairs: KeyValuePairs<String, JSONValue>) {
        Output.standard.line(JSONValue.object(JSONObject(pairs)).jsonText)
        Output.standard.flush()
    }

    mutating func violation(_ message: String) {
        emit(["violation": .string(message), "seed": .integer(Int64(seed))])
        violated = true
    }

    static func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }

    mutating func step(_ step: Int) throws {
        switch rng.int(0...99) {
        case 0..<24: try ingest(step)
        case 24..<38: try enqueue(step)
        case 38..<41: try repeatEnqueue()
        case 41..<60: try claim(step)
        case 60..<76: try written()
        case 76..<92: try apply()
        case 92..<96: try release()
        default: try cursor()
        }
        now += Int64(rng.int(0...6))
        if rng.chance(7) { now += Int64(rng.int(61...150)) }  // past the 60 s lease
    }

    // MARK: Events

    mutating func sign(_ identity: SoftchatIdentity, kind: Int, tags: [[String]], createdAt: Int64) -> VerifiedEvent {
        counter += 1
        let content = "torture \(seed) #\(counter)" + (rng.chance(8) ? " \u{0}\u{1F600} é" : "")
        let aux = rng.bytes(32)
        return try! identity.sign(UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content), auxRandom: aux)
    }

    mutating func randomEvent() -> VerifiedEvent {
        let a = rng.int(0...Self.authors.count - 1)
        let author = Self.authors[a]
        let kind = rng.pick([1, 1, 1, 1, 7, 14, 0, 3, 30023, 30023, 5])
        var tags: [[String]] = []
        switch kind {
        case 7: if let target = history.last { tags.append(["e", target.id]) }
        case 14: tags.append(["p", rng.pick(Self.authors).publicKeyHex])
        case 30023: tags.append(["d", rng.pick(["a", "b", "c"])])
        case 5:
            let own = history.filter { $0.pubkey == author.publicKeyHex }
            if let target = own.last, rng.chance(70) {
                tags.append(["e", target.id])
            } else {
                tags.append(["a", "30023:\(author.publicKeyHex):\(rng.pick(["a", "b", "c"]))"])
            }
        default: break
        }
        if rng.chance(30) { tags.append(["t", rng.pick(["chat", "nostr", "softchat"])]) }
        if rng.chance(6) {
            tags.append(["expiration", "\(now - Int64(rng.int(0...100)))"])
        } else if rng.chance(6) {
            tags.append(["expiration", "\(now + Int64(rng.int(1...300)))"])
        }
        let createdAt = now - Int64(rng.int(0...600))
        return sign(author, kind: kind, tags: tags, createdAt: createdAt)
    }

    mutating func ingest(_ step: Int) throws {
        var lines: [String] = []
        var batch: [VerifiedEvent] = []
        for _ in 0..<rng.int(1...48) {
            if rng.chance(5), let old = history.randomElement(using: &rng) {
                batch.append(old)
                lines.append(old.jsonText)
            } else if rng.chance(3) {
                lines.append("garbage \(seed) \(step) \(rng.int(0...1_000_000))")
            } else if rng.chance(3) {
                let e = randomEvent()
                var sig = Array(e.sig)
                sig[10] = sig[10] == "0" ? "1" : "0"
                lines.append(e.jsonValue.setting("sig", .string(String(sig))).jsonText)
            } else {
                let e = randomEvent()
                batch.append(e)
                lines.append(e.jsonText)
            }
        }
        let outcome = try account.incoming.ingest(lines: lines, receivedAt: now)
        let r = outcome.receipt
        history += batch.filter { r.insertedEventIDs.contains($0.id) }
        var replaceable: [JSONValue] = []
        var described: Set<String> = []
        for e in batch where [0, 3].contains(e.kind) || (10_000..<20_000).contains(e.kind) || (30_000..<40_000).contains(e.kind) {
            guard described.insert(e.id).inserted else { continue }
            let d: JSONValue = (30_000..<40_000).contains(e.kind) ? .string(e.firstTagValue("d") ?? "") : .null
            replaceable.append(
                .object(
                    JSONObject([
                        "id": .string(e.id), "kind": .integer(Int64(e.kind)), "pubkey": .string(e.pubkey), "d": d,
                        "createdAt": .integer(e.createdAt),
                    ])))
        }
        emit([
            "ack": "ingest", "inserted": Self.strings(r.insertedEventIDs), "duplicates": Self.strings(r.duplicateEventIDs),
            "quarantined": Self.strings(r.quarantinedEventIDs), "replaceable": .array(replaceable),
        ])
    }

    // MARK: Outgoing

    mutating func ownEvents() -> [VerifiedEvent] {
        var out: [VerifiedEvent] = []
        for _ in 0..<rng.int(1...4) {
            let roll = rng.int(0...9)
            let back = Int64(rng.int(0...50))
            let recipient = rng.pick(Self.authors).publicKeyHex
            switch roll {
            case 0: out.append(sign(Self.me, kind: 0, tags: [], createdAt: now - back))
            case 1, 2: out.append(sign(Self.me, kind: 1, tags: [["t", "chat"]], createdAt: now))
            default: out.append(sign(Self.me, kind: 14, tags: [["p", recipient]], createdAt: now))
            }
        }
        return out
    }

    mutating func relaySubset() -> [String] {
        var relays = Self.relays.filter { _ in rng.chance(50) }
        if relays.isEmpty { relays = [rng.pick(Self.relays)] }
        return relays
    }

    mutating func enqueue(_ step: Int) throws {
        let operation = "s\(seed)-op\(step)"
        let events = ownEvents()
        let relays = relaySubset()
        let intents = try account.outgoing.enqueueSigned(operationID: operation, events: events, relayURLs: relays, now: now)
        if intents.count != events.count * relays.count || Set(intents).count != intents.count {
            violation("enqueue \(operation): \(intents.count) intents for \(events.count) events × \(relays.count) relays")
        }
        operations.append((operation, events, relays, intents))
        emit([
            "ack": "enqueue", "operation": .string(operation), "events": Self.strings(events.map(\.id)),
            "relays": Self.strings(relays), "intents": Self.strings(intents),
        ])
    }

    /// The same operation again: the same content must give the same intents; different
    /// content must be refused with invalid_delivery_state.
    mutating func repeatEnqueue() throws {
        guard !operations.isEmpty else { return }
        let op = operations[rng.int(0...operations.count - 1)]
        if rng.chance(60) {
            let intents = try account.outgoing.enqueueSigned(operationID: op.id, events: op.events, relayURLs: op.relays, now: now)
            if intents != op.intents { violation("repeated enqueue \(op.id) gave different intents") }
            emit([
                "ack": "enqueue", "operation": .string(op.id), "events": Self.strings(op.events.map(\.id)),
                "relays": Self.strings(op.relays), "intents": Self.strings(intents), "repeat": true,
            ])
        } else {
            let more = op.events + ownEvents()
            do {
                _ = try account.outgoing.enqueueSigned(operationID: op.id, events: more, relayURLs: op.relays, now: now)
                violation("enqueue \(op.id) with different events was accepted")
            } catch {
                guard error.code == .invalidDeliveryState else { throw error }
                emit(["nack": "enqueue", "operation": .string(op.id), "code": .string(error.code.rawValue)])
            }
        }
    }

    // MARK: Delivery

    mutating func claim(_ step: Int) throws {
        let relay = rng.pick(Self.relays)
        let lease = "s\(seed)-L\(step)"
        let max = rng.chance(10) ? 256 : rng.int(1...12)
        guard let result = try account.delivery.claim(leaseID: lease, relayURL: relay, now: now, max: max) else {
            emit(["ack": "claim", "lease": .string(lease), "relay": .string(relay), "intents": []])
            return
        }
        let ids = result.payloads.map(\.intentID)
        // Work held by a live lease of this run must never be handed out again.
        for held in claims where held.claim.relayURL == relay && held.claim.expiresAt > now {
            if let taken = ids.first(where: { held.intents[$0] != nil }) {
                violation("claim \(lease) took intent \(taken) held by live lease \(held.claim.leaseID)")
            }
        }
        if ids.count > max || ids.isEmpty { violation("claim \(lease) returned \(ids.count) intents for max \(max)") }
        // Leases whose work was taken are stale now; forget those intents there.
        for i in claims.indices { for id in ids { claims[i].intents[id] = nil } }
        claims.append((result.claim, Dictionary(uniqueKeysWithValues: ids.map { ($0, DeliveryState.pending) })))
        emit([
            "ack": "claim", "lease": .string(lease), "relay": .string(relay), "expiresAt": .integer(result.claim.expiresAt),
            "createdAt": .integer(now), "intents": Self.strings(ids),
        ])
    }

    /// A refused delivery call is expected only from a lease that expired (its work may have
    /// been claimed again); from a live lease it is a violation.
    mutating func refused(_ call: String, _ index: Int, _ error: SoftchatError) {
        let claim = claims[index].claim
        if error.code == .invalidDeliveryState && claim.expiresAt <= now {
            emit(["nack": .string(call), "lease": .string(claim.leaseID), "code": .string(error.code.rawValue)])
        } else {
            violation("\(call) on lease \(claim.leaseID) (expires \(claim.expiresAt), now \(now)) failed: \(error)")
        }
        claims.remove(at: index)
    }

    mutating func written() throws {
        guard !claims.isEmpty else { return }
        let i = rng.int(0...claims.count - 1)
        let pending = claims[i].intents.filter { $0.value == .pending }.keys.sorted()
        guard !pending.isEmpty else { return }
        let chosen = pending.filter { _ in rng.chance(70) }
        guard !chosen.isEmpty else { return }
        do {
            try account.delivery.markSocketWritten(claims[i].claim, intentIDs: chosen)
        } catch {
            refused("written", i, error)
            return
        }
        for id in chosen { claims[i].intents[id] = .inFlight }
        emit(["ack": "written", "lease": .string(claims[i].claim.leaseID), "intents": Self.strings(chosen)])
    }

    mutating func apply() throws {
        guard !claims.isEmpty else { return }
        let i = rng.int(0...claims.count - 1)
        let held = claims[i].intents.keys.sorted().filter { _ in rng.chance(70) }
        guard !held.isEmpty else { return }
        var results: [DeliveryResult] = []
        for id in held {
            let roll = rng.int(0...99)
            let d: DeliveryDecision =
                roll < 35
                ? DeliveryDecision(eventID: "", state: .accepted, category: .accepted, message: "")
                : roll < 50
                    ? DeliveryDecision(eventID: "", state: .rejected, category: .blocked, message: "blocked: torture")
                    : roll < 75
                        ? DeliveryDecision(eventID: "", state: .retryable, category: .rateLimited, message: "rate-limited: torture")
                        : DeliveryDecision(eventID: "", state: .retryable, category: .error, message: "error: torture")
            results.append(DeliveryResult(intentID: id, decision: d))
        }
        do {
            try account.delivery.applyResults(claims[i].claim, results: results)
        } catch {
            refused("apply", i, error)
            return
        }
        for id in held { claims[i].intents[id] = nil }
        emit([
            "ack": "apply", "lease": .string(claims[i].claim.leaseID),
            "results": .array(
                results.map {
                    .object(JSONObject(["intentId": .string($0.intentID), "state": .string($0.decision.state.rawValue)]))
                }),
        ])
    }

    mutating func release() throws {
        guard !claims.isEmpty else { return }
        let i = rng.int(0...claims.count - 1)
        do {
            try account.delivery.release(claims[i].claim)
        } catch {
            refused("release", i, error)
            return
        }
        emit(["ack": "release", "lease": .string(claims[i].claim.leaseID)])
        claims.remove(at: i)
    }

    mutating func cursor() throws {
        let relay = rng.pick(Self.relays)
        let subscription = "sub\(rng.int(0...2))"
        let createdAt = now - Int64(rng.int(0...1_000))
        try account.advanceSyncCursor(relayURL: relay, subscriptionID: subscription, createdAt: createdAt, now: now)
        emit(["ack": "cursor", "relay": .string(relay), "subscription": .string(subscription), "createdAt": .integer(createdAt)])
    }
}

extension JSONValue {
    /// A copy of an object with member `key` replaced.
    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(let object) = self else { return self }
        return .object(JSONObject(members: object.members.map { $0.key == key ? .init(key: key, value: value) : $0 }))
    }
}
