#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The C library's math functions the core uses. A platform seam: the WebAssembly build replaces
/// this file with `Wasm/Platform/Math.swift` (wasi-libc's libm).
enum Math {
    /// The natural logarithm.
    static func log(_ x: Double) -> Double {
        #if canImport(Glibc)
            Glibc.log(x)
        #else
            Darwin.log(x)
        #endif
    }
}
