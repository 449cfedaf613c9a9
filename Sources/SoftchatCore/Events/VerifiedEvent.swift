public import SoftchatJSON

/// A Nostr event whose id is the SHA-256 of its NIP-01 serialization and whose BIP-340
/// signature verifies against its pubkey.
///
/// The type is the proof: its initializer is private to this file, reachable only through
/// `EventVerifier`, so every `VerifiedEvent` anywhere in Softchat passed both checks.
public struct VerifiedEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event id: the SHA-256 of its NIP-01 serialization, 64 lowercase hex characters.
    public let id: String
    /// The author's x-only public key, 64 lowercase hex characters; the signature verifies against it.
    public let pubkey: String
    /// The creation time the author claims, in Unix seconds (never negative).
    public let createdAt: Int64
    /// The event kind, 0–65535.
    public let kind: Int
    /// The tags, each an array of at least one string.
    public let tags: [[String]]
    /// The content, decoded (long escaped content is decoded on first read; see `EventContent`).
    public var content: String { contentStorage.string }
    package let contentStorage: EventContent
    /// The BIP-340 signature over the id, 128 lowercase hex characters.
    public let sig: String

    fileprivate init(_ e: UnverifiedEvent) {
        id = e.id
        pubkey = e.pubkey
        createdAt = e.createdAt
        kind = e.kind
        tags = e.tags
        contentStorage = e.contentStorage
        sig = e.sig
    }

    /// Parses event JSON text and verifies it.
    ///
    /// - Parameter text: The JSON text of one event object; whitespace around it is allowed.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the text is not a well-formed
    ///   event (see ``UnverifiedEvent/init(text:)``) or its id or signature does not verify.
    public init(text: String) throws(SoftchatError) {
        self = try UnverifiedEvent(text: text).verified()
    }

    /// Reads an event object strictly and verifies it: ``UnverifiedEvent/init(json:)``, then
    /// ``UnverifiedEvent/verified()``.
    ///
    /// - Parameter json: The event object.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the object is not a well-formed
    ///   event or its id or signature does not verify.
    public init(json: JSONValue) throws(SoftchatError) {
        self = try UnverifiedEvent(json: json).verified()
    }

    /// Parses and verifies many event texts (a bulk import, a file of events), spread over the
    /// machine's cores; one result per text, in input order, each as ``VerifiedEvent/init(text:)``
    /// gives it.
    ///
    /// - Parameter texts: The JSON texts, one event each.
    /// - Returns: One result per text, in input order: the verified event, or the ``SoftchatError``
    ///   (code `invalid_relay_frame`) that ``VerifiedEvent/init(text:)`` throws for it.
    public static func verify(texts: [String]) -> [Result<VerifiedEvent, SoftchatError>] {
        EventVerifier.inParallel(count: texts.count) { i in
            Result { () throws(SoftchatError) in try VerifiedEvent(text: texts[i]) }
        }
    }

    /// As ``VerifiedEvent/verify(texts:)`` for raw lines (a file, a pipe): each must be UTF-8, which
    /// is checked on the same cores as the rest.
    ///
    /// - Parameter lines: One event's UTF-8 bytes each; whitespace around it, a line terminator
    ///   included, is allowed.
    /// - Returns: One result per line, in input order; a line that is not valid UTF-8 fails with
    ///   code `invalid_relay_frame`, like one that does not verify.
    public static func verify<Line: Collection<UInt8>>(utf8 lines: [Line]) -> [Result<VerifiedEvent, SoftchatError>] {
        EventVerifier.inParallel(count: lines.count) { i in
            guard let text = String(validating: lines[i], as: UTF8.self) else {
                return .failure(.invalidRelayFrame("event: not valid UTF-8"))
            }
            return Result { () throws(SoftchatError) in try VerifiedEvent(text: text) }
        }
    }

    /// An event whose signature this process verified before it left through a binding
    /// (``VerificationSeal/open(_:proof:)`` found its seal): the id is re-hashed, which binds
    /// every field, and the signature is not checked again.
    package init(sealedEvent e: UnverifiedEvent) throws(SoftchatError) {
        try self.init(idChecked: e) { problem throws(SoftchatError) in throw .invalidRelayFrame("event \(e.id): \(problem)") }
    }

    /// Re-reads an event that was verified before it was stored by Softchat's own account:
    /// the id is re-hashed (catching corruption of any field), the signature — checked when the
    /// event arrived — is not checked again. Never use this for text from a socket.
    package init(storedJSON text: String) throws(SoftchatError) {
        let e = try UnverifiedEvent(text: text)
        try self.init(idChecked: e) { problem throws(SoftchatError) in
            throw .invalidPersistenceResult("stored event \(e.id): \(problem)", operation: .relayIngestion)
        }
    }

    /// An event whose signature was checked before (by this process, or before it was stored):
    /// its id is re-hashed, and `refuse` throws the caller's error when it does not match.
    private init(idChecked e: UnverifiedEvent, refuse: (String) throws(SoftchatError) -> Never) throws(SoftchatError) {
        do throws(EventIssue) {
            try EventVerifier.checkID(e)
        } catch {
            try refuse(error.message)
        }
        self.init(e)
    }

    /// Two verified events are equal when they have the same id and the same signature.
    ///
    /// - Parameters:
    ///   - a: One event.
    ///   - b: The other event.
    /// - Returns: True when both ids and both signatures are equal.
    public static func == (a: VerifiedEvent, b: VerifiedEvent) -> Bool {
        // Equal ids mean equal serializations (SHA-256), and verified ids are honest; sig may
        // differ (BIP-340 signatures are randomized), so it is compared too.
        a.id == b.id && a.sig == b.sig
    }

    /// Hashes the id alone, which equal events share.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The event as compact JSON in NIP-01 field order.
    public var jsonValue: JSONValue {
        .object(
            JSONObject([
                "id": .string(id), "pubkey": .string(pubkey), "created_at": .integer(createdAt),
                "kind": .integer(Int64(kind)), "tags": .array(tags.map { .array($0.map(JSONValue.string)) }),
                "content": .string(content), "sig": .string(sig),
            ]))
    }

    /// `jsonValue` as text, written directly: content kept escaped (see `EventContent`) is
    /// copied as it arrived when its escapes are the writer's own, without being decoded.
    public var jsonText: String {
        Self.jsonText(id: id, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: contentStorage, sig: sig)
    }

    /// An event object's text in NIP-01 field order, written directly: content kept escaped is
    /// copied as it arrived; without `sig` for a NIP-59 rumor, which is never signed.
    package static func jsonText(id: String, pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: EventContent, sig: String?)
        -> String
    {
        var w = JSONWriter(reserve: 512 + (content.escapedBody?.utf8.count ?? content.string.utf8.count))
        w.write("{\"id\":")
        w.writeString(id)
        w.write(",\"pubkey\":")
        w.writeString(pubkey)
        w.write(",\"created_at\":")
        w.writeInteger(createdAt)
        w.write(",\"kind\":")
        w.writeInteger(Int64(kind))
        w.write(",\"tags\":")
        w.writeTags(tags)
        w.write(",\"content\":")
        w.writeContent(content)
        if let sig {
            w.write(",\"sig\":")
            w.writeString(sig)
        }
        w.write(UInt8(ascii: "}"))
        return w.string
    }

    /// The value of the first tag named `name` that has one (`"p"` → the recipient).
    ///
    /// - Parameter name: The tag name, compared exactly with each tag's first element.
    /// - Returns: That tag's second element, or nil when no tag named `name` has a value.
    public func firstTagValue(_ name: String) -> String? {
        for tag in tags where tag.count >= 2 && tag[0] == name { return tag[1] }
        return nil
    }

    /// A one-line summary for logs: id, kind and pubkey, never content or signature.
    public var description: String { "VerifiedEvent(id: \(id), kind: \(kind), pubkey: \(pubkey))" }
}

