import Foundation
import SoftchatCore
import SoftchatTestSupport
import Testing

@Suite struct IdentityTests {
    /// secp256k1's curve order n: the first value that is not a valid secret.
    static let curveOrder = "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141"
    /// The secret 1, whose public key is the generator's x coordinate.
    static let one = String(repeating: "0", count: 63) + "1"
    static let generatorX = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"

    /// A fresh empty directory under the system temporary directory.
    func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("softchat-identity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
        return url
    }

    @Test func generateGivesDistinctValidKeys() throws {
        let identities = (0..<16).map { _ in SoftchatIdentity.generate() }
        #expect(Set(identities.map(\.publicKeyHex)).count == 16)
        #expect(try Set(identities.map { try $0.exportSecretHex() }).count == 16)
        for identity in identities {
            #expect(Hex.isLowercase(identity.publicKeyHex, count: 64))
            #expect(Schnorr.parsePublicKey(try #require(Hex.decodeLowercase(identity.publicKeyHex))) != nil)
            // The exported secret imports back to the same key.
            #expect(try SoftchatIdentity.importSecretHex(try identity.exportSecretHex()).publicKeyHex == identity.publicKeyHex)
        }
    }

    @Test func knownSecretGivesItsKnownPublicKey() throws {
        #expect(try SoftchatIdentity.importSecretHex(Self.one).publicKeyHex == Self.generatorX)
        // n - 1 is the largest valid secret; its point is -G, with the same x.
        let nMinus1 = String(Self.curveOrder.dropLast()) + "0"
        #expect(try SoftchatIdentity.importSecretHex(nMinus1).publicKeyHex == Self.generatorX)
    }

    @Test func textFormsShowThePublicKeyButNeverTheSecret() throws {
        let identity = SoftchatIdentity.generate()
        let secret = try identity.exportSecretHex()
        #expect(secret.count == 64 && secret != identity.publicKeyHex)
        var dumped = ""
        dump(identity, to: &dumped)
        let forms = [
            identity.description, identity.debugDescription, String(describing: identity),
            String(reflecting: identity), "\(identity)", "\([identity])", dumped,
        ]
        for form in forms {
            #expect(form.contains(identity.publicKeyHex), "\(form)")
            #expect(!form.lowercased().contains(secret), "the secret leaked into \(form)")
            #expect(!form.lowercased().contains(secret.prefix(16)), "part of the secret leaked into \(form)")
        }
        #expect(identity.description == "SoftchatIdentity(publicKey: \(identity.publicKeyHex))")
    }

    @Test(arguments: [
        ("63 characters", String(repeating: "1", count: 63)),
        ("65 characters", String(repeating: "1", count: 65)),
        ("non-hex", String(repeating: "1", count: 63) + "g"),
        ("0x prefix", "0x" + String(repeating: "1", count: 62)),
        ("inner space", String(repeating: "1", count: 32) + " " + String(repeating: "1", count: 31)),
        ("empty", ""),
    ])
    func malformedSecretIsRejectedWithoutEchoingIt(_ label: String, _ input: String) {
        let error = expectSoftchatError(.invalidRelayAuthentication, mentioning: ["64 hex characters"]) {
            _ = try SoftchatIdentity.importSecretHex(input)
        }
        if let error, !input.isEmpty {
            #expect(!error.message.contains(input) && !error.description.contains(input), "\(label)")
            #expect(!error.message.contains("1111"), "\(label): part of the input echoed")
        }
    }

    @Test(arguments: [
        String(repeating: "0", count: 64), IdentityTests.curveOrder, IdentityTests.curveOrder.lowercased(),
        String(repeating: "f", count: 64),
    ])
    func outOfRangeSecretIsRejectedWithoutEchoingIt(_ input: String) {
        let error = expectSoftchatError(.invalidRelayAuthentication, mentioning: ["not a valid secp256k1 secret"]) {
            _ = try SoftchatIdentity.importSecretHex(input)
        }
        #expect(error.map { !$0.message.lowercased().contains(input.lowercased().prefix(12)) } == true)
    }

    @Test func uppercaseHexAndSurroundingWhitespaceAreAccepted() throws {
        let identity = SoftchatIdentity.generate()
        let secret = try identity.exportSecretHex()
        for spelling in [secret.uppercased(), " \(secret)\n", "\t\(secret.uppercased())\r\n", "\n\n\(secret)  "] {
            #expect(try SoftchatIdentity.importSecretHex(spelling).publicKeyHex == identity.publicKeyHex)
        }
    }

