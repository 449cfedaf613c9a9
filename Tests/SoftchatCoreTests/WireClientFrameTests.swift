import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// Client → relay frames: every verb parses and round-trips, every bound holds at N and fails
/// at N+1, and every rejection carries its code and a message that names the place.
@Suite struct WireClientFrameTests {
    static let maxFrameBytes = RelayWireContract.maxFrameBytes.value  // 524,288
    /// Three distinct signed notes, the raw material of most frames below.
    static let notes: [VerifiedEvent] = (0..<3).map { note($0) }

    static func note(_ i: Int, content: String = "note", by identity: SoftchatIdentity = WireKeys.alice) -> VerifiedEvent {
        try! identity.sign(UnsignedEvent(createdAt: 1_700_000_000 + Int64(i), kind: 1, tags: [["t", "wire"]], content: "\(content) \(i)"))
    }

    static func authEvent(kind: Int = Nip42.authenticationKind, tags: [[String]]) -> VerifiedEvent {
        try! WireKeys.alice.sign(UnsignedEvent(createdAt: 1_714_625_219, kind: kind, tags: tags, content: ""))
    }

    /// Parses `frame.toJSON()`, expects the same frame back, and the same text again.
    @discardableResult
    func roundTrip(_ frame: ClientRelayFrame, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let text = frame.toJSON()
        let parsed = try parseClientRelayFrame(text)
        #expect(parsed == frame, sourceLocation: sourceLocation)
        #expect(parsed.verb == frame.verb, sourceLocation: sourceLocation)
        #expect(parsed.toJSON() == text, sourceLocation: sourceLocation)
        return text
    }

    func expectRejected(
        _ text: String, _ code: SoftchatErrorCode, mentioning parts: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectSoftchatError(code, mentioning: parts, sourceLocation: sourceLocation) { _ = try parseClientRelayFrame(text) }
    }

    // MARK: Every verb parses and round-trips

    @Test func eventFrameParsesToTheVerifiedEventAndRoundTrips() throws {
        let note = Self.notes[0]
        let text = wireFrame("EVENT", note.jsonValue)
        guard case .event(let parsed) = try parseClientRelayFrame(text) else {
            Issue.record("not .event")
            return
        }
        #expect(parsed == note && parsed.content == "note 0")
        #expect(try roundTrip(.event(note)) == text)
    }

    @Test func reqWithOneFilterParsesItsIdAndFilterAndRoundTrips() throws {
        let text = ##"["REQ","sub-1",{"kinds":[1],"authors":["\##(WireKeys.alice.publicKeyHex)"],"#t":["wire"],"limit":10}]"##
        let frame = try parseClientRelayFrame(text)
        guard case .req(let id, let filters) = frame else {
            Issue.record("not .req: \(frame)")
            return
        }
        #expect(id == "sub-1" && filters.count == 1)
        #expect(filters[0].kinds == [1] && filters[0].authors == [WireKeys.alice.publicKeyHex] && filters[0].limit == 10)
        #expect(frame.verb == "REQ" && frame.toJSON() == text)
        try roundTrip(frame)
    }

    @Test func reqWith64FiltersIsAcceptedAnd65IsInvalidRelayFilter() throws {
        let filters = (0..<65).map { JSONValue.object(JSONObject(["kinds": [.integer(Int64($0))]])) }
        let frame = try parseClientRelayFrame(JSONValue.array(["REQ", "s"] + Array(filters.prefix(64))).jsonText)
        guard case .req(_, let parsed) = frame else {
            Issue.record("not .req")
            return
        }
        #expect(parsed.count == 64 && parsed[63].kinds == [63])
        try roundTrip(frame)
        expectRejected(JSONValue.array(["REQ", "s"] + filters).jsonText, .invalidRelayFilter, mentioning: ["REQ has 65 filters", "64"])
    }

    @Test func countWith64FiltersIsAcceptedAnd65IsInvalidRelayFilter() throws {
        let filters = (0..<65).map { JSONValue.object(JSONObject(["#p": [.string(String(repeating: "a", count: $0 + 1))]])) }
        let frame = try parseClientRelayFrame(JSONValue.array(["COUNT", "c"] + Array(filters.prefix(64))).jsonText)
        guard case .count("c", let parsed) = frame else {
            Issue.record("not .count")
            return
        }
        #expect(parsed.count == 64)
        try roundTrip(frame)
        expectRejected(JSONValue.array(["COUNT", "c"] + filters).jsonText, .invalidRelayFilter, mentioning: ["COUNT has 65 filters", "64"])
    }