/// The id and signature checks that make a `VerifiedEvent`.
enum EventVerifier {
    /// Verifies every event, spreading the work over the machine's cores for larger inputs
    /// (each check is independent; libsecp256k1's context is safe to share). Results are in
    /// input order.
    static func verifyInParallel(_ events: [UnverifiedEvent]) -> [Result<VerifiedEvent, EventIssue>] {
        inParallel(count: events.count) { i in Result { () throws(EventIssue) in try verify(events[i]) } }
    }

    /// `body(0..<count)` in input order, on all cores when there are enough items to share.
    static func inParallel<T>(count n: Int, _ body: (Int) -> T) -> [T] {
        Parallel.map(count: n, body)
    }

    static func verify(_ e: UnverifiedEvent) throws(EventIssue) -> VerifiedEvent {
        let idBytes = try checkID(e)
        // Key and signature are decoded on the stack: 96 bytes need no allocation.
        let outcome = withUnsafeTemporaryAllocation(byteCount: 96, alignment: 8) { scratch -> String? in
            let pubkey = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<32])
            let sig = UnsafeMutableRawBufferPointer(rebasing: scratch[32..<96])
            guard Hex.decodeLowercase(e.pubkey, into: pubkey), Hex.decodeLowercase(e.sig, into: sig) else {
                return "pubkey and sig must be lowercase hex"
            }
            guard var key = PublicKeyCache.shared.publicKey(UnsafeRawBufferPointer(pubkey)) else {
                return "pubkey is not a valid secp256k1 x-only public key"
            }
            let valid = idBytes.withUnsafeBytes { m in
                Schnorr.verify(signature: UnsafeRawBufferPointer(sig), message: m, publicKey: &key)
            }
            return valid ? nil : "signature does not verify"
        }
        if let outcome { throw EventIssue(outcome) }
        return VerifiedEvent(e)
    }

    /// Checks that the id is the SHA-256 of either serialization (see CanonicalSerialization)
    /// and returns its bytes.
    @discardableResult
    static func checkID(_ e: UnverifiedEvent) throws(EventIssue) -> [UInt8] {
        guard let idBytes = Hex.decodeLowercase(e.id) else { throw EventIssue("id must be lowercase hex") }
        var digest = CanonicalSerialization.digest(
            pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags, content: e.contentStorage)
        if digest != idBytes {
            // NIP-01 read literally leaves the other control characters verbatim; an id over that
            // form is an honest hash of the same values too (see CanonicalSerialization).
            guard
                e.tags.contains(where: { $0.contains(where: CanonicalSerialization.hasUnlistedControlCharacter) })
                    || CanonicalSerialization.hasUnlistedControlCharacter(e.content)
            else { throw EventIssue("id does not match the NIP-01 serialization") }
            digest = CanonicalSerialization.digest(
                pubkey: e.pubkey, createdAt: e.createdAt, kind: e.kind, tags: e.tags, content: e.content, escaping: .nip01)
            guard digest == idBytes else {
                throw EventIssue("id does not match the NIP-01 serialization")
            }
        }
        return idBytes
    }
}
