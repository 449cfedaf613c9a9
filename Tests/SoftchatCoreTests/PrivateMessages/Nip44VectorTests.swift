import Foundation
import Testing

@testable import SoftchatCore

/// NIP-44 v2's normative vectors (`Tests/Fixtures/nip44/nip44.vectors.json`, paulmillr/nip44),
/// every one of them, counted: a vector the file gains or loses changes a count and fails.
@Suite struct Nip44VectorTests {
    nonisolated(unsafe) static let vectors: [String: Any] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/nip44/nip44.vectors.json")
        let root = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        return root["v2"] as! [String: Any]
    }()

    static func group(_ validity: String, _ name: String) -> [[String: Any]] {
        ((vectors[validity] as! [String: Any])[name] as! [Any]).map { $0 as? [String: Any] ?? [:] }
    }

    static func bytes(_ hex: Any?) -> [UInt8] { Hex.decodeLowercase(hex as! String)! }

    @Test func everyValidConversationKeyVectorDerivesItsKey() throws {
        let cases = Self.group("valid", "get_conversation_key")
        #expect(cases.count == 35)
        for v in cases {
            let key = try Nip44.conversationKey(secretKey: Self.bytes(v["sec1"]), publicKey: Self.bytes(v["pub2"]))
            #expect(Hex.encode(key) == v["conversation_key"] as! String, "\(v)")
        }
    }

    @Test func everyInvalidConversationKeyVectorIsRefusedWithItsReason() {
        let cases = Self.group("invalid", "get_conversation_key")
        #expect(cases.count == 8)
        for v in cases {
            let note = v["note"] as! String
            let expected: Nip44Failure = note.hasPrefix("sec1") ? .invalidSecretKey : .invalidPublicKey
            #expect(throws: expected, "\(note)") {
                try Nip44.conversationKey(secretKey: Self.bytes(v["sec1"]), publicKey: Self.bytes(v["pub2"]))
            }
        }
    }

    @Test func everyMessageKeysVectorSplitsTheExpansion() {
        let root = (Self.vectors["valid"] as! [String: Any])["get_message_keys"] as! [String: Any]
        let conversationKey = Self.bytes(root["conversation_key"])
        let keys = root["keys"] as! [[String: Any]]
        #expect(keys.count == 32)
        for k in keys {
            let derived = Nip44.MessageKeys(conversationKey: conversationKey, nonce: Self.bytes(k["nonce"]))
            #expect(Hex.encode(derived.chachaKey) == k["chacha_key"] as! String)
            #expect(Hex.encode(derived.chachaNonce) == k["chacha_nonce"] as! String)
            #expect(Hex.encode(derived.hmacKey) == k["hmac_key"] as! String)
        }
    }

    @Test func everyPaddedLengthVectorHolds() {
        let cases = (Self.vectors["valid"] as! [String: Any])["calc_padded_len"] as! [[Int]]
        #expect(cases.count == 24)
        for pair in cases { #expect(Nip44.paddedLength(pair[0]) == pair[1], "\(pair)") }
    }

    @Test func everyEncryptDecryptVectorRoundTripsToItsExactPayload() throws {
        let cases = Self.group("valid", "encrypt_decrypt")
        #expect(cases.count == 10)
        for v in cases {
            let sec1 = Self.bytes(v["sec1"])
            let sec2 = Self.bytes(v["sec2"])
            let identity2 = try SoftchatIdentity.importSecretHex(v["sec2"] as! String)
            let key = try Nip44.conversationKey(secretKey: sec1, publicKey: Hex.decodeLowercase(identity2.publicKeyHex)!)
            #expect(Hex.encode(key) == v["conversation_key"] as! String)
            // Symmetric: the other side's secret with the first side's public key.
            let identity1 = try SoftchatIdentity.importSecretHex(v["sec1"] as! String)
            #expect(try Nip44.conversationKey(secretKey: sec2, publicKey: Hex.decodeLowercase(identity1.publicKeyHex)!) == key)
            let payload = try Nip44.encrypt(v["plaintext"] as! String, conversationKey: key, nonce: Self.bytes(v["nonce"]))
            #expect(payload == v["payload"] as! String)
            #expect(try Nip44.decrypt(payload, conversationKey: key) == v["plaintext"] as! String)
            // The identity's API derives the same key from its side.
            #expect(try identity2.nip44Decrypt(payload, from: identity1.publicKeyHex) == v["plaintext"] as! String)
        }
    }

    @Test func everyLongMessageVectorMatchesItsDigests() throws {
        let cases = Self.group("valid", "encrypt_decrypt_long_msg")
        #expect(cases.count == 3)
        for v in cases {
            let plaintext = String(repeating: v["pattern"] as! String, count: v["repeat"] as! Int)
            #expect(Hex.encode(SHA256.hash(Array(plaintext.utf8))) == v["plaintext_sha256"] as! String)
            let key = Self.bytes(v["conversation_key"])
            let payload = try Nip44.encrypt(plaintext, conversationKey: key, nonce: Self.bytes(v["nonce"]))
            #expect(Hex.encode(SHA256.hash(Array(payload.utf8))) == v["payload_sha256"] as! String)
            #expect(try Nip44.decrypt(payload, conversationKey: key) == plaintext)
        }
    }

    @Test func everyInvalidPlaintextLengthIsRefused() {
        let lengths = (Self.vectors["invalid"] as! [String: Any])["encrypt_msg_lengths"] as! [Int]
        #expect(lengths.count == 4)
        for length in lengths {
            #expect(throws: Nip44Failure.invalidPlaintextLength) {
                try Nip44.encrypt(String(repeating: "a", count: length), conversationKey: [UInt8](repeating: 1, count: 32))
            }
        }
    }

    @Test func everyInvalidPayloadIsRefusedWithTheReasonItsNoteNames() {
        let cases = Self.group("invalid", "decrypt")
        #expect(cases.count == 12)
        var reasons: [Nip44Failure: Int] = [:]
        for v in cases {
            let note = v["note"] as! String
            let expected: Nip44Failure =
                note.hasPrefix("unknown encryption version")
                ? .unknownVersion
                : note.hasPrefix("invalid base64")
                    ? .invalidBase64
                    : note.hasPrefix("invalid MAC")
                        ? .invalidMAC
                        : note.hasPrefix("invalid padding")
                            ? .invalidPadding
                            : .invalidPayloadLength
            #expect(throws: expected, "\(note)") { try Nip44.decrypt(v["payload"] as! String, conversationKey: Self.bytes(v["conversation_key"])) }
            reasons[expected, default: 0] += 1
        }
        #expect(reasons == [.unknownVersion: 2, .invalidBase64: 1, .invalidMAC: 2, .invalidPadding: 3, .invalidPayloadLength: 4])
    }

    @Test func aRefusalCarriesTheStableCodeAndNeitherKeyNorText() throws {
        let alice = SoftchatIdentity.generate()
        let bob = SoftchatIdentity.generate()
        let payload = try alice.nip44Encrypt("meet at noon", to: bob.publicKeyHex)
        var tampered = Array(payload.utf8)
        tampered[50] = tampered[50] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        do {
            _ = try bob.nip44Decrypt(String(decoding: tampered, as: UTF8.self), from: alice.publicKeyHex)
            Issue.record("a tampered payload decrypted")
        } catch {
            #expect(error.code == .invalidPrivateMessage)
            #expect(error.message == "nip44: invalid MAC")
            #expect(!error.description.contains(try bob.exportSecretHex()))
            #expect(!error.description.contains("noon"))
        }
        #expect(try bob.nip44Decrypt(payload, from: alice.publicKeyHex) == "meet at noon")
        // A third party's key derives another conversation key: the MAC fails.
        #expect(throws: SoftchatError.self) { try SoftchatIdentity.generate().nip44Decrypt(payload, from: alice.publicKeyHex) }
    }

    @Test func base64DecodingAcceptsOnlyCanonicalText() {
        for n in 0..<8 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64.encode(bytes)
            #expect(text == Data(bytes).base64EncodedString())
            #expect(Base64.decode(Array(text.utf8)) == bytes)
        }
        for bad in ["A", "AB=C", "AB==CD==", "AR==", "ABC\n", "AB-_", "====", "AB=="] {
            let canonical =
                Data(base64Encoded: bad).map { Data(base64Encoded: $0.base64EncodedString()) != nil && $0.base64EncodedString() == bad } ?? false
            #expect((Base64.decode(Array(bad.utf8)) != nil) == canonical, "\(bad)")
        }
    }
}
