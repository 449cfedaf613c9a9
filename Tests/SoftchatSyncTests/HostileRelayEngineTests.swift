import SoftchatCore
import SoftchatJSON
import Testing

@testable import SoftchatSync

/// A hostile relay against the whole engine (issue 44): NIP-11 numbers at the edges of Int64,
/// text floods, challenge floods. The engine must not trap, must bound every text it reports,
/// must sign no AUTH past the session's policy, and must still hold the relay's events.
@Suite struct HostileRelayEngineTests {
    static let notes = #"{"kinds":[1]}"#

    func world(count: Int = 300) -> (EngineWorld, [VerifiedEvent]) {
        let w = EngineWorld()
        w.relays[0].negentropy = .answer
        var events: [VerifiedEvent] = []
        // Within the hour behind the cursor: paging (when a tiny frame bound rules NIP-77 out)
        // reaches them as well as reconciliation does.
        for i in 0..<count { events.append(Fixtures.event(w.unix - 3_000 + Int64(i * 3_000 / count), content: "h\(i)")) }
        w.relays[0].stored = events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        for (i, e) in events.enumerated() where i % 3 != 0 { w.account.events[e.id] = e }
        w.account.policy = [("notes", [Self.notes], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        return (w, events)
    }

    /// `max_message_length` of -2^63 reached `negentropyFrameLimit` as `Int.min`, and
    /// `(frame - 256) / 2` trapped on the I/O thread at every start.
    @Test(arguments: [Int.min, -1, 0, 1, 255, 256, Int.max])
    func aNIP11MaxMessageLengthAtAnyEdgeNeitherTrapsNorLosesAnEvent(_ length: Int) {
        let (w, events) = world()
        w.limits[0] = RelayLimits(maxMessageLength: length, maxLimit: length, maxSubscriptions: length, maxFilters: length)
        w.start()
        w.run(for: 5_000)
        #expect(events.allSatisfy { w.account.events[$0.id] != nil }, "max_message_length \(length)")
        #expect(w.synced(0, "notes"))
        #expect(!w.runaway)
    }

    @Test func relayLimitsHoldOnlyStatedRangeNumbersHoweverTheyAreSet() {
        var limits = RelayLimits(maxMessageLength: Int.min, maxLimit: -5, maxSubscriptions: 0, maxFilters: Int.max)
        #expect(limits.maxMessageLength == nil && limits.maxLimit == nil && limits.maxSubscriptions == nil && limits.maxFilters == nil)
        limits.maxMessageLength = 16_384
        #expect(limits.maxMessageLength == 16_384)
        limits.maxMessageLength = Int.min
        #expect(limits.maxMessageLength == nil)
        limits.maxSubscriptions = -1
        #expect(limits.maxSubscriptions == nil)
        limits.name = String(repeating: "n", count: 300_000)
        #expect((limits.name?.utf8.count ?? .max) <= RelayText.maxReportBytes)
    }

    /// NOTICE, CLOSED and NEG-ERR text reached the host whole: 512 KiB each, back to back.
    @Test func aFloodOfHugeNoticesReachesTheHostCutToTheBound() {
        let (w, _) = world(count: 10)
        w.start()
        w.completeOpens()
        let huge = String(repeating: "N", count: 400_000)
        for _ in 0..<50 {
            w.handle(.received(relay: 0, text: #"["NOTICE","\#(huge)"]"#))
            w.handle(.received(relay: 0, text: #"["NEG-ERR","notes~0~n0","\#(huge)"]"#))
        }
        w.handle(.received(relay: 0, text: #"["CLOSED","~live0","restricted: \#(huge)"]"#))
        w.run(for: 2_000)
        var texts = 0
        for report in w.reports {
            switch report {
            case .notice(_, let text), .connectionFailed(_, let text):
                texts += 1
                #expect(text.utf8.count <= RelayText.maxReportBytes)
            case .delivery(_, _, let decision):
                #expect(decision.message.utf8.count <= RelayText.maxReportBytes)
            default:
                break
            }
        }
        #expect(texts >= 50)
        #expect(!w.runaway)
    }

    /// 1,728 signed answers in 8 s before: every new challenge was signed and sent at once.
    @Test func aChallengeFloodGetsAtMostOneAnswerPerInterval() {
        let (w, events) = world()
        let identity = SoftchatIdentity.generate()
        w.start { $0.identity = identity }
        w.completeOpens()
        let interval = Int64(RelaySessionContract.authenticationIntervalSeconds.value)
        let seconds: Int64 = 60
        var sent = 0
        for step in 0..<(seconds * 10) {
            // Ten challenges every 100 ms, each new, and a huge one now and then.
            for k in 0..<10 { w.handle(.received(relay: 0, text: #"["AUTH","c\#(step)-\#(k)"]"#)) }
            if step % 50 == 0 { w.handle(.received(relay: 0, text: #"["AUTH","\#(String(repeating: "x", count: 300_000))"]"#)) }
            sent += 10
            w.advance(100)
            w.settle()
        }
        let answers = w.relays[0].verbs.filter { $0 == "AUTH" }.count
        #expect(sent == 6_000)
        #expect(answers >= 1)
        #expect(answers <= Int(seconds / interval) + 1, "\(answers) AUTH answers in \(seconds) s")
        w.run(for: 5_000)
        #expect(events.allSatisfy { w.account.events[$0.id] != nil }, "the relay's events still arrive")
        #expect(!w.runaway)
    }

    /// NIP-42 was answered over plain ws:// and unauthenticated Noise, so anyone on the path
    /// could relay the real relay's challenge and take the user's signed answer.
    @Test func authenticationOverCleartextToARemoteHostIsAnsweredOnlyWhenTheHostOptsIn() {
        let (w, _) = world(count: 1)
        w.start { $0.identity = SoftchatIdentity.generate() }
        let answered = [
            "wss://relay.example", "ws://127.0.0.1:7000", "ws://localhost:7000", "ws://[::1]:7000",
            "noise://relay.example:7000?pattern=IK&key=\(String(repeating: "ab", count: 32))",
        ]
        let refused = ["ws://relay.example", "ws://10.0.0.1:7000", "ws://0x7f.1:7000", "noise://relay.example:7000?pattern=NN&unauthenticated=yes"]
        for url in answered { #expect(w.engine.answersAuthentication(on: url), "\(url)") }
        for url in refused { #expect(!w.engine.answersAuthentication(on: url), "\(url)") }
        let (optedIn, _) = world(count: 1)
        optedIn.start {
            $0.identity = SoftchatIdentity.generate()
            $0.authenticatesOverCleartext = true
        }
        for url in refused { #expect(optedIn.engine.answersAuthentication(on: url), "\(url) once the host opts in") }
    }

    /// Found in review: with the cleartext policy refusing to answer, a relay whose NIP-11 says
    /// `auth_required` left the connection "authenticating" for ever (nothing would ever move it
    /// to ready) and waited the challenge grace at every connect.
    @Test func aRelayWhoseChallengesWillNotBeAnsweredIsNeverReportedAuthenticating() {
        let w = EngineWorld(scheme: "ws")
        let note = Fixtures.event(w.unix - 60, content: "over ws")
        w.relays[0].stored = [note]
        w.account.policy = [("notes", [Self.notes], nil)]
        w.account.cursors[w.account.key(w.urls[0], "notes")] = w.unix - 3_600
        w.limits[0] = RelayLimits(supportsAuthentication: true, authenticationRequired: true)
        w.start { $0.identity = SoftchatIdentity.generate() }
        w.run(for: 2_000)
        let states = w.reports.compactMap { if case .relayState(_, let s) = $0 { s } else { nil } }
        #expect(!states.contains(.authenticating), "\(states)")
        #expect(states.last == .ready)
        #expect(w.synced(0, "notes") && w.account.events[note.id] != nil)
    }
}
