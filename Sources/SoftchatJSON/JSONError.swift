/// Why the strict reader refused a document, and the byte offset where it noticed.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case empty
        case unexpectedEnd
        case unexpectedByte(UInt8)
        case invalidUTF8
        case controlCharacterInString(UInt8)
        case invalidEscape
        case unpairedSurrogate
        case invalidNumber
        case duplicateKey(String)
        case tooDeep(limit: Int)
        case trailingData
    }

    public let reason: Reason
    /// Zero-based byte offset into the input.
    public let offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

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
    public func lineAndColumn<C: Collection>(in bytes: C) -> (line: Int, column: Int) where C.Element == UInt8 {
        JSONError.lineAndColumn(ofOffset: offset, in: bytes)
    }

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
