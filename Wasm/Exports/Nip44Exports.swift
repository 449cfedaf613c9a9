// Exports of the WebAssembly build only, for scripts/facades/test-wasm's equivalence run: every
// NIP-44 v2 vector (Tests/Fixtures/nip44), which the wasm core must meet exactly as
// Nip44VectorTests requires of the native core. Arguments are NUL-terminated text (keys and nonces
// as lowercase hex); the result (free with softchat_string_free) is "o" and the value, or "e" and
// the Nip44Failure's reason.
import SoftchatCore

private func answer(_ body: () throws(Nip44Failure) -> String) -> UnsafeMutablePointer<CChar>? {
    do throws(Nip44Failure) { return ffiDuplicate("o" + (try body())) } catch { return ffiDuplicate("e" + error.description) }
}

@_cdecl("softchat_wasm_nip44_conversation_key")
public func softchat_wasm_nip44_conversation_key(_ secret: UnsafePointer<CChar>?, _ publicKey: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>?
{
    guard let secret, let publicKey, let s = Hex.decodeLowercase(String(cString: secret)), let p = Hex.decodeLowercase(String(cString: publicKey))
    else { return nil }
    return answer { () throws(Nip44Failure) in Hex.encode(try Nip44.conversationKey(secretKey: s, publicKey: p)) }
}

@_cdecl("softchat_wasm_nip44_encrypt")
public func softchat_wasm_nip44_encrypt(
    _ key: UnsafePointer<CChar>?, _ nonce: UnsafePointer<CChar>?, _ plaintext: UnsafePointer<CChar>?
) -> UnsafeMutablePointer<CChar>? {
    guard let key, let nonce, let plaintext, let k = Hex.decodeLowercase(String(cString: key)), k.count == 32,
        let n = Hex.decodeLowercase(String(cString: nonce)), n.count == 32
    else { return nil }
    return answer { () throws(Nip44Failure) in try Nip44.encrypt(String(cString: plaintext), conversationKey: k, nonce: n) }
}

@_cdecl("softchat_wasm_nip44_decrypt")
public func softchat_wasm_nip44_decrypt(_ key: UnsafePointer<CChar>?, _ payload: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? {
    guard let key, let payload, let k = Hex.decodeLowercase(String(cString: key)), k.count == 32 else { return nil }
    return answer { () throws(Nip44Failure) in try Nip44.decrypt(String(cString: payload), conversationKey: k) }
}

/// NIP-44's message keys of a conversation key and a nonce (hex): "o" and the ChaCha20 key,
/// ChaCha20 nonce and HMAC key in hex, joined by ":".
@_cdecl("softchat_wasm_nip44_message_keys")
public func softchat_wasm_nip44_message_keys(_ key: UnsafePointer<CChar>?, _ nonce: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? {
    guard let key, let nonce, let k = Hex.decodeLowercase(String(cString: key)), k.count == 32,
        let n = Hex.decodeLowercase(String(cString: nonce)), n.count == 32
    else { return nil }
    let keys = Nip44.MessageKeys(conversationKey: k, nonce: n)
    return ffiDuplicate("o" + [keys.chachaKey, keys.chachaNonce, keys.hmacKey].map { Hex.encode($0) }.joined(separator: ":"))
}

/// NIP-44's padded length of an unpadded length of at least 1 (-1 below that).
@_cdecl("softchat_wasm_nip44_padded_length")
public func softchat_wasm_nip44_padded_length(_ length: Int32) -> Int32 {
    length >= 1 ? Int32(Nip44.paddedLength(Int(length))) : -1
}
