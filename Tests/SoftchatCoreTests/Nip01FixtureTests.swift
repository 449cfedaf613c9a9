import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// A fixture whose id and signature verify (Tests/Fixtures/nostr-sdk-ios/README.md), and where its event sits in the file.
struct GoodFixture: Sendable, CustomTestStringConvertible {
    var name: String
    /// Index of the event in a relay frame (`["EVENT", subid, event]` → 2); nil for a bare event.
    var frameIndex: Int?
    var testDescription: String { name }

    static let all: [GoodFixture] = [
        .init(name: "auth_request", frameIndex: 1), .init(name: "authentication_event"),
        .init(name: "event", frameIndex: 2), .init(name: "event_request", frameIndex: 1),
        .init(name: "test_event"), .init(name: "simple_note"), .init(name: "text_note"),
        .init(name: "metadata_json_stringified"), .init(name: "reaction"), .init(name: "text_note_root_reply"),
        .init(name: "deletion"), .init(name: "relay_list_metadata"), .init(name: "seal"),
        .init(name: "legacy_encrypted_direct_message"),
    ]

    /// The event's JSON value, read with the strict reader.
    func eventJSON() throws -> JSONValue {
        let document = try JSONReader().parse(Paths.fixtureText(name))
        guard let frameIndex else { return document }
        let frame = try #require(document.arrayValue, "\(name) is not a frame")
        return frame[frameIndex]
    }
}

/// Every way to tamper with a good event; each must cost it its verification.
enum Tamper: String, CaseIterable, Sendable {
    case content, tagChanged, tagAdded, tagRemoved, createdAt, kind, sig, pubkey, id

