/// The ChaCha20 stream cipher of RFC 8439 (a 256-bit key, a 96-bit nonce, a 32-bit block counter),
/// in portable Swift so the native and WebAssembly cores share one implementation.
///
/// NIP-44 v2 encrypts with it from block counter 0. It is a keystream XOR only: NIP-44 supplies
/// the authentication (HMAC-SHA256 over the nonce and ciphertext).
package enum ChaCha20 {
    /// XORs `bytes` in place with the keystream of `key` (32 bytes) and `nonce` (12 bytes),
    /// starting at block `counter`.
    package static func xor(_ bytes: inout [UInt8], key: [UInt8], nonce: [UInt8], counter: UInt32 = 0) {
        precondition(key.count == 32 && nonce.count == 12, "ChaCha20 takes a 32-byte key and a 12-byte nonce")
        var state = [UInt32](repeating: 0, count: 16)
        state[0] = 0x6170_7865
        state[1] = 0x3320_646e
        state[2] = 0x7962_2d32
        state[3] = 0x6b20_6574
        for i in 0..<8 { state[4 + i] = word(key, 4 * i) }
        state[12] = counter
        for i in 0..<3 { state[13 + i] = word(nonce, 4 * i) }
        var block = [UInt32](repeating: 0, count: 16)
        bytes.withUnsafeMutableBufferPointer { out in
            state.withUnsafeMutableBufferPointer { s in
                block.withUnsafeMutableBufferPointer { b in
                    var offset = 0
                    while offset < out.count {
                        keystream(s, into: b)
                        let n = Swift.min(64, out.count - offset)
                        // The keystream's words are serialized little-endian (RFC 8439 §2.3).
                        for i in 0..<n {
                            out[offset + i] ^= UInt8(truncatingIfNeeded: b[i >> 2] >> (UInt32(i & 3) << 3))
                        }
                        offset += n
                        s[12] &+= 1
                    }
                }
            }
        }
        block.withUnsafeMutableBytes { secureZero($0) }
        state.withUnsafeMutableBytes { secureZero($0) }
    }

    @inline(__always)
    private static func word(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
    }

    /// One 64-byte block: 20 rounds over the state, then the state added back.
    @inline(__always)
    private static func keystream(_ s: UnsafeMutableBufferPointer<UInt32>, into x: UnsafeMutableBufferPointer<UInt32>) {
        var x0 = s[0]
        var x1 = s[1]
        var x2 = s[2]
        var x3 = s[3]
        var x4 = s[4]
        var x5 = s[5]
        var x6 = s[6]
        var x7 = s[7]
        var x8 = s[8]
        var x9 = s[9]
        var x10 = s[10]
        var x11 = s[11]
        var x12 = s[12]
        var x13 = s[13]
        var x14 = s[14]
        var x15 = s[15]
        @inline(__always) func quarter(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32, _ d: inout UInt32) {
            a &+= b
            d ^= a
            d = d << 16 | d >> 16
            c &+= d
            b ^= c
            b = b << 12 | b >> 20
            a &+= b
            d ^= a
            d = d << 8 | d >> 24
            c &+= d
            b ^= c
            b = b << 7 | b >> 25
        }
        for _ in 0..<10 {
            quarter(&x0, &x4, &x8, &x12)
            quarter(&x1, &x5, &x9, &x13)
            quarter(&x2, &x6, &x10, &x14)
            quarter(&x3, &x7, &x11, &x15)
            quarter(&x0, &x5, &x10, &x15)
            quarter(&x1, &x6, &x11, &x12)
            quarter(&x2, &x7, &x8, &x13)
            quarter(&x3, &x4, &x9, &x14)
        }
        x[0] = x0 &+ s[0]
        x[1] = x1 &+ s[1]
        x[2] = x2 &+ s[2]
        x[3] = x3 &+ s[3]
        x[4] = x4 &+ s[4]
        x[5] = x5 &+ s[5]
        x[6] = x6 &+ s[6]
        x[7] = x7 &+ s[7]
        x[8] = x8 &+ s[8]
        x[9] = x9 &+ s[9]
        x[10] = x10 &+ s[10]
        x[11] = x11 &+ s[11]
        x[12] = x12 &+ s[12]
        x[13] = x13 &+ s[13]
        x[14] = x14 &+ s[14]
        x[15] = x15 &+ s[15]
    }
}
