import SoftchatJSON
import Testing

/// Parses bytes and returns the error the strict reader raised, recording an issue when it
/// accepted the document.
func rejection(
    _ bytes: [UInt8], reader: JSONReader = JSONReader(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> JSONError? {
    do {
        let value = try reader.parse(bytes)
        Issue.record("accepted \(bytes) as \(value)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

func rejection(
    _ text: String, reader: JSONReader = JSONReader(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> JSONError? {
    rejection(Array(text.utf8), reader: reader, sourceLocation: sourceLocation)
}

/// Expects the reader to refuse `text` for `reason`, noticing it at byte `offset`.
func expectRejected(
    _ text: String, _ reason: JSONError.Reason, at offset: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    expectRejected(Array(text.utf8), reason, at: offset, sourceLocation: sourceLocation)
}

func expectRejected(
    _ bytes: [UInt8], _ reason: JSONError.Reason, at offset: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let error = rejection(bytes, sourceLocation: sourceLocation) else { return }
    #expect(error == JSONError(reason, at: offset), "got \(error)", sourceLocation: sourceLocation)
}

/// `"ab` + bad bytes + `"`: the bad sequence starts at byte 3.
func quoted(_ bad: [UInt8]) -> [UInt8] { Array("\"ab".utf8) + bad + [0x22] }

/// Every way the strict reader refuses a document, one test per rejection.
@Suite struct JSONReaderRejectionTests {
    // MARK: Invalid UTF-8

    @Test func loneContinuationByteIsInvalidUTF8() {
        expectRejected(quoted([0x80]), .invalidUTF8, at: 3)
    }

    @Test func overlongTwoByteSlashIsInvalidUTF8() {
        expectRejected(quoted([0xC0, 0xAF]), .invalidUTF8, at: 3)
    }

    @Test func overlongThreeByteFormIsInvalidUTF8() {
        expectRejected(quoted([0xE0, 0x80, 0xAF]), .invalidUTF8, at: 3)
    }

    @Test func utf8EncodedSurrogateIsInvalidUTF8() {
        expectRejected(quoted([0xED, 0xA0, 0x80]), .invalidUTF8, at: 3)
    }

    @Test func truncatedSequenceBeforeTheClosingQuoteIsInvalidUTF8() {
        expectRejected(quoted([0xE2, 0x82]), .invalidUTF8, at: 3)
    }

    @Test func truncatedSequenceAtEndOfInputIsInvalidUTF8() {
        expectRejected(Array("\"ab".utf8) + [0xF0, 0x9F, 0xA4], .invalidUTF8, at: 3)
    }

    @Test func scalarAboveU10FFFFIsInvalidUTF8() {
        expectRejected(quoted([0xF4, 0x90, 0x80, 0x80]), .invalidUTF8, at: 3)
    }

    @Test func invalidUTF8AfterAnEscapeIsInvalidUTF8() {
        expectRejected(Array("\"\\n".utf8) + [0xFF, 0x22], .invalidUTF8, at: 3)
    }

    @Test func invalidUTF8OutsideAStringIsInvalidUTF8() {
        expectRejected([0x5B, 0x31, 0x2C, 0xFE, 0x5D], .invalidUTF8, at: 3)
    }

    // MARK: Surrogate escapes

    @Test func unpairedHighSurrogateEscapeIsRejected() {
        expectRejected(#"["x","\ud800"]"#, .unpairedSurrogate, at: 6)
    }

    @Test func loneLowSurrogateEscapeIsRejected() {
        expectRejected(#""\udc00""#, .unpairedSurrogate, at: 1)
    }

    @Test func highSurrogateFollowedByANonLowEscapeIsRejected() {
        expectRejected(#""\ud800\u0041""#, .unpairedSurrogate, at: 1)
    }

    @Test func highSurrogateFollowedByAnotherEscapeIsRejected() {
        expectRejected(#""\ud800\n""#, .unpairedSurrogate, at: 1)
    }

    @Test func twoHighSurrogatesAreRejected() {
        expectRejected(#""\ud83e\ud83e""#, .unpairedSurrogate, at: 1)
    }

    // MARK: Strings

    @Test func unescapedControlCharacterInStringIsRejected() {
        expectRejected("\"ab\u{01}\"", .controlCharacterInString(0x01), at: 3)
    }

    @Test func rawNewlineAndTabInStringAreRejected() {
        expectRejected("\"a\nb\"", .controlCharacterInString(0x0A), at: 2)
        expectRejected("\"\\u0041\t\"", .controlCharacterInString(0x09), at: 7)
    }

    @Test func invalidEscapeIsRejected() {
        expectRejected(#"{"k":"a\x"}"#, .invalidEscape, at: 7)
    }

    @Test func nonHexUnicodeEscapeIsRejectedAtTheBadDigit() {
        expectRejected(#""\u12G4""#, .invalidEscape, at: 5)
    }

    @Test func unterminatedStringIsUnexpectedEnd() {
        expectRejected(#""abc"#, .unexpectedEnd, at: 4)
        expectRejected(#""\u00"#, .unexpectedEnd, at: 3)
    }

    // MARK: Structure

    @Test func duplicateObjectKeyIsRejectedAtTheSecondKey() {
        expectRejected(#"{"a":1,"a":2}"#, .duplicateKey("a"), at: 7)
    }

    @Test func duplicateKeySpelledWithAnEscapeIsStillADuplicate() {
        expectRejected(#"{"é":1,"\u00e9":2}"#, .duplicateKey("é"), at: 8)
    }

    @Test func duplicateKeyInALargeObjectIsRejected() {
        let members = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let text = "{\(members),\"k3\":0}"
        expectRejected(text, .duplicateKey("k3"), at: text.utf8.count - 7)
    }

    @Test func trailingDataIsRejected() {
        expectRejected("{} {}", .trailingData, at: 3)
        expectRejected("1 2", .trailingData, at: 2)
        expectRejected("\"a\"x", .trailingData, at: 3)
    }

    @Test func nestingDeeperThanMaxDepthIsRejected() {
        let limit = JSONReader.defaultMaxDepth
        let text = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        expectRejected(text, .tooDeep(limit: limit), at: limit)
    }

    @Test func nestingExactlyMaxDepthIsAccepted() throws {
        let limit = JSONReader.defaultMaxDepth
        let text = String(repeating: "[", count: limit - 1) + "{\"a\":1}" + String(repeating: "]", count: limit - 1)
        var value = try JSONReader().parse(text)
        for _ in 0..<(limit - 1) { value = try #require(value.arrayValue?.first) }
        #expect(value["a"] == .integer(1))
    }

    @Test func customMaxDepthIsHonoured() throws {
        let reader = JSONReader(maxDepth: 2)
        _ = try reader.parse("[{}]")
        let error = rejection("[{\"a\":[]}]", reader: reader)
        #expect(error == JSONError(.tooDeep(limit: 2), at: 6))
    }

    @Test func emptyDocumentIsRejected() {
        expectRejected("", .empty, at: 0)
        expectRejected(" \n\t\r", .empty, at: 0)
    }

    @Test func truncatedContainersAreUnexpectedEnd() {
        expectRejected("[1,", .unexpectedEnd, at: 3)
        expectRejected(#"{"a":"#, .unexpectedEnd, at: 5)
        expectRejected(#"{"a""#, .unexpectedEnd, at: 4)
        expectRejected("tru", .unexpectedEnd, at: 3)
    }

    @Test func missingColonOrCommaIsAnUnexpectedCharacter() {
        expectRejected(#"{"a" 1}"#, .unexpectedByte(UInt8(ascii: "1")), at: 5)
        expectRejected("[1 2]", .unexpectedByte(UInt8(ascii: "2")), at: 3)
        expectRejected("{1:2}", .unexpectedByte(UInt8(ascii: "1")), at: 1)
    }

    // MARK: Numbers

    @Test func leadingZeroIsRejected() {
        expectRejected("01", .trailingData, at: 1)
        expectRejected("[01]", .unexpectedByte(UInt8(ascii: "1")), at: 2)
        expectRejected("-01", .trailingData, at: 2)
    }

    @Test func fractionWithoutDigitsIsInvalidNumber() {
        expectRejected("1.", .invalidNumber, at: 0)
        expectRejected("[1.e5]", .invalidNumber, at: 1)
    }

    @Test func loneMinusIsInvalidNumber() {
        expectRejected("-", .invalidNumber, at: 0)
        expectRejected("[-]", .invalidNumber, at: 1)
    }

    @Test func leadingDotIsAnUnexpectedCharacter() {
        expectRejected(".5", .unexpectedByte(UInt8(ascii: ".")), at: 0)
    }

    @Test func exponentWithoutDigitsIsInvalidNumber() {
        expectRejected("1e", .invalidNumber, at: 0)
        expectRejected("1e+", .invalidNumber, at: 0)
        expectRejected("[0,2E-]", .invalidNumber, at: 3)
    }

    @Test func plusSignIsAnUnexpectedCharacter() {
        expectRejected("+1", .unexpectedByte(UInt8(ascii: "+")), at: 0)
    }

    @Test func nanAndInfinityAreRejected() {
        expectRejected("NaN", .unexpectedByte(UInt8(ascii: "N")), at: 0)
        expectRejected("Infinity", .unexpectedByte(UInt8(ascii: "I")), at: 0)
        expectRejected("-Infinity", .invalidNumber, at: 0)
        expectRejected("nan", .unexpectedByte(UInt8(ascii: "a")), at: 1)
    }

    // MARK: Lenient-reader extensions

    @Test func singleQuotesAreRejected() {
        expectRejected("'a'", .unexpectedByte(0x27), at: 0)
        expectRejected("{'a':1}", .unexpectedByte(0x27), at: 1)
    }

    @Test func trailingCommaInArrayIsRejected() {
        expectRejected("[1,2,]", .unexpectedByte(UInt8(ascii: "]")), at: 5)
    }

    @Test func trailingCommaInObjectIsRejected() {
        expectRejected("{\"a\":1,\n}", .unexpectedByte(UInt8(ascii: "}")), at: 8)
    }

    @Test func commentsAreRejected() {
        expectRejected("// note\n1", .unexpectedByte(UInt8(ascii: "/")), at: 0)
        expectRejected("[1 /* note */]", .unexpectedByte(UInt8(ascii: "/")), at: 3)
        expectRejected("# note\n1", .unexpectedByte(UInt8(ascii: "#")), at: 0)
    }

    @Test func nonJSONWhitespaceIsRejected() {
        expectRejected("\u{0C}1", .unexpectedByte(0x0C), at: 0)
        expectRejected("[1,\u{0B}2]", .unexpectedByte(0x0B), at: 3)
        expectRejected([0xC2, 0xA0, 0x31], .unexpectedByte(0xC2), at: 0)
        expectRejected([0xEF, 0xBB, 0xBF, 0x31], .unexpectedByte(0xEF), at: 0)
    }

    @Test func misspelledLiteralsAreRejected() {
        expectRejected("tru e", .unexpectedByte(0x20), at: 3)
        expectRejected("True", .unexpectedByte(UInt8(ascii: "T")), at: 0)
        expectRejected("nul", .unexpectedEnd, at: 3)
    }

    // MARK: Error text

    @Test func errorDescriptionNamesTheReasonAndByte() {
        #expect(JSONError(.unexpectedByte(UInt8(ascii: "}")), at: 7).description == "unexpected character '}' at byte 7")
        #expect(JSONError(.unexpectedByte(0x0B), at: 3).description == "unexpected byte 0xB at byte 3")
        #expect(JSONError(.controlCharacterInString(0x1F), at: 1).reasonText == "unescaped control character 0x1F in string")
        #expect(JSONError(.duplicateKey("a"), at: 0).reasonText == "duplicate object key \"a\"")
        #expect(JSONError(.tooDeep(limit: 32), at: 0).reasonText == "nesting deeper than 32 levels")
    }

    @Test func lineAndColumnCountFromOne() {
        let text = Array("{\n  \"a\": 1,\n  \"a\": 2\n}".utf8)
        guard let error = rejection(text) else { return }
        #expect(error.reason == .duplicateKey("a"))
        #expect(error.lineAndColumn(in: text) == (3, 3))
        #expect(JSONError.lineAndColumn(ofOffset: 0, in: text) == (1, 1))
    }
}

/// What the strict reader accepts, and exactly what it makes of it.
@Suite struct JSONReaderAcceptanceTests {
    func parse(_ text: String) throws -> JSONValue { try JSONReader().parse(text) }
    /// The UTF-8 of a parsed string: `==` on String would accept canonically equivalent text.
    func utf8(_ text: String) throws -> [UInt8]? { try parse(text).stringValue.map { Array($0.utf8) } }

    @Test func escapedAndLiteralSpellingsGiveTheSameString() throws {
        #expect(try utf8(#""\u00e9""#) == [0xC3, 0xA9])
        #expect(try utf8(#""\u00E9""#) == [0xC3, 0xA9])
        #expect(try utf8("\"é\"") == [0xC3, 0xA9])
        #expect(try utf8(#""e\u0301""#) == [0x65, 0xCC, 0x81])
        #expect(try utf8(#""\/""#) == [0x2F])
        #expect(try parse(#""a\"b\\c\b\f\n\r\t""#) == .string("a\"b\\c\u{08}\u{0C}\n\r\t"))
    }

    @Test func surrogatePairEscapeDecodesToOneScalar() throws {
        let value = try parse(#""\ud83e\udd19""#)
        #expect(try utf8(#""\ud83e\udd19""#) == Array("🤙".utf8))
        #expect(value.stringValue?.unicodeScalars.map(\.value) == [0x1F919])
        #expect(try parse(#""\uD83E\uDD19 \udbff\udfff""#) == .string("🤙 \u{10FFFF}"))
    }

    @Test func escapedNulIsKept() throws {
        let s = try #require(try parse(#""a\u0000b""#).stringValue)
        #expect(Array(s.utf8) == [0x61, 0x00, 0x62])
    }

    @Test func rawNonASCIIIsKeptByteForByte() throws {
        let text = "\"🤙 é \u{2028}\u{2029} \u{7F} \u{FEFF}\""
        let s = try #require(try parse(text).stringValue)
        #expect(Array(s.utf8) == Array(text.utf8.dropFirst().dropLast()))
    }

    @Test func plainIntegersBecomeIntegers() throws {
        #expect(try parse("12") == .integer(12))
        #expect(try parse("0") == .integer(0))
        #expect(try parse("-7") == .integer(-7))
        #expect(try parse("12").int64Value == 12)
    }

    @Test func int64ExtremesAreIntegers() throws {
        #expect(try parse("9223372036854775807") == .integer(Int64.max))
        #expect(try parse("-9223372036854775808") == .integer(Int64.min))
    }

    @Test func integersOutsideInt64KeepTheirLiteral() throws {
        #expect(try parse("9223372036854775808") == .number("9223372036854775808"))
        #expect(try parse("-9223372036854775809") == .number("-9223372036854775809"))
        #expect(try parse("18446744073709551616") == .number("18446744073709551616"))
        #expect(try parse("123456789012345678901234567890") == .number("123456789012345678901234567890"))
        #expect(try parse("9223372036854775808").int64Value == nil)
    }

    @Test func negativeZeroIsANumberNotAnInteger() throws {
        #expect(try parse("-0") == .number("-0"))
        #expect(try parse("-0").int64Value == nil)
    }

    @Test func fractionsAndExponentsAreNumbers() throws {
        #expect(try parse("1.0") == .number("1.0"))
        #expect(try parse("1e3") == .number("1e3"))
        #expect(try parse("1E+3") == .number("1E+3"))
        #expect(try parse("-0.5e-10") == .number("-0.5e-10"))
        #expect(try parse("0e0") == .number("0e0"))
    }

    @Test func jsonWhitespaceIsSkippedEverywhere() throws {
        let value = try parse(" \t\r\n{ \"a\" \n:\t[ 1 ,\r\n2 ] , \"b\" : { } } \n")
        #expect(value == .object(JSONObject(["a": [1, 2], "b": .object(JSONObject())])))
        #expect(try parse("[ ]") == .array([]))
    }

    @Test func literalsParse() throws {
        #expect(try parse("[true,false,null]") == [true, false, nil])
    }

    @Test func objectMembersKeepDocumentOrder() throws {
        let text = #"{"z":1,"a":2,"m":{"y":3,"b":4}}"#
        let value = try parse(text)
        #expect(value.objectValue?.keys == ["z", "a", "m"])
        #expect(value["m"]?.objectValue?.keys == ["y", "b"])
        #expect(value.jsonText == text)
    }

    @Test func stringAndBytesEntryPointsAgree() throws {
        let text = #"{"k":["\u00e9",1,-0,1.5]}"#
        #expect(try JSONReader().parse(text) == JSONReader().parse(Array(text.utf8)))
    }

    @Test func locationsAreReportedForNestedPaths() throws {
        let text = #"{"a": [0, {"b": true, "c": "x"}], "d": null}"#
        let bytes = Array(text.utf8)
        let (value, locations) = try JSONReader().parseWithLocations(bytes)
        #expect(value["a"]?.arrayValue?[1]["b"] == .bool(true))
        func offset(of needle: String, from start: Int = 0) -> Int? {
            let n = Array(needle.utf8)
            return (start...(bytes.count - n.count)).first { Array(bytes[$0..<($0 + n.count)]) == n }
        }
        #expect(locations[""] == 0)
        #expect(locations["a#key"] == 1)
        #expect(locations["a"] == offset(of: "["))
        #expect(locations["a[0]"] == offset(of: "0"))
        #expect(locations["a[1]"] == offset(of: "{", from: 1))
        #expect(locations["a[1].b"] == offset(of: "true"))
        #expect(locations["a[1].b#key"] == offset(of: "\"b\""))
        #expect(locations["a[1].c"] == offset(of: "\"x\""))
        #expect(locations["d"] == offset(of: "null"))
        #expect(locations["a[2]"] == nil)
    }

    @Test func locationsOfTopLevelArrayElements() throws {
        let (_, locations) = try JSONReader().parseWithLocations(Array("[ 1, [2, 3]]".utf8))
        #expect(locations["[0]"] == 2)
        #expect(locations["[1]"] == 5)
        #expect(locations["[1][1]"] == 9)
    }

    @Test func parseWithLocationsRejectsWhatParseRejects() {
        #expect(throws: JSONError(.duplicateKey("a"), at: 8)) {
            try JSONReader().parseWithLocations(Array(#"{"a":[],"a":1}"#.utf8))
        }
    }
}
