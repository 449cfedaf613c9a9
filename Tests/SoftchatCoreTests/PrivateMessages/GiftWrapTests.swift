import SoftchatCore
import Testing

/// A signer that decrypts with an identity and records every batch it is asked for.
private final class CountingSigner: SoftchatSigner, @unchecked Sendable {
    // @unchecked: `batches` is only touched by the test's one thread.
    let identity: SoftchatIdentity
    var batches: [[SignerDecryption]] = []
    init(_ identity: SoftchatIdentity) { self.identity = identity }
    var publicKeyHex: String { identity.publicKeyHex }
    func sign(_ draft: UnsignedEvent, timeoutMilliseconds: Int) -> SignerOutcome<VerifiedEvent> {
        identity.sign(draft, timeoutMilliseconds: timeoutMilliseconds)
    }
    func nip44Encrypt(_ plaintext: String, to recipient: String, timeoutMilliseconds: Int) -> SignerOutcome<Result<String, Nip44Failure>> {
        identity.nip44Encrypt(plaintext, to: recipient, timeoutMilliseconds: timeoutMilliseconds)
    }
    func nip44Decrypt(_ batch: [SignerDecryption], timeoutMilliseconds: Int) -> SignerOutcome<[Result<String, Nip44Failure>]> {
        batches.append(batch)
        return identity.nip44Decrypt(batch, timeoutMilliseconds: timeoutMilliseconds)
    }
}

@Suite struct GiftWrapTests {
    let alice = SoftchatIdentity.generate(), bob = SoftchatIdentity.generate()
    let now: Int64 = 1_760_000_000

    func wrap(_ text: String, for recipient: SoftchatIdentity) throws -> VerifiedEvent {
        let rumor = try Rumor(pubkey: alice.publicKeyHex, createdAt: now, kind: 14, tags: [["p", bob.publicKeyHex]], content: text)
        return try GiftWrap.wrap(rumor, from: alice, to: recipient.publicKeyHex, now: now)
    }

    @Test func aWrapUnwrapsToItsRumorAuthenticatedByTheSeal() throws {
        let message = try GiftWrap.unwrap(try wrap("hello", for: bob), with: bob)
        #expect(message.rumor.pubkey == alice.publicKeyHex)
        #expect(message.rumor.content == "hello")
        #expect(message.rumor.kind == 14)
    }

    @Test func anEventThatIsNotAGiftWrapFailsBeforeAnyDecryption() throws {
        let note = try alice.sign(UnsignedEvent(createdAt: now, kind: 1, tags: [], content: "not a wrap"))
        let signer = CountingSigner(bob)
        guard case .approved(let results) = GiftWrap.unwrap([note], with: signer, timeoutMilliseconds: 1_000) else {
            Issue.record("the signer was not asked or refused")
            return
        }
        #expect(signer.batches.map(\.count) == [0, 0])
        #expect(throws: SoftchatError.self) { try results[0].get() }
        #expect((try? results[0].get()) == nil)
        if case .failure(let error) = results[0] {
            #expect(error.code == .invalidPrivateMessage)
            #expect(error.message.contains("is not a gift wrap"))
        }
    }

    @Test func theOneWrapFormAndTheBatchGiveTheSameResultsAndTheBatchDecryptsOnlyWraps() throws {
        let good = try wrap("first", for: bob)
        let forSomeoneElse = try wrap("second", for: alice)
        let note = try alice.sign(UnsignedEvent(createdAt: now, kind: 1, tags: [], content: "x"))
        let batch = [good, forSomeoneElse, note]
        let signer = CountingSigner(bob)
        guard case .approved(let results) = GiftWrap.unwrap(batch, with: signer, timeoutMilliseconds: 1_000) else {
            Issue.record("the signer refused")
            return
        }
        // Two wraps decrypted, then the one seal that opened.
        #expect(signer.batches.map(\.count) == [2, 1])
        for (event, result) in zip(batch, results) {
            let single = Result { () throws(SoftchatError) in try GiftWrap.unwrap(event, with: bob) }
            switch (result, single) {
            case (.success(let a), .success(let b)): #expect(a == b)
            case (.failure(let a), .failure(let b)):
                #expect(a.code == b.code)
                #expect(a.message == b.message)
            default: Issue.record("the batch and the one-wrap form disagree on \(event.id)")
            }
        }
        #expect((try? results[0].get())?.rumor.content == "first")
    }

    @Test func anErasedIdentityRefusesRatherThanReportingTheWrapInvalid() throws {
        let wrapped = try wrap("hello", for: bob)
        let erased = try SoftchatIdentity.importSecretHex(try bob.exportSecretHex())
        erased.erase()
        #expect {
            _ = try GiftWrap.unwrap(wrapped, with: erased)
        } throws: { error in
            (error as? SoftchatError)?.code == .signerRefused
        }
    }
}
