/// HMAC-SHA256 (RFC 2104) and HKDF (RFC 5869) over the core's SHA-256 seam, so the native and
/// WebAssembly cores derive NIP-44 keys with the same code.
package enum HMACSHA256 {
    /// HMAC-SHA256 of the concatenation of `parts` under `key`.
    package static func mac(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        mac(key: key, parts: parts)
    }

    /// HMAC-SHA256 of the concatenation of `parts` under `key`.
    package static func mac(key: [UInt8], parts: [[UInt8]]) -> [UInt8] {
        var block = key.count > 64 ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA256.Hasher()
        var pad = block.map { $0 ^ 0x36 }
        pad.withUnsafeBytes { inner.update($0.baseAddress!, count: 64) }
        for part in parts where !part.isEmpty { part.withUnsafeBytes { inner.update($0.baseAddress!, count: $0.count) } }
        var innerDigest = inner.finish()
        var outer = SHA256.Hasher()
        for i in 0..<64 { pad[i] = block[i] ^ 0x5c }
        pad.withUnsafeBytes { outer.update($0.baseAddress!, count: 64) }
        innerDigest.withUnsafeBytes { outer.update($0.baseAddress!, count: 32) }
        block.withUnsafeMutableBytes { secureZero($0) }
        pad.withUnsafeMutableBytes { secureZero($0) }
        innerDigest.withUnsafeMutableBytes { secureZero($0) }
        return outer.finish()
    }

    /// HKDF-Extract: the pseudorandom key of `inputKeyMaterial` under `salt`.
    package static func extract(salt: [UInt8], inputKeyMaterial: [UInt8]) -> [UInt8] {
        mac(key: salt, inputKeyMaterial)
    }

    /// HKDF-Expand: `length` bytes (at most 255 × 32) from `pseudorandomKey` and `info`.
    package static func expand(pseudorandomKey: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length >= 0 && length <= 255 * 32, "HKDF-Expand output is at most 8,160 bytes")
        var output: [UInt8] = []
        output.reserveCapacity(length + 32)
        var previous: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            previous = mac(key: pseudorandomKey, previous, info, [counter])
            output += previous
            counter &+= 1
        }
        previous.withUnsafeMutableBytes { secureZero($0) }
        let result = Array(output.prefix(length))
        output.withUnsafeMutableBytes { secureZero($0) }
        return result
    }

    /// Whether `a` and `b` are equal, in time that depends only on their lengths (a MAC check
    /// must not tell an attacker how many leading bytes of a forged tag were right).
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
