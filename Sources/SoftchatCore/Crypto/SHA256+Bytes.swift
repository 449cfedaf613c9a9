/// The conveniences both SHA-256 seams share (the native `Platform/SHA256.swift` and the
/// WebAssembly `Wasm/Platform/SHA256.swift` provide `hash(_:into:)` and `Hasher`).
extension SHA256 {
    /// The 32-byte digest of `bytes`.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        hash(bytes, into: &out)
        return out
    }

    package static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }
}

extension SecureRandom {
    /// `count` bytes from the platform's CSPRNG (`fill`).
    static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}
