/// Softchat's strict JSON reader over UTF-8 bytes (RFC 8259, no extensions).
///
/// It refuses what lenient readers let through, because socket text is untrusted and two
/// readers that disagree on a document disagree on an event: invalid UTF-8, unpaired
/// surrogate escapes, unescaped control characters, duplicate object keys, nesting deeper
/// than `maxDepth`, and anything after the value but whitespace. Strings are decoded exactly
/// (`"\u00e9"` and `"é"` give the same `String`); numbers keep their literal (see `JSONValue`).
public struct JSONReader: Sendable {
    /// Deepest nesting of arrays and objects accepted. A relay frame needs 4 (frame, event,
    /// tags, tag); 32 leaves room for documents such as NIP-11 while bounding recursion.
    public static let defaultMaxDepth = 32

    /// Deepest nesting of arrays and objects accepted; a deeper document fails with
    /// `JSONError.Reason.tooDeep`.
    public var maxDepth: Int

    /// Creates a reader.
    ///
    /// - Parameter maxDepth: Deepest nesting of arrays and objects accepted
    ///   (``JSONReader/defaultMaxDepth`` unless a document needs more).
    public init(maxDepth: Int = JSONReader.defaultMaxDepth) {
        self.maxDepth = maxDepth
    }

    /// Parses text that is already a Swift `String`, and so already valid UTF-8: strings are
    /// scanned only for quotes, escapes and control characters, and unescaped strings are
    /// sliced from `text` without being decoded again.
    ///
    /// - Parameter text: The JSON document.
    /// - Returns: The document's value.
    /// - Throws: ``JSONError`` for the first violation found, with its byte offset into `text`'s
    ///   UTF-8.
    public func parse(_ text: String) throws(JSONError) -> JSONValue {
        let source = text
        var text = text
        let result: Result<JSONValue, JSONError> = text.withUTF8 { buffer in
            Result { () throws(JSONError) -> JSONValue in
                var parser = Parser(buffer: buffer, maxDepth: maxDepth, recordLocations: false, source: source)
                return try parser.parseDocument()
            }
        }
        return try result.get()
    }

