// Two exports of the WebAssembly build only, for scripts/facades/test-wasm's equivalence run: BIP-340
// signing and verification of arbitrary messages (the C ABI signs and verifies events only), so
// the wasm build's Schnorr path meets the BIP-340 vectors that BIP340VectorTests checks natively.
// Arguments are NUL-terminated hex; the result is the signature's hex (free with
// softchat_string_free) or NULL, and 1 or 0.
import SoftchatCore

@_cdecl("softchat_wasm_bip340_sign")
public func softchat_wasm_bip340_sign(
    _ secret: UnsafePointer<CChar>?, _ aux: UnsafePointer<CChar>?, _ message: UnsafePointer<CChar>?
) -> UnsafeMutablePointer<CChar>? {
    guard let secret, let aux, let message,
        let auxBytes = Hex.decodeLowercase(String(cString: aux)),
        let messageBytes = Hex.decodeLowercase(String(cString: message)),
        let identity = try? SoftchatIdentity.importSecretHex(String(cString: secret)),
        let signature = identity.signMessage(messageBytes, auxRandom: auxBytes)
    else { return nil }
    return ffiDuplicate(Hex.encode(signature))
}

@_cdecl("softchat_wasm_bip340_verify")
public func softchat_wasm_bip340_verify(
    _ publicKey: UnsafePointer<CChar>?, _ message: UnsafePointer<CChar>?, _ signature: UnsafePointer<CChar>?
) -> Int32 {
    guard let publicKey, let message, let signature,
        let key = Hex.decodeLowercase(String(cString: publicKey)),
        let messageBytes = Hex.decodeLowercase(String(cString: message)),
        let signatureBytes = Hex.decodeLowercase(String(cString: signature))
    else { return 0 }
    return Schnorr.verify(signature: signatureBytes, message: messageBytes, publicKey: key) ? 1 : 0
}
