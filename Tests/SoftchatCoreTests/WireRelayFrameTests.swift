import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// One OK/CLOSED/NOTICE text and how it splits into NIP-01's prefix and the human message.
struct WireRelayMessageCase: Sendable, CustomTestStringConvertible {
    var text: String
    var prefix: String?
    var message: String
    var testDescription: String { text.isEmpty ? "(empty)" : text }
}

/// Relay → client frames: every verb parses and round-trips, the shared fixtures parse, the
/// machine-readable prefixes real relays send are read, and every rejection names the place.
@Suite struct WireRelayFrameTests {
    static let note = try! WireKeys.bob.sign(
        UnsignedEvent(
            createdAt: 1_700_000_123, kind: 1, tags: [["p", WireKeys.alice.publicKeyHex]],
            content: "relay side"))
    static let id = "b1a649ebe8b435ec71d3784793f3bbf4b93e64e17568a741aecd4c7ddeafce30"
    /// NIP-45's "Followers count with HyperLogLog" example, 256 registers.
    static let nip45HLL =
        "0607070505060806050508060707070706090d080b0605090607070b07090606060b0705070709050807080805080407060906080707080507070805060509040a0b06060704060405070706080607050907070b08060808080b080607090a06060805060604070908050607060805050d05060906090809080807050e0705070507060907060606070708080b0807070708080706060609080705060604060409070a0808050a0506050b0810060a0908070709080b0a07050806060508060607080606080707050806080c0a0707070a080808050608080f070506070706070a0908090c080708080806090508060606090906060d07050708080405070708"

    @discardableResult
    func roundTrip(_ frame: RelayResponseFrame, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let text = frame.toJSON()
        let parsed = try parseRelayResponseFrame(text)
        #expect(parsed == frame, sourceLocation: sourceLocation)
        #expect(parsed.verb == frame.verb, sourceLocation: sourceLocation)
        #expect(parsed.toJSON() == text, sourceLocation: sourceLocation)
        return text
    }

    func expectRejected(
        _ text: String, _ code: SoftchatErrorCode = .invalidRelayFrame, mentioning parts: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectSoftchatError(code, mentioning: parts, sourceLocation: sourceLocation) { _ = try parseRelayResponseFrame(text) }
    }

    // MARK: Every verb parses and round-trips

    @Test func eventFrameParsesItsSubscriptionAndVerifiedEventAndRoundTrips() throws {
        let text = wireFrame("EVENT", "sub1", Self.note.jsonValue)
        guard case .event("sub1", let event) = try parseRelayResponseFrame(text) else {
            Issue.record("not .event")
            return
        }
        #expect(event == Self.note && event.content == "relay side")
        #expect(try roundTrip(.event(subscriptionID: "sub1", event: Self.note)) == text)
    }

