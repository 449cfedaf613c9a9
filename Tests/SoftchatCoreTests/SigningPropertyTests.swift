import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// Seeded, so every run generates the same corpus.
private typealias SeededGenerator = SplitMix64

/// Every C0 control, DEL, the characters NIP-01 escapes, non-BMP scalars and U+2028/U+2029.
private let awkward: [Unicode.Scalar] =
    (0..<0x20).map { Unicode.Scalar(UInt8($0)) }
    + ["\u{7F}", "\"", "\\", "/", "\u{2028}", "\u{2029}", "\u{FEFF}", "🤙", "𝄞", "\u{10FFFF}", "\u{10000}", "é", "’"]

private func randomText(_ rng: inout SeededGenerator, maxLength: Int) -> String {
    var scalars = String.UnicodeScalarView()
    for _ in 0..<Int.random(in: 0...maxLength, using: &rng) {
        if Bool.random(using: &rng) {
            scalars.append(awkward.randomElement(using: &rng)!)
        } else if Bool.random(using: &rng) {
            scalars.append(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &rng)))
        } else {
            var v = UInt32.random(in: 0...0x10FFFF, using: &rng)
            if (0xD800...0xDFFF).contains(v) { v += 0x800 }
            scalars.append(Unicode.Scalar(v)!)
        }
    }
    return String(scalars)
}

@Suite struct SigningPropertyTests {
    static let identity = SoftchatIdentity.generate()

    @Test func randomEventsRoundTripThroughSignSerializeParseVerify() throws {
        var rng = SeededGenerator(seed: 0x5EED_50F7)
        var seen = Set<UInt32>()
        var unlistedCases = 0
        let cases = 600
        for i in 0..<cases {
            // The first cases put each awkward scalar alone in the content and a tag.
            let content = i < awkward.count ? String(awkward[i]) : randomText(&rng, maxLength: 40)
            let tags: [[String]] =
                (0..<Int.random(in: 0...4, using: &rng)).map { _ in
                    (0..<Int.random(in: 1...4, using: &rng)).map { _ in randomText(&rng, maxLength: 12) }
                } + (i < awkward.count ? [[String(awkward[i])]] : [])
            let draft = UnsignedEvent(
                createdAt: Int64.random(in: 0...(1 << 40), using: &rng),
                kind: Int.random(in: 0...65535, using: &rng), tags: tags, content: content)
            seen.formUnion(content.unicodeScalars.map(\.value))
            for tag in tags { for item in tag { seen.formUnion(item.unicodeScalars.map(\.value)) } }

            let signed = try Self.identity.sign(draft)
            let text = signed.jsonText
            #expect(!text.utf8.contains { $0 < 0x20 }, "case \(i): raw control byte on the wire")
            let parsed = try VerifiedEvent(text: text)
            #expect(parsed == signed, "case \(i)")
            // Byte-exact: String == would accept canonically equivalent text.
            #expect(Array(parsed.content.utf8) == Array(content.utf8), "case \(i): content")
            #expect(parsed.tags.map { $0.map { Array($0.utf8) } } == tags.map { $0.map { Array($0.utf8) } }, "case \(i): tags")
            #expect(parsed.createdAt == draft.createdAt && parsed.kind == draft.kind && parsed.pubkey == Self.identity.publicKeyHex)
            // Softchat signs the escaped (JSON.stringify/serde_json) form; it differs from the
            // literal NIP-01 form exactly when an unlisted control character is present.
            let escaped = CanonicalSerialization.bytes(
                pubkey: parsed.pubkey, createdAt: parsed.createdAt,
                kind: parsed.kind, tags: parsed.tags, content: parsed.content, escaping: .json)
            let literal = CanonicalSerialization.bytes(
                pubkey: parsed.pubkey, createdAt: parsed.createdAt,
                kind: parsed.kind, tags: parsed.tags, content: parsed.content, escaping: .nip01)
            #expect(Hex.encode(SHA256.hash(escaped)) == parsed.id, "case \(i): id")
            let hasUnlisted = ([content] + tags.joined()).contains { s in
                s.utf8.contains { $0 < 0x20 && ![0x08, 0x09, 0x0A, 0x0C, 0x0D].contains($0) }
            }
            #expect((escaped != literal) == hasUnlisted, "case \(i)")
            if hasUnlisted { unlistedCases += 1 }
        }
        for scalar in awkward { #expect(seen.contains(scalar.value), "never generated U+\(String(scalar.value, radix: 16))") }
        #expect(unlistedCases > 100 && unlistedCases < cases)
    }

    @Test func canonicalSerializationFormsDifferOnlyInUnlistedControls() {
        let tags = [["e", "x\u{01}"], ["p"]]
        let content = "q\"\\\n\r\t\u{08}\u{0C}\u{1F}/é"
        let literal = CanonicalSerialization.bytes(pubkey: "ab", createdAt: 7, kind: 1, tags: tags, content: content, escaping: .nip01)
        #expect(literal == Array("[0,\"ab\",7,1,[[\"e\",\"x\u{01}\"],[\"p\"]],\"q\\\"\\\\\\n\\r\\t\\b\\f\u{1F}/é\"]".utf8))
        let escaped = CanonicalSerialization.bytes(pubkey: "ab", createdAt: 7, kind: 1, tags: tags, content: content)
        #expect(escaped == Array(#"[0,"ab",7,1,[["e","x\u0001"],["p"]],"q\"\\\n\r\t\b\f\u001f/é"]"#.utf8))
        #expect(escaped == CanonicalSerialization.bytes(pubkey: "ab", createdAt: 7, kind: 1, tags: tags, content: content, escaping: .json))
    }

    // MARK: The JSON.stringify-compatible id

    /// An event whose id hashes the serialization with `escaping` (JSON.stringify escapes
    /// U+0001 as `\u0001`; NIP-01 writes it verbatim), signed by `identity`.
    static func event(
        content: String, tags: [[String]], escaping: JSONWriter.StringEscaping,
        identity: SoftchatIdentity = identity, idOverride: [UInt8]? = nil
    ) throws -> String {
        let pubkey = identity.publicKeyHex
        let id =
            idOverride
            ?? SHA256.hash(
                CanonicalSerialization.bytes(
                    pubkey: pubkey, createdAt: 1_700_000_000, kind: 1, tags: tags, content: content, escaping: escaping))
        let sig = try #require(identity.signMessage(id, auxRandom: [UInt8](repeating: 7, count: 32)))
        return JSONValue.object(
            JSONObject([
                "id": .string(Hex.encode(id)), "pubkey": .string(pubkey), "created_at": 1_700_000_000, "kind": 1,
                "tags": .array(tags.map { .array($0.map(JSONValue.string)) }), "content": .string(content),
                "sig": .string(Hex.encode(sig)),
            ])
        ).jsonText
    }

    @Test func jsonStringifyStyleIdOfContentWithAControlCharacterIsAccepted() throws {
        let content = "ring\u{07}bell \u{01}\u{1F}\u{00}"
        let stringify = try VerifiedEvent(text: Self.event(content: content, tags: [], escaping: .json))
        let nip01 = try VerifiedEvent(text: Self.event(content: content, tags: [], escaping: .nip01))
        #expect(stringify.id != nip01.id)
        #expect(Array(stringify.content.utf8) == Array(content.utf8) && stringify.content == nip01.content)
    }

    @Test func jsonStringifyStyleIdOfATagWithAControlCharacterIsAccepted() throws {
        let tags = [["t", "a\u{01}b"], ["e", "x"]]
        let stringify = try VerifiedEvent(text: Self.event(content: "plain", tags: tags, escaping: .json))
        let nip01 = try VerifiedEvent(text: Self.event(content: "plain", tags: tags, escaping: .nip01))
        #expect(stringify.id != nip01.id && stringify.tags == tags && nip01.tags == tags)
    }

    @Test func signingHashesTheEscapedInteroperableForm() throws {
        let signed = try Self.identity.sign(sampleDraft(content: "\u{01}", tags: [["t", "\u{1F}"]]))
        func id(_ escaping: JSONWriter.StringEscaping) -> String {
            Hex.encode(
                SHA256.hash(
                    CanonicalSerialization.bytes(
                        pubkey: signed.pubkey, createdAt: signed.createdAt, kind: 1, tags: [["t", "\u{1F}"]], content: "\u{01}",
                        escaping: escaping)))
        }
        #expect(signed.id == id(.json))
        #expect(signed.id != id(.nip01))
    }

    @Test func withoutUnlistedControlsOnlyTheNIP01IdIsAccepted() throws {
        // Listed escapes (\n, \t, quotes) are the same in both forms, so there is no second chance.
        let content = "line\nbreak\t\"quoted\" \\ / é"
        _ = try VerifiedEvent(text: Self.event(content: content, tags: [["t", "x"]], escaping: .nip01))
        let wrong = SHA256.hash(Array("[0,\"not the event\"]".utf8))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["id does not match the NIP-01 serialization"]) {
            _ = try VerifiedEvent(text: Self.event(content: content, tags: [["t", "x"]], escaping: .nip01, idOverride: wrong))
        }
    }

