import COpenSSL

/// SHA-256 through libcrypto, with the digest implementation fetched once (OpenSSL 3 makes
/// every implicit fetch cost a lookup; one fetch keeps hashing at the library's speed).
package enum SHA256 {
    nonisolated(unsafe) static let md: OpaquePointer = {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("libcrypto has no SHA256") }
        return md
    }()

    /// The 32-byte digest of `bytes`.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        hash(bytes, into: &out)
        return out
    }

    package static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    package static func hash(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { o in
            EVP_Digest(bytes.baseAddress, bytes.count, o.baseAddress, &length, md, nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA256) failed")
    }
}
