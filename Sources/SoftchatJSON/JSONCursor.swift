/// A forward-only reader over the UTF-8 of a `String`, for fast paths that read one expected
/// shape (an event, an EVENT frame) without building `JSONValue`s.
///
/// It never explains a failure: `nil` or `false` means "not the expected shape", and the caller
/// falls back to `JSONReader`, whose diagnostics are the ones users see. It accepts a subset of
/// what `JSONReader` accepts and gives the same values for it. The bytes come from a `String`,
/// so they are valid UTF-8 already.
package struct JSONCursor {
    package let source: String
    package let bytes: UnsafeBufferPointer<UInt8>
    package var index: Int

    /// `bytes` must be `source`'s UTF-8 (from `withUTF8`).
    package init(source: String, bytes: UnsafeBufferPointer<UInt8>, index: Int = 0) {
        self.source = source
        self.bytes = bytes
        self.index = index
    }

    /// Runs `body` with a cursor at the start of `text`; its result counts only if the cursor
    /// then stands at the end (whitespace aside): the whole text was the expected shape.
    package static func readWhole<T>(_ text: String, _ body: (inout JSONCursor) -> T?) -> T? {
        var text = text
        let source = text
        return text.withUTF8 { bytes -> T? in
            var c = JSONCursor(source: source, bytes: bytes)
            guard let value = body(&c) else { return nil }
            c.skipWhitespace()
            return c.atEnd ? value : nil
        }
    }

    /// A string token: where its body (between the quotes) lies, whether it has escapes, and
    /// whether those escapes are exactly the ones `JSONWriter` writes (`\"` `\\` `\n` `\r` `\t`
    /// `\b` `\f`, lowercase `\u00XX` for the other control characters), in which case the body
    /// is byte for byte the serialization of its value.
    package struct StringToken: Sendable {
        package let start: Int
        package let end: Int
        package let hasEscapes: Bool
        package let isCanonical: Bool
        package var count: Int { end - start }
    }

    package var atEnd: Bool { index == bytes.count }

    @inline(__always)
    package mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    /// Consumes `byte` after optional whitespace.
    @inline(__always)
    package mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// True when the next token is `byte` (after optional whitespace), without consuming it.
    package mutating func peek(_ byte: UInt8) -> Bool {
        skipWhitespace()
        return index < bytes.count && bytes[index] == byte
    }

    /// Reads a string token (after optional whitespace), checking every escape as `JSONReader`
    /// does (`JSONScan.checkEscape`); nil for anything it would refuse.
    package mutating func string() -> StringToken? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        let start = index
        var hasEscapes = false
        var canonical = true
        while true {
            index = JSONScan.plainRunEnd(bytes, from: index, stopAtNonASCII: false)
            guard index < bytes.count else { return nil }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let token = StringToken(start: start, end: index, hasEscapes: hasEscapes, isCanonical: canonical)
                index += 1
                return token
            }
            // Anything else that stops the scan is a backslash or a raw control character.
            guard b == UInt8(ascii: "\\"), case .success(let escape) = JSONScan.checkEscape(bytes, at: index) else { return nil }
            hasEscapes = true
            canonical = canonical && escape.isCanonical
            index = escape.end
        }
    }

    /// The token's value as a `String`: sliced from `source` when it has no escapes (no second
    /// UTF-8 validation), decoded otherwise.
    package func decode(_ token: StringToken) -> String {
        let range = token.start..<token.end
        if !token.hasEscapes { return JSONScan.string(bytes, range, source: source) }
        return JSONScan.unescapedString(UnsafeBufferPointer(rebasing: bytes[range]))
    }

    /// The token's body (escapes as written) as a slice of `source`.
    package func body(_ token: StringToken) -> Substring {
        JSONScan.substring(source, utf8: token.start..<token.end)
    }

    /// True when the token's body is exactly `literal` (for ASCII keys and verbs).
    package func token(_ token: StringToken, is literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard !token.hasEscapes, token.count == n else { return false }
        let p = literal.utf8Start
        for k in 0..<n where bytes[token.start + k] != p[k] { return false }
        return true
    }

    /// A non-negative integer literal (after optional whitespace) that fits comfortably in
    /// `Int64`; nil for a sign, a fraction, an exponent or more than 18 digits.
    package mutating func nonNegativeInteger() -> Int64? {
        skipWhitespace()
        let start = index
        var v: Int64 = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            // Eighteen digits always fit; a nineteenth could overflow, so it is left to JSONReader.
            guard index - start < 18 else { return nil }
            v = v * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        let digits = index - start
        guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return v
    }
}