    @Test func theSecretDigitDecoderAgreesWithHexForEveryByte() {
        for c in UInt8.min...UInt8.max {
            let want: UInt8 =
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
                default: 0xFF
                }
            #expect(Hex.secretNibble(c) == want, "byte \(c)")
        }
    }

    @Test func importingFromBytesEqualsImportingFromText() throws {
        let identity = SoftchatIdentity.generate()
        let secret = try identity.exportSecretHex()
        for spelling in [secret, secret.uppercased(), " \(secret)\n", String(secret.dropLast()), secret + "0", "0x" + secret.dropFirst(2)] {
            let fromText = Result { () throws(SoftchatError) in try SoftchatIdentity.importSecretHex(spelling).publicKeyHex }
            let fromBytes = Array(spelling.utf8).withUnsafeBytes { utf8 in
                Result { () throws(SoftchatError) in try SoftchatIdentity.importSecretHex(utf8: utf8).publicKeyHex }
            }
            #expect(fromText == fromBytes, "\(spelling.count) characters")
        }
    }

    @Test func secretKeyFileIsCreatedOwnerOnly() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("key").path
        let identity = SoftchatIdentity.generate()
        try identity.writeSecretKeyFile(path: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let mode = try #require(attributes[.posixPermissions] as? NSNumber).intValue
        #expect(mode & 0o777 == 0o600, "mode \(String(mode, radix: 8))")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == (try identity.exportSecretHex()) + "\n")
    }

    @Test func secretKeyFileIsNeverOverwritten() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("key").path
        let first = SoftchatIdentity.generate()
        try first.writeSecretKeyFile(path: path)
        let second = SoftchatIdentity.generate()
        let error = #expect(throws: KeyFileError.self) { try second.writeSecretKeyFile(path: path) }
        guard case .exists(let p)? = error else {
            Issue.record("expected KeyFileError.exists, got \(String(describing: error))")
            return
        }
        #expect(p == path)
        let secondSecret = try second.exportSecretHex()
        #expect("\(error!)".contains("refusing to overwrite") && !"\(error!)".contains(secondSecret))
        #expect(try SoftchatIdentity.loadSecretKeyFile(path: path).publicKeyHex == first.publicKeyHex)
    }

    @Test func secretKeyFileRoundTrips() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("key").path
        let identity = SoftchatIdentity.generate()
        try identity.writeSecretKeyFile(path: path)
        let loaded = try SoftchatIdentity.loadSecretKeyFile(path: path)
        #expect(loaded.publicKeyHex == identity.publicKeyHex)
        #expect(try loaded.exportSecretHex() == identity.exportSecretHex())
    }

    @Test func unreadableOrMalformedKeyFileIsRejected() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("missing").path
        let readError = #expect(throws: KeyFileError.self) { _ = try SoftchatIdentity.loadSecretKeyFile(path: missing) }
        if case .cannotRead(let p, let errno)? = readError {
            #expect(p == missing && errno == ENOENT)
        } else {
            Issue.record("expected KeyFileError.cannotRead, got \(String(describing: readError))")
        }
        let garbage = dir.appendingPathComponent("garbage").path
        try "not a key\n".write(toFile: garbage, atomically: false, encoding: .utf8)
        #expect(chmod(garbage, 0o600) == 0)
        expectSoftchatError(.invalidRelayAuthentication) { _ = try SoftchatIdentity.loadSecretKeyFile(path: garbage) }
        let unwritable = dir.appendingPathComponent("no/such/dir/key").path
        let writeError = #expect(throws: KeyFileError.self) { try SoftchatIdentity.generate().writeSecretKeyFile(path: unwritable) }
        if case .cannotWrite(let p, _)? = writeError {
            #expect(p == unwritable)
        } else {
            Issue.record("expected KeyFileError.cannotWrite, got \(String(describing: writeError))")
        }
    }

    @Test func twoSignaturesOfOneDraftDifferButBothVerify() throws {
        let identity = SoftchatIdentity.generate()
        let draft = sampleDraft()
        let a = try identity.sign(draft)
        let b = try identity.sign(draft)
        #expect(a.id == b.id)
        #expect(a.sig != b.sig)
        #expect(a != b)
        #expect(try VerifiedEvent(text: a.jsonText) == a)
        #expect(try VerifiedEvent(text: b.jsonText) == b)
    }

    @Test func fixedAuxRandomnessMakesSigningDeterministic() throws {
        // So the difference above comes from fresh aux randomness, not from anything else.
        let identity = SoftchatIdentity.generate()
        let aux = [UInt8](repeating: 0x42, count: 32)
        let a = try identity.sign(sampleDraft(), auxRandom: aux)
        let b = try identity.sign(sampleDraft(), auxRandom: aux)
        #expect(a.sig == b.sig && a == b)
    }

    @Test func signedEventCarriesTheSignersPubkey() throws {
        let identity = SoftchatIdentity.generate()
        let event = try identity.sign(sampleDraft())
        #expect(event.pubkey == identity.publicKeyHex)
        let other = SoftchatIdentity.generate()
        #expect(try other.sign(sampleDraft()).id != event.id)
    }

    @Test func eraseZeroesTheSecretForEveryUseAndIsIdempotent() throws {
        let identity = SoftchatIdentity.generate()
        let publicKey = identity.publicKeyHex
        #expect(!identity.isErased)
        identity.erase()
        identity.erase()
        #expect(identity.isErased && identity.publicKeyHex == publicKey)
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["erased"]) {
            _ = try identity.sign(UnsignedEvent(createdAt: 1, kind: 1, tags: [], content: "x"))
        }
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["erased"]) {
            _ = try identity.createNip42Authentication(challenge: "c", relayURL: "wss://r.example", createdAt: 1)
        }
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["erased"]) { _ = try identity.exportSecretHex() }
        #expect(identity.signMessage([1, 2, 3], auxRandom: [UInt8](repeating: 0, count: 32)) == nil)
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("key").path
        #expect(throws: KeyFileError.self) { try identity.writeSecretKeyFile(path: path) }
        #expect(!FileManager.default.fileExists(atPath: path), "an erased identity left a key file behind")
    }

    @Test(arguments: [0o644, 0o640, 0o604, 0o660, 0o606])
    func aKeyFileOthersCanReachIsRefused(mode: Int) throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("key").path
        let identity = SoftchatIdentity.generate()
        try identity.writeSecretKeyFile(path: path)
        #expect(chmod(path, mode_t(mode)) == 0)
        let error = #expect(throws: KeyFileError.self) { _ = try SoftchatIdentity.loadSecretKeyFile(path: path) }
        guard case .readableByOthers(let p, let m)? = error else {
            Issue.record("expected readableByOthers, got \(String(describing: error))")
            return
        }
        #expect(p == path && m == UInt32(mode))
        #expect(chmod(path, 0o400) == 0)
        #expect(try SoftchatIdentity.loadSecretKeyFile(path: path).publicKeyHex == identity.publicKeyHex)
    }
}
