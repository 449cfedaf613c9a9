/// What a signer answered: the value, or why there is none. A signer that asks a person (a
/// NIP-46 bunker, Android's NIP-55 signer app) can be refused, can time out, or can be gone;
/// the in-core ``SoftchatIdentity`` answers at once, and only `unavailable` once erased.
public enum SignerOutcome<Value: Sendable>: Sendable {
    /// The signer did the work.
    case approved(Value)
    /// The user (or the signer's policy) refused.
    case denied
    /// No answer within the call's timeout.
    case timedOut
    /// The signer cannot answer at all: erased, disconnected, not installed.
    case unavailable

    /// The refusal as Softchat's error (`signer_refused`), or nil for `approved`.
    public func refusal(_ what: String, operation: SoftchatOperation) -> SoftchatError? {
        switch self {
        case .approved: nil
        case .denied: .signerRefused("\(what): the signer denied the request", operation: operation)
        case .timedOut: .signerRefused("\(what): the signer did not answer in time", operation: operation)
        case .unavailable: .signerRefused("\(what): the signer is unavailable", operation: operation)
        }
    }
}

/// One NIP-44 decryption a signer is asked for: a payload and the other party's public key.
public struct SignerDecryption: Sendable, Hashable {
    /// The NIP-44 payload.
    public let payload: String
    /// The x-only public key of the party it is from, 64 lowercase hex characters.
    public let counterparty: String

    /// A decryption request.
    ///
    /// - Parameters:
    ///   - payload: The NIP-44 payload.
    ///   - counterparty: The other party's x-only public key.
    public init(payload: String, counterparty: String) {
        self.payload = payload
        self.counterparty = counterparty
    }
}

/// The one contract through which an account signs and decrypts, so a remote signer can stand
/// where the in-core ``SoftchatIdentity`` stands without changing the account.
///
/// Every call carries a timeout and answers with a ``SignerOutcome``: a signer that cannot
/// answer in time says `timedOut` rather than blocking its caller. Decryptions are asked for in
/// batches: unwrapping N gift wraps is two calls (the N wraps, then the N seals they held), never
/// 2N, so a signer that asks its user asks twice per sync, not per message. A batch is approved
/// or refused whole; inside an approved batch each payload has its own result, so one bad wrap
/// fails alone.
public protocol SoftchatSigner: AnyObject, Sendable {
    /// The signer's x-only public key, 64 lowercase hex characters.
    var publicKeyHex: String { get }

    /// Signs a draft as this signer's key.
    ///
    /// - Parameters:
    ///   - draft: The event to sign.
    ///   - timeoutMilliseconds: How long the caller waits for an answer.
    /// - Returns: The signed, verified event, or the refusal.
    func sign(_ draft: UnsignedEvent, timeoutMilliseconds: Int) -> SignerOutcome<VerifiedEvent>

    /// NIP-44 encrypts `plaintext` to `recipient`.
    ///
    /// - Parameters:
    ///   - plaintext: 1 to 65,535 UTF-8 bytes.
    ///   - recipient: The recipient's x-only public key.
    ///   - timeoutMilliseconds: How long the caller waits for an answer.
    /// - Returns: The payload (or why this plaintext or key cannot be encrypted), or the refusal.
    func nip44Encrypt(_ plaintext: String, to recipient: String, timeoutMilliseconds: Int) -> SignerOutcome<Result<String, Nip44Failure>>

    /// NIP-44 decrypts a batch of payloads.
    ///
    /// - Parameters:
    ///   - batch: The payloads and who each is from.
    ///   - timeoutMilliseconds: How long the caller waits for the whole batch.
    /// - Returns: One result per request, in order, or the refusal of the whole batch.
    func nip44Decrypt(_ batch: [SignerDecryption], timeoutMilliseconds: Int) -> SignerOutcome<[Result<String, Nip44Failure>]>
}

extension SoftchatIdentity: SoftchatSigner {
    /// Signs at once; `unavailable` once erased, never `denied` or `timedOut`.
    public func sign(_ draft: UnsignedEvent, timeoutMilliseconds: Int) -> SignerOutcome<VerifiedEvent> {
        do throws(SoftchatError) { return .approved(try sign(draft)) } catch { return .unavailable }
    }

