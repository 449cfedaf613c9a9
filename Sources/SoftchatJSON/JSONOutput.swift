/// A destination for JSON bytes: a growing buffer (`JSONWriter`) or a running SHA-256 (an
/// event id). The writing rules, escaping above all, are written once here for every one.
package protocol JSONOutput: ~Copyable {
    var escaping: JSONWriter.StringEscaping { get }
    mutating func write(_ byte: UInt8)
    mutating func write(_ run: UnsafeBufferPointer<UInt8>)
}

extension JSONOutput where Self: ~Copyable {
    package mutating func write(_ text: StaticString) {
        write(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Writes `text`'s UTF-8 as it is (JSON the caller already has in its final form).
    package mutating func writeVerbatim(_ text: String) {
        var text = text
        text.withUTF8 { write($0) }
    }

    package mutating func writeInteger(_ n: Int64) {
        if n >= 0 && n < 10 {
            write(UInt8(ascii: "0") + UInt8(n))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for Int64.min
        withUnsafeMutableBytes(of: &digits) { raw in
            var v = n.magnitude
            var i = raw.count
            repeat {
                i -= 1
                raw[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0
            if n < 0 {
                i -= 1
                raw[i] = UInt8(ascii: "-")
            }
            write(UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[i...]))
        }
    }

    package mutating func writeString(_ s: String) {
        var s = s
        s.withUTF8 { writeString(utf8: $0) }
    }

    /// A quoted string in this output's escaping. Runs that need none are found sixteen bytes
    /// at a time and written whole.
    package mutating func writeString(utf8 buffer: UnsafeBufferPointer<UInt8>) {
        write(UInt8(ascii: "\""))
        var runStart = 0
        var i = 0
        let n = buffer.count
        while true {
            i = JSONScan.plainRunEnd(buffer, from: i, stopAtNonASCII: false)
            guard i < n else { break }
            let b = buffer[i]
            let short = JSONScan.shortEscape(b)
            if short == 0 && escaping == .nip01 {
                i += 1  // NIP-01 read literally: every other character verbatim, control characters included
                continue
            }
            if i > runStart { write(UnsafeBufferPointer(rebasing: buffer[runStart..<i])) }
            write(0x5C)
            if short != 0 {
                write(short)
            } else {
                write("u00")
                write(JSONScan.lowercaseHexDigit(b >> 4))
                write(JSONScan.lowercaseHexDigit(b & 0xF))
            }
            i += 1
            runStart = i
        }
        if n > runStart { write(UnsafeBufferPointer(rebasing: buffer[runStart..<n])) }
        write(UInt8(ascii: "\""))
    }
}
