public import SoftchatFaultProxy
public import SoftchatJSON
public import SoftchatTestRelay

/// One fault run's settings. Everything random in a run comes from `seed` (the proxies'
/// generators, the identities, the reconnect jitter), so a failing run replays with it.
public struct FaultRunOptions: Sendable {
    public var seed: UInt64
    /// Chat messages the sender publishes in all.
    public var events: Int
    /// Of those, how many are on the relay before the receiver starts (nil: half, but at
    /// least 520 so the first sync pages past the relay's 500-event cap).
    public var preloaded: Int?
    /// The live part is enqueued `batchSize` at a time, one batch per `batchIntervalMilliseconds`.
    public var batchSize = 25
    public var batchIntervalMilliseconds = 100
    /// The faults (its `seed` is replaced per proxy from `seed`).
    public var plan = FaultRunOptions.standardPlan
    /// Stop the receiver's transport halfway through the live part, close its account, reopen
    /// the same file and start again: a process restart.
    public var restartReceiver = true
    /// The managed transports' keepalive: short, so black holes are found within seconds.
    public var keepaliveIntervalMilliseconds: Int64 = 1_000
    public var readDeadlineMilliseconds: Int64 = 2_500
    public var acknowledgementTimeoutSeconds: Int64 = 3
    /// After the faults stop: wait this long for convergence at most…
    public var deadlineSeconds = 180.0
    /// …then this long more, to see that nothing changes after convergence.
    public var quietSeconds = 2.0
    /// Where the account files go (a directory that exists).
    public var directory: String

    public init(seed: UInt64, events: Int, directory: String) {
        self.seed = seed
        self.events = events
        self.directory = directory
    }

    /// The soak's faults: per relayed message, rare black holes, cuts and fragmentation,
    /// frequent cuts at page boundaries and inside stored-event bursts, some delays.
    public static var standardPlan: FaultPlan {
        var plan = FaultPlan()
        plan.blackHole = 0.0005
        plan.cut = 0.0005
        plan.cutAfterEndOfStoredEvents = 0.1
        plan.cutMidSync = 0.2
        plan.fragment = 0.0005
        plan.delay = 0.003
        plan.maxDelayMilliseconds = 200
        return plan
    }

    /// Denser faults for short CI runs (a few hundred events still meet every kind).
    public static var densePlan: FaultPlan {
        var plan = FaultPlan()
        plan.blackHole = 0.002
        plan.cut = 0.002
        plan.cutAfterEndOfStoredEvents = 0.25
        plan.cutMidSync = 0.4
        plan.fragment = 0.004
        plan.delay = 0.01
        plan.maxDelayMilliseconds = 200
        return plan
    }

    var preloadCount: Int { min(events, preloaded ?? max(events / 2, 520)) }
}

/// What one fault run found. `passed` only when nothing was lost, nothing rejected, every
/// intent terminal and accepted once in the sender's records, no lease left, both accounts
/// consistent.
public struct FaultRunResult: Sendable {
    public var seed: UInt64
    public var events: Int
    public var faults = FaultCounts()
    /// Reconnects of both transports (summed over the receiver's restart).
    public var reconnects = 0
    /// Connections given up because a keepalive ping went unanswered (black holes found).
    public var keepaliveTimeouts = 0
    public var seconds = 0.0
    /// Events the relay stores that the receiver does not hold.
    public var lost = 0
    /// Intents rejected (the test relay never answers OK false, so every one is a failure).
    public var rejected = 0
    /// Intents still pending, in flight or retryable.
    public var notTerminal = 0
    /// The sender's run intents in `accepted`, and all of its accepted intents.
    public var accepted = 0
    public var acceptedTotal = 0
    public var relayStored = 0
    public var receiverHeld = 0
    /// Rows the receiver returned beyond distinct ids (an event held twice).
    public var receiverDuplicates = 0
    /// Live leases left on both accounts after both transports stopped.
    public var liveLeases = 0
    /// `check()` problems of either account, and anything the run itself could not do.
    public var problems: [String] = []
    /// The convergence deadline passed before everything was in place.
    public var timedOut = false

    public init(seed: UInt64, events: Int) {
        self.seed = seed
        self.events = events
    }

    /// Every broken expectation, said plainly; empty when the run passed.
    public var failures: [String] {
        var out = problems
        if lost != 0 { out.append("\(lost) events lost at the receiver") }
        if rejected != 0 { out.append("\(rejected) intents rejected without an OK false") }
        if notTerminal != 0 { out.append("\(notTerminal) intents not terminal") }
        if accepted != events || acceptedTotal != events { out.append("accepted \(accepted) of \(events) (account total \(acceptedTotal))") }
        if relayStored != events { out.append("relay stores \(relayStored) of \(events)") }
        if receiverDuplicates != 0 { out.append("receiver holds \(receiverDuplicates) events twice") }
        if liveLeases != 0 { out.append("\(liveLeases) leases left held") }
        if timedOut { out.append("did not converge before the deadline") }
        return out
    }

    public var passed: Bool { failures.isEmpty }

    /// One line for people.
    public var line: String {
        let verdict = passed ? "PASS" : "FAIL (\(failures.joined(separator: "; ")))"
        return "seed=\(seed) events=\(events) \(faults.summary) reconnects=\(reconnects) keepaliveTimeouts=\(keepaliveTimeouts) "
            + "seconds=\(Int(seconds.rounded())) lost=\(lost) rejected=\(rejected) notTerminal=\(notTerminal) "
            + "accepted=\(accepted)/\(events) received=\(receiverHeld) leases=\(liveLeases) \(verdict)"
    }

    /// One JSON object.
    public var json: JSONValue {
        var f = JSONObject()
        f.append("blackHoles", .integer(Int64(faults.blackHoles)))
        f.append("fragmented", .integer(Int64(faults.fragmented)))
        f.append("pingsInjected", .integer(Int64(faults.pingsInjected)))
        f.append("cuts", .integer(Int64(faults.cuts)))
        f.append("cutsAfterEndOfStoredEvents", .integer(Int64(faults.cutsAfterEndOfStoredEvents)))
        f.append("cutsMidSync", .integer(Int64(faults.cutsMidSync)))
        f.append("delayed", .integer(Int64(faults.delayed)))
        f.append("connections", .integer(Int64(faults.connections)))
        f.append("informationRequests", .integer(Int64(faults.informationRequests)))
        f.append("relayed", .integer(Int64(faults.relayed)))
        var o = JSONObject()
        o.append("seed", .string(String(seed)))
        o.append("events", .integer(Int64(events)))
        o.append("faults", .object(f))
        o.append("reconnects", .integer(Int64(reconnects)))
        o.append("keepaliveTimeouts", .integer(Int64(keepaliveTimeouts)))
        o.append("seconds", .number(String((seconds * 10).rounded() / 10)))
        o.append("lost", .integer(Int64(lost)))
        o.append("rejected", .integer(Int64(rejected)))
        o.append("notTerminal", .integer(Int64(notTerminal)))
        o.append("accepted", .integer(Int64(accepted)))
        o.append("acceptedTotal", .integer(Int64(acceptedTotal)))
        o.append("relayStored", .integer(Int64(relayStored)))
        o.append("receiverHeld", .integer(Int64(receiverHeld)))
        o.append("liveLeases", .integer(Int64(liveLeases)))
        o.append("passed", .bool(passed))
        o.append("failures", .array(failures.map { .string($0) }))
        return .object(o)
    }
}
