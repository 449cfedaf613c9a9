import CSecp256k1

/// Bytes from the host's CSPRNG: `crypto.getRandomValues`, imported as `softchat.random_fill`
/// (the JavaScript loader provides it). The native seam is `Sources/SoftchatCore/Platform/SecureRandom.swift`.
enum SecureRandom {
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        softchat_host_random_fill(base, buffer.count)
    }
}

/// Overwrites memory with zeros through a volatile pointer in C, which the optimizer may not
/// remove (wasm has no explicit_bzero).
func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    softchat_secure_zero(base, buffer.count)
}
