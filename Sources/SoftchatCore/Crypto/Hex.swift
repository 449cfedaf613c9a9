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

    /// Decodes lowercase hex only (NIP-01 forbids uppercase); nil for anything else.
    package static func decodeLowercase(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count % 2 == 0 else { return nil }
            var out = [UInt8](repeating: 0, count: utf8.count / 2)
            for i in 0..<out.count {
                guard let hi = nibble(utf8[2 * i]), let lo = nibble(utf8[2 * i + 1]) else { return nil }
                out[i] = hi << 4 | lo
            }
            return out
        }
    }

    /// True when `text` is exactly `count` lowercase hex characters.
    package static func isLowercase(_ text: String, count: Int) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in utf8.count == count && utf8.allSatisfy { nibble($0) != nil } }
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
