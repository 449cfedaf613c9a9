/// The inner loop both the reader and the writer spend their time in: finding the end of a run
/// of string bytes that need no attention. Sixteen bytes are tested per step, so a 50 KB
/// message costs about as much as copying it.
package enum JSONScan {
    /// The index of the first byte at or after `start` that is `"`, `\`, a control character,
    /// or — when `stopAtNonASCII` — a byte of a multi-byte UTF-8 sequence; `buffer.count` when
    /// there is none.
    @inlinable @inline(__always)
    package static func plainRunEnd(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int, stopAtNonASCII: Bool) -> Int {
        var i = start
        let n = buffer.count
        if n - i >= 16, let base = buffer.baseAddress {
            let raw = UnsafeRawPointer(base)
            let quote = SIMD16<UInt8>(repeating: 0x22)
            let backslash = SIMD16<UInt8>(repeating: 0x5C)
            let space = SIMD16<UInt8>(repeating: 0x20)
            let high = SIMD16<UInt8>(repeating: 0x80)
            while i &+ 16 <= n {
                let v = raw.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
                var stop = (v .== quote) .| (v .== backslash) .| (v .< space)
                if stopAtNonASCII { stop .|= (v .>= high) }
                // Read the mask as two words (`any(_:)` compiles to a slow horizontal reduction);
                // a stopping lane is 0xFF, so the first one is the lowest set byte.
                let words = unsafeBitCast(stop, to: SIMD2<UInt64>.self)
                if words[0] != 0 { return i &+ words[0].trailingZeroBitCount &>> 3 }
                if words[1] != 0 { return i &+ 8 &+ words[1].trailingZeroBitCount &>> 3 }
                i &+= 16
            }
        }
        while i < n {
            let b = buffer[i]
            if b == 0x22 || b == 0x5C || b < 0x20 || (stopAtNonASCII && b >= 0x80) { return i }
            i &+= 1
        }
        return n
    }

    /// Decodes the contents of a JSON string whose escapes and UTF-8 are already checked, so
    /// the only bytes that need attention are backslashes. Returns the decoded length, which is
    /// never more than `raw.count`.
    package static func unescape(_ raw: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var i = 0
        var o = 0
        let n = raw.count
        while i < n {
            let runEnd = JSONScan.plainRunEnd(raw, from: i, stopAtNonASCII: false)
            if runEnd > i {
                (out.baseAddress! + o).update(from: raw.baseAddress! + i, count: runEnd - i)
                o += runEnd - i
            }
            i = runEnd
            guard i < n else { break }
            let e = raw[i + 1]  // raw[i] is a backslash
            i += 2
            switch e {
            case UInt8(ascii: "b"): out[o] = 0x08
            case UInt8(ascii: "f"): out[o] = 0x0C
            case UInt8(ascii: "n"): out[o] = 0x0A
            case UInt8(ascii: "r"): out[o] = 0x0D
            case UInt8(ascii: "t"): out[o] = 0x09
            case UInt8(ascii: "u"):
                var scalar = hex4(raw, i)
                i += 4
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (hex4(raw, i + 2) - 0xDC00)
                    i += 6
                }
                o += encodeUTF8(scalar, into: out.baseAddress! + o)
                continue
            default: out[o] = e  // `"`, `\`, `/` stand for themselves
            }
            o += 1
        }
        return o
    }

    package static func hex4(_ raw: UnsafeBufferPointer<UInt8>, _ i: Int) -> UInt32 {
        var v: UInt32 = 0
        for k in i..<i + 4 {
            let c = raw[k] | 0x20  // lowercase letters; digits are unaffected
            v = v << 4 | UInt32(c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10)
        }
        return v
    }

    package static func encodeUTF8(_ scalar: UInt32, into p: UnsafeMutablePointer<UInt8>) -> Int {
        switch scalar {
        case 0..<0x80:
            p[0] = UInt8(scalar)
            return 1
        case 0x80..<0x800:
            p[0] = UInt8(0xC0 | (scalar >> 6))
            p[1] = UInt8(0x80 | (scalar & 0x3F))
            return 2
        case 0x800..<0x10000:
            p[0] = UInt8(0xE0 | (scalar >> 12))
            p[1] = UInt8(0x80 | ((scalar >> 6) & 0x3F))
            p[2] = UInt8(0x80 | (scalar & 0x3F))
            return 3
        default:
            p[0] = UInt8(0xF0 | (scalar >> 18))
            p[1] = UInt8(0x80 | ((scalar >> 12) & 0x3F))
            p[2] = UInt8(0x80 | ((scalar >> 6) & 0x3F))
            p[3] = UInt8(0x80 | (scalar & 0x3F))
            return 4
        }
    }

    /// The letter of a character's two-byte escape (`n` for a line feed, `"` for a quote), or 0
    /// when it has none.
    @inline(__always)
    package static func shortEscape(_ b: UInt8) -> UInt8 {
        switch b {
        case 0x22: 0x22
        case 0x5C: 0x5C
        case 0x0A: UInt8(ascii: "n")
        case 0x0D: UInt8(ascii: "r")
        case 0x09: UInt8(ascii: "t")
        case 0x08: UInt8(ascii: "b")
        case 0x0C: UInt8(ascii: "f")
        default: 0
        }
    }

    @inline(__always)
    package static func lowercaseHexDigit(_ v: UInt8) -> UInt8 { v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "a") + v - 10 }
}
