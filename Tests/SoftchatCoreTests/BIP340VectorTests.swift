import Foundation
import SoftchatCore
import Testing

/// One row of `Tests/Fixtures/bip340/test-vectors.csv`.
struct BIP340Vector: Sendable, CustomTestStringConvertible {
    var index: Int
    var secretKey: String?
    var publicKey: [UInt8]
    var auxRand: [UInt8]?
    var message: [UInt8]
    var signature: [UInt8]
    var valid: Bool
    var comment: String

    var testDescription: String { "vector \(index)\(comment.isEmpty ? "" : " (\(comment))")" }

    static func load() throws -> [BIP340Vector] {
        let text = try String(contentsOf: Paths.testFixtures.appendingPathComponent("bip340/test-vectors.csv"), encoding: .utf8)
        var lines = text.split(whereSeparator: \.isNewline).map(String.init)
        let header = lines.removeFirst()
        #expect(header.hasPrefix("index,secret key,public key,aux_rand,message,signature,verification result"))
        return try lines.map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            try #require(f.count >= 7, "malformed row: \(line)")
            func hex(_ s: String) throws -> [UInt8] { try #require(Hex.decodeLowercase(s.lowercased()), "not hex: \(s)") }
            try #require(f[6] == "TRUE" || f[6] == "FALSE")
            let aux: [UInt8]? = try f[3].isEmpty ? nil : hex(f[3])
            return BIP340Vector(
                index: try #require(Int(f[0])), secretKey: f[1].isEmpty ? nil : f[1], publicKey: try hex(f[2]),
                auxRand: aux, message: try hex(f[4]), signature: try hex(f[5]),
                valid: f[6] == "TRUE", comment: f[7...].joined(separator: ","))
        }
    }
}

@Suite struct BIP340VectorTests {
    @Test func all19VectorsSignAndVerifyAsSpecified() throws {
        let vectors = try BIP340Vector.load()
        var ran = 0
        var signed = 0
        var accepted = 0
        var rejected = 0
        for v in vectors {
            if let secret = v.secretKey {
                let identity = try SoftchatIdentity.importSecretHex(secret)
                #expect(identity.publicKeyHex == Hex.encode(v.publicKey), "\(v.testDescription): public key")
                let aux = try #require(v.auxRand, "\(v.testDescription) has a secret but no aux_rand")
                let sig = try #require(identity.signMessage(v.message, auxRandom: aux), "\(v.testDescription): signing failed")
                #expect(Hex.encode(sig) == Hex.encode(v.signature), "\(v.testDescription): signature")
                signed += 1
            }
            let verified = Schnorr.verify(signature: v.signature, message: v.message, publicKey: v.publicKey)
            #expect(verified == v.valid, "\(v.testDescription): verify gave \(verified)")
            if verified { accepted += 1 } else { rejected += 1 }
            ran += 1
        }
        #expect(ran == 19)
        #expect(vectors.map(\.index) == Array(0...18))
        // Rows 0-3 and 15-18 have secret keys; rows 0-4 and 15-18 verify, 5-14 must not.
        #expect(signed == 8)
        #expect(accepted == 9)
        #expect(rejected == 10)
    }

    @Test func publicKeysThatAreNotCurvePointsFailToParseAndVerifyFalse() throws {
        let vectors = try BIP340Vector.load()
        let notOnCurve = try #require(vectors.first { $0.index == 5 })
        let overField = try #require(vectors.first { $0.index == 14 })
        for v in [notOnCurve, overField] {
            #expect(Schnorr.parsePublicKey(v.publicKey) == nil, "\(v.testDescription)")
            #expect(!Schnorr.verify(signature: v.signature, message: v.message, publicKey: v.publicKey))
        }
        // A valid key from the same file does parse, so the check above is not vacuous.
        #expect(Schnorr.parsePublicKey(try #require(vectors.first).publicKey) != nil)
    }

    @Test func everyValidSignatureFailsOnceOneBitOfItsInputsChanges() throws {
        for v in try BIP340Vector.load() where v.valid {
            var sig = v.signature
            sig[63] ^= 0x01
            #expect(!Schnorr.verify(signature: sig, message: v.message, publicKey: v.publicKey), "\(v.testDescription): sig")
            var msg = v.message
            if msg.isEmpty { msg = [0] } else { msg[0] ^= 0x80 }
            #expect(!Schnorr.verify(signature: v.signature, message: msg, publicKey: v.publicKey), "\(v.testDescription): msg")
            #expect(!Schnorr.verify(signature: Array(v.signature.dropLast()), message: v.message, publicKey: v.publicKey))
        }
    }

    @Test func differentAuxRandomnessGivesADifferentValidSignature() throws {
        for v in try BIP340Vector.load() {
            guard let secret = v.secretKey, let aux = v.auxRand else { continue }
            let identity = try SoftchatIdentity.importSecretHex(secret)
            var otherAux = aux
            otherAux[0] ^= 0xFF
            let sig = try #require(identity.signMessage(v.message, auxRandom: otherAux))
            #expect(sig != v.signature, "\(v.testDescription)")
            #expect(Schnorr.verify(signature: sig, message: v.message, publicKey: v.publicKey))
        }
    }

    @Test func signMessageRefusesAuxRandomnessThatIsNot32Bytes() throws {
        let identity = SoftchatIdentity.generate()
        #expect(identity.signMessage([1, 2, 3], auxRandom: [UInt8](repeating: 0, count: 31)) == nil)
        #expect(identity.signMessage([1, 2, 3], auxRandom: [UInt8](repeating: 0, count: 33)) == nil)
        #expect(identity.signMessage([1, 2, 3], auxRandom: [UInt8](repeating: 0, count: 32)) != nil)
    }
}
