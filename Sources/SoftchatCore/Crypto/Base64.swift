/// Strict standard Base64 (RFC 4648 §4, with `=` padding), as NIP-44 payloads use it.
///
/// Decoding accepts only canonical text: a length that is a multiple of 4, the standard
/// alphabet, padding only at the end, and zero bits in the padding's last character.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// The Base64 text of `bytes`.
    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        case 2:
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        default: break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of canonical Base64 `text`, or nil when it is not canonical Base64.
    package static func decode<Text: Collection<UInt8>>(_ text: Text) -> [UInt8]? {
        let text = Array(text)
        guard text.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 4 * 3)
        var i = 0
        while i < text.count {
            let last = i + 4 == text.count
            let c0 = values[Int(text[i])]
            let c1 = values[Int(text[i + 1])]
            let p2 = text[i + 2] == UInt8(ascii: "=")
            let p3 = text[i + 3] == UInt8(ascii: "=")
            guard c0 != 0xff, c1 != 0xff else { return nil }
            if p2 || p3 {
                guard last, p3 else { return nil }
                if p2 {
                    guard c1 & 0x0f == 0 else { return nil }
                    out.append(c0 << 2 | c1 >> 4)
                } else {
                    let c2 = values[Int(text[i + 2])]
                    guard c2 != 0xff, c2 & 0x03 == 0 else { return nil }
                    out += [c0 << 2 | c1 >> 4, c1 << 4 | c2 >> 2]
                }
            } else {
                let c2 = values[Int(text[i + 2])]
                let c3 = values[Int(text[i + 3])]
                guard c2 != 0xff, c3 != 0xff else { return nil }
                out += [c0 << 2 | c1 >> 4, c1 << 4 | c2 >> 2, c2 << 6 | c3]
            }
            i += 4
        }
        return out
    }
}
