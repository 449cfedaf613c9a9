import SoftchatClient
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatTestRelay
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat demo`: the main job. Starts the embedded relay on two loopback ports (or uses --relay),
/// creates two identities with SQLite accounts in a temporary folder, each with an inbox relay
/// list (kind 10050); alice sends batches of NIP-17 private messages to bob through her durable
/// account (each a kind-14 rumor sealed and gift-wrapped for bob and for herself) while bob
/// syncs his wraps and unwraps each once; bob replies; every delivery change and ingestion
/// receipt is printed; the connections are dropped mid-way to show recovery; a summary ends it.
enum DemoCommand {
    static let help = """
        usage: softchat demo [--relay URL[,URL…]] [--transport ws|noise] [--messages N] [--json] [--keep]

        Runs Softchat end to end on this machine: two embedded loopback relays on two ports (or
        the relays at URL…), two identities with SQLite accounts in a temporary folder, each
        publishing an inbox relay list (kind 10050). Alice sends N NIP-17 private messages to bob
        (default 24, in three batches): each a kind-14 rumor, sealed and gift-wrapped (kind 1059)
        for bob and for herself, committed as durable publish intents to the inbox relays. Bob
        syncs his wraps from every relay; each is unwrapped once, inside the transaction that
        stores it; bob replies. Each delivery state change and ingestion receipt is printed,
        every connection is dropped after the first batch to show recovery, and a summary ends
        the run (sent, accepted intents, received, unwraps, duplicates, time).
        --keep leaves the temporary folder in place and prints its path; --keys-out DIR writes
        the two identities' secret keys to DIR/alice.key and DIR/bob.key (mode 0600).
        --auth makes the embedded relay require NIP-42 authentication.
        --transport noise serves the embedded relay over Noise (noise://…?pattern=IK&key=…:
        WebSocket inside a Noise_IK_25519_ChaChaPoly_SHA256 channel, the relay pinned by its
        static key); each account's Noise static key is created beside its database.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args, valued: ["--relay", "--messages", "--keys-out", "--transport"], switches: ["--json", "--keep", "--auth", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let total = Int(try parsed.int("--messages") ?? 24)
        guard total >= 3 && total <= 3 * RelayPublishContract.maxPublishBatchEvents.value else {
            throw UsageError("--messages must be 3 to \(3 * RelayPublishContract.maxPublishBatchEvents.value)")
        }
        let transportKind = parsed.options["--transport"] ?? "ws"
        guard transportKind == "ws" || transportKind == "noise" else { throw UsageError("--transport must be ws or noise") }
        let printer = DemoPrinter(json: parsed.has("--json"))
        let started = monotonic()

        var embedded: [TestRelay] = []
        let relayURLs: [String]
        if parsed.options["--relay"] != nil {
            relayURLs = try NetworkOptions.relays(parsed)!
            if transportKind == "noise" && relayURLs.contains(where: { !$0.lowercased().hasPrefix("noise://") }) {
                throw UsageError("--transport noise needs noise:// --relay URLs (or no --relay: the embedded relays)")
            }
            for url in relayURLs { printer.say("relay", ["url": .string(url), "embedded": false], "relay      \(url)") }
        } else {
            var options = TestRelayOptions()
            if transportKind == "noise" { options.noise = TestRelayNoise(patterns: [.IK, .XX]) }
            options.requireAuth = parsed.has("--auth")
            do {
                for _ in 0..<2 { embedded.append(try TestRelay(options: options)) }
            } catch {
                throw RuntimeFailure(code: "relay_failed", message: "cannot start the embedded relay: \(error)")
            }
            relayURLs = embedded.map(\.url)
            for url in relayURLs {
                printer.say(
                    "relay", ["url": .string(url), "embedded": true, "transport": .string(transportKind)],
                    "relay      embedded loopback relay at \(url) (NIP-01, NIP-11, NIP-42, NIP-45, EVENTS batches"
                        + (transportKind == "noise" ? "; WebSocket over Noise_IK_25519_ChaChaPoly_SHA256, prologue softchat-relay/1)" : ")"))
            }
        }
        defer { for relay in embedded { relay.stop() } }

        let folder = try TemporaryFolder(keep: parsed.has("--keep"))
        let alice = SoftchatIdentity.generate()
        let bob = SoftchatIdentity.generate()
        if let dir = parsed.options["--keys-out"] {
            // The demo's identities as 0600 key files, for keeping them (or auditing the output).
            do {
                try alice.writeSecretKeyFile(path: dir + "/alice.key")
                try bob.writeSecretKeyFile(path: dir + "/bob.key")
            } catch {
                throw RuntimeFailure(code: "key_file", message: error.description)
            }
        }
        let aliceAccount = try SoftchatAccount.open(path: folder.path + "/alice.db")
        let bobAccount = try SoftchatAccount.open(path: folder.path + "/bob.db")
        defer {
            aliceAccount.close()
            bobAccount.close()
        }
        printer.say(
            "accounts", ["alice": .string(alice.publicKeyHex), "bob": .string(bob.publicKeyHex), "folder": .string(folder.path)],
            "accounts   alice \(alice.publicKeyHex.prefix(12))…  bob \(bob.publicKeyHex.prefix(12))…  (SQLite in \(folder.path))")

        // Private messages (NIP-17): each account unwraps the gift wraps addressed to it inside
        // the transaction that stores them, follows its own wraps and the other's inbox list
        // (kind 10050), and publishes its own list naming the relays.
        let now = Int64(time(nil))
        for (me, other, account) in [(alice, bob, aliceAccount), (bob, alice, bobAccount)] {
            try account.messages.unlock(me, now: now)  // and keeps its wraps and own list synced
            try account.messages.watchInboxLists(publicKeys: [other.publicKeyHex])
            let list = try me.sign(UnsignedEvent(createdAt: now, kind: 10050, tags: relayURLs.map { ["relay", $0] }, content: ""))
            _ = try account.outgoing.enqueueSigned(operationID: "inbox-list", events: [list], relayURLs: relayURLs, now: now)
        }
        printer.say(
            "inbox", ["relays": .integer(Int64(relayURLs.count))],
            "inbox      alice and bob each publish an inbox relay list (kind 10050) naming the \(relayURLs.count) relays")
        var policy = ManagedTransportPolicy()
        policy.session.jitterSeed = 7
        policy.session.reconnectBaseDelaySeconds = 1
        let counters = DemoCounters()
        let bobPolicy = observed(policy, name: "bob", printer: printer, counters: counters)
        let alicePolicy = observed(policy, name: "alice", printer: printer, counters: counters)
        let bobTransport = try bobAccount.startManagedTransport(relays: relayURLs, identity: bob, policy: bobPolicy)
        let aliceTransport = try aliceAccount.startManagedTransport(relays: relayURLs, identity: alice, policy: alicePolicy)
        defer {
            aliceTransport.stop()
            bobTransport.stop()
        }
        // A message needs its recipient's list: wait until each account holds the other's.
        let listsKnown = try waitUntil(seconds: 20) {
            let aliceKnows = !(try aliceAccount.messages.inboxRelays(publicKey: bob.publicKeyHex).isEmpty)
            let bobKnows = !(try bobAccount.messages.inboxRelays(publicKey: alice.publicKeyHex).isEmpty)
            return aliceKnows && bobKnows
        }
        guard listsKnown else {
            printer.say("summary", ["complete": false], "summary    INCOMPLETE: the inbox relay lists did not arrive")
            return .runtimeFailure
        }

        var sent: [String] = []
        var intents = relayURLs.count  // alice's list
        let batches = [total / 3, total / 3, total - 2 * (total / 3)]
        for (b, size) in batches.enumerated() {
            for _ in 0..<size {
                let n = sent.count + 1
                let message = try aliceAccount.messages.send(
                    to: [bob.publicKeyHex], text: "message \(n) of \(total): \"héllo\" 🤙", signer: alice, now: Int64(time(nil)))
                sent.append(message.message.id)
                intents += message.deliveries.map(\.intentIDs.count).reduce(0, +)
            }
            printer.say(
                "enqueue", ["batch": .integer(Int64(b + 1)), "messages": .integer(Int64(size))],
                "alice      sent batch \(b + 1): \(size) private messages, each gift-wrapped for bob and for herself and committed as durable publish intents to their inbox relays"
            )
            if b == 0 {
                // Let the first batch land, then cut every connection mid-run.
                try waitUntil(seconds: 15) { try terminalCount(aliceAccount) >= intents }
                printer.say("recovery", [:], "recovery   dropping every connection mid-run")
                if !embedded.isEmpty {
                    for relay in embedded { relay.dropConnections() }
                } else {
                    aliceTransport.dropConnection()
                    bobTransport.dropConnection()
                }
            }
        }
        func fromAlice() throws -> [PrivateMessage] {
            try bobAccount.messages.messages(
                ownerKey: bob.publicKeyHex, members: [alice.publicKeyHex], now: Int64(time(nil)) + 1, limit: AccountMessages.maxPage
            )
            .filter { $0.sender == alice.publicKeyHex }
        }
        var finished = try waitUntil(seconds: 30) { try terminalCount(aliceAccount) >= intents && (try fromAlice().count) >= total }
        // Bob answers: his reply reaches alice's account the same way.
        let reply = try bobAccount.messages.send(to: [alice.publicKeyHex], text: "got all \(total) 👍", signer: bob, now: Int64(time(nil)))
        func replies() throws -> Int {
            try aliceAccount.messages.messages(ownerKey: alice.publicKeyHex, members: [bob.publicKeyHex], now: Int64(time(nil)) + 1).filter {
                $0.id == reply.message.id
            }.count
        }
        finished = try waitUntil(seconds: 30) { try replies() == 1 } && finished
        printer.say(
            "reply", ["from": .string("bob"), "received": .bool(try replies() == 1)],
            "bob        replied \"got all \(total) 👍\"; alice \(try replies() == 1 ? "received it" : "did NOT receive it")")
        let counts = try aliceAccount.delivery.stateCounts()
        let received = try fromAlice()
        let receivedIDs = Set(received.map(\.id))
        let missing = sent.filter { !receivedIDs.contains($0) }.count
        let elapsed = monotonic() - started
        let c = counters
        let skipped = bobTransport.relays.map(\.duplicatesSkipped).reduce(0, +)
        let reconnects = (aliceTransport.relays + bobTransport.relays).map(\.reconnects).reduce(0, +)
        let complete = finished && missing == 0
        printer.say(
            "summary",
            [
                "sent": .integer(Int64(sent.count)), "accepted": .integer(Int64(counts[.accepted] ?? 0)),
                "rejected": .integer(Int64(counts[.rejected] ?? 0)), "received": .integer(Int64(received.count)),
                "unwrapped": .integer(Int64(bobAccount.messages.decryptions)),
                "relays": .integer(Int64(relayURLs.count)), "duplicates": .integer(Int64(c.duplicates)),
                "skippedBeforeVerification": .integer(Int64(skipped)), "reconnects": .integer(Int64(reconnects)),
                "milliseconds": .integer(Int64(elapsed * 1000)), "complete": .bool(complete),
            ],
            "summary    sent \(sent.count) private messages to \(relayURLs.count) relays, accepted \(counts[.accepted] ?? 0) of \(intents) intents, "
                + "received \(received.count) (each wrap unwrapped once: \(bobAccount.messages.decryptions) unwraps; \(skipped) copies skipped before verification, \(c.duplicates) duplicates at commit, "
                + "reconnects \(reconnects)) in \(formatSeconds(elapsed)) s"
                + (complete ? "" : " — INCOMPLETE: \(missing) not received"))
        return complete ? .success : .runtimeFailure
    }

    static func terminalCount(_ account: SoftchatAccount) throws -> Int {
        let counts = try account.delivery.stateCounts()
        return (counts[.accepted] ?? 0) + (counts[.rejected] ?? 0)
    }

    /// Polls `condition` every 20 ms for up to `seconds`; returns whether it became true.
    @discardableResult
    static func waitUntil(seconds: Double, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = monotonic() + seconds
        while monotonic() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    static func observed(_ policy: ManagedTransportPolicy, name: String, printer: DemoPrinter, counters: DemoCounters) -> ManagedTransportPolicy {
        var p = policy
        let label = name.padding(10)
        p.observer = { event in
            switch event {
            case .state:
                break
            case .relayState(let url, let s):
                printer.say(
                    "state", ["who": .string(name), "relay": .string(url), "state": .string(s.description)], "\(label) \(short(url)) state \(s)")
            case .relayInformation(let url, let info):
                printer.say(
                    "nip11",
                    ["who": .string(name), "relay": .string(url), "name": .string(info.name ?? ""), "eventsBatch": .bool(info.acceptsEventsBatch)],
                    "\(label) \(short(url)) NIP-11: \(info.name ?? "unnamed relay"), EVENTS batch \(info.acceptsEventsBatch ? "supported" : "not supported")"
                )
            case .delivery(let url, _, let d):
                printer.say(
                    "delivery", ["who": .string(name), "relay": .string(url), "decision": d.jsonValue],
                    "\(label) \(short(url)) delivery \(d.eventID.prefix(12))… \(d.state.rawValue)/\(d.category.rawValue)\(d.message.isEmpty ? "" : " (\(d.message))")"
                )
            case .ingested(let url, let r):
                counters.duplicates(r.alreadyPresent.count)
                printer.say(
                    "receipt",
                    [
                        "who": .string(name), "relay": .string(url), "inserted": .integer(Int64(r.accepted.count)),
                        "duplicates": .integer(Int64(r.alreadyPresent.count)), "quarantined": .integer(Int64(r.rejected.count)),
                    ],
                    "\(label) \(short(url)) receipt inserted \(r.accepted.count), duplicates \(r.alreadyPresent.count), quarantined \(r.rejected.count)"
                )
            case .synced(let url, let sub, let n, _):
                printer.say(
                    "synced", ["who": .string(name), "relay": .string(url), "subscription": .string(sub), "events": .integer(Int64(n))],
                    "\(label) \(short(url)) synced \"\(sub)\" to the end of stored events (\(n) received)")
            case .notice(let url, let text):
                printer.say("notice", ["who": .string(name), "relay": .string(url), "text": .string(text)], "\(label) \(short(url)) notice \(text)")
            case .connectionFailed(let url, let text):
                printer.say(
                    "connection", ["who": .string(name), "relay": .string(url), "error": .string(text)],
                    "\(label) \(short(url)) connection ended: \(text)")
            }
        }
        return p
    }

    static func monotonic() -> Double { Double(IODriver.monotonicMilliseconds()) / 1000 }

    /// `host:port` of a relay URL, for the demo's lines.
    static func short(_ url: String) -> String {
        let rest = url.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? url
        return String(rest.prefix { $0 != "?" })
    }

    static func formatSeconds(_ s: Double) -> String {
        let tenths = Int((s * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}

/// Serialized printing from the transports' threads.
final class DemoPrinter: Sendable {
    let json: Bool
    private let lock = Lock()
    init(json: Bool) { self.json = json }

    func say(_ step: String, _ fields: KeyValuePairs<String, JSONValue>, _ text: String) {
        lock.with { write(step, fields, text) }
    }

    private func write(_ step: String, _ fields: KeyValuePairs<String, JSONValue>, _ text: String) {
        if json {
            var o = JSONObject()
            o.append("step", .string(step))
            for (k, v) in fields { o.append(k, v) }
            Output.standard.line(JSONValue.object(o).jsonText)
        } else {
            // The line carries relay text (NOTICE, connection errors): never raw control bytes.
            Output.standard.line(terminalSafe(text))
        }
        Output.standard.flush()
    }
}

final class DemoCounters: @unchecked Sendable {
    // @unchecked: the counts are only touched under `lock`.
    private let lock = Lock()
    private var duplicateCount = 0
    func duplicates(_ n: Int) { lock.with { duplicateCount += n } }
    var duplicates: Int { lock.with { duplicateCount } }
}

/// A temporary folder for the demo's SQLite files, removed afterwards unless kept.
final class TemporaryFolder {
    let path: String
    let keep: Bool

    init(keep: Bool) throws {
        var template = Array("/tmp/softchat-demo-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw RuntimeFailure(code: "tempdir", message: "mkdtemp failed") }
        path = String(cString: p)
        self.keep = keep
    }

    deinit {
        guard !keep else { return }
        for name in ["alice.db", "alice.db-wal", "alice.db-shm", "alice.db.noise-key", "bob.db", "bob.db-wal", "bob.db-shm", "bob.db.noise-key"] {
            unlink(path + "/" + name)
        }
        rmdir(path)
    }
}
