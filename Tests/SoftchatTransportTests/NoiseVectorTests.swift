import Foundation
import Testing

@testable import SoftchatTransport

/// One vector of `Tests/Fixtures/noise/{cacophony,snow}-25519_ChaChaPoly_SHA256.txt` (sources in
/// the README there). Static and ephemeral values are private keys; remote_static values
/// are public keys.
struct NoiseVector: Decodable {
    struct Message: Decodable {
        let payload: String
        let ciphertext: String
    }

    let protocol_name: String
    let init_prologue: String
    let init_psks: [String]?
    let init_static: String?
    let init_ephemeral: String?
    let init_remote_static: String?
    let resp_prologue: String
    let resp_psks: [String]?
    let resp_static: String?
    let resp_ephemeral: String?
    let resp_remote_static: String?
    let handshake_hash: String?
    let messages: [Message]
}

struct NoiseVectorFile: Decodable {
    let vectors: [NoiseVector]
}

enum NoiseVectors {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/noise")

    static func load(_ name: String) throws -> [NoiseVector] {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try JSONDecoder().decode(NoiseVectorFile.self, from: data).vectors
    }

    static func bytes(_ hex: String?) -> [UInt8]? {
        guard let hex else { return nil }
        return NoiseHex.decode(hex)
    }

    static func keyPair(_ hex: String?) throws -> NoiseKeyPair? {
        guard var key = bytes(hex) else { return nil }
        return try NoiseKeyPair(privateKey: &key)
    }

    /// What one vector checked, or where it first differed.
    struct Outcome {
        var messages = 0
        var handshakeHashChecked = false
        var failures: [String] = []
    }

    /// Plays both sides of the vector's conversation: every handshake and transport ciphertext
    /// must equal the vector's, every decryption must give back the payload, and both sides
    /// must end with the vector's handshake hash when it has one.
    static func run(_ v: NoiseVector) -> Outcome {
        var outcome = Outcome()
        do {
            let proto = try NoiseProtocol(v.protocol_name)
            let initiator = try NoiseHandshakeState(
                protocol: proto, initiator: true, prologue: bytes(v.init_prologue)!,
                localStatic: try keyPair(v.init_static), localEphemeral: try keyPair(v.init_ephemeral),
                remoteStatic: bytes(v.init_remote_static), psks: (v.init_psks ?? []).map { bytes($0)! })
            let responder = try NoiseHandshakeState(
                protocol: proto, initiator: false, prologue: bytes(v.resp_prologue)!,
                localStatic: try keyPair(v.resp_static), localEphemeral: try keyPair(v.resp_ephemeral),
                remoteStatic: bytes(v.resp_remote_static), psks: (v.resp_psks ?? []).map { bytes($0)! })
            let handshakeCount = proto.pattern.messages.count
            for (i, m) in v.messages.enumerated() {
                let payload = bytes(m.payload)!
                let expected = bytes(m.ciphertext)!
                // The conversation alternates from the initiator; one-way patterns only ever
                // send from the initiator.
                let fromInitiator = proto.pattern.isOneWay || i % 2 == 0
                let (sender, receiver) = fromInitiator ? (initiator, responder) : (responder, initiator)
                let ciphertext: [UInt8]
                let decrypted: [UInt8]
                if i < handshakeCount {
                    ciphertext = try sender.writeMessage(payload: payload)
                    decrypted = try receiver.readMessage(ciphertext)
                } else {
                    guard let send = sender.sendCipher, let receive = receiver.receiveCipher else {
                        outcome.failures.append("\(v.protocol_name) message \(i): no transport cipher for that direction")
                        return outcome
                    }
                    ciphertext = try send.encrypt(payload)
                    decrypted = try receive.decrypt(ciphertext)
                }
                if ciphertext != expected {
                    outcome.failures.append("\(v.protocol_name) message \(i): ciphertext differs")
                    return outcome
                }
                if decrypted != payload {
                    outcome.failures.append("\(v.protocol_name) message \(i): payload differs after decryption")
                    return outcome
                }
                if i == handshakeCount - 1 {
                    guard initiator.isComplete, responder.isComplete else {
                        outcome.failures.append("\(v.protocol_name): the handshake did not complete after \(handshakeCount) messages")
                        return outcome
                    }
                    if let hash = v.handshake_hash {
                        guard initiator.handshakeHash == bytes(hash)!, responder.handshakeHash == bytes(hash)! else {
                            outcome.failures.append("\(v.protocol_name): handshake hash differs")
                            return outcome
                        }
                        outcome.handshakeHashChecked = true
                    }
                }
                outcome.messages += 1
            }
        } catch {
            outcome.failures.append("\(v.protocol_name): \(error)")
        }
        return outcome
    }
}

@Suite struct NoiseVectorTests {
    // Every pattern in both files is implemented (15 fundamental and one-way patterns, 21
    // single-PSK and 13 multi-PSK variants, 23 deferred patterns): nothing is skipped.

    @Test func everyCacophonyVectorReproducesItsCiphertextsAndHandshakeHash() throws {
        let vectors = try NoiseVectors.load("cacophony-25519_ChaChaPoly_SHA256.txt")
        var messages = 0
        var hashes = 0
        for v in vectors {
            let outcome = NoiseVectors.run(v)
            for f in outcome.failures { Issue.record(Comment(rawValue: f)) }
            messages += outcome.messages
            hashes += outcome.handshakeHashChecked ? 1 : 0
        }
        #expect(vectors.count == 59)
        #expect(messages == 354)
        #expect(hashes == 59)
    }

    @Test func everySnowVectorReproducesItsCiphertexts() throws {
        let vectors = try NoiseVectors.load("snow-25519_ChaChaPoly_SHA256.txt")
        var messages = 0
        for v in vectors {
            let outcome = NoiseVectors.run(v)
            for f in outcome.failures { Issue.record(Comment(rawValue: f)) }
            messages += outcome.messages
        }
        #expect(vectors.count == 51)
        #expect(messages == 232)
    }

    @Test func allVectorsOfBothFilesRanAndTheCountIsReported() throws {
        var ran = 0
        var messages = 0
        var passed = 0
        var patterns: Set<String> = []
        for file in ["cacophony-25519_ChaChaPoly_SHA256.txt", "snow-25519_ChaChaPoly_SHA256.txt"] {
            for v in try NoiseVectors.load(file) {
                let outcome = NoiseVectors.run(v)
                ran += 1
                messages += outcome.messages
                if outcome.failures.isEmpty { passed += 1 }
                patterns.insert(try NoiseProtocol(v.protocol_name).pattern.name)
            }
        }
        print("noise vectors: \(ran) ran, \(passed) passed, \(messages) messages, \(patterns.count) distinct patterns")
        #expect(ran == 110)
        #expect(passed == 110)
        #expect(messages == 586)
        #expect(patterns.count == 72)
    }
}