    @Test func closeFrameParsesItsSubscriptionIdAndRoundTrips() throws {
        #expect(try parseClientRelayFrame(#"["CLOSE","sub-1"]"#) == .close(subscriptionID: "sub-1"))
        try roundTrip(.close(subscriptionID: "sub-1"))
    }

    @Test func authFrameWithKind22242RelayAndChallengeTagsParsesAndRoundTrips() throws {
        let event = try WireKeys.alice.createNip42Authentication(
            challenge: WireKeys.challenge, relayURL: WireKeys.relay,
            createdAt: 1_714_625_219)
        guard case .auth(let parsed) = try parseClientRelayFrame(wireFrame("AUTH", event.jsonValue)) else {
            Issue.record("not .auth")
            return
        }
        #expect(parsed == event && parsed.kind == 22242)
        #expect(parsed.tags == [["relay", WireKeys.relay], ["challenge", WireKeys.challenge]])
        try roundTrip(.auth(event))
    }

    @Test func countFrameParsesLikeReqAndRoundTrips() throws {
        let text = ##"["COUNT","cnt1",{"kinds":[7],"#e":["\##(Self.notes[0].id)"]},{"kinds":[1]}]"##
        let frame = try parseClientRelayFrame(text)
        guard case .count("cnt1", let filters) = frame else {
            Issue.record("not .count: \(frame)")
            return
        }
        #expect(filters.count == 2 && filters[0].tagConditions.first?.values == [Self.notes[0].id])
        #expect(frame.verb == "COUNT" && frame.toJSON() == text)
        try roundTrip(frame)
    }

    @Test(arguments: [1, 2, 256])
    func eventsBatchOfNEventsParsesInOrderAndRoundTrips(_ n: Int) throws {
        let events = (0..<n).map { Self.note($0, content: "batch") }
        let frame = try parseClientRelayFrame(JSONValue.array(["EVENTS"] + events.map(\.jsonValue)).jsonText)
        guard case .events(let parsed) = frame else {
            Issue.record("not .events")
            return
        }
        #expect(parsed.map(\.id) == events.map(\.id))
        try roundTrip(.events(events))
    }

    // MARK: Frame size: 524,288 UTF-8 bytes, checked before parsing

    /// An EVENT frame of exactly `bytes` UTF-8 bytes, its content padded with "é" (2 bytes each).
    static func eventFrame(ofBytes bytes: Int) throws -> String {
        let base = ClientRelayFrame.event(try WireKeys.alice.sign(sampleDraft(content: ""))).toJSON().utf8.count
        let padding = bytes - base
        let content = String(repeating: "é", count: padding / 2) + String(repeating: "x", count: padding % 2)
        let text = ClientRelayFrame.event(try WireKeys.alice.sign(sampleDraft(content: content))).toJSON()
        try #require(text.utf8.count == bytes)
        return text
    }

    @Test func eventFrameOfExactly524288BytesIsAccepted() throws {
        let text = try Self.eventFrame(ofBytes: Self.maxFrameBytes)
        #expect(Self.maxFrameBytes == 524_288)
        #expect(text.count < Self.maxFrameBytes, "multibyte padding: fewer characters than bytes")
        guard case .event(let event) = try parseClientRelayFrame(text) else {
            Issue.record("not .event")
            return
        }
        #expect(event.content.hasPrefix("éé"))
    }

    @Test func eventFrameOf524289BytesIsRejectedEvenWithFewerCharacters() throws {
        let text = try Self.eventFrame(ofBytes: Self.maxFrameBytes + 1)
        #expect(text.count < Self.maxFrameBytes, "UTF-8 bytes count, not characters")
        expectRejected(text, .invalidRelayFrame, mentioning: ["client frame has 524289 bytes", "over the limit of 524288"])
    }

