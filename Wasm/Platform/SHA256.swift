import CSecp256k1

/// SHA-256 in the WebAssembly build: libsecp256k1's own implementation through the C shim
/// (`Wasm/CSecp256k1/softchat_wasm.c`). The native build's `Sources/SoftchatCore/Platform/SHA256.swift`
/// (OpenSSL) has the same names.
package enum SHA256 {
    /// The 32-byte digest of `bytes` into `out` (`hash(_:)` in Crypto/SHA256+Bytes.swift wraps it).
    package static func hash(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        var hasher = Hasher()
        if let base = bytes.baseAddress { hasher.update(base, count: bytes.count) }
        out = hasher.finish()
    }

    /// An incremental SHA-256: `update` any number of times, then `finish` once.
    package struct Hasher: ~Copyable {
        private var state = softchat_sha256()

        package init() { softchat_sha256_init(&state) }

        @inline(__always)
        package mutating func update(_ base: UnsafeRawPointer, count: Int) {
            softchat_sha256_update(&state, base.assumingMemoryBound(to: UInt8.self), count)
        }

        /// The 32-byte digest of everything given to `update`.
        package consuming func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            out.withUnsafeMutableBufferPointer { softchat_sha256_finish(&state, $0.baseAddress) }
            return out
        }
    }
}
