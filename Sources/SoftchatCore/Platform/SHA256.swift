import COpenSSL

/// SHA-256 through libcrypto, with the digest implementation fetched once (OpenSSL 3 makes
/// every implicit fetch cost a lookup; one fetch keeps hashing at the library's speed).
///
/// A platform seam: the WebAssembly build replaces this file with `Wasm/Platform/SHA256.swift`
/// (libsecp256k1's own SHA-256 through a C shim), with the same names.
package enum SHA256 {
    nonisolated(unsafe) static let md: OpaquePointer = {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("libcrypto has no SHA256") }
        return md
    }()

    /// The 32-byte digest of `bytes` into `out` (`hash(_:)` in Crypto/SHA256+Bytes.swift wraps it).
    package static func hash(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { o in
            EVP_Digest(bytes.baseAddress, bytes.count, o.baseAddress, &length, md, nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA256) failed")
    }

    /// An incremental SHA-256: `update` any number of times, then `finish` once.
    package struct Hasher: ~Copyable {
        private let context: OpaquePointer

        package init() {
            guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, SHA256.md, nil) == 1 else {
                fatalError("EVP_DigestInit_ex(SHA256) failed")
            }
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        @inline(__always)
        package mutating func update(_ base: UnsafeRawPointer, count: Int) {
            precondition(EVP_DigestUpdate(context, base, count) == 1)
        }

        /// The 32-byte digest of everything given to `update`.
        package consuming func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            var length: UInt32 = 0
            let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
            precondition(ok == 1 && length == 32, "EVP_DigestFinal_ex(SHA256) failed")
            return out
        }
    }
}
