package import SoftchatJSON

/// The per-process seal that keeps ``VerifiedEvent`` a proof across a binding.
///
/// A verified event leaves the native library as JSON (a TypeScript object, a Kotlin data class, a
/// Rust struct), and anything in those languages can make an object of the same shape. So each
/// event the library hands out carries a `proof`. The proof is HMAC-SHA256 under a key that this
/// process makes at first use and that never leaves it, taken over the event's id and signature
/// and truncated to 128 bits.
///
/// When an event comes back with its proof, ``open(_:)`` re-hashes the id, which binds every other
/// field, and does not check the signature again: a SHA-256 and an HMAC instead of a BIP-340
/// verification. An event without a proof, or with a proof that is not this process's seal over
/// its id and signature, is verified in full. A proof copied onto another event, or kept on an
/// altered one, therefore buys nothing: the altered one fails its id check with
/// `invalid_relay_frame`.
package enum VerificationSeal {
    /// The process's key: 32 bytes from the operating system's CSPRNG, made at first use.
    private static let key: [UInt8] = {
        var key = [UInt8](repeating: 0, count: 32)
        key.withUnsafeMutableBytes { SecureRandom.fill($0) }
        return key
    }()

    /// The event's proof: 32 lowercase hex characters.
    package static func seal(_ event: VerifiedEvent) -> String {
        Hex.encode(mac(id: event.id, sig: event.sig))
    }

    /// The event in `object`, as a binding hands it back (NIP-01 fields, `createdAt` allowed
    /// for `created_at` and equal to it when both come, plus an optional `proof`), read in one
    /// pass, and whether its proof spared the signature check.
    ///
    /// - Parameter object: An event object; `proof`, when present, must be a string or null.
    /// - Returns: The verified event, and `true` when it came back with this process's seal.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the object is not a
    ///   well-formed event, or its id or (unsealed) signature does not verify.
    package static func open(_ object: JSONObject) throws(SoftchatError) -> (event: VerifiedEvent, sealed: Bool) {
        let camel = object["createdAt"]
        if let camel, let snake = object["created_at"], camel != snake {
            throw .invalidRelayFrame("event: createdAt \(camel.jsonText) and created_at \(snake.jsonText) differ")
        }
        var fields = JSONObject()
        var proof: String?
        for member in object {
            switch (member.key, member.value) {
            case ("proof", .string(let text)): proof = text
            case ("proof", .null): break
            case ("proof", _): throw .invalidRelayFrame("event: proof must be a string or null")
            case ("created_at", _) where camel != nil: break
            case ("createdAt", let value): fields.append("created_at", value)
            default: fields.append(member.key, member.value)
            }
        }
        let event = try UnverifiedEvent(json: .object(fields))
        if let proof, let given = Hex.decodeLowercase(proof), given.count == 16,
            HMACSHA256.constantTimeEqual(given, mac(id: event.id, sig: event.sig))
        {
            return (try VerifiedEvent(sealedEvent: event), true)
        }
        return (try event.verified(), false)
    }

    private static func mac(id: String, sig: String) -> [UInt8] {
        Array(HMACSHA256.mac(key: key, Array(id.utf8), Array(sig.utf8)).prefix(16))
    }
}
