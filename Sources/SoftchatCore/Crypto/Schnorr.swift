package import CSecp256k1

/// BIP-340 Schnorr signatures over libsecp256k1 (schnorrsig + extrakeys modules).
///
/// One process-wide context, randomized at creation for side-channel protection when signing;
/// libsecp256k1 contexts are safe for concurrent use once created, so verification spreads
/// across threads freely.
package enum Schnorr {
    nonisolated(unsafe) package static let context: OpaquePointer = {
        guard let ctx = secp256k1_context_create(UInt32(SECP256K1_CONTEXT_NONE)) else {
            fatalError("secp256k1_context_create failed")
        }
        var seed = SecureRandom.bytes(32)
        precondition(secp256k1_context_randomize(ctx, &seed) == 1, "secp256k1_context_randomize failed")
        seed.withUnsafeMutableBytes { secureZero($0) }
        return ctx
    }()

    /// Parses a 32-byte x-only public key; nil when it is not a valid curve point.
    package static func parsePublicKey(_ bytes: UnsafeRawBufferPointer) -> secp256k1_xonly_pubkey? {
        guard bytes.count == 32 else { return nil }
        var key = secp256k1_xonly_pubkey()
        let ok = secp256k1_xonly_pubkey_parse(context, &key, bytes.bindMemory(to: UInt8.self).baseAddress!)
        return ok == 1 ? key : nil
    }

    package static func parsePublicKey(_ bytes: [UInt8]) -> secp256k1_xonly_pubkey? {
        bytes.withUnsafeBytes { parsePublicKey($0) }
    }

    /// Verifies a 64-byte signature over `message` (any length, per BIP-340).
    package static func verify(
        signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer,
        publicKey: inout secp256k1_xonly_pubkey
    ) -> Bool {
        guard signature.count == 64 else { return false }
        let sig = signature.bindMemory(to: UInt8.self).baseAddress!
        let msg = message.count > 0 ? message.bindMemory(to: UInt8.self).baseAddress : nil
        return secp256k1_schnorrsig_verify(context, sig, msg, message.count, &publicKey) == 1
    }

    package static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard var key = parsePublicKey(publicKey) else { return false }
        return signature.withUnsafeBytes { s in message.withUnsafeBytes { m in verify(signature: s, message: m, publicKey: &key) } }
    }

    /// Signs `message` (any length) with `keypair`; `auxRandom` is BIP-340's 32 bytes of
    /// auxiliary randomness (fresh from the CSPRNG in production, fixed in test vectors).
    package static func sign(message: [UInt8], keypair: UnsafePointer<secp256k1_keypair>, auxRandom: [UInt8]) -> [UInt8]? {
        precondition(auxRandom.count == 32)
        var signature = [UInt8](repeating: 0, count: 64)
        var aux = auxRandom
        let ok = aux.withUnsafeMutableBytes { auxPtr -> Int32 in
            var params = secp256k1_schnorrsig_extraparams()
            params.magic = (0xda, 0x6f, 0xb3, 0x8c)  // SECP256K1_SCHNORRSIG_EXTRAPARAMS_MAGIC
            params.noncefp = nil
            params.ndata = auxPtr.baseAddress
            return message.withUnsafeBufferPointer { m in
                secp256k1_schnorrsig_sign_custom(context, &signature, m.baseAddress, m.count, keypair, &params)
            }
        }
        aux.withUnsafeMutableBytes { secureZero($0) }
        return ok == 1 ? signature : nil
    }
}