    /// Encrypts at once; `unavailable` once erased.
    public func nip44Encrypt(_ plaintext: String, to recipient: String, timeoutMilliseconds: Int) -> SignerOutcome<Result<String, Nip44Failure>> {
        if isErased { return .unavailable }
        return .approved(
            Result { () throws(Nip44Failure) in
                var key = try conversationKey(with: recipient)
                defer { key.withUnsafeMutableBytes { secureZero($0) } }
                return try Nip44.encrypt(plaintext, conversationKey: key)
            })
    }

    /// Decrypts the batch at once, on every core, deriving each counterparty's conversation key
    /// once (a batch of seals from one sender costs one ECDH); `unavailable` once erased.
    public func nip44Decrypt(_ batch: [SignerDecryption], timeoutMilliseconds: Int) -> SignerOutcome<[Result<String, Nip44Failure>]> {
        if isErased { return .unavailable }
        var parties: [String: Int] = [:]
        var order: [String] = []
        for request in batch where parties[request.counterparty] == nil {
            parties[request.counterparty] = order.count
            order.append(request.counterparty)
        }
        var keys: [Result<[UInt8], Nip44Failure>] = Parallel.map(count: order.count) { i in
            Result { () throws(Nip44Failure) in try conversationKey(with: order[i]) }
        }
        defer {
            for i in keys.indices {
                if case .success(var key) = keys[i] {
                    key.withUnsafeMutableBytes { secureZero($0) }
                    keys[i] = .failure(.invalidSecretKey)
                }
            }
        }
        let results: [Result<String, Nip44Failure>] = Parallel.map(count: batch.count) { i in
            Result { () throws(Nip44Failure) in
                try Nip44.decrypt(batch[i].payload, conversationKey: try keys[parties[batch[i].counterparty]!].get())
            }
        }
        return isErased ? .unavailable : .approved(results)
    }
}

extension GiftWrap {
    /// Unwraps a batch of gift wraps through a signer: two decryption calls (the wraps, then the
    /// seals they held). Each wrap is decrypted to its seal, the seal verified (id, signature,
    /// kind 13) and decrypted to its rumor, and the rumor's author checked against the seal's
    /// signer; an event that is not a gift wrap fails before any decryption. The one pipeline:
    /// ``unwrap(_:with:)`` unwraps one wrap through it.
    ///
    /// - Parameters:
    ///   - wraps: Verified kind-1059 events addressed to the signer.
    ///   - signer: The recipient's signer.
    ///   - timeoutMilliseconds: How long each of the two calls may take.
    /// - Returns: One result per wrap, in order, or the signer's refusal (then nothing was
    ///   unwrapped, and the wraps may be asked for again).
    public static func unwrap(_ wraps: [VerifiedEvent], with signer: any SoftchatSigner, timeoutMilliseconds: Int)
        -> SignerOutcome<[Result<UnwrappedMessage, SoftchatError>]>
    {
        // A non-wrap costs no decryption: only kind-1059 events are sent to the signer.
        let candidates = wraps.indices.filter { wraps[$0].kind == wrapKind }
        let outer = signer.nip44Decrypt(
            candidates.map { SignerDecryption(payload: wraps[$0].content, counterparty: wraps[$0].pubkey) },
            timeoutMilliseconds: timeoutMilliseconds)
        guard case .approved(let sealTexts) = outer, sealTexts.count == candidates.count else { return outer.withoutValue }
        var sealText: [Result<String, Nip44Failure>?] = Array(repeating: nil, count: wraps.count)
        for (k, i) in candidates.enumerated() { sealText[i] = sealTexts[k] }
        // The seals are verified on every core (each is a Schnorr verification).
        let opened: [Result<VerifiedEvent, UnwrapFailure>] = Parallel.map(count: wraps.count) { i in
            Result { () throws(UnwrapFailure) in
                switch sealText[i] {
                case nil: throw UnwrapFailure("wrap: kind \(wraps[i].kind) is not a gift wrap (1059)")
                case .success(let text): return try seal(text)
                case .failure(let failure): throw UnwrapFailure("wrap: nip44: \(failure)")
                }
            }
        }
        var results: [Result<UnwrappedMessage, SoftchatError>] = []
        var seals: [(index: Int, seal: VerifiedEvent)] = []
        for (i, result) in opened.enumerated() {
            switch result {
            case .success(let seal):
                seals.append((i, seal))
                results.append(.failure(UnwrapFailure("wrap: not unwrapped").error))  // replaced below
            case .failure(let failure):
                results.append(.failure(failure.error))
            }
        }
        let inner = signer.nip44Decrypt(
            seals.map { SignerDecryption(payload: $0.seal.content, counterparty: $0.seal.pubkey) }, timeoutMilliseconds: timeoutMilliseconds)
        guard case .approved(let rumorTexts) = inner, rumorTexts.count == seals.count else { return inner.withoutValue }
        let messages: [Result<UnwrappedMessage, UnwrapFailure>] = Parallel.map(count: seals.count) { k in
            Result { () throws(UnwrapFailure) in
                switch rumorTexts[k] {
                case .success(let text): return try message(wrap: wraps[seals[k].index], seal: seals[k].seal, rumorText: text)
                case .failure(let failure): throw UnwrapFailure("seal: nip44: \(failure)")
                }
            }
        }
        for (k, entry) in seals.enumerated() {
            results[entry.index] = messages[k].mapError { $0.error }
        }
        return .approved(results)
    }

