/// An HTTP/1.1 message head: the start line and the header fields, parsed strictly.
///
/// Only ``parse(_:refuse:)`` makes one, and it refuses rather than guesses: a control character
/// anywhere but a tab in a value (so no CR, LF or escape ever reaches an error message or a log),
/// a field without a colon or with whitespace before it, an obsolete folded line, a field name
/// that is not a token, or more than ``HTTPMessageReader/Limits/maxHeaderFields`` fields.
package struct HTTPHead: Equatable {
    /// The start line: `HTTP/1.1 200 OK`, or a request line.
    let firstLine: String
    /// The fields in order, names lowercased, values trimmed of spaces and tabs.
    let fields: [(name: String, value: String)]

    package static func == (a: HTTPHead, b: HTTPHead) -> Bool {
        a.firstLine == b.firstLine && a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Every value of the field `name`, in order.
    func values(_ name: String) -> [String] {
        let name = name.lowercased()
        return fields.filter { $0.name == name }.map(\.value)
    }

    /// The field `name`'s values joined with ", " (RFC 9110 §5.3), or nil when absent.
    func header(_ name: String) -> String? {
        let all = values(name)
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    /// The status code of a response head (`HTTP/1.x NNN …`); nil for anything else.
    var status: Int? {
        let parts = firstLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3 else { return nil }
        return HTTPMessageReader.decimal(String(parts[1]))
    }

    /// Parses the bytes before the blank line.
    /// - Parameters:
    ///   - bytes: The head without its final CRLFCRLF.
    ///   - refuse: Makes the error for a reason.
    static func parse(_ bytes: ArraySlice<UInt8>, refuse: (String) -> TransportError) throws(TransportError) -> HTTPHead {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == 13, i + 1 < bytes.endIndex, bytes[i + 1] == 10 {
                lines.append(bytes[start..<i])
                i += 2
                start = i
                continue
            }
            guard isFieldByte(bytes[i]) else { throw refuse("the head holds a control character") }
            i += 1
        }
        lines.append(bytes[start..<bytes.endIndex])
        guard let first = lines.first, !first.isEmpty else { throw refuse("an empty start line") }
        guard lines.count - 1 <= HTTPMessageReader.Limits.maxHeaderFields else {
            throw refuse("more than \(HTTPMessageReader.Limits.maxHeaderFields) header fields")
        }
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 58) else { throw refuse("a header line without a colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw refuse("a malformed header name") }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: " \t")
            fields.append((String(decoding: name, as: UTF8.self).lowercased(), value))
        }
        return HTTPHead(firstLine: String(decoding: first, as: UTF8.self), fields: fields)
    }

    /// A byte a head, a chunk-size line or a trailer may hold: a tab, or anything but a control
    /// character (obs-text included).
    static func isFieldByte(_ byte: UInt8) -> Bool { byte == 9 || (byte >= 32 && byte != 127) }

    /// RFC 9110 §5.6.2 token characters.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 48...57, 65...90, 97...122: return true
        case 33, 35, 36, 37, 38, 39, 42, 43, 45, 46, 94, 95, 96, 124, 126: return true
        default: return false
        }
    }
}
