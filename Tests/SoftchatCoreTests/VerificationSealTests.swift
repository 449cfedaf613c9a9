import SoftchatJSON
import Testing

@testable import SoftchatCore

/// The per-process seal that keeps a verified event a proof when it comes back through a binding.
@Suite struct VerificationSealTests {
    let identity = SoftchatIdentity.generate()

    func event(_ content: String = "hello") throws -> VerifiedEvent {
        try identity.sign(UnsignedEvent(createdAt: 1_760_000_000, kind: 1, tags: [["t", "seal"]], content: content))
    }

    /// The event's JSON object as a binding hands it back: NIP-01 fields (some replaced), plus `proof`.
    func handedBack(_ e: VerifiedEvent, proof: JSONValue?, replacing: [String: String] = [:]) throws -> JSONObject {
        let parsed = try #require(try JSONReader().parse(e.jsonText).objectValue)
        var object = JSONObject()
        for member in parsed { object.append(member.key, replacing[member.key].map(JSONValue.string) ?? member.value) }
        if let proof { object.append("proof", proof) }
        return object
    }

    @Test func anEventHandedBackWithItsSealIsRecognisedWithoutASecondSignatureCheck() throws {
        let e = try event()
        let opened = try VerificationSeal.open(try handedBack(e, proof: .string(VerificationSeal.seal(e))))
        #expect(opened.sealed)
        #expect(opened.event == e)
        #expect(opened.event.content == e.content)
    }

    @Test func aHandMadeEventWithoutAProofIsVerifiedInFull() throws {
        let e = try event()
        for proof in [nil, JSONValue.null] {
            let opened = try VerificationSeal.open(try handedBack(e, proof: proof))
            #expect(!opened.sealed)
            #expect(opened.event == e)
        }
    }

    @Test func aSealCopiedOntoAnotherEventBuysNothing() throws {
        let a = try event("a")
        let b = try event("b")
        let opened = try VerificationSeal.open(try handedBack(b, proof: .string(VerificationSeal.seal(a))))
        #expect(!opened.sealed)
        #expect(opened.event == b)
    }

    @Test func anAlteredEventKeepingItsSealIsRefusedByItsIdCheck() throws {
        let e = try event()
        #expect {
            _ = try VerificationSeal.open(try handedBack(e, proof: .string(VerificationSeal.seal(e)), replacing: ["content": "altered"]))
        } throws: { error in
            (error as? SoftchatError)?.code == .invalidRelayFrame
        }
    }

    @Test func aForgedSignatureIsRefusedWhateverProofItCarries() throws {
        let e = try event()
        let forged = String(repeating: "1", count: 128)
        for proof in [String(repeating: "0", count: 32), "not hex", VerificationSeal.seal(e)] {
            let object = try handedBack(e, proof: .string(proof), replacing: ["sig": forged])
            #expect(throws: SoftchatError.self) { _ = try VerificationSeal.open(object) }
        }
    }

    @Test func aProofThatIsNotAStringIsRefusedWithTheFrameCode() throws {
        let e = try event()
        #expect {
            _ = try VerificationSeal.open(try handedBack(e, proof: .integer(1)))
        } throws: { error in
            (error as? SoftchatError)?.code == .invalidRelayFrame
        }
    }

    @Test func theSealIsThirtyTwoHexCharactersAndTheSameForTheSameEvent() throws {
        let e = try event()
        let seal = VerificationSeal.seal(e)
        #expect(seal.count == 32 && seal.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(seal == VerificationSeal.seal(e))
        #expect(seal != VerificationSeal.seal(try event("other")))
    }
}