    func apply(to event: JSONValue, otherPubkey: String) throws -> JSONValue {
        func string(_ key: String) throws -> String { try #require(event[key]?.stringValue) }
        let tags = try #require(event["tags"]?.arrayValue)
        switch self {
        case .content: return event.setting("content", .string(try string("content") + "!"))
        case .tagChanged:
            guard var first = tags.first?.arrayValue else {
                return event.setting("tags", [["t", "x"]])  // no tag to change: "change" [] into one tag
            }
            first[first.count - 1] = .string((first.last?.stringValue ?? "") + "x")
            return event.setting("tags", .array([.array(first)] + tags.dropFirst()))
        case .tagAdded: return event.setting("tags", .array(tags + [["t", "tampered"]]))
        case .tagRemoved: return event.setting("tags", .array(tags.isEmpty ? [["e"]] : Array(tags.dropLast())))
        case .createdAt: return event.setting("created_at", .integer(try #require(event["created_at"]?.int64Value) + 1))
        case .kind: return event.setting("kind", .integer(try #require(event["kind"]?.int64Value) ^ 1))
        case .sig: return event.setting("sig", .string(try string("sig").flippingHexDigit(at: 77)))
        case .pubkey: return event.setting("pubkey", .string(otherPubkey))
        case .id: return event.setting("id", .string(try string("id").flippingHexDigit(at: 63)))
        }
    }
}

@Suite struct Nip01FixtureTests {
    @Test(arguments: GoodFixture.all)
    func idAndSignatureOKFixtureVerifies(_ fixture: GoodFixture) throws {
        let json = try fixture.eventJSON()
        let event = try VerifiedEvent(json: json)
        #expect(event.id == json["id"]?.stringValue)
        #expect(event.sig == json["sig"]?.stringValue)
        // The compact re-serialization verifies too and reads back to the same event.
        let again = try VerifiedEvent(text: event.jsonText)
        #expect(again == event)
        #expect(again.content == event.content && again.tags == event.tags)
    }

    @Test func everyGoodFixtureWasChecked() throws {
        #expect(GoodFixture.all.count == 14)
        let kinds = try GoodFixture.all.map { try VerifiedEvent(json: $0.eventJSON()).kind }
        #expect(Set(kinds) == [0, 1, 4, 5, 7, 13, 10002, 22242])
    }

    @Test func bareEventFileVerifiesFromItsText() throws {
        // Pretty-printed, non-ASCII content, fields in unusual order: still the same event.
        let event = try VerifiedEvent(text: Paths.fixtureText("text_note"))
        #expect(event.id == "fa5ed84fc8eeb959fd39ad8e48388cfc33075991ef8e50064cfcecfd918bb91b")
        #expect(event.content.hasSuffix("doesn’t persist. Bug.  "))
        let reordered = try VerifiedEvent(text: Paths.fixtureText("text_note_root_reply"))
        #expect(
            reordered.tags.count == 3 && reordered.tags[0] == ["e", "a7823beaa8c9d4063bb554972fa5ba90112764231aed3d4d691199da3e5c6a03", "", "root"])
    }

    @Test(arguments: GoodFixture.all)
    func tamperedCopiesFailVerification(_ fixture: GoodFixture) throws {
        let json = try fixture.eventJSON()
        let other = SoftchatIdentity.generate().publicKeyHex
        for tamper in Tamper.allCases {
            let bad = try tamper.apply(to: json, otherPubkey: other)
            #expect(bad != json, "\(tamper) changed nothing")
            let id = try #require(bad["id"]?.stringValue)
            let error = expectSoftchatError(.invalidRelayFrame, mentioning: [id]) { _ = try VerifiedEvent(json: bad) }
            // A tampered sig leaves the id honest, so it is the signature that fails; anything
            // else breaks the id first.
            let expected = tamper == .sig ? "signature does not verify" : "id does not match"
            #expect(error?.message.contains(expected) == true, "\(tamper): \(error?.message ?? "-")")
            // The text path rejects it the same way.
            expectSoftchatError(.invalidRelayFrame) { _ = try VerifiedEvent(text: bad.jsonText) }
        }
    }

    @Test(arguments: GoodFixture.all)
    func tamperedCopiesWithARecomputedIdFailOnTheSignature(_ fixture: GoodFixture) throws {
        // A forger who also fixes the id still cannot produce the signature.
        let json = try fixture.eventJSON()
        let other = SoftchatIdentity.generate().publicKeyHex
        for tamper in Tamper.allCases where tamper != .id && tamper != .sig {
            var bad = try tamper.apply(to: json, otherPubkey: other)
            let e = try UnverifiedEvent(json: bad)
            let id = Hex.encode(
                SHA256.hash(
                    CanonicalSerialization.bytes(
                        pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags, content: e.content)))
            bad = bad.setting("id", .string(id))
            expectSoftchatError(.invalidRelayFrame, mentioning: [id, "signature does not verify"]) {
                _ = try VerifiedEvent(json: bad)
            }
        }
    }

    @Test func pubkeyThatIsNotACurvePointIsRejectedNotCrashed() throws {
        // BIP-340 vector 5's key: 64 valid hex characters, but no point on the curve.
        let json = try GoodFixture(name: "test_event").eventJSON()
            .setting("pubkey", "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34")
        let e = try UnverifiedEvent(json: json)
        let id = Hex.encode(
            SHA256.hash(
                CanonicalSerialization.bytes(
                    pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags, content: e.content)))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["pubkey is not a valid secp256k1"]) {
            _ = try VerifiedEvent(json: json.setting("id", .string(id)))
        }
    }

    // MARK: Fixtures that must not verify

    @Test(arguments: ["relay_list_metadata_invalid_tags", "test_event_expired"])
    func editedFixtureParsesButFailsVerificationNamingItsId(_ name: String) throws {
        let text = try Paths.fixtureText(name)
        let parsed = try UnverifiedEvent(text: text)
        expectSoftchatError(.invalidRelayFrame, mentioning: ["event \(parsed.id)", "id does not match"]) {
            _ = try VerifiedEvent(text: text)
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: [parsed.id]) { _ = try parsed.verified() }
    }

    @Test func rumorWithoutSigFailsToParse() throws {
        let text = try Paths.fixtureText("rumor")
        expectSoftchatError(.invalidRelayFrame, mentioning: ["missing field \"sig\""]) { _ = try UnverifiedEvent(text: text) }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["missing field \"sig\""]) { _ = try VerifiedEvent(text: text) }
    }

    @Test func rumorIdIsStillTheCanonicalHash() throws {
        // The README says the rumor's id verifies; it is a NIP-01 vector even without a sig.
        let json = try JSONReader().parse(Paths.fixtureText("rumor"))
        let tags = try #require(json["tags"]?.arrayValue).map { try #require($0.arrayValue).map { try #require($0.stringValue) } }
        let bytes = CanonicalSerialization.bytes(
            pubkey: try #require(json["pubkey"]?.stringValue), createdAt: try #require(json["created_at"]?.int64Value),
            kind: Int(try #require(json["kind"]?.int64Value)), tags: tags, content: try #require(json["content"]?.stringValue))
        #expect(Hex.encode(SHA256.hash(bytes)) == json["id"]?.stringValue)
    }

    @Test(arguments: ["gift_wrap", "relay_info"])
    func fixtureWithATrailingCommaIsRejectedByTheStrictReader(_ name: String) throws {
        let bytes = Array(try Paths.fixtureText(name).utf8)
        // Where the offending close brace is: the first `}` after a comma and only whitespace.
        let closeAfterComma = try #require(
            bytes.indices.first { i in
                guard bytes[i] == UInt8(ascii: "}") else { return false }
                let before = bytes[..<i].lastIndex { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
                return before.map { bytes[$0] == UInt8(ascii: ",") } ?? false
            })
        #expect(throws: JSONError(.unexpectedByte(UInt8(ascii: "}")), at: closeAfterComma)) {
            try JSONReader().parse(bytes)
        }
        let error = expectSoftchatError(.invalidRelayFrame, mentioning: ["not JSON", "unexpected character '}'"]) {
            _ = try VerifiedEvent(text: String(decoding: bytes, as: UTF8.self))
        }
        #expect(error?.message.contains("at byte \(closeAfterComma)") == true)
    }

    @Test func giftWrapWithoutItsTrailingCommaVerifies() throws {
        // The comma is the only defect: removed, the event is the "id+sig OK" one the README lists.
        let text = try Paths.fixtureText("gift_wrap")
        let fixed = text.replacingOccurrences(of: "]],\n}", with: "]]\n}")
        #expect(fixed != text)
        let event = try VerifiedEvent(text: fixed)
        #expect(event.kind == 1059)
        #expect(event.id == "5c005f3ccf01950aa8d131203248544fb1e41a0d698e846bd419cec3890903ac")
    }

    // MARK: Spelling

    @Test func fixtureRespelledWithEscapesStillVerifies() throws {
        let text = try Paths.fixtureText("text_note")
        let respelled = text.replacingOccurrences(of: "’", with: "\\u2019").replacingOccurrences(of: "Bug.", with: "\\u0042ug\\u002e")
        #expect(respelled != text && !respelled.contains("’"))
        let a = try VerifiedEvent(text: text)
        let b = try VerifiedEvent(text: respelled)
        #expect(a == b && a.content == b.content)
    }

    @Test func signedEventRespelledWithEscapesStillVerifies() throws {
        let identity = SoftchatIdentity.generate()
        let event = try identity.sign(
            sampleDraft(
                content: "café é/à 🤙 https://example.com/x",
                tags: [["r", "wss://relay.example.com/"], ["t", "é"]]))
        let text = event.jsonText
        let respelled = text.replacingOccurrences(of: "é", with: "\\u00e9").replacingOccurrences(of: "/", with: "\\/")
            .replacingOccurrences(of: "🤙", with: "\\ud83e\\udd19").replacingOccurrences(of: "à", with: "\\u00E0")
        #expect(!respelled.contains("é") && respelled.contains("\\/"))
        #expect(!respelled.replacingOccurrences(of: "\\/", with: "").contains("/"))
        let again = try VerifiedEvent(text: respelled)
        #expect(again == event)
        #expect(again.content == event.content && again.tags == event.tags)
    }

    @Test func respellingThatChangesAValueDoesNotVerify() throws {
        // Guard against a reader that would "normalize" values: é (U+00E9) vs e + U+0301.
        let event = try SoftchatIdentity.generate().sign(sampleDraft(content: "café"))
        let changed = event.jsonText.replacingOccurrences(of: "é", with: "e\\u0301")
        expectSoftchatError(.invalidRelayFrame, mentioning: ["id does not match"]) { _ = try VerifiedEvent(text: changed) }
    }
}