    @Test func reqPaddedWithALongTagValueIsAcceptedAtTheBoundAndRejectedOneByteOver() throws {
        let shell = ##"["REQ","pad",{"#t":[""]}]"##.utf8.count
        let exact = ##"["REQ","pad",{"#t":["\##(String(repeating: "t", count: Self.maxFrameBytes - shell - 3))€"]}]"##
        try #require(exact.utf8.count == Self.maxFrameBytes)
        guard case .req("pad", let filters) = try parseClientRelayFrame(exact) else {
            Issue.record("not .req")
            return
        }
        #expect(filters[0].tagConditions.first?.values.first?.hasSuffix("t€") == true)
        let over = exact.replacingOccurrences(of: "\"pad\"", with: "\"pad2\"")
        #expect(over.utf8.count == Self.maxFrameBytes + 1)
        expectRejected(over, .invalidRelayFrame, mentioning: ["524289 bytes", "524288"])
    }

    @Test func oversizeFrameIsRejectedForItsSizeBeforeItIsParsed() {
        // The same kind of garbage: at the bound it reaches the JSON reader, one byte over it never does.
        let garbage = "[" + String(repeating: "x", count: Self.maxFrameBytes - 1)
        expectRejected(garbage, .invalidRelayFrame, mentioning: ["client frame is not valid JSON"])
        let error = expectSoftchatError(.invalidRelayFrame, mentioning: ["524289 bytes", "524288"]) {
            _ = try parseClientRelayFrame(garbage + "x")
        }
        #expect(error?.message.contains("JSON") == false, "\(error?.message ?? "")")
    }

    // MARK: Subscription ids: 1 to 64 characters

    @Test(arguments: ["REQ", "COUNT", "CLOSE"])
    func subscriptionIdOf64CharactersIsAcceptedAnd65OrEmptyIsRejected(_ verb: String) throws {
        func text(_ id: String) -> String {
            verb == "CLOSE" ? wireFrame("CLOSE", .string(id)) : wireFrame(.string(verb), .string(id), .object(JSONObject()))
        }
        let id64 = String(repeating: "s", count: 64)
        let frame = try parseClientRelayFrame(text(id64))
        switch frame {
        case .req(let id, _), .count(let id, _), .close(let id): #expect(id == id64)
        default: Issue.record("unexpected \(frame)")
        }
        expectRejected(text(id64 + "s"), .invalidRelayFrame, mentioning: ["\(verb) subscription id has 65 characters", "1 to 64"])
        expectRejected(text(""), .invalidRelayFrame, mentioning: ["\(verb) subscription id has 0 characters"])
    }

