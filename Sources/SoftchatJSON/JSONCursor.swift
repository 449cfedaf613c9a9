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
    /// does; nil for anything it would refuse.
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
            guard b == UInt8(ascii: "\\"), index + 1 < bytes.count else { return nil }  // a raw control character
            hasEscapes = true
            let e = bytes[index + 1]
            index += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"),
                UInt8(ascii: "b"), UInt8(ascii: "f"):
                continue
            case UInt8(ascii: "/"):
                canonical = false
            case UInt8(ascii: "u"):
                guard let scalar = hex4() else { return nil }
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { return nil }
                    index += 2
                    guard let low = hex4(), low >= 0xDC00 && low <= 0xDFFF else { return nil }
                    canonical = false
                } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                    return nil
                } else if !Self.isCanonicalUnicodeEscape(bytes, at: index - 6, scalar) {
                    canonical = false
                }
            default:
                return nil
            }
        }
    }

    /// `\u00XX` is how `JSONWriter` writes a control character without a short form, in
    /// lowercase hex; any other `\u` escape is a different spelling of the same text.
    static func isCanonicalUnicodeEscape(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int, _ scalar: UInt32) -> Bool {
        guard scalar < 0x20 else { return false }
        switch scalar {
        case 0x08, 0x09, 0x0A, 0x0C, 0x0D: return false  // these have short forms
        default: break
        }
        for k in i + 2..<i + 6 where bytes[k] >= UInt8(ascii: "A") && bytes[k] <= UInt8(ascii: "F") { return false }
        return true
    }

    mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for k in index..<index + 4 {
            let c = bytes[k]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: return nil
            }
            v = v << 4 | d
        }
        index += 4
        return v
    }

    /// The token's value as a `String`: sliced from `source` when it has no escapes (no second
    /// UTF-8 validation), decoded otherwise.
    package func decode(_ token: StringToken) -> String {
        if !token.hasEscapes {
            if token.count <= 15 {
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), as: UTF8.self)
            }
            return String(body(token))
        }
        let raw = UnsafeBufferPointer(rebasing: bytes[token.start..<token.end])
        return String(unsafeUninitializedCapacity: raw.count) { out in JSONScan.unescape(raw, into: out) }
    }

    /// The token's body (escapes as written) as a slice of `source`.
    package func body(_ token: StringToken) -> Substring {
        let utf8 = source.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: token.start)
        let upper = utf8.index(lower, offsetBy: token.count)
        return Substring(utf8[lower..<upper])
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
