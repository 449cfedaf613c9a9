import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// NIP-01's event shape, enforced strictly: every rejection is `invalid_relay_frame` with a
/// message naming the field.
@Suite struct EventModelTests {
    /// A real signed event as JSON, the starting point every malformed case edits.
    static let identity = SoftchatIdentity.generate()
    let good: JSONValue
    let goodText: String

    init() throws {
        let event = try Self.identity.sign(sampleDraft(tags: [["e", String(repeating: "ab", count: 32)], ["t", "x"]]))
        good = event.jsonValue
        goodText = event.jsonText
    }

    /// Expects `json` (as a value and as text) to be refused with a message containing `field`.
    func expectRejected(_ json: JSONValue, mentioning parts: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        expectSoftchatError(.invalidRelayFrame, mentioning: parts, sourceLocation: sourceLocation) {
            _ = try UnverifiedEvent(json: json)
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: parts, sourceLocation: sourceLocation) {
            _ = try VerifiedEvent(text: json.jsonText)
        }
    }

    /// Replaces the literal of `field` in the good event's text (for numbers JSONValue can't spell).
    func text(replacing field: String, with literal: String) throws -> String {
        let value = try #require(good[field])
        let original = "\"\(field)\":\(value.jsonText)"
        #expect(goodText.contains(original))
        return goodText.replacingOccurrences(of: original, with: "\"\(field)\":\(literal)")
    }

    func expectTextRejected(_ text: String, mentioning parts: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        expectSoftchatError(.invalidRelayFrame, mentioning: parts, sourceLocation: sourceLocation) {
            _ = try UnverifiedEvent(text: text)
        }
    }

    @Test func goodEventParsesAndVerifies() throws {
        let e = try UnverifiedEvent(json: good)
        #expect(try e.verified().id == e.id)
        #expect(try VerifiedEvent(text: goodText).jsonText == goodText)
    }

    @Test func unknownFieldIsRejected() {
        expectRejected(good.setting("extra", 1), mentioning: ["unknown field \"extra\""])
        expectRejected(good.setting("Kind", 1), mentioning: ["unknown field \"Kind\""])
    }

