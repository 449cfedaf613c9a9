import SoftchatJSON
import Testing

/// SplitMix64: a tiny seeded generator, so property tests are the same on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Scalars a writer is most likely to get wrong: every C0 control, DEL, quote, backslash,
/// slash, line/paragraph separators, BOM, non-BMP characters and the extremes of the range.
let awkwardScalars: [Unicode.Scalar] =
    (0..<0x20).map { Unicode.Scalar(UInt8($0)) }
    + [
        "\u{7F}", "\"", "\\", "/", "\u{2028}", "\u{2029}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}",
        "é", "€", "🤙", "𝄞", "\u{10000}", "\u{10FFFF}", "\u{80}", "\u{7FF}", "\u{800}", "\u{D7FF}", "\u{E000}",
    ]

func randomString(_ rng: inout SplitMix64, maxLength: Int = 24) -> String {
    var scalars = String.UnicodeScalarView()
    for _ in 0..<Int.random(in: 0...maxLength, using: &rng) {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: scalars.append(awkwardScalars.randomElement(using: &rng)!)
        case 1: scalars.append(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &rng)))
        case 2: scalars.append(Unicode.Scalar(UInt8.random(in: 0x00...0x1F, using: &rng)))
        default:
            // Any scalar at all, skipping the surrogate range.
            var v = UInt32.random(in: 0...0x10FFFF, using: &rng)
            if (0xD800...0xDFFF).contains(v) { v -= 0x1000 }
            scalars.append(Unicode.Scalar(v)!)
        }
    }
    return String(scalars)
}

func written(_ s: String, _ escaping: JSONWriter.StringEscaping) -> String {
    var w = JSONWriter(escaping: escaping)
    w.string(s)
    return w.string
}

@Suite struct JSONWriterTests {
    static let shortForms: [UInt8: String] = [0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"]

    @Test func jsonEscapingEscapesEveryC0Control() {
        for b in UInt8(0)..<0x20 {
            let expected = Self.shortForms[b] ?? "\\u00" + String(b >> 4, radix: 16) + String(b & 0xF, radix: 16)
            #expect(written(String(Unicode.Scalar(b)), .json) == "\"\(expected)\"", "byte 0x\(String(b, radix: 16))")
        }
        #expect(written("\u{1F}", .json) == #""\u001f""#)
        #expect(written("\u{00}", .json) == #""\u0000""#)
    }

    @Test func jsonEscapingEscapesQuoteAndBackslashOnly() {
        #expect(written("a\"b\\c/d\u{7F}\u{2028}é🤙", .json) == "\"a\\\"b\\\\c/d\u{7F}\u{2028}é🤙\"")
        #expect(written("", .json) == "\"\"")
    }

    @Test func jsonOutputNeverContainsARawControlByte() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<500 {
            let out = written(randomString(&rng), .json)
            #expect(!out.utf8.contains { $0 < 0x20 })
        }
    }

    @Test func jsonEscapingRoundTripsRandomStringsThroughTheReader() throws {
        var rng = SplitMix64(seed: 0x50F7_C4A7)
        var seen = Set<UInt32>()
        let cases = 2_500
        for i in 0..<cases {
            // The first cases walk every awkward scalar alone; then random mixes.
            let s = i < awkwardScalars.count ? String(awkwardScalars[i]) : randomString(&rng)
            seen.formUnion(s.unicodeScalars.map(\.value))
            let text = written(s, .json)
            let back = try JSONReader().parse(text)
            // Byte comparison: String's == would accept a canonically equivalent spelling.
            #expect(back.stringValue.map { Array($0.utf8) } == Array(s.utf8), "case \(i): \(s.unicodeScalars.map { String($0.value, radix: 16) })")
            // Also inside a structure, as a key and as a value.
            let doc = JSONValue.object(JSONObject(members: [.init(key: s, value: [.string(s), 1])]))
            #expect(try JSONReader().parse(doc.jsonText) == doc)
        }
        for scalar in awkwardScalars { #expect(seen.contains(scalar.value), "never generated U+\(String(scalar.value, radix: 16))") }
    }

    @Test func nip01EscapingEscapesExactlySevenCharacters() {
        let escaped: [UInt8: String] = Self.shortForms.merging([0x22: "\\\"", 0x5C: "\\\\"]) { a, _ in a }
        for b in UInt8(0)..<0x80 {
            let s = String(Unicode.Scalar(b))
            let expected = escaped[b] ?? s
            #expect(written(s, .nip01) == "\"\(expected)\"", "byte 0x\(String(b, radix: 16))")
        }
    }

    @Test func nip01EscapingLeavesOtherControlsVerbatim() {
        let out = written("a\u{01}b\u{1F}c\u{00}\u{0B}\u{7F}\u{2028}/é", .nip01)
        #expect(Array(out.utf8) == Array("\"a\u{01}b\u{1F}c\u{00}\u{0B}\u{7F}\u{2028}/é\"".utf8))
        #expect(written("\n\"\\\r\t\u{08}\u{0C}", .nip01) == #""\n\"\\\r\t\b\f""#)
    }

    @Test func nip01OutputWithUnlistedControlsIsNotValidJSON() {
        let text = written("x\u{01}", .nip01)
        #expect(throws: JSONError(.controlCharacterInString(0x01), at: 2)) { try JSONReader().parse(text) }
    }

    @Test func nip01AndJSONAgreeWithoutUnlistedControls() {
        var rng = SplitMix64(seed: 11)
        var compared = 0
        for _ in 0..<500 {
            let s = randomString(&rng)
            guard !s.utf8.contains(where: { $0 < 0x20 && Self.shortForms[$0] == nil }) else { continue }
            #expect(written(s, .nip01) == written(s, .json))
            compared += 1
        }
        #expect(compared > 50)
    }

    @Test func integersAreWrittenExactly() {
        for n: Int64 in [0, 9, 10, -1, -10, Int64.max, Int64.min] {
            var w = JSONWriter()
            w.integer(n)
            #expect(w.string == String(n))
        }
        #expect(JSONValue.number("-0").jsonText == "-0")
        #expect(JSONValue.number("1e3").jsonText == "1e3")
    }

    @Test func compactTextHasNoWhitespaceAndKeepsOrder() {
        let v: JSONValue = .object(JSONObject(["b": [1, "x", nil], "a": .object(JSONObject(["t": true]))]))
        #expect(v.jsonText == #"{"b":[1,"x",null],"a":{"t":true}}"#)
    }

    @Test func prettyTextHasTheDocumentedLayout() {
        let v: JSONValue = .object(JSONObject(["a": [1, 2], "b": .object(JSONObject()), "c": []]))
        #expect(v.prettyText() == "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}\n")
        #expect(JSONValue.integer(5).prettyText() == "5\n")
        #expect(JSONValue.array([1]).prettyText(indent: 4) == "[\n    1\n]\n")
    }

    @Test func prettyTextRoundTripsThroughTheReader() throws {
        var rng = SplitMix64(seed: 99)
        for _ in 0..<200 {
            let v = randomValue(&rng, depth: 0)
            #expect(try JSONReader().parse(v.prettyText()) == v)
            #expect(try JSONReader().parse(v.prettyText(indent: 0)) == v)
            #expect(try JSONReader().parse(v.jsonText) == v)
        }
    }

    func randomValue(_ rng: inout SplitMix64, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 3 ? 5 : 8), using: &rng) {
        case 0: return nil
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(Int64.random(in: Int64.min...Int64.max, using: &rng))
        case 3: return .number(["-0", "1.5", "1e300", "-2.5E-3", "18446744073709551616"].randomElement(using: &rng)!)
        case 4: return .string(randomString(&rng, maxLength: 8))
        case 5, 6:
            var o = JSONObject()
            for k in 0..<Int.random(in: 0..<4, using: &rng) {
                o.append("\(k)" + randomString(&rng, maxLength: 4), randomValue(&rng, depth: depth + 1))
            }
            return .object(o)
        default:
            return .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        }
    }
}