    @Test func okAcceptedWithEmptyMessageParsesAndRoundTrips() throws {
        let frame = try parseRelayResponseFrame(#"["OK","\#(Self.id)",true,""]"#)
        #expect(frame == .ok(eventID: Self.id, accepted: true, message: RelayMessage("")))
        guard case .ok(_, _, let message) = frame else { return }
        #expect(message.prefix == nil && message.message == "")
        try roundTrip(frame)
    }

    @Test func okRejectedWithPrefixExposesPrefixAndMessage() throws {
        let frame = try parseRelayResponseFrame(#"["OK","\#(Self.id)",false,"duplicate: exists"]"#)
        guard case .ok(let id, let accepted, let message) = frame else {
            Issue.record("not .ok")
            return
        }
        #expect(id == Self.id && !accepted)
        #expect(message.prefix == "duplicate" && message.message == "exists" && message.text == "duplicate: exists")
        try roundTrip(frame)
        try roundTrip(.ok(eventID: Self.id, accepted: false, message: RelayMessage("no prefix here")))
    }

    @Test func okWithEmptyIdIsValidWithNoEventId() throws {
        // nostr-relay answers an invalid event with an empty id.
        let text = #"["OK","",false,"invalid: Bad signature"]"#
        let frame = try parseRelayResponseFrame(text)
        guard case .ok(let id, let accepted, let message) = frame else {
            Issue.record("not .ok")
            return
        }
        #expect(id == nil && !accepted && message.prefix == "invalid" && message.message == "Bad signature")
        #expect(try roundTrip(frame) == text)
    }

    @Test func eoseClosedNoticeAndAuthParseAndRoundTrip() throws {
        #expect(try parseRelayResponseFrame(#"["EOSE","sub1"]"#) == .eose(subscriptionID: "sub1"))
        try roundTrip(.eose(subscriptionID: "sub1"))

        let closed = try parseRelayResponseFrame(#"["CLOSED","s","auth-required: you must auth"]"#)
        guard case .closed("s", let message) = closed else {
            Issue.record("not .closed")
            return
        }
        #expect(message.prefix == "auth-required" && message.message == "you must auth")
        try roundTrip(closed)

        let notice = try parseRelayResponseFrame(#"["NOTICE","rate-limited"]"#)
        #expect(notice == .notice(RelayMessage("rate-limited")))
        guard case .notice(let m) = notice else { return }
        #expect(m.prefix == nil && m.message == "rate-limited")
        try roundTrip(notice)

        #expect(
            try parseRelayResponseFrame(#"["AUTH","8b87031e971e6097f7a7a6762ba86309"]"#)
                == .auth(challenge: "8b87031e971e6097f7a7a6762ba86309"))
        try roundTrip(.auth(challenge: "8b87031e971e6097f7a7a6762ba86309"))
    }

    @Test func countWithCountOnlyApproximateOrHLLParsesAndRoundTrips() throws {
        let plain = try parseRelayResponseFrame(#"["COUNT","cnt1",{"count":5}]"#)
        #expect(plain == .count(subscriptionID: "cnt1", result: CountResult(count: 5)))
        #expect(try roundTrip(plain) == #"["COUNT","cnt1",{"count":5}]"#)

        let approximate = try parseRelayResponseFrame(#"["COUNT","c",{"count":93412452,"approximate":true}]"#)
        #expect(approximate == .count(subscriptionID: "c", result: CountResult(count: 93_412_452, approximate: true)))
        try roundTrip(approximate)

        let withHLL = try parseRelayResponseFrame(#"["COUNT","c",{"count":16578,"hll":"\#(Self.nip45HLL)"}]"#)
        guard case .count(_, let result) = withHLL else {
            Issue.record("not .count")
            return
        }
        #expect(result.count == 16578 && !result.approximate)
        #expect(result.hll?.hex == Self.nip45HLL && result.hll?.registers.count == 256 && result.hll?.registers[0] == 6)
        try roundTrip(withHLL)
        try roundTrip(.count(subscriptionID: "c", result: CountResult(count: 0, approximate: true, hll: HyperLogLog())))
    }

    // MARK: Errors

    @Test(arguments: [
        String(repeating: "a", count: 63), String(repeating: "a", count: 65),
        "B1A649EBE8B435EC71D3784793F3BBF4B93E64E17568A741AECD4C7DDEAFCE30", "b1a649ebe8b435ec71d3784793f3bbf4b93e64e17568a741aecd4c7ddeafce3g",
    ])
    func okWhoseIdIsNot64LowercaseHexIsInvalidRelayFrame(_ id: String) {
        expectRejected(
            wireFrame("OK", .string(id), true, ""),
            mentioning: ["OK element 1 (event id) must be 64 lowercase hex characters or empty"])
    }

    @Test func okWithANonBooleanOrMissingPartIsInvalidRelayFrame() {
        expectRejected(#"["OK","\#(Self.id)","true",""]"#, mentioning: ["OK element 2 (accepted) must be true or false, not string"])
        expectRejected(#"["OK","\#(Self.id)",1,""]"#, mentioning: ["OK element 2 (accepted)", "number"])
        expectRejected(#"["OK","\#(Self.id)",true]"#, mentioning: ["OK frame must be", "(4 elements), got 3"])
        expectRejected(#"["OK","\#(Self.id)",true,null]"#, mentioning: ["OK element 3 (message) must be a string, not null"])
        expectRejected(#"["OK",7,true,""]"#, mentioning: ["OK element 1 (event id) must be a string"])
    }

    @Test(arguments: [#"["AUTH",""]"#, #"["AUTH",42]"#, #"["AUTH"]"#, #"["AUTH","c","d"]"#, #"["AUTH",{"challenge":"c"}]"#])
    func relayAuthWithoutANonEmptyChallengeStringIsInvalidRelayAuthentication(_ text: String) {
        expectRejected(text, .invalidRelayAuthentication, mentioning: ["relay AUTH must be", "non-empty challenge string"])
    }

    @Test(arguments: [
        (#"{}"#, #"COUNT result has no "count""#),
        (#"{"approximate":true}"#, #"COUNT result has no "count""#),
        (#"{"count":-1}"#, #""count" must be a non-negative integer, not -1"#),
        (#"{"count":1.5}"#, #""count" must be a non-negative integer, not 1.5"#),
        (#"{"count":"5"}"#, #""count" must be a non-negative integer"#),
        (#"{"count":5,"extra":1}"#, #"COUNT result has unknown key "extra""#),
        (#"{"count":5,"approximate":"yes"}"#, #"COUNT result "approximate" must be a boolean"#),
        (#"{"count":5,"hll":"00"}"#, #"COUNT result "hll" must be 512 lowercase hex characters"#),
        (#"[5]"#, "COUNT result must be an object, not array"),
        (#"238"#, "COUNT result must be an object, not number"),
    ])
    func badCountResultIsInvalidRelayFrame(_ result: String, _ place: String) {
        expectRejected(#"["COUNT","c",\#(result)]"#, mentioning: [place])
    }

    @Test func hllOfTheWrongLengthOrCaseIsInvalidRelayFrame() {
        for hll in [
            String(Self.nip45HLL.dropLast(2)), Self.nip45HLL + "00", String(Self.nip45HLL.dropLast()), Self.nip45HLL.uppercased(),
            String(Self.nip45HLL.dropLast(2)) + "zz",
        ] {
            expectRejected(#"["COUNT","c",{"count":1,"hll":"\#(hll)"}]"#, mentioning: [#""hll" must be 512 lowercase hex"#])
        }
        expectRejected(#"["COUNT","c",{"count":1}, {"count":2}]"#, mentioning: ["COUNT frame must be", "got 4"])
    }

    @Test func eventFrameWithATamperedEventIsInvalidRelayFrameNamingTheId() {
        expectRejected(
            wireFrame("EVENT", "sub1", Self.note.tamperedContentJSON),
            mentioning: ["EVENT event \(Self.note.id)", "id does not match"])
        expectRejected(
            wireFrame("EVENT", "sub1", Self.note.badSignatureJSON),
            mentioning: ["EVENT event \(Self.note.id)", "signature does not verify"])
        // The client's shape ["EVENT", event] is not a relay frame.
        expectRejected(wireFrame("EVENT", Self.note.jsonValue), mentioning: ["EVENT frame must be", "got 2"])
    }

    @Test(arguments: [
        (#"["REQ","s",{}]"#, #"unknown relay verb "REQ""#),
        (#"["EVENTS",{}]"#, #"unknown relay verb "EVENTS""#),
        (#"["ok","","true",""]"#, #"unknown relay verb "ok""#),
        ("NOTICE", "relay frame is not valid JSON"),
        (#"{"NOTICE":"x"}"#, "relay frame must be a JSON array, not object"),
        ("[]", "relay frame is an empty array"),
        (#"[null]"#, "relay frame element 0 must be the verb string, not null"),
        (#"["EOSE"]"#, "EOSE frame must be [\"EOSE\", subscription id] (2 elements), got 1"),
        (#"["EOSE",""]"#, "EOSE subscription id has 0 characters"),
        (#"["CLOSED","s"]"#, "CLOSED frame must be [\"CLOSED\", subscription id, message] (3 elements), got 2"),
        (#"["CLOSED","s",false]"#, "CLOSED element 2 (message) must be a string, not boolean"),
        (#"["NOTICE"]"#, "NOTICE frame must be [\"NOTICE\", message] (2 elements), got 1"),
        (#"["NOTICE",{"m":1}]"#, "NOTICE element 1 (message) must be a string, not object"),
    ])
    func malformedRelayFrameIsInvalidRelayFrameNamingThePlace(_ text: String, _ place: String) {
        expectRejected(text, mentioning: [place])
    }

    @Test func relaySubscriptionIdsAreBoundedLikeClientOnes() throws {
        let id64 = String(repeating: "q", count: 64)
        #expect(try parseRelayResponseFrame(wireFrame("EOSE", .string(id64))) == .eose(subscriptionID: id64))
        expectRejected(wireFrame("EOSE", .string(id64 + "q")), mentioning: ["EOSE subscription id has 65 characters"])
        expectRejected(wireFrame("CLOSED", .string(id64 + "q"), ""), mentioning: ["CLOSED subscription id has 65 characters"])
        expectRejected(wireFrame("EVENT", .string(id64 + "q"), Self.note.jsonValue), mentioning: ["EVENT subscription id has 65"])
        expectRejected(wireFrame("COUNT", "", .object(JSONObject(["count": 1]))), mentioning: ["COUNT subscription id has 0 characters"])
    }

    @Test func relayFrameOver524288BytesIsRejectedBeforeParsing() throws {
        let shell = wireFrame("NOTICE", "").utf8.count
        let exact = wireFrame("NOTICE", .string(String(repeating: "n", count: 524_288 - shell)))
        try #require(exact.utf8.count == 524_288)
        guard case .notice(let m) = try parseRelayResponseFrame(exact) else {
            Issue.record("not .notice")
            return
        }
        #expect(m.text.utf8.count == 524_288 - shell)
        expectRejected(exact.replacingOccurrences(of: "NOTICE", with: "NOTICE!"), mentioning: ["relay frame has 524289 bytes", "524288"])
        let garbage = String(repeating: "{", count: 524_289)
        let error = expectSoftchatError(.invalidRelayFrame, mentioning: ["524289 bytes"]) { _ = try parseRelayResponseFrame(garbage) }
        #expect(error?.message.contains("JSON") == false)
    }

    // MARK: Shared fixtures (nostr-sdk-ios)

    @Test func relayFixturesParse() throws {
        func parse(_ name: String) throws -> RelayResponseFrame {
            let frame = try parseRelayResponseFrame(Paths.fixtureText(name))
            try roundTrip(frame)
            return frame
        }
        guard case .event("some-subscription-id", let event) = try parse("event") else {
            Issue.record("event.json")
            return
        }
        #expect(event.id == "fa5ed84fc8eeb959fd39ad8e48388cfc33075991ef8e50064cfcecfd918bb91b")
        #expect(event.content.hasSuffix("doesn’t persist. Bug.  "))

        #expect(try parse("ok_success") == .ok(eventID: Self.id, accepted: true, message: RelayMessage("")))
        let expectations: [(String, Bool, String?, String)] = [
            ("ok_fail_reason", false, "blocked", "tor exit nodes not allowed"),
            ("ok_success_reason", true, "pow", "difficulty: 25>=24"),
            ("ok_success_reason_prefix_no_message", true, "pow", ""),
            ("ok_unknown_reason", true, "unknown", "reason: unknown"),
        ]
        for (name, accepted, prefix, message) in expectations {
            guard case .ok(let id, let a, let m) = try parse(name) else {
                Issue.record("\(name) is not .ok")
                continue
            }
            #expect(id == Self.id && a == accepted && m.prefix == prefix && m.message == message, "\(name)")
        }
        #expect(try parse("eose") == .eose(subscriptionID: "some-subscription-id"))
        guard case .closed("some-subscription-id", let closed) = try parse("closed") else {
            Issue.record("closed.json")
            return
        }
        #expect(closed.prefix == "error" && closed.message == "shutting down idle subscription")
        #expect(try parse("notice") == .notice(RelayMessage("there was an error")))
        #expect(try parse("auth_challenge") == .auth(challenge: "some-challenge-string"))
        #expect(try parse("count_response") == .count(subscriptionID: "subscription-id", result: CountResult(count: 238)))
    }

    @Test func clientFixturesEventAuthAndCloseParse() throws {
        guard case .event(let event) = try parseClientRelayFrame(Paths.fixtureText("event_request")) else {
            Issue.record("event_request.json")
            return
        }
        #expect(event.id == "fa5ed84fc8eeb959fd39ad8e48388cfc33075991ef8e50064cfcecfd918bb91b")
        guard case .auth(let auth) = try parseClientRelayFrame(Paths.fixtureText("auth_request")) else {
            Issue.record("auth_request.json")
            return
        }
        #expect(auth.kind == 22242 && auth.id == "adb599bc2f6b4cf97d927de2cb36829326c86013e0a6e8f51159f80938a5c246")
        #expect(try parseClientRelayFrame(Paths.fixtureText("close_request")) == .close(subscriptionID: "some-subscription-id"))
        // Relay-direction fixtures are not client frames, and vice versa.
        expectSoftchatError(.invalidRelayFrame, mentioning: [#"unknown client verb "EOSE""#]) {
            _ = try parseClientRelayFrame(Paths.fixtureText("eose"))
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["EVENT frame must be", "got 2"]) {
            _ = try parseRelayResponseFrame(Paths.fixtureText("event_request"))
        }
    }

    @Test(arguments: ["req", "count_request"])
    func clientFixtureWithPlaceholderAuthorIsInvalidRelayFilter(_ name: String) {
        // "some-pubkey" is a placeholder, not lowercase hex.
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter 0", #"key "authors" element 0"#, "lowercase hex"]) {
            _ = try parseClientRelayFrame(Paths.fixtureText(name))
        }
    }

    // MARK: RelayMessage: the machine-readable prefix

    /// Texts real relays send (peers README §3–4: nostr-relay, LocalRelay, strfry) and edge cases.
    static let messageCases: [WireRelayMessageCase] = [
        .init(text: "duplicate: exists", prefix: "duplicate", message: "exists"),
        .init(text: "duplicate: already have this event", prefix: "duplicate", message: "already have this event"),
        .init(text: "ERROR: auth-required: x", prefix: "auth-required", message: "x"),
        .init(text: "auth-required: you must auth", prefix: "auth-required", message: "you must auth"),
        .init(text: "auth-required: received invalid challenge", prefix: "auth-required", message: "received invalid challenge"),
        .init(text: "pow:", prefix: "pow", message: ""),
        .init(text: "pow: required a difficulty >= 8", prefix: "pow", message: "required a difficulty >= 8"),
        .init(text: "rate-limited", prefix: nil, message: "rate-limited"),
        .init(text: "rate-limited: slow down", prefix: "rate-limited", message: "slow down"),
        .init(text: "rate-limited: too many REQs", prefix: "rate-limited", message: "too many REQs"),
        .init(
            text: "invalid: 280 characters should be enough for anybody", prefix: "invalid",
            message: "280 characters should be enough for anybody"),
        .init(text: "invalid: Bad JSON", prefix: "invalid", message: "Bad JSON"),
        .init(text: "invalid: invalid event ID", prefix: "invalid", message: "invalid event ID"),
        .init(text: "invalid: 1732912639 is too old", prefix: "invalid", message: "1732912639 is too old"),
        .init(text: "invalid: Wrong domain: ws://evil.example", prefix: "invalid", message: "Wrong domain: ws://evil.example"),
        .init(text: "invalid: Wrong kind. Must be 22242.", prefix: "invalid", message: "Wrong kind. Must be 22242."),
        .init(
            text: "blocked: event size (65642 bytes) exceeds maximum allowed size (65536 bytes)", prefix: "blocked",
            message: "event size (65642 bytes) exceeds maximum allowed size (65536 bytes)"),
        .init(text: "blocked: subscription ID exceeds max length 8", prefix: "blocked", message: "subscription ID exceeds max length 8"),
        .init(text: "restricted: permission denied", prefix: "restricted", message: "permission denied"),
        .init(text: "rejected: too many subscriptions", prefix: "rejected", message: "too many subscriptions"),
        .init(text: "invalid client message", prefix: nil, message: "invalid client message"),
        .init(text: "there was an error", prefix: nil, message: "there was an error"),
        .init(text: "", prefix: nil, message: ""),
        .init(text: "Bad: capitalised words are not prefixes", prefix: nil, message: "Bad: capitalised words are not prefixes"),
        .init(text: ": no word before the colon", prefix: nil, message: ": no word before the colon"),
        .init(text: "error: ERROR: only a leading one is stripped", prefix: "error", message: "ERROR: only a leading one is stripped"),
    ]

    @Test(arguments: messageCases)
    func relayMessageSplitsPrefixFromMessage(_ c: WireRelayMessageCase) throws {
        let m = RelayMessage(c.text)
        #expect(m.prefix == c.prefix)
        #expect(m.message == c.message)
        #expect(m.text == c.text && m.description == c.text)
        // The same text inside OK, CLOSED and NOTICE frames keeps its exact text and prefix.
        guard case .ok(_, _, let inOK) = try parseRelayResponseFrame(wireFrame("OK", "", false, .string(c.text))),
            case .closed(_, let inClosed) = try parseRelayResponseFrame(wireFrame("CLOSED", "s", .string(c.text))),
            case .notice(let inNotice) = try parseRelayResponseFrame(wireFrame("NOTICE", .string(c.text)))
        else {
            Issue.record("frames did not parse to OK/CLOSED/NOTICE")
            return
        }
        #expect(inOK == m && inClosed == m && inNotice == m)
    }
}