    @Test(arguments: ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"])
    func missingFieldIsRejected(_ field: String) {
        expectRejected(good.removing(field), mentioning: ["missing field \"\(field)\""])
    }

    @Test func duplicateFieldIsRejectedByTheReader() throws {
        expectTextRejected(try text(replacing: "kind", with: "1,\"kind\":1"), mentioning: ["not JSON", "duplicate object key \"kind\""])
    }

    @Test func eventMustBeAnObject() {
        expectRejected(.array([good]), mentioning: ["must be a JSON object, not array"])
        expectRejected("event", mentioning: ["not string"])
    }

    @Test func uppercaseHexIdIsRejected() throws {
        let id = try #require(good["id"]?.stringValue)
        expectRejected(good.setting("id", .string(id.uppercased())), mentioning: ["id must be 64 lowercase hex characters"])
    }

    @Test func nonHexIdIsRejected() throws {
        let id = try #require(good["id"]?.stringValue)
        expectRejected(good.setting("id", .string("g" + id.dropFirst())), mentioning: ["id must be 64 lowercase hex"])
        expectRejected(good.setting("id", 1), mentioning: ["id must be a string, not number"])
    }

    @Test func shortPubkeyIsRejected() throws {
        let pubkey = try #require(good["pubkey"]?.stringValue)
        expectRejected(good.setting("pubkey", .string(String(pubkey.dropLast()))), mentioning: ["pubkey must be 64 lowercase hex"])
        expectRejected(good.setting("pubkey", .string(pubkey + "0")), mentioning: ["pubkey must be 64 lowercase hex"])
    }

    @Test func shortSigIsRejected() throws {
        let sig = try #require(good["sig"]?.stringValue)
        expectRejected(good.setting("sig", .string(String(sig.dropLast()))), mentioning: ["sig must be 128 lowercase hex"])
        expectRejected(good.setting("sig", .string(sig.uppercased())), mentioning: ["sig must be 128 lowercase hex"])
    }

    @Test func kindAbove65535IsRejected() {
        expectRejected(good.setting("kind", 65536), mentioning: ["kind 65536 is outside 0–65535"])
    }

    @Test func negativeKindIsRejected() {
        expectRejected(good.setting("kind", -1), mentioning: ["kind -1 is outside 0–65535"])
    }

    @Test func fractionalKindIsRejected() throws {
        expectTextRejected(try text(replacing: "kind", with: "1.5"), mentioning: ["kind 1.5 is not an integer"])
        expectTextRejected(try text(replacing: "kind", with: "1.0"), mentioning: ["kind 1.0 is not an integer"])
        expectRejected(good.setting("kind", "1"), mentioning: ["kind must be an integer, not string"])
    }

    @Test func negativeCreatedAtIsRejected() {
        expectRejected(good.setting("created_at", -1), mentioning: ["created_at -1 is negative"])
    }

    @Test func exponentCreatedAtIsRejected() throws {
        expectTextRejected(try text(replacing: "created_at", with: "1e3"), mentioning: ["created_at 1e3 is not an integer"])
    }

    @Test func createdAtBeyondInt64IsRejected() throws {
        expectTextRejected(
            try text(replacing: "created_at", with: "18446744073709551616"),
            mentioning: ["created_at 18446744073709551616 is not an integer timestamp in range"])
        expectTextRejected(try text(replacing: "created_at", with: "-0"), mentioning: ["created_at -0"])
        expectRejected(good.setting("created_at", nil), mentioning: ["created_at must be an integer, not null"])
    }

    @Test func tagsThatAreNotAnArrayAreRejected() {
        expectRejected(good.setting("tags", .object(JSONObject())), mentioning: ["tags must be an array, not object"])
        expectRejected(good.setting("tags", ["e"]), mentioning: ["tags[0] must be an array of strings, not string"])
    }

    @Test func emptyTagIsRejected() {
        expectRejected(good.setting("tags", [["t", "x"], []]), mentioning: ["tags[1] is empty"])
    }

    @Test func tagWithANumberIsRejected() {
        expectRejected(good.setting("tags", [["e", 1]]), mentioning: ["tags[0][1] must be a string, not number"])
        expectRejected(good.setting("tags", [["e", nil]]), mentioning: ["tags[0][1] must be a string, not null"])
    }

    @Test func contentThatIsNotAStringIsRejected() {
        expectRejected(good.setting("content", 5), mentioning: ["content must be a string, not number"])
        expectRejected(good.setting("content", nil), mentioning: ["content must be a string, not null"])
    }

    @Test func kindAtEachEndOfTheRangeIsAccepted() throws {
        for kind in [0, 65535] {
            let event = try Self.identity.sign(sampleDraft(kind: kind))
            let again = try VerifiedEvent(text: event.jsonText)
            #expect(again.kind == kind)
        }
    }

    @Test func createdAtAtEachEndOfTheRangeIsAccepted() throws {
        for createdAt in [0, Int64.max] {
            let event = try Self.identity.sign(sampleDraft(createdAt: createdAt))
            #expect(try VerifiedEvent(text: event.jsonText).createdAt == createdAt)
        }
    }

    @Test func emptyTagsAndContentAreAccepted() throws {
        let event = try Self.identity.sign(sampleDraft(content: "", tags: []))
        #expect(event.jsonText.contains("\"tags\":[],\"content\":\"\""))
        #expect(try VerifiedEvent(text: event.jsonText) == event)
    }

    @Test func jsonTextRoundTripsToAnEqualEvent() throws {
        let event = try Self.identity.sign(sampleDraft(content: "a\"b\\c\n\u{01}🤙", tags: [["p", "x", "", "mention"]]))
        let again = try VerifiedEvent(text: event.jsonText)
        #expect(again == event)
        #expect([again.id, again.pubkey, again.sig, again.content] == [event.id, event.pubkey, event.sig, event.content])
        #expect(again.createdAt == event.createdAt && again.kind == event.kind && again.tags == event.tags)
        #expect(event.jsonValue.objectValue?.keys == ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"])
        #expect(again.firstTagValue("p") == "x" && again.firstTagValue("e") == nil)
    }

    @Test func descriptionShowsIdKindAndPubkeyOnly() throws {
        let event = try Self.identity.sign(sampleDraft(content: "secret plans"))
        #expect(event.description == "VerifiedEvent(id: \(event.id), kind: 1, pubkey: \(event.pubkey))")
    }

    // MARK: UnsignedEvent

    @Test func unsignedEventReadsItsFieldsWithDefaults() throws {
        let draft = try UnsignedEvent(json: JSONReader().parse(#"{"kind":1,"created_at":5,"content":"hi"}"#))
        #expect(draft == UnsignedEvent(createdAt: 5, kind: 1, tags: [], content: "hi"))
        #expect(draft.pubkey == nil)
    }

    @Test func unsignedEventRejectsUnknownFields() throws {
        expectSoftchatError(.invalidRelayFrame, mentioning: ["unknown field \"id\" in an unsigned event"]) {
            _ = try UnsignedEvent(json: JSONReader().parse(#"{"kind":1,"created_at":5,"content":"","id":"00"}"#))
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["unknown field \"sig\""]) {
            _ = try UnsignedEvent(json: JSONReader().parse(#"{"kind":1,"created_at":5,"content":"","sig":""}"#))
        }
    }

    @Test(arguments: ["created_at", "kind", "content"])
    func unsignedEventRequiresItsField(_ field: String) throws {
        let full = try JSONReader().parse(#"{"kind":1,"created_at":5,"content":"","tags":[]}"#)
        expectSoftchatError(.invalidRelayFrame, mentioning: ["missing field \"\(field)\""]) {
            _ = try UnsignedEvent(json: full.removing(field))
        }
    }

    @Test func unsignedEventChecksShapes() throws {
        for (literal, message) in [
            (#""kind":70000"#, "kind 70000"), (#""kind":1.5"#, "kind 1.5"),
            (#""kind":1,"created_at":-2"#, "created_at -2"), (#""kind":1,"tags":[[]]"#, "tags[0] is empty"),
            (#""kind":1,"pubkey":"ABC""#, "pubkey must be 64 lowercase hex"),
        ] {
            let text = "{\(literal)\(literal.contains("created_at") ? "" : ",\"created_at\":5"),\"content\":\"\"}"
            expectSoftchatError(.invalidRelayFrame, mentioning: [message]) { _ = try UnsignedEvent(json: JSONReader().parse(text)) }
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["must be a JSON object"]) { _ = try UnsignedEvent(json: [1]) }
    }

    @Test func signingChecksAGivenPubkey() throws {
        let me = Self.identity
        let draft = try UnsignedEvent(
            json: JSONReader().parse(
                #"{"kind":1,"created_at":5,"content":"x","pubkey":"\#(me.publicKeyHex)"}"#))
        #expect(try me.sign(draft).pubkey == me.publicKeyHex)
        let someoneElse = SoftchatIdentity.generate().publicKeyHex
        expectSoftchatError(.invalidRelayFrame, mentioning: ["pubkey \(someoneElse) is not this identity's public key"]) {
            _ = try me.sign(UnsignedEvent(pubkey: someoneElse, createdAt: 5, kind: 1, content: "x"))
        }
    }

    @Test func signingRefusesDraftsThatWouldNotParse() {
        let me = Self.identity
        expectSoftchatError(.invalidRelayFrame, mentioning: ["kind 65536"]) { _ = try me.sign(sampleDraft(kind: 65536)) }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["kind -1"]) { _ = try me.sign(sampleDraft(kind: -1)) }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["created_at -1"]) { _ = try me.sign(sampleDraft(createdAt: -1)) }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["tags[1] is empty"]) { _ = try me.sign(sampleDraft(tags: [["t"], []])) }
    }
}
