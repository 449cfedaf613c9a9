/// Lowercase hex, as NIP-01 writes ids, keys and signatures.
package enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value of one hex digit of either case, or 0xFF for any other byte; computed with
    /// masks, without a branch or a table indexed by the digit, since a secret key's text goes
    /// through it.
    package static func secretNibble(_ c: UInt8) -> UInt8 {
        let digit = c &- 0x30  // 0…9 for a digit
        let letter = (c | 0x20) &- 0x61  // 0…5 for a-f or A-F
        let isDigit = UInt8(truncatingIfNeeded: (Int(digit) - 10) >> 8)  // 0xFF when digit < 10
        let isLetter = UInt8(truncatingIfNeeded: (Int(letter) - 6) >> 8)  // 0xFF when letter < 6
        return (digit & isDigit) | ((letter &+ 10) & isLetter) | ~(isDigit | isLetter)
    }

    /// Decodes lowercase hex only (NIP-01 forbids uppercase); nil for anything else.
    package static func decodeLowercase(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count % 2 == 0 else { return nil }
            var valid = true
            let out = [UInt8](unsafeUninitializedCapacity: utf8.count / 2) { buffer, initialized in
                // One table lookup per character; 0xFF marks a byte that is not lowercase hex.
                var bad: UInt8 = 0
                for i in 0..<buffer.count {
                    let hi = nibbleTable[Int(utf8[2 * i])]
                    let lo = nibbleTable[Int(utf8[2 * i + 1])]
                    bad |= hi | lo
                    buffer[i] = hi << 4 | (lo & 0x0F)
                }
                valid = bad & 0xF0 == 0
                initialized = buffer.count
            }
            return valid ? out : nil
        }
    }

    /// Decodes exactly `out.count * 2` lowercase hex characters into `out`; false otherwise.
    package static func decodeLowercase(_ text: String, into out: UnsafeMutableRawBufferPointer) -> Bool {
        var text = text
        return text.withUTF8 { utf8 -> Bool in
            guard utf8.count == out.count * 2 else { return false }
            var bad: UInt8 = 0
            for i in 0..<out.count {
                let hi = nibbleTable[Int(utf8[2 * i])]
                let lo = nibbleTable[Int(utf8[2 * i + 1])]
                bad |= hi | lo
                out[i] = hi << 4 | (lo & 0x0F)
            }
            return bad & 0xF0 == 0
        }
    }

    /// The value of each lowercase hex digit; 0xFF for every other byte.
    private static let nibbleTable: [UInt8] = (0..<256).map { nibble(UInt8($0)) ?? 0xFF }

    /// True when `text` is exactly `count` lowercase hex characters.
    package static func isLowercase(_ text: String, count: Int) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in utf8.count == count && isLowercase(utf8) }
    }

    /// True when every byte is a lowercase hex digit; sixteen are checked per step, since ids,
    /// keys and signatures make up most of a small event.
    package static func isLowercase(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = utf8.count
        if n >= 16, let base = utf8.baseAddress {
            let raw = UnsafeRawPointer(base)
            let zero = SIMD16<UInt8>(repeating: UInt8(ascii: "0"))
            let a = SIMD16<UInt8>(repeating: UInt8(ascii: "a"))
            let ten = SIMD16<UInt8>(repeating: 10)
            let six = SIMD16<UInt8>(repeating: 6)
            while i + 16 <= n {
                let v = raw.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
                // Wrapping subtraction folds each range check into one unsigned comparison.
                let bad = .!(((v &- zero) .< ten) .| ((v &- a) .< six))
                let words = unsafeBitCast(bad, to: SIMD2<UInt64>.self)
                if words[0] | words[1] != 0 { return false }
                i += 16
            }
        }
        while i < n {
            if nibble(utf8[i]) == nil { return false }
            i += 1
        }
        return true
    }

    /// True when `text` is 1…`max` lowercase hex characters (a NIP-01 prefix).
    package static func isLowercasePrefix(_ text: String, max: Int) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in utf8.count >= 1 && utf8.count <= max && utf8.allSatisfy { nibble($0) != nil } }
    }

    @inline(__always)
    package static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
