import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// The fast path from text to event (`EventReader`, the EVENT/EVENTS/AUTH frame reader, long
/// escaped content kept as written) against the full reader it stands in for: whatever the
/// fast path accepts, the full reader accepts with equal fields; whatever it declines, the full
/// reader decides, so every diagnostic is the full reader's.
@Suite struct EventFastPathTests {
    static let author = WireKeys.alice

    /// Text the way awkward encoders write it: control characters, quotes, non-ASCII, emoji.
    static let pieces = [
        "plain words ", "line\nbreak", "tab\t", "quote\"", "back\\slash", "café", "東京", "🤙", "\u{1}",
        "\u{1F}", "\u{7F}", "/slash/", "\u{2028}", "\r\n", "\u{8}\u{C}", "ok. ",
    ]

    static func content(_ rng: inout WireRNG, length: Int) -> String {
        var s = ""
        while s.utf8.count < length { s += pieces.randomElement(using: &rng)! }
        return s
    }

    /// 300 signed events; one in ten carries long content (past the lazy threshold).
    static let corpus: [VerifiedEvent] = {
        var rng = WireRNG(seed: 42)
        return (0..<300).map { i in
            let length = i % 10 == 0 ? 5_000 + Int.random(in: 0...20_000, using: &rng) : Int.random(in: 0...300, using: &rng)
            var tags: [[String]] = [["t", content(&rng, length: 8)]]
            if i % 3 == 0 { tags.append(["p", WireKeys.bob.publicKeyHex, "wss://relay.example.com", ""]) }
            return try! author.sign(
                UnsignedEvent(
                    createdAt: 1_700_000_000 + Int64(i), kind: i % 7 == 0 ? 30_023 : 1,
                    tags: tags, content: content(&rng, length: length)))
        }
    }()

    /// The same event spelled differently: whitespace between tokens, members in another order,
    /// escapes an encoder may choose (`\/`, `\u00e9`, uppercase hex, surrogate pairs).
    static func respellings(_ e: VerifiedEvent, _ rng: inout WireRNG) -> [String] {
        var spellings = [e.jsonText]
        let spaced = e.jsonText.replacingOccurrences(of: "\":", with: "\" : ").replacingOccurrences(of: ",\"", with: " ,\n\t\"")
        spellings.append(" \(spaced) ")
        var members = e.jsonValue.objectValue!.members
        members.shuffle(using: &rng)
        spellings.append(JSONValue.object(JSONObject(members: members)).jsonText)
        var escaped = "\""
        for scalar in e.content.unicodeScalars {
            switch scalar {
            case "/": escaped += "\\/"
            case "é": escaped += "\\u00e9"
            case "\u{1F}": escaped += "\\u001F"
            case "🤙": escaped += "\\ud83e\\udd19"
            default: escaped += JSONValue.string(String(scalar)).jsonText.dropFirst().dropLast()
            }
        }
        escaped += "\""
        spellings.append(e.jsonText.replacingOccurrences(of: JSONValue.string(e.content).jsonText, with: escaped))
        return spellings
    }

    static func reference(_ text: String) throws -> UnverifiedEvent {
        try UnverifiedEvent(json: try JSONReader().parse(text))
    }

    @Test func fastPathAndFullReaderAgreeOnEveryEventAndSpelling() throws {
        var rng = WireRNG(seed: 7)
        var checked = 0
        for event in Self.corpus {
            for text in Self.respellings(event, &rng) {
                let fast = try #require(EventReader.read(text: text), "fast path declined \(text.prefix(120))")
                let full = try Self.reference(text)
                #expect(fast.id == full.id && fast.pubkey == full.pubkey && fast.sig == full.sig)
                #expect(fast.createdAt == full.createdAt && fast.kind == full.kind && fast.tags == full.tags)
                #expect(fast.content == full.content)
                #expect(fast.content == event.content)
                let verified = try fast.verified()
                #expect(verified == event)
                // Written back: byte for byte what the full path writes, whatever the input spelling.
                #expect(verified.jsonText == event.jsonValue.jsonText)
                checked += 1
            }
        }
        #expect(checked == Self.corpus.count * 4)
    }

