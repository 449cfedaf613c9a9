/// Why the strict reader refused a document, and the byte offset where it noticed.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the reader found wrong at the error's offset.
    public enum Reason: Sendable, Equatable {
        /// The input holds nothing but whitespace.
        case empty
        /// The input ended inside a value: an open string, array or object, or a cut-off literal or
        /// escape.
        case unexpectedEnd
        /// A byte that cannot start or continue the value at that point; the payload is the byte.
        case unexpectedByte(UInt8)
        /// Bytes that are not well-formed UTF-8 (RFC 3629): overlong forms, encoded surrogates and
        /// code points above U+10FFFF count as malformed.
        case invalidUTF8
        /// An unescaped control character (U+0000–U+001F) inside a string; the payload is its byte.
        case controlCharacterInString(UInt8)
        /// A backslash escape JSON does not define, or a `\u` with a non-hexadecimal digit among its four.
        case invalidEscape
        /// A `\u` escape of a UTF-16 surrogate that is not a high surrogate followed by an escaped
        /// low one.
        case unpairedSurrogate
        /// A number that breaks JSON's grammar: a `-` without digits, a `.` or an exponent without
        /// digits after it.
        case invalidNumber
        /// An object names one key twice (keys compared as code points); the payload is the key, and
        /// the offset is that of its second occurrence.
        case duplicateKey(String)
        /// Arrays and objects nest deeper than the reader's `maxDepth`; the payload is that limit.
        case tooDeep(limit: Int)
        /// Something other than whitespace follows the document's value.
        case trailingData
    }

    /// Why the document was refused.
    public let reason: Reason
    /// Zero-based byte offset into the input.
    public let offset: Int

    /// Creates an error for `reason`, noticed at byte `offset`.
    ///
    /// - Parameters:
    ///   - reason: What was wrong.
    ///   - offset: The zero-based byte offset into the input where it was noticed.
    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    /// The reason and where it was noticed, as in `unexpected character ',' at byte 17`.
    public var description: String {
        "\(reasonText) at byte \(offset)"
    }

    /// The reason alone, without the offset.
    public var reasonText: String {
        switch reason {
        case .empty: "empty document"
        case .unexpectedEnd: "unexpected end of input"
        case .unexpectedByte(let b):
            if b >= 0x21 && b < 0x7F {
                "unexpected character '\(Character(Unicode.Scalar(b)))'"
            } else {
                "unexpected byte 0x\(String(b, radix: 16, uppercase: true))"
            }
        case .invalidUTF8: "invalid UTF-8"
        case .controlCharacterInString(let b):
            "unescaped control character 0x\(String(b, radix: 16, uppercase: true)) in string"
        case .invalidEscape: "invalid escape sequence"
        case .unpairedSurrogate: "unpaired UTF-16 surrogate escape"
        case .invalidNumber: "invalid number"
        case .duplicateKey(let k): "duplicate object key \"\(k)\""
        case .tooDeep(let limit): "nesting deeper than \(limit) levels"
        case .trailingData: "trailing data after the JSON value"
        }
    }

    /// One-based line and column of `offset` in `bytes`, for compiler-style diagnostics.
    ///
    /// - Parameter bytes: The input the error was thrown for.
    /// - Returns: The line (one plus the line feeds before `offset`) and the column, counted in
    ///   bytes from the start of that line.
    public func lineAndColumn<C: Collection>(in bytes: C) -> (line: Int, column: Int) where C.Element == UInt8 {
        JSONError.lineAndColumn(ofOffset: offset, in: bytes)
    }

    /// One-based line and column of the byte at `offset` in `bytes`: lines are counted by line
    /// feed, columns in bytes (not characters).
    ///
    /// - Parameters:
    ///   - offset: A zero-based byte offset into `bytes`.
    ///   - bytes: The UTF-8 input.
    /// - Returns: The line and column of `offset`; an offset past the end gives the position just
    ///   after the last byte.
    public static func lineAndColumn<C: Collection>(ofOffset offset: Int, in bytes: C) -> (line: Int, column: Int)
    where C.Element == UInt8 {
        var line = 1
        var column = 1
        for (i, b) in bytes.enumerated() {
            if i >= offset { break }
            if b == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return (line, column)
    }
}