    @Test func controlCharacterEventWhoseIdIsNeitherFormIsRejected() throws {
        let wrong = SHA256.hash(Array("[0,\"not the event\"]".utf8))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["id does not match the NIP-01 serialization"]) {
            _ = try VerifiedEvent(text: Self.event(content: "\u{01}", tags: [], escaping: .nip01, idOverride: wrong))
        }
        // The stringify id of *different* values is no better.
        let other = SHA256.hash(
            CanonicalSerialization.bytes(
                pubkey: Self.identity.publicKeyHex, createdAt: 1_700_000_000, kind: 1, tags: [], content: "\u{02}", escaping: .json))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["id does not match"]) {
            _ = try VerifiedEvent(text: Self.event(content: "\u{01}", tags: [], escaping: .json, idOverride: other))
        }
    }

    @Test func stringifyStyleIdStillNeedsAValidSignature() throws {
        let text = try Self.event(content: "\u{01}", tags: [], escaping: .json)
        var json = try JSONReader().parse(text)
        json = json.setting("sig", .string(try #require(json["sig"]?.stringValue).flippingHexDigit(at: 100)))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["signature does not verify"]) { _ = try VerifiedEvent(json: json) }
        // Signed by someone else under our pubkey: the id matches, the signature does not.
        let forged = try Self.event(content: "\u{01}", tags: [], escaping: .json, identity: SoftchatIdentity.generate())
        var forgedJSON = try JSONReader().parse(forged)
        let ourId = SHA256.hash(
            CanonicalSerialization.bytes(
                pubkey: Self.identity.publicKeyHex, createdAt: 1_700_000_000, kind: 1, tags: [], content: "\u{01}", escaping: .json))
        forgedJSON = forgedJSON.setting("pubkey", .string(Self.identity.publicKeyHex)).setting("id", .string(Hex.encode(ourId)))
        expectSoftchatError(.invalidRelayFrame, mentioning: ["signature does not verify"]) { _ = try VerifiedEvent(json: forgedJSON) }
    }
}
