import SoftchatCore
import SoftchatJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `softchat demo`: the main job. Today it runs offline through what the core has —
/// identities, signed chat messages, wire validation of EVENT/EVENTS/REQ/AUTH frames, filter
/// matching, tampering caught — because the embedded loopback relay, the session and the
/// durable account have not landed yet; it says so rather than pretending.
enum DemoCommand {
    static let help = """
        usage: softchat demo [--messages N] [--json]

        Runs the Softchat flow on this machine. Built so far: two identities exchange N kind-14
        chat messages (default 8) as signed events, sent as one EVENTS batch frame and single
        EVENT frames that relay.wire validates (ids and BIP-340 signatures), a REQ filter
        selects the recipient's messages, a tampered copy is refused with its stable error
        code, and a NIP-42 AUTH round checks relay URL and challenge. Not built yet: the
        embedded loopback relay, RelaySession and the SQLite account (the demo says so).
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--messages"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let count = Int(parsed.options["--messages"] ?? "8") ?? -1
        guard count >= 1 && count <= RelayWireContract.maxBatchEvents.value else {
            throw UsageError("--messages must be 1 to \(RelayWireContract.maxBatchEvents.value)")
        }
        let json = parsed.has("--json")
        func say(_ step: String, _ fields: KeyValuePairs<String, JSONValue>, _ text: String) {
            if json {
                var o = JSONObject()
                o.append("step", .string(step))
                for (k, v) in fields { o.append(k, v) }
                Output.standard.line(JSONValue.object(o).jsonText)
            } else {
                Output.standard.line(text)
            }
        }
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        let now = Int64(clock.tv_sec)
        let started = monotonic()

        let alice = SoftchatIdentity.generate()
        let bob = SoftchatIdentity.generate()
        say("identities", ["alice": .string(alice.publicKeyHex), "bob": .string(bob.publicKeyHex)],
            "identities   alice \(alice.publicKeyHex.prefix(16))…  bob \(bob.publicKeyHex.prefix(16))…  (secrets stay in memory)")

        var messages: [VerifiedEvent] = []
        for i in 1...count {
            messages.append(try alice.sign(UnsignedEvent(
                createdAt: now - Int64(count - i), kind: 14, tags: [["p", bob.publicKeyHex]],
                content: "message \(i) of \(count) — \"héllo\" 🤙")))
        }
        say("signed", ["events": .integer(Int64(count))], "signed       \(count) kind-14 chat messages from alice to bob")

        let batch = ClientRelayFrame.events(messages).toJSON()
        guard case .events(let received) = try parseClientRelayFrame(batch) else { throw RuntimeFailure(code: "demo", message: "EVENTS did not parse as EVENTS") }
        say("batch", ["verb": "EVENTS", "bytes": .integer(Int64(batch.utf8.count)), "verified": .integer(Int64(received.count))],
            "wire         EVENTS batch of \(batch.utf8.count) bytes: \(received.count) events verified (ids + BIP-340)")
        for m in messages.prefix(2) {
            guard case .event(let e) = try parseClientRelayFrame(ClientRelayFrame.event(m).toJSON()), e == m else {
                throw RuntimeFailure(code: "demo", message: "EVENT did not round-trip")
            }
        }
        say("single", ["verb": "EVENT", "frames": .integer(2)], "wire         2 single EVENT frames round-trip exactly")

        let filterJSON = "{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"],\"limit\":100}"
        let req = ClientRelayFrame.req(subscriptionID: "chat", filters: [try RelayFilter.fromJSON(filterJSON)]).toJSON()
        guard case .req(_, let filters) = try parseClientRelayFrame(req) else { throw RuntimeFailure(code: "demo", message: "REQ did not parse") }
        let matched = received.filter { RelayFilter.anyMatches(filters, $0) }.count
        let unrelated = try bob.sign(UnsignedEvent(createdAt: now, kind: 1, content: "a public note"))
        let unrelatedMatches = RelayFilter.anyMatches(filters, unrelated)
        say("filter", ["matched": .integer(Int64(matched)), "unrelatedMatched": .bool(unrelatedMatches)],
            "filter       bob's REQ {kinds:[14], #p:[bob]} matches \(matched)/\(count); a kind-1 note matches: \(unrelatedMatches)")

        var tampered = messages[0].jsonText
        tampered = tampered.replacingFirst("message 1", with: "message 9")
        do {
            _ = try parseRelayResponseFrame("[\"EVENT\",\"chat\",\(tampered)]")
            throw RuntimeFailure(code: "demo", message: "a tampered event was accepted")
        } catch let error as SoftchatError {
            say("tampered", ["code": .string(error.code.rawValue)], "tampered     refused: \(error.code.rawValue): \(error.message)")
        }

        let relayURL = "wss://relay.example"
        let challenge = Hex32.random()
        guard case .auth(let issued) = try parseRelayResponseFrame("[\"AUTH\",\"\(challenge)\"]") else {
            throw RuntimeFailure(code: "demo", message: "AUTH challenge did not parse")
        }
        let auth = try alice.createNip42Authentication(challenge: issued, relayURL: relayURL, createdAt: now)
        guard case .auth(let presented) = try parseClientRelayFrame(ClientRelayFrame.auth(auth).toJSON()) else {
            throw RuntimeFailure(code: "demo", message: "AUTH did not parse")
        }
        try Nip42.verify(presented, challenge: issued, relayURL: "WSS://Relay.Example:443/", now: now)
        var otherRelayRefused = false
        do { try Nip42.verify(presented, challenge: issued, relayURL: "wss://other.example", now: now) } catch { otherRelayRefused = true }
        say("nip42", ["verified": true, "otherRelayRefused": .bool(otherRelayRefused)],
            "nip42        AUTH kind 22242 verified for \(relayURL); refused for another relay: \(otherRelayRefused)")

        let elapsed = monotonic() - started
        say("summary", ["signed": .integer(Int64(count)), "verified": .integer(Int64(received.count)), "matched": .integer(Int64(matched)),
                        "milliseconds": .integer(Int64(elapsed * 1000)),
                        "notBuiltYet": .array(["embedded loopback relay", "RelaySession", "SoftchatAccount"])],
            "summary      \(count) signed, \(received.count) verified, \(matched) matched in \(Int(elapsed * 1000)) ms.\n"
            + "             Not built yet: the embedded loopback relay, RelaySession and the SQLite account;\n"
            + "             when they land this demo publishes and syncs through them.")
        return .success
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// 32 random hex characters, the shape of challenges relays send.
enum Hex32 {
    static func random() -> String {
        let digits = Array("0123456789abcdef")
        var g = SystemRandomNumberGenerator()
        return String((0..<32).map { _ in digits[Int(g.next() % 16)] })
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let start = firstRange(of: target) else { return self }
        return String(self[..<start.lowerBound]) + replacement + String(self[start.upperBound...])
    }

    func firstRange(of target: String) -> Range<String.Index>? {
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(target) { return i..<index(i, offsetBy: target.count) }
            i = index(after: i)
        }
        return nil
    }
}