    @Test func longEscapedContentIsVerifiedAndStoredWithoutBeingDecoded() throws {
        let long = try #require(Self.corpus.first { $0.content.utf8.count > 5_000 && $0.content.contains("\n") })
        let parsed = try #require(EventReader.read(text: long.jsonText))
        guard case .escaped(let text) = parsed.contentStorage.storage else {
            Issue.record("long escaped content was decoded eagerly")
            return
        }
        #expect(text.isCanonical)
        let verified = try parsed.verified()
        #expect(verified.jsonText == long.jsonText)  // copied through, still escaped
        #expect(verified.content == long.content)  // decoded on first read
        #expect(verified.content == long.content)  // and again, from the cache

        // A non-canonical spelling (`\/`) is still verified, by decoding and re-serializing.
        let respelled = long.jsonText.replacingOccurrences(of: "/", with: "\\/")
        let slashed = try #require(EventReader.read(text: respelled))
        if case .escaped(let t) = slashed.contentStorage.storage { #expect(!t.isCanonical) }
        #expect(try slashed.verified().jsonText == long.jsonText)

        // Tampering inside the escaped text still breaks the id.
        let tampered = long.jsonText.replacingOccurrences(of: "\\n", with: "\\r")
        expectSoftchatError(.invalidRelayFrame, mentioning: ["id does not match"]) {
            _ = try VerifiedEvent(text: tampered)
        }
    }

    /// Shapes the fast path must not take: each still fails through the full reader with its
    /// precise message.
    @Test(arguments: [
        (#"{"id":"I","id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"","sig":"S"}"#, "duplicate object key"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"","sig":"S","x":1}"#, "unknown field"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":""}"#, "missing field \"sig\""),
        (#"{"id":"I","pubkey":"P","created_at":-1,"kind":1,"tags":[],"content":"","sig":"S"}"#, "negative"),
        (#"{"id":"I","pubkey":"P","created_at":1.0,"kind":1,"tags":[],"content":"","sig":"S"}"#, "created_at 1.0"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1e3,"tags":[],"content":"","sig":"S"}"#, "kind 1e3"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":70000,"tags":[],"content":"","sig":"S"}"#, "outside 0–65535"),
        (#"{"id":"I","pubkey":"P","created_at":01,"kind":1,"tags":[],"content":"","sig":"S"}"#, "not JSON"),
        // Past Int64 (a fuzz finding: the fast path must not overflow while reading digits).
        (
            #"{"id":"I","pubkey":"P","created_at":9704157232222222222222222225,"kind":1,"tags":[],"content":"","sig":"S"}"#,
            "not an integer timestamp in range"
        ),
        (
            #"{"id":"I","pubkey":"P","created_at":1,"kind":99999999999999999999,"tags":[],"content":"","sig":"S"}"#,
            "not an integer in 0–65535"
        ),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[[]],"content":"","sig":"S"}"#, "tags[0] is empty"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[["t",1]],"content":"","sig":"S"}"#, "tags[0][1] must be a string"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"a\x","sig":"S"}"#, "not JSON"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"\ud800","sig":"S"}"#, "not JSON"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"","sig":"S",}"#, "not JSON"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"","sig":"S"} x"#, "not JSON"),
        (#"{"id":"I","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":null,"sig":"S"}"#, "content must be a string"),
        (#"{"id":"i","pubkey":"P","created_at":1,"kind":1,"tags":[],"content":"","sig":"S"}"#, "id must be 64 lowercase hex"),
        ("{}", "missing field"),
    ])
    func theFastPathDeclinesWhatTheFullReaderRefuses(template: String, message: String) throws {
        let e = Self.corpus[1]
        let text = template.replacingOccurrences(of: "\"I\"", with: "\"\(e.id)\"")
            .replacingOccurrences(of: "\"i\"", with: "\"\(e.id.uppercased())\"")
            .replacingOccurrences(of: "\"P\"", with: "\"\(e.pubkey)\"").replacingOccurrences(of: "\"S\"", with: "\"\(e.sig)\"")
        #expect(EventReader.read(text: text) == nil)
        expectSoftchatError(.invalidRelayFrame, mentioning: [message]) { _ = try UnverifiedEvent(text: text) }
    }

    @Test func shapesOffTheFastPathStillParseThroughTheFullReader() throws {
        let e = Self.corpus[2]
        // An escaped key is valid JSON the fast path leaves to the full reader.
        let text = e.jsonText.replacingOccurrences(of: "\"content\":", with: "\"c\\u006fntent\":")
        #expect(EventReader.read(text: text) == nil)
        #expect(try VerifiedEvent(text: text) == e)
        // Nineteen digits may fit in Int64; the fast path leaves them to the full reader.
        let far = e.jsonText.replacingOccurrences(of: "\"created_at\":\(e.createdAt)", with: "\"created_at\":1000000000000000000")
        #expect(EventReader.read(text: far) == nil)
        #expect(try UnverifiedEvent(text: far).createdAt == 1_000_000_000_000_000_000)
    }

    @Test func relayAndClientFramesTakeTheFastPathWithTheSameResults() throws {
        let events = Array(Self.corpus.prefix(40))
        for e in events {
            let spaced = " [ \"EVENT\" ,\n \"sub-1\" , \(e.jsonText) ] "
            guard case .event(let sub, let parsed) = try parseRelayResponseFrame(spaced) else {
                Issue.record("not an EVENT")
                continue
            }
            #expect(sub == "sub-1" && parsed == e && parsed.jsonText == e.jsonText)
            guard case .event(let fromClient) = try parseClientRelayFrame("[\"EVENT\",\(e.jsonText)]") else {
                Issue.record("not a client EVENT")
                continue
            }
            #expect(fromClient == e)
        }
        let batch = "[\"EVENTS\"," + events.map(\.jsonText).joined(separator: ",") + "]"
        guard case .events(let verified) = try parseClientRelayFrame(batch) else {
            Issue.record("not EVENTS")
            return
        }
        #expect(verified == events)
    }

    /// Frames with the right verb but the wrong shape: the fast path reads them or declines,
    /// and either way the message is the one the full reader gives.
    @Test func misshapenEventFramesKeepTheirDiagnostics() throws {
        let e = Self.corpus[3].jsonText
        expectSoftchatError(.invalidRelayFrame, mentioning: ["EVENT frame must be", "got 4"]) {
            _ = try parseRelayResponseFrame("[\"EVENT\",\"s\",\(e),\"x\"]")
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["got 2"]) { _ = try parseRelayResponseFrame("[\"EVENT\",\(e)]") }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["element 1 (subscription id) must be a string, not object"]) {
            _ = try parseRelayResponseFrame("[\"EVENT\",\(e),\"s\"]")
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["element 1 (subscription id) must be a string, not number"]) {
            _ = try parseRelayResponseFrame("[\"EVENT\",1,\(e)]")
        }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["the batch is flat"]) {
            _ = try parseClientRelayFrame("[\"EVENTS\",\(e),[\(e)]]")
        }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["duplicate event id"]) {
            _ = try parseClientRelayFrame("[\"EVENTS\",\(e),\(e)]")
        }
        expectSoftchatError(.invalidRelayBatch, mentioning: ["duplicate"]) {
            _ = try parseClientRelayFrame("[\"EVENTS\",\(e.replacingOccurrences(of: "\"kind\"", with: "\"kind\":1,\"kind\""))]")
        }
        expectSoftchatError(.invalidRelayFrame, mentioning: ["not valid JSON"]) { _ = try parseRelayResponseFrame("[\"EVENT\",\"s\",\(e)") }
    }

    @Test func theStreamedDigestEqualsTheHashOfTheSerialization() {
        for (i, e) in Self.corpus.enumerated() {
            for escaping in [JSONWriter.StringEscaping.json, .nip01] {
                let bytes = CanonicalSerialization.bytes(
                    pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags,
                    content: e.content, escaping: escaping)
                let digest = CanonicalSerialization.digest(
                    pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags,
                    content: e.content, escaping: escaping)
                #expect(digest == SHA256.hash(bytes), "event \(i), \(escaping)")
            }
        }
    }

    @Test func bulkVerificationKeepsInputOrderAndSaysWhatFailed() {
        var lines = Self.corpus.prefix(100).map { Array($0.jsonText.utf8) }
        lines[10] = [0x7B, 0xFF, 0x7D]  // invalid UTF-8
        lines[20] = Array(Self.corpus[20].tamperedContentJSON.jsonText.utf8)
        lines[30] = Array("not json".utf8)
        let results = VerifiedEvent.verify(utf8: lines)
        let texts = lines.map { String(decoding: $0, as: UTF8.self) }
        let fromTexts = VerifiedEvent.verify(texts: texts)
        #expect(results.count == 100 && fromTexts.count == 100)
        for i in 0..<100 {
            switch (i, results[i]) {
            case (10, .failure(let error)): #expect(error.code == .invalidRelayFrame && error.message.contains("UTF-8"))
            case (20, .failure(let error)): #expect(error.code == .invalidRelayFrame && error.message.contains("id does not match"))
            case (30, .failure(let error)): #expect(error.code == .invalidRelayFrame && error.message.contains("not JSON"))
            case (_, .success(let e)): #expect(![10, 20, 30].contains(i) && e == Self.corpus[i])
            default: Issue.record("line \(i): \(results[i])")
            }
            if i != 10 { #expect((try? results[i].get()) == (try? fromTexts[i].get())) }
        }
    }
}
