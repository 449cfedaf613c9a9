#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bytes from the operating system's CSPRNG (getentropy/getrandom(2) on Linux, arc4random on Apple).
enum SecureRandom {
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Glibc)
            // getentropy(3) wraps getrandom(2) and takes at most 256 bytes per call.
            var filled = 0
            while filled < buffer.count {
                let n = min(256, buffer.count - filled)
                guard getentropy(base + filled, n) == 0 else { fatalError("getentropy failed: errno \(errno)") }
                filled += n
            }
        #else
            arc4random_buf(base, buffer.count)
        #endif
    }
}

/// Overwrites memory in a way the optimizer may not remove (best effort secret erasure).
func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    #if canImport(Glibc)
        explicit_bzero(base, buffer.count)
    #else
        _ = memset_s(base, buffer.count, 0, buffer.count)
    #endif
}
