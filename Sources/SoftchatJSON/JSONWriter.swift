/// Writes compact JSON into a byte buffer.
///
/// Two string escapings exist because Nostr needs both: `.json` produces valid JSON for the
/// wire (every control character escaped), `.nip01` produces NIP-01's canonical event
/// serialization, which escapes exactly seven characters and writes everything else verbatim.
public struct JSONWriter: Sendable {
    /// How a writer escapes strings: valid JSON for the wire, or NIP-01's canonical event
    /// serialization.
    public enum StringEscaping: Sendable {
        /// RFC 8259: `"` `\` and all of U+0000–U+001F escaped (short forms where they exist).
        case json
        /// NIP-01 canonical form: only `\n` `\"` `\\` `\r` `\t` `\b` `\f`; all else verbatim.
        case nip01
    }

    /// The JSON written so far, as UTF-8.
    public private(set) var bytes: [UInt8]
    /// The escaping applied to every string written from now on.
    public var escaping: StringEscaping

    /// Creates an empty writer.
    ///
    /// - Parameters:
    ///   - escaping: How strings are escaped: `.json` unless the output is a NIP-01 event
    ///     serialization.
    ///   - reserve: Bytes of capacity to reserve up front.
    public init(escaping: StringEscaping = .json, reserve: Int = 256) {
        self.escaping = escaping
        bytes = []
        bytes.reserveCapacity(reserve)
    }

    /// The bytes written so far, decoded as UTF-8.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends one byte as it is, unescaped: a structural character such as `[`, `,` or `:`.
    ///
    /// - Parameter byte: The byte to append.
    @inline(__always)
    public mutating func raw(_ byte: UInt8) { bytes.append(byte) }

    /// Appends literal text as it is, unescaped: `null`, `true`, or a fixed key with its quotes.
    ///
    /// - Parameter text: The text to append; it must already be valid JSON in its place.
    public mutating func raw(_ text: StaticString) { write(text) }

    /// Appends `text`'s UTF-8 as it is (JSON the caller already has in its final form).
    package mutating func verbatim(_ text: String) { writeVerbatim(text) }

    /// Appends an integer in decimal (`Int64.min` included).
    ///
    /// - Parameter n: The integer to write.
    public mutating func integer(_ n: Int64) { writeInteger(n) }

    /// Appends `s` as a quoted JSON string, escaped as ``JSONWriter/escaping`` says.
    ///
    /// - Parameter s: The string to write.
    public mutating func string(_ s: String) { writeString(s) }

    /// Appends the UTF-8 in `buffer` as a quoted JSON string, escaped as ``JSONWriter/escaping``
    /// says, without building a `String` first.
    ///
    /// - Parameter buffer: The string's UTF-8. It is not validated: the caller guarantees it is
    ///   well-formed, since malformed bytes would be copied into the output as they are.
    public mutating func string(utf8 buffer: UnsafeBufferPointer<UInt8>) { writeString(utf8: buffer) }

    /// Appends a whole value, compactly: members in their stored order, a `.number` literal as it
    /// was written, strings escaped as ``JSONWriter/escaping`` says.
    ///
    /// - Parameter v: The value to write.
    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: raw("null")
        case .bool(let b): b ? raw("true") : raw("false")
        case .integer(let n): integer(n)
        case .number(let literal):
            var literal = literal
            literal.withUTF8 { bytes.append(contentsOf: $0) }
        case .string(let s): string(s)
        case .array(let elements):
            raw(UInt8(ascii: "["))
            for (k, e) in elements.enumerated() {
                if k > 0 { raw(UInt8(ascii: ",")) }
                value(e)
            }
            raw(UInt8(ascii: "]"))
        case .object(let object):
            raw(UInt8(ascii: "{"))
            for (k, m) in object.members.enumerated() {
                if k > 0 { raw(UInt8(ascii: ",")) }
                string(m.key)
                raw(UInt8(ascii: ":"))
                value(m.value)
            }
            raw(UInt8(ascii: "}"))
        }
    }
}

extension JSONValue {
    /// Compact JSON text (no whitespace), members in their stored order.
    public var jsonText: String {
        var w = JSONWriter()
        w.value(self)
        return w.string
    }

    /// Indented JSON text (one element or member per line), for files people read and diff.
    ///
    /// - Parameter indent: Spaces per level of nesting.
    /// - Returns: The text, ending with a line feed; empty arrays and objects stay `[]` and `{}`.
    public func prettyText(indent: Int = 2) -> String {
        var out = ""
        Self.pretty(self, level: 0, indent: indent, into: &out)
        out.append("\n")
        return out
    }

    private static func pretty(_ v: JSONValue, level: Int, indent: Int, into out: inout String) {
        let pad = String(repeating: " ", count: (level + 1) * indent)
        let closePad = String(repeating: " ", count: level * indent)
        switch v {
        case .array(let elements) where !elements.isEmpty:
            out.append("[\n")
            for (k, e) in elements.enumerated() {
                out.append(pad)
                pretty(e, level: level + 1, indent: indent, into: &out)
                out.append(k + 1 < elements.count ? ",\n" : "\n")
            }
            out.append(closePad + "]")
        case .object(let o) where o.count > 0:
            out.append("{\n")
            for (k, m) in o.members.enumerated() {
                out.append(pad + JSONValue.string(m.key).jsonText + ": ")
                pretty(m.value, level: level + 1, indent: indent, into: &out)
                out.append(k + 1 < o.count ? ",\n" : "\n")
            }
            out.append(closePad + "}")
        default:
            out.append(v.jsonText)
        }
    }
}

extension JSONWriter: JSONOutput {
    @inline(__always)
    package mutating func write(_ byte: UInt8) { bytes.append(byte) }

    package mutating func write(_ run: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: run) }
}