    /// Seals and wraps `rumor` through the author's signer (it signs the seal and encrypts the
    /// rumor); the wrap's one-time key is made and erased here.
    ///
    /// - Parameters:
    ///   - rumor: The message; its pubkey must be the signer's.
    ///   - signer: The author's signer.
    ///   - recipient: The x-only public key the wrap is for.
    ///   - now: The current time in Unix seconds.
    ///   - timeoutMilliseconds: How long each signer call may take.
    /// - Returns: The gift wrap.
    /// - Throws: ``SoftchatError`` with code `signer_refused`, or `invalid_private_message`.
    public static func wrap(_ rumor: Rumor, signer: any SoftchatSigner, to recipient: String, now: Int64, timeoutMilliseconds: Int)
        throws(SoftchatError) -> VerifiedEvent
    {
        guard rumor.pubkey == signer.publicKeyHex else { throw .invalidPrivateMessage("rumor pubkey is not the sender's", operation: .relayPublish) }
        let encrypted = signer.nip44Encrypt(rumor.jsonText, to: recipient, timeoutMilliseconds: timeoutMilliseconds)
        guard case .approved(let sealContent) = encrypted else { throw encrypted.refusal("seal the message", operation: .relayPublish)! }
        let content: String
        do throws(Nip44Failure) { content = try sealContent.get() } catch { throw error.error(operation: .relayPublish) }
        let signed = signer.sign(
            UnsignedEvent(createdAt: randomizedTime(now), kind: sealKind, content: content), timeoutMilliseconds: timeoutMilliseconds)
        guard case .approved(let seal) = signed else { throw signed.refusal("sign the seal", operation: .relayPublish)! }
        let oneTime = SoftchatIdentity.generate()
        defer { oneTime.erase() }
        let wrapContent = try oneTime.nip44Encrypt(seal.jsonText, to: recipient)
        return try oneTime.sign(UnsignedEvent(createdAt: randomizedTime(now), kind: wrapKind, tags: [["p", recipient]], content: wrapContent))
    }
}

extension SignerOutcome {
    /// The same refusal for another value type (`approved` is not a refusal and maps to `unavailable`).
    fileprivate func refusal<Other>() -> SignerOutcome<Other> {
        switch self {
        case .approved: .unavailable
        case .denied: .denied
        case .timedOut: .timedOut
        case .unavailable: .unavailable
        }
    }
}

extension SignerOutcome {
    fileprivate var withoutValue: SignerOutcome<[Result<UnwrappedMessage, SoftchatError>]> { refusal() }
}