    @Test func subscriptionIdThatIsNotAStringIsInvalidRelayFrame() {
        expectRejected(#"["REQ",7,{}]"#, .invalidRelayFrame, mentioning: ["REQ element 1 (subscription id) must be a string, not number"])
        expectRejected(#"["CLOSE",null]"#, .invalidRelayFrame, mentioning: ["CLOSE element 1 (subscription id)", "null"])
    }

    // MARK: EVENTS batches → invalid_relay_batch

    @Test func eventsBatchOf257IsRejectedAndEmptyBatchToo() {
        let events = (0..<257).map { Self.note($0, content: "big batch").jsonValue }
        expectRejected(
            JSONValue.array(["EVENTS"] + events).jsonText, .invalidRelayBatch,
            mentioning: ["EVENTS batch has 257 events", "over the limit of 256"])
        expectRejected(#"["EVENTS"]"#, .invalidRelayBatch, mentioning: ["EVENTS batch has 0 events", "minimum of 1"])
    }

    @Test func eventsBatchWithADuplicateIdIsRejectedNamingTheElement() {
        let (a, b) = (Self.notes[0], Self.notes[1])
        expectRejected(
            wireFrame("EVENTS", a.jsonValue, b.jsonValue, a.jsonValue), .invalidRelayBatch,
            mentioning: ["EVENTS element 3", "duplicate event id \(a.id)"])
    }

    @Test func nestedEventsArrayIsRejectedBecauseTheBatchIsFlat() {
        let nested = wireFrame("EVENTS", [Self.notes[0].jsonValue])
        expectRejected(nested, .invalidRelayBatch, mentioning: ["EVENTS element 1 is an array", "flat"])
        expectRejected(
            wireFrame("EVENTS", Self.notes[0].jsonValue, [Self.notes[1].jsonValue]), .invalidRelayBatch,
            mentioning: ["EVENTS element 2 is an array"])
    }

    @Test func eventsBatchWithABadSignatureIsRejectedNamingTheElementAndEvent() {
        let bad = Self.notes[1]
        expectRejected(
            wireFrame("EVENTS", Self.notes[0].jsonValue, bad.badSignatureJSON, Self.notes[2].jsonValue),
            .invalidRelayBatch, mentioning: ["EVENTS element 2", "event \(bad.id)", "signature does not verify"])
        expectRejected(
            wireFrame("EVENTS", Self.notes[0].jsonValue, Self.notes[2].tamperedContentJSON), .invalidRelayBatch,
            mentioning: ["EVENTS element 2", Self.notes[2].id, "id does not match"])
    }

    @Test func eventsBatchWithAMalformedElementIsRejectedNamingIt() {
        expectRejected(
            wireFrame("EVENTS", Self.notes[0].jsonValue, Self.notes[1].jsonValue.removing("sig")), .invalidRelayBatch,
            mentioning: ["EVENTS element 2", "missing field \"sig\""])
        expectRejected(
            wireFrame("EVENTS", "not an event"), .invalidRelayBatch,
            mentioning: ["EVENTS element 1", "must be a JSON object, not string"])
    }

    // MARK: AUTH → invalid_relay_authentication

    @Test func authWithAnotherKindIsRejected() {
        let event = Self.authEvent(kind: 1, tags: [["relay", WireKeys.relay], ["challenge", WireKeys.challenge]])
        expectRejected(
            wireFrame("AUTH", event.jsonValue), .invalidRelayAuthentication,
            mentioning: ["AUTH event \(event.id)", "kind is 1, not 22242"])
    }

    @Test func authWithoutAChallengeTagIsRejected() {
        let event = Self.authEvent(tags: [["relay", WireKeys.relay]])
        expectRejected(
            wireFrame("AUTH", event.jsonValue), .invalidRelayAuthentication,
            mentioning: ["AUTH event \(event.id)", "exactly one challenge tag, found 0"])
    }

    @Test func authWithTwoRelayTagsIsRejected() {
        let event = Self.authEvent(tags: [["relay", WireKeys.relay], ["relay", "wss://other.example"], ["challenge", WireKeys.challenge]])
        expectRejected(
            wireFrame("AUTH", event.jsonValue), .invalidRelayAuthentication,
            mentioning: ["AUTH event \(event.id)", "exactly one relay tag, found 2"])
    }

    @Test func authWithAnEmptyChallengeValueIsRejected() {
        let event = Self.authEvent(tags: [["relay", WireKeys.relay], ["challenge", ""]])
        expectRejected(wireFrame("AUTH", event.jsonValue), .invalidRelayAuthentication, mentioning: ["the challenge tag has no value"])
    }

    @Test func authWithABadSignatureOrNoEventIsRejected() throws {
        let event = try WireKeys.alice.createNip42Authentication(
            challenge: WireKeys.challenge, relayURL: WireKeys.relay,
            createdAt: 1_714_625_219)
        expectRejected(
            wireFrame("AUTH", event.badSignatureJSON), .invalidRelayAuthentication,
            mentioning: ["AUTH event \(event.id)", "signature does not verify"])
        expectRejected(wireFrame("AUTH", "a-challenge"), .invalidRelayAuthentication, mentioning: ["AUTH event", "JSON object"])
        expectRejected(wireFrame("AUTH"), .invalidRelayFrame, mentioning: ["AUTH frame must be", "got 1"])
    }

    // MARK: Everything else → invalid_relay_frame (REQ without filters → invalid_relay_filter)

    @Test(arguments: [
        ("not json", "client frame is not valid JSON"),
        ("", "client frame is not valid JSON"),
        (#"["CLOSE","s"] ["CLOSE","t"]"#, "client frame is not valid JSON"),
        (#"{"verb":"CLOSE"}"#, "client frame must be a JSON array, not object"),
        (#""CLOSE""#, "client frame must be a JSON array, not string"),
        ("[]", "client frame is an empty array"),
        (#"[1,"s"]"#, "client frame element 0 must be the verb string, not number"),
        (#"[["REQ"],"s",{}]"#, "client frame element 0 must be the verb string, not array"),
        (#"["PUBLISH","s"]"#, #"unknown client verb "PUBLISH""#),
        (#"["req","s",{}]"#, #"unknown client verb "req""#),
        (#"["EOSE","s"]"#, #"unknown client verb "EOSE""#),
        (#"["OK","","true",""]"#, #"unknown client verb "OK""#),
        (#"["EVENT"]"#, "EVENT frame must be [\"EVENT\", event] (2 elements), got 1"),
        (#"["CLOSE"]"#, "CLOSE frame must be [\"CLOSE\", subscription id] (2 elements), got 1"),
        (#"["CLOSE","a","b"]"#, "CLOSE frame must be [\"CLOSE\", subscription id] (2 elements), got 3"),
        (#"["REQ"]"#, "REQ frame needs a subscription id and filters"),
        (#"["COUNT"]"#, "COUNT frame needs a subscription id and filters"),
        (#"["EVENT","s"]"#, "EVENT event: an event must be a JSON object, not string"),
        (#"["EVENT",{}]"#, "EVENT event: missing field \"id\""),
    ])
    func malformedFrameIsInvalidRelayFrameNamingThePlace(_ text: String, _ place: String) {
        expectRejected(text, .invalidRelayFrame, mentioning: [place])
    }

    @Test func eventFrameWithThreeElementsIsWrongArity() {
        expectRejected(
            wireFrame("EVENT", Self.notes[0].jsonValue, Self.notes[1].jsonValue), .invalidRelayFrame,
            mentioning: ["EVENT frame must be", "got 3"])
        // The relay's shape ["EVENT", subid, event] is not a client frame.
        expectRejected(wireFrame("EVENT", "sub", Self.notes[0].jsonValue), .invalidRelayFrame, mentioning: ["EVENT frame must be", "got 3"])
    }

    @Test func reqOrCountWithoutFiltersIsInvalidRelayFilter() {
        expectRejected(#"["REQ","s"]"#, .invalidRelayFilter, mentioning: ["REQ needs at least one filter, got none"])
        expectRejected(#"["COUNT","c"]"#, .invalidRelayFilter, mentioning: ["COUNT needs at least one filter"])
    }

    @Test func badFilterInReqIsInvalidRelayFilterNamingItsIndexAndKey() {
        expectRejected(
            ##"["REQ","s",{"kinds":[1]},{},{"limit":1},{"#pp":["x"]}]"##, .invalidRelayFilter,
            mentioning: [##"filter 3: key "#pp" is not a single-letter tag"##])
        expectRejected(#"["COUNT","s",[]]"#, .invalidRelayFilter, mentioning: ["filter 0: must be a JSON object, not array"])
    }

    @Test func duplicateKeyIsReportedWithTheCodeOfThePartThatHoldsIt() {
        // The strict reader refuses duplicate keys while parsing the frame; the error carries
        // the code of the filter, batch event or AUTH event the key sits in.
        expectRejected(
            #"["REQ","s",{"kinds":[1],"kinds":[2]}]"#, .invalidRelayFilter,
            mentioning: ["filter", #"duplicate object key "kinds""#])
        expectRejected(
            ##"["COUNT","s",{"#p":["a"],"#p":["b"]}]"##, .invalidRelayFilter,
            mentioning: [##"duplicate object key "#p""##])
        expectRejected(
            #"["EVENTS",{"id":"x","id":"y"}]"#, .invalidRelayBatch,
            mentioning: ["EVENTS event", #"duplicate object key "id""#])
        expectRejected(
            #"["AUTH",{"kind":22242,"kind":1}]"#, .invalidRelayAuthentication,
            mentioning: ["AUTH event", #"duplicate object key "kind""#])
        expectRejected(
            #"["EVENT",{"kind":1,"kind":2}]"#, .invalidRelayFrame,
            mentioning: ["not valid JSON", #"duplicate object key "kind""#])
    }

    @Test func eventFrameWhoseEventFailsVerificationNamesTheEventId() {
        let note = Self.notes[0]
        expectRejected(
            wireFrame("EVENT", note.badSignatureJSON), .invalidRelayFrame,
            mentioning: ["EVENT event \(note.id)", "signature does not verify"])
        expectRejected(
            wireFrame("EVENT", note.tamperedContentJSON), .invalidRelayFrame,
            mentioning: ["EVENT event \(note.id)", "id does not match the NIP-01 serialization"])
        let otherKey = note.jsonValue.setting("pubkey", .string(WireKeys.bob.publicKeyHex))
        expectRejected(wireFrame("EVENT", otherKey), .invalidRelayFrame, mentioning: ["EVENT event \(note.id)"])
    }
}
