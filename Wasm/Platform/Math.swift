import CSecp256k1

/// wasi-libc's libm in the WebAssembly build (declared in the shim). The native seam is
/// `Sources/SoftchatCore/Platform/Math.swift`.
enum Math {
    /// The natural logarithm.
    static func log(_ x: Double) -> Double { CSecp256k1.log(x) }
}