    /// Parses UTF-8 bytes. Valid UTF-8 (the common case) is checked in one pass by the standard
    /// library and parsed as a `String`; anything else is parsed byte by byte, so the error
    /// says exactly where the bad sequence is.
    ///
    /// - Parameter bytes: The JSON document's UTF-8.
    /// - Returns: The document's value.
    /// - Throws: ``JSONError`` for the first violation found (`invalidUTF8` for malformed UTF-8),
    ///   with its byte offset into `bytes`.
    public func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        if let text = String(validating: bytes, as: UTF8.self) { return try parse(text) }
        let result: Result<JSONValue, JSONError> = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(buffer) }
        }
        return try result.get()
    }

    /// Parses UTF-8 bytes in place, validating the UTF-8 byte by byte as it goes (no copy of the
    /// input is made first).
    ///
    /// - Parameter buffer: The JSON document's UTF-8; it only needs to stay valid for the call.
    /// - Returns: The document's value.
    /// - Throws: ``JSONError`` for the first violation found, with its byte offset into `buffer`.
    public func parse(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONError) -> JSONValue {
        var parser = Parser(buffer: buffer, maxDepth: maxDepth, recordLocations: false)
        return try parser.parseDocument()
    }

    /// Parses and also returns the byte offset of every value by path (`""` is the root,
    /// `bounds[1].error` a member of an element), for tools that report file:line diagnostics.
    ///
    /// - Parameter bytes: The JSON document's UTF-8.
    /// - Returns: The document's value, and the zero-based byte offset of each value by path; a
    ///   member's key is also recorded, under its member's path followed by `#key`.
    /// - Throws: ``JSONError`` for the first violation found, with its byte offset into `bytes`.
    public func parseWithLocations(_ bytes: [UInt8]) throws(JSONError) -> (JSONValue, [String: Int]) {
        let result: Result<(JSONValue, [String: Int]), JSONError> = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONError) -> (JSONValue, [String: Int]) in
                var parser = Parser(buffer: buffer, maxDepth: maxDepth, recordLocations: true)
                let value = try parser.parseDocument()
                return (value, parser.locations)
            }
        }
        return try result.get()
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    let recordLocations: Bool
    /// The `String` the bytes are the UTF-8 of, when parsing one: its bytes need no UTF-8
    /// validation, and string values can be sliced from it.
    let source: String?
    var path: [String] = []
    var locations: [String: Int] = [:]

    init(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, recordLocations: Bool, source: String? = nil) {
        self.bytes = buffer
        self.maxDepth = maxDepth
        self.recordLocations = recordLocations
        self.source = source
    }

    mutating func parseDocument() throws(JSONError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw JSONError(.empty, at: 0) }
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw JSONError(.trailingData, at: index) }
        return value
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func record() {
        locations[path.joined()] = index
    }

    mutating func parseValue() throws(JSONError) -> JSONValue {
        guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
        if recordLocations { record() }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw unexpected()
        }
    }

    func unexpected() -> JSONError {
        guard index < bytes.count else { return JSONError(.unexpectedEnd, at: index) }
        let b = bytes[index]
        if b >= 0x80 && !isValidUTF8Sequence(at: index) { return JSONError(.invalidUTF8, at: index) }
        return JSONError(.unexpectedByte(b), at: index)
    }

    func isValidUTF8Sequence(at i: Int) -> Bool {
        var j = i
        return (try? validateUTF8Sequence(&j)) != nil
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONError) {
        let n = literal.utf8CodeUnitCount
        let p = literal.utf8Start
        for k in 0..<n {
            guard index + k < bytes.count else { throw JSONError(.unexpectedEnd, at: index + k) }
            guard bytes[index + k] == p[k] else {
                index += k
                throw unexpected()
            }
        }
        index += n
    }

    mutating func enter() throws(JSONError) {
        depth += 1
        if depth > maxDepth { throw JSONError(.tooDeep(limit: maxDepth), at: index) }
    }

    mutating func parseArray() throws(JSONError) -> JSONValue {
        try enter()
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        elements.reserveCapacity(4)  // tags and frames are short: one allocation instead of three
        while true {
            skipWhitespace()
            if recordLocations { path.append("[\(elements.count)]") }
            let element = try parseValue()
            if recordLocations { path.removeLast() }
            elements.append(element)
            skipWhitespace()
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            let b = bytes[index]
            index += 1
            if b == UInt8(ascii: ",") { continue }
            if b == UInt8(ascii: "]") { break }
            index -= 1
            throw unexpected()
        }
        depth -= 1
        return .array(elements)
    }

    mutating func parseObject() throws(JSONError) -> JSONValue {
        try enter()
        index += 1  // {
        var members: [JSONObject.Member] = []
        // Keys compare as code points (RFC 8259), not as canonically equivalent Strings.
        var seen: Set<[UInt8]>? = nil
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObject(uncheckedMembers: members))
        }
        members.reserveCapacity(8)  // an event has seven members
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            guard bytes[index] == UInt8(ascii: "\"") else { throw unexpected() }
            let keyOffset = index
            let key = try parseString()
            // Small objects (every Nostr object) compare linearly; big ones switch to a set.
            if members.count < 16 {
                for m in members where m.key.utf8.elementsEqual(key.utf8) { throw JSONError(.duplicateKey(key), at: keyOffset) }
            } else {
                if seen == nil { seen = Set(members.map { Array($0.key.utf8) }) }
                if !seen!.insert(Array(key.utf8)).inserted { throw JSONError(.duplicateKey(key), at: keyOffset) }
            }
            skipWhitespace()
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            guard bytes[index] == UInt8(ascii: ":") else { throw unexpected() }
            index += 1
            skipWhitespace()
            if recordLocations {
                path.append(path.isEmpty ? key : ".\(key)")
                locations[path.joined() + "#key"] = keyOffset
            }
            let value = try parseValue()
            if recordLocations { path.removeLast() }
            members.append(JSONObject.Member(key: key, value: value))
            skipWhitespace()
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            let b = bytes[index]
            index += 1
            if b == UInt8(ascii: ",") { continue }
            if b == UInt8(ascii: "}") { break }
            index -= 1
            throw unexpected()
        }
        depth -= 1
        return .object(JSONObject(uncheckedMembers: members))
    }

    /// Parses a string starting at its opening quote. The common case (no escapes) takes the
    /// validated bytes as they are; escapes are decoded by `parseEscapedString`.
    mutating func parseString() throws(JSONError) -> String {
        index += 1  // opening quote
        let start = index
        let validate = source == nil
        while true {
            index = JSONScan.plainRunEnd(bytes, from: index, stopAtNonASCII: validate)
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let s = string(start, index)
                index += 1
                return s
            }
            if b == UInt8(ascii: "\\") { return try parseEscapedString(from: start) }
            if b < 0x20 { throw JSONError(.controlCharacterInString(b), at: index) }
            try validateUTF8Sequence(&index)
        }
    }

    /// The string of the valid UTF-8 at `start..<end`: a slice of the source `String` when
    /// there is one (no second validation), decoded otherwise.
    func string(_ start: Int, _ end: Int) -> String {
        // Up to 15 bytes fit in a String's inline storage, which decoding fills cheaper.
        if end - start > 15, let source {
            let utf8 = source.utf8
            let lower = utf8.index(utf8.startIndex, offsetBy: start)
            let upper = utf8.index(lower, offsetBy: end - start)
            return String(Substring(utf8[lower..<upper]))
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// A string with escapes, in two passes: the first checks every escape and finds the closing
    /// quote, the second decodes into the string's own storage (decoding only shrinks: `\n` is
    /// one byte, `\uXXXX` at most three), copying the runs between escapes whole.
    mutating func parseEscapedString(from start: Int) throws(JSONError) -> String {
        let validate = source == nil
        while true {
            index = JSONScan.plainRunEnd(bytes, from: index, stopAtNonASCII: validate)
            guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") { break }
            if b == UInt8(ascii: "\\") {
                try skipEscape()
                continue
            }
            if b < 0x20 { throw JSONError(.controlCharacterInString(b), at: index) }
            try validateUTF8Sequence(&index)
        }
        let end = index
        index += 1  // closing quote
        let raw = UnsafeBufferPointer(rebasing: bytes[start..<end])
        return String(unsafeUninitializedCapacity: raw.count) { out in JSONScan.unescape(raw, into: out) }
    }

    /// Checks the escape at `index` (a backslash) and moves past it.
    mutating func skipEscape() throws(JSONError) {
        let escapeOffset = index
        index += 1
        guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
        let e = bytes[index]
        index += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return
        case UInt8(ascii: "u"):
            let scalar = try parseHex4()
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                // A high surrogate must be followed by an escaped low surrogate.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw JSONError(.unpairedSurrogate, at: escapeOffset) }
                index += 2
                let low = try parseHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else { throw JSONError(.unpairedSurrogate, at: escapeOffset) }
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw JSONError(.unpairedSurrogate, at: escapeOffset)
            }
        default:
            throw JSONError(.invalidEscape, at: escapeOffset)
        }
    }

    mutating func parseHex4() throws(JSONError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw JSONError(.unexpectedEnd, at: index) }
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = bytes[index + k]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw JSONError(.invalidEscape, at: index + k)
            }
            v = v << 4 | d
        }
        index += 4
        return v
    }

    /// Validates one multi-byte UTF-8 sequence starting at `i` (a byte ≥ 0x80) per RFC 3629:
    /// no overlong forms, no surrogates, nothing above U+10FFFF. Advances `i` past it.
    func validateUTF8Sequence(_ i: inout Int) throws(JSONError) {
        let b0 = bytes[i]
        let need: Int
        var lo: UInt8 = 0x80
        var hi: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: need = 1
        case 0xE0:
            need = 2
            lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 2
        case 0xED:
            need = 2
            hi = 0x9F
        case 0xF0:
            need = 3
            lo = 0x90
        case 0xF1...0xF3: need = 3
        case 0xF4:
            need = 3
            hi = 0x8F
        default: throw JSONError(.invalidUTF8, at: i)
        }
        guard i + need < bytes.count else { throw JSONError(.invalidUTF8, at: i) }
        let b1 = bytes[i + 1]
        guard b1 >= lo && b1 <= hi else { throw JSONError(.invalidUTF8, at: i) }
        var k = 2
        while k <= need {
            guard bytes[i + k] & 0xC0 == 0x80 else { throw JSONError(.invalidUTF8, at: i) }
            k += 1
        }
        i += need + 1
    }

    mutating func parseNumber() throws(JSONError) -> JSONValue {
        let start = index
        var negative = false
        if bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < bytes.count else { throw JSONError(.invalidNumber, at: start) }
        let intStart = index
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if bytes[index] >= UInt8(ascii: "1") && bytes[index] <= UInt8(ascii: "9") {
            while index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
        } else {
            throw JSONError(.invalidNumber, at: start)
        }
        let intEnd = index
        var isInteger = true
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let fracStart = index
            while index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            guard index > fracStart else { throw JSONError(.invalidNumber, at: start) }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            isInteger = false
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                index += 1
            }
            let expStart = index
            while index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            guard index > expStart else { throw JSONError(.invalidNumber, at: start) }
        }
        if isInteger && intEnd - intStart <= 19 && !(negative && intEnd - intStart == 1 && bytes[intStart] == UInt8(ascii: "0")) {
            // Accumulate negatively so Int64.min parses; overflow falls back to the literal.
            var v: Int64 = 0
            var overflow = false
            for k in intStart..<intEnd {
                let d = Int64(bytes[k] - UInt8(ascii: "0"))
                let (m, o1) = v.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.subtractingReportingOverflow(d)
                if o1 || o2 {
                    overflow = true
                    break
                }
                v = s
            }
            if !overflow {
                if negative { return .integer(v) }
                if v != Int64.min { return .integer(-v) }
            }
        }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }
}