/// The sixteen-bytes-at-a-time scan and the fast-path cursor, against plain definitions.
@Suite struct JSONScanTests {
    @Test func plainRunEndFindsTheFirstByteThatNeedsAttentionAtEveryOffset() {
        var rng = SplitMix64(seed: 3)
        let special: [UInt8] = [0x22, 0x5C, 0x00, 0x0A, 0x1F, 0x80, 0xC3, 0xFF]
        for _ in 0..<3_000 {
            let count = Int.random(in: 0...70, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0x20...0x7E, using: &rng) }.map { $0 == 0x22 || $0 == 0x5C ? 0x41 : $0 }
            for _ in 0..<Int.random(in: 0...2, using: &rng) where count > 0 {
                bytes[Int.random(in: 0..<count, using: &rng)] = special.randomElement(using: &rng)!
            }
            let start = Int.random(in: 0...count, using: &rng)
            for nonASCII in [false, true] {
                let expected =
                    bytes.indices.first { i in
                        i >= start && (bytes[i] == 0x22 || bytes[i] == 0x5C || bytes[i] < 0x20 || (nonASCII && bytes[i] >= 0x80))
                    } ?? count
                let found = bytes.withUnsafeBufferPointer { JSONScan.plainRunEnd($0, from: start, stopAtNonASCII: nonASCII) }
                #expect(found == expected, "\(bytes) from \(start), nonASCII \(nonASCII)")
            }
        }
    }

    /// A string's body is canonical exactly when it is what `JSONWriter` writes for its value.
    @Test func theCursorCallsABodyCanonicalExactlyWhenTheWriterWouldWriteIt() throws {
        let values = ["", "plain", "a\"b\\c", "\n\r\t\u{8}\u{C}", "\u{1}\u{1F}\u{7F}", "é東🤙", "a/b"]
        let spellings: [(String, String)] =
            values.map { ($0, JSONValue.string($0).jsonText) } + [
                ("a/b", #""a\/b""#), ("é", #""\u00e9""#), ("\u{1F}", #""\u001F""#), ("\n", #""\u000a""#),
                ("🤙", #""\ud83e\udd19""#), ("\u{1}", #""\u0001""#),
            ]
        for (value, text) in spellings {
            var source = text
            let copy = source
            let token = try #require(
                source.withUTF8 { bytes -> JSONCursor.StringToken? in
                    var c = JSONCursor(source: copy, bytes: bytes)
                    let t = c.string()
                    #expect(t.map { c.decode($0) } == value, "\(text)")
                    return t
                })
            #expect(token.isCanonical == (JSONValue.string(value).jsonText == text), "\(text)")
        }
    }

    @Test func theCursorRefusesWhatTheReaderRefuses() {
        for text in [#""\x""#, #""\ud800""#, #""\udc00""#, #""\u12""#, "\"a\u{1}\"", #""abc"#, "abc"] {
            var source = text
            let copy = source
            let token = source.withUTF8 { bytes -> JSONCursor.StringToken? in
                var c = JSONCursor(source: copy, bytes: bytes)
                return c.string()
            }
            #expect(token == nil, "\(text)")
            #expect((try? JSONReader().parse(text)) == nil, "\(text)")
        }
    }
}
