// The hand-written half of the C ABI (portable: the WebAssembly build compiles it too; what
// needs the account or the managed transport is in FFIBindings+Native.swift): which Swift type stands behind each schema type
// (`FFI.<SchemaName>`), adapters where the Swift spelling differs from the schema's, and the
// codecs of types whose Swift form is not a memberwise struct of their declared fields
// (CABIRenderer.handWrittenCodecs). A schema type missing here fails the build.
import SoftchatCore
import SoftchatJSON

/// The schema's names for the Swift types the exports call.
enum FFI {
    // relay.wire
    typealias VerifiedEvent = SoftchatCore.VerifiedEvent
    typealias UnsignedEvent = SoftchatCore.UnsignedEvent
    typealias SignedNostrEvent = SignedNostrEventFFI
    typealias SoftchatIdentity = IdentityHandle
    typealias Rumor = SoftchatCore.Rumor
    typealias UnwrappedMessage = SoftchatCore.UnwrappedMessage
    typealias RelayFilter = SoftchatCore.RelayFilter
    typealias ClientRelayFrame = SoftchatCore.ClientRelayFrame
    typealias CountResult = SoftchatCore.CountResult
    typealias RelayResponseFrame = SoftchatCore.RelayResponseFrame
    // relay.session
    typealias RelaySessionConfig = SoftchatCore.RelaySessionConfig
    typealias OutboundRelayFrame = SoftchatCore.OutboundRelayFrame
    typealias RelaySessionActionKind = SoftchatCore.RelaySessionActionKind
    typealias RelaySessionAction = SoftchatCore.RelaySessionAction
    typealias EventWindowChangeKind = SoftchatCore.EventWindowChangeKind
    typealias EventWindowChange = SoftchatCore.EventWindowChange
    typealias EventWindowUpdateKind = SoftchatCore.EventWindowUpdateKind
    typealias EventWindowUpdate = SoftchatCore.EventWindowUpdate
    typealias RowChangeKind = SoftchatCore.RowChangeKind
    typealias RelaySessionSnapshot = SoftchatCore.RelaySessionSnapshot
    typealias RelaySession = SoftchatCore.RelaySession
    // relay.publish
    typealias DeliveryState = SoftchatCore.DeliveryState
    typealias DeliveryCategory = SoftchatCore.DeliveryCategory
    typealias DeliveryDecision = SoftchatCore.DeliveryDecision
    typealias DeliveryClaim = SoftchatCore.DeliveryClaim
    typealias DeliveryPayload = SoftchatCore.DeliveryPayload
    typealias DeliveryClaimResult = SoftchatCore.DeliveryClaimResult
    typealias DeliveryResult = SoftchatCore.DeliveryResult
    // relay.ingestion
    typealias IngestionBatch = SoftchatCore.IngestionBatch
    typealias IngestionResult = SoftchatCore.IngestionResult
    // relay.recovery: the managed transport (its handle and records: FFIBindings+Native.swift)
    typealias RelayPhase = SoftchatCore.RelayPhase
    typealias ManagedTransportStateChangeKind = SoftchatCore.ManagedTransportStateChangeKind
    typealias ManagedTransportStateChange = SoftchatCore.ManagedTransportStateChange
    typealias SkipReason = SoftchatCore.SkipReason
    typealias SkippedEvents = SoftchatCore.SkippedEvents
    typealias ManagedTransportActivityKind = SoftchatCore.ManagedTransportActivityKind
    typealias ManagedTransportActivity = SoftchatCore.ManagedTransportActivity

    // Free functions, spelled as the schema declares them.
    static func parseClientRelayFrame(_ text: String) throws(SoftchatError) -> ClientRelayFrame {
        try SoftchatCore.parseClientRelayFrame(text)
    }

    static func parseRelayResponseFrame(_ text: String) throws(SoftchatError) -> RelayResponseFrame {
        try SoftchatCore.parseRelayResponseFrame(text)
    }

    static func planNip42Authentication(identity: IdentityHandle, challenge: String, relayURL: String, createdAt: Int64)
        throws(SoftchatError) -> VerifiedEvent
    {
        try identity.createNip42Authentication(challenge: challenge, relayURL: relayURL, createdAt: createdAt)
    }

    static func classifyDeliveryAcknowledgement(_ ok: RelayResponseFrame) throws(SoftchatError) -> DeliveryDecision {
        try SoftchatCore.classifyDeliveryAcknowledgement(ok)
    }

    static func validateIngestionResult(batch: IngestionBatch, result: IngestionResult) throws(SoftchatError) {
        try SoftchatCore.validateIngestionResult(batch: batch, result: result)
    }
}

/// `SignedNostrEvent.parse(json)`: verifies a NIP-01 event text.
enum SignedNostrEventFFI {
    static func parse(_ json: String) throws(SoftchatError) -> VerifiedEvent {
        try VerifiedEvent(text: json)
    }
}

/// The `SoftchatIdentity` handle: the identity until `erase()` drops it (its deinit zeroes
/// the secret); later signing fails with `invalid_relay_authentication`. Calls arrive
/// serialized by the handle's lock.
final class IdentityHandle: @unchecked Sendable {
    // One core identity for the handle's life: erase() zeroes it under the identity's own lock,
    // so every holder (a managed transport answering NIP-42 included) stops signing at once and
    // no call reads a field that erase() writes.
    private let identity: SoftchatIdentity
    let publicKeyHex: String

    init(_ identity: SoftchatIdentity) {
        self.identity = identity
        publicKeyHex = identity.publicKeyHex
    }

    static func generate() -> IdentityHandle { IdentityHandle(.generate()) }

    static func importSecretHex(secretHex: FFISecretText) throws(SoftchatError) -> IdentityHandle {
        IdentityHandle(try .importSecretHex(utf8: secretHex.utf8))
    }

    func sign(_ event: UnsignedEvent) throws(SoftchatError) -> VerifiedEvent {
        try identity.sign(event)
    }

    func createNip42Authentication(challenge: String, relayURL: String, createdAt: Int64) throws(SoftchatError) -> VerifiedEvent {
        try identity.createNip42Authentication(challenge: challenge, relayURL: relayURL, createdAt: createdAt)
    }

    func nip44Encrypt(_ plaintext: String, to recipient: String) throws(SoftchatError) -> String {
        try identity.nip44Encrypt(plaintext, to: recipient)
    }

    func nip44Decrypt(_ payload: String, from sender: String) throws(SoftchatError) -> String {
        try identity.nip44Decrypt(payload, from: sender)
    }

    func giftWrap(_ rumor: UnsignedEvent, recipient: String, now: Int64) throws(SoftchatError) -> VerifiedEvent {
        if let given = rumor.pubkey, given != publicKeyHex {
            throw .invalidPrivateMessage("giftWrap: the rumor's pubkey is not this identity's", operation: .relayPublish)
        }
        let made = try Rumor(pubkey: publicKeyHex, createdAt: rumor.createdAt, kind: rumor.kind, tags: rumor.tags, content: rumor.content)
        return try GiftWrap.wrap(made, from: identity, to: recipient, now: now)
    }

    func unwrapGift(_ wrap: VerifiedEvent) throws(SoftchatError) -> UnwrappedMessage {
        try GiftWrap.unwrap(wrap, with: identity)
    }

    func erase() { identity.erase() }

    /// The identity, for a managed transport that answers NIP-42 with it (the same object, so
    /// erase() reaches it).
    func current() throws(SoftchatError) -> SoftchatIdentity {
        guard !identity.isErased else { throw SoftchatIdentity.erasedError }
        return identity
    }
}

/// The handle signs and decrypts for an account's private messages as the identity it holds
/// (the same object, so erase() ends that too).
extension IdentityHandle: SoftchatSigner {
    func sign(_ draft: UnsignedEvent, timeoutMilliseconds: Int) -> SignerOutcome<VerifiedEvent> {
        identity.sign(draft, timeoutMilliseconds: timeoutMilliseconds)
    }

    func nip44Encrypt(_ plaintext: String, to recipient: String, timeoutMilliseconds: Int) -> SignerOutcome<Result<String, Nip44Failure>> {
        identity.nip44Encrypt(plaintext, to: recipient, timeoutMilliseconds: timeoutMilliseconds)
    }

    func nip44Decrypt(_ batch: [SignerDecryption], timeoutMilliseconds: Int) -> SignerOutcome<[Result<String, Nip44Failure>]> {
        identity.nip44Decrypt(batch, timeoutMilliseconds: timeoutMilliseconds)
    }
}

// MARK: Hand-written codecs (CABIRenderer.handWrittenCodecs and value objects)

extension VerifiedEvent: FFIEncodable, FFIDecodable {
    /// The schema's record form: NIP-01 fields under the schema's names (`createdAt`), and `proof`,
    /// this process's seal (``VerificationSeal``), which the event carries through every binding.
    var ffiJSON: JSONValue {
        .object(
            JSONObject([
                "id": .string(id), "pubkey": .string(pubkey), "createdAt": .integer(createdAt),
                "kind": .integer(Int64(kind)), "tags": .array(tags.map { .array($0.map { JSONValue.string($0) }) }),
                "content": .string(content), "sig": .string(sig), "proof": .string(VerificationSeal.seal(self)),
            ]))
    }

    /// An event from a binding: one that carries this process's seal is recognised (its id
    /// re-hashed, its signature not checked again); any other is verified in full (the id
    /// recomputed and the signature checked, `invalid_relay_frame` otherwise), so a facade cannot
    /// hand the core an event that is not what it claims.
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        // Either name may come (TypeScript events carry both); the seal reads them in one pass.
        self = try VerificationSeal.open(try ffiObject(value, "VerifiedEvent", code: code)).event
    }
}

extension CountResult: FFIEncodable {
    var ffiJSON: JSONValue {
        .object(JSONObject(["count": .integer(count), "approximate": .bool(approximate), "hll": hll.map { .string($0.hex) } ?? .null]))
    }
}

extension RelayFilter: FFIEncodable {
    /// A value object: its JSON form is the filter object itself.
    var ffiJSON: JSONValue { .object(json) }

    init(ffiReceiver pointer: UnsafePointer<CChar>?, code: String) throws(SoftchatError) {
        guard let pointer else { throw ffiFailure(code, "null RelayFilter") }
        self = try RelayFilter.fromJSON(String(cString: pointer))
    }
}

extension ClientRelayFrame: FFIEncodable {
    var ffiJSON: JSONValue {
        var sub: String? = nil
        var events: [VerifiedEvent] = []
        var filters: [RelayFilter] = []
        var negentropy: String? = nil
        switch self {
        case .event(let e), .auth(let e): events = [e]
        case .req(let id, let f), .count(let id, let f):
            sub = id
            filters = f
        case .close(let id), .negClose(let id): sub = id
        case .events(let e): events = e
        case .negOpen(let id, let f, let m):
            sub = id
            filters = [f]
            negentropy = Hex.encode(m)
        case .negMessage(let id, let m):
            sub = id
            negentropy = Hex.encode(m)
        }
        return .object(
            JSONObject([
                "verb": .string(verb), "subscriptionId": sub.ffiJSON, "events": events.ffiJSON, "filters": filters.ffiJSON,
                "negentropy": negentropy.ffiJSON,
            ]))
    }
}

extension RelayResponseFrame: FFIEncodable, FFIDecodable {
    /// `message` is the relay's whole text; `prefix` its machine-readable prefix.
    var ffiJSON: JSONValue {
        var o = JSONObject()
        var sub: String? = nil
        var event: VerifiedEvent? = nil
        var eventID: String? = nil
        var accepted: Bool? = nil
        var prefix: String? = nil
        var message: String? = nil
        var challenge: String? = nil
        var count: CountResult? = nil
        var negentropy: String? = nil
        switch self {
        case .event(let s, let e):
            sub = s
            event = e
        case .ok(let id, let a, let m):
            eventID = id
            accepted = a
            prefix = m.prefix
            message = m.text
        case .eose(let s): sub = s
        case .closed(let s, let m):
            sub = s
            prefix = m.prefix
            message = m.text
        case .notice(let m):
            prefix = m.prefix
            message = m.text
        case .auth(let c): challenge = c
        case .count(let s, let r):
            sub = s
            count = r
        case .negMessage(let s, let m):
            sub = s
            negentropy = Hex.encode(m)
        case .negError(let s, let m):
            sub = s
            prefix = m.prefix
            message = m.text
        }
        o.append("verb", .string(verb))
        o.append("subscriptionId", sub.ffiJSON)
        o.append("event", event.ffiJSON)
        o.append("eventId", eventID.ffiJSON)
        o.append("accepted", accepted.ffiJSON)
        o.append("prefix", prefix.ffiJSON)
        o.append("message", message.ffiJSON)
        o.append("challenge", challenge.ffiJSON)
        o.append("count", count.ffiJSON)
        o.append("negentropy", negentropy.ffiJSON)
        return .object(o)
    }

    /// Rebuilds the frame from its record form by re-parsing its wire text, so every rule of
    /// parseRelayResponseFrame (id syntax, signature) applies to facade-built frames too.
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        let o = try ffiObject(value, "RelayResponseFrame", code: code)
        let verb: String = try ffiField(o, "verb", in: "RelayResponseFrame", code: code)
        let sub: String? = try ffiField(o, "subscriptionId", in: "RelayResponseFrame", code: code)
        let message: String? = try ffiField(o, "message", in: "RelayResponseFrame", code: code)
        var elements: [JSONValue] = [.string(verb)]
        switch verb {
        case "OK":
            let id: String? = try ffiField(o, "eventId", in: "RelayResponseFrame", code: code)
            let accepted: Bool? = try ffiField(o, "accepted", in: "RelayResponseFrame", code: code)
            elements += [.string(id ?? ""), .bool(accepted ?? false), .string(message ?? "")]
        case "EVENT":
            let event: VerifiedEvent? = try ffiField(o, "event", in: "RelayResponseFrame", code: code)
            elements += [.string(sub ?? ""), event.map { $0.jsonValue } ?? .null]
        case "EOSE": elements += [.string(sub ?? "")]
        case "CLOSED": elements += [.string(sub ?? ""), .string(message ?? "")]
        case "NOTICE": elements += [.string(message ?? "")]
        case "AUTH":
            let challenge: String? = try ffiField(o, "challenge", in: "RelayResponseFrame", code: code)
            elements += [.string(challenge ?? "")]
        case "NEG-MSG":
            let negentropy: String? = try ffiField(o, "negentropy", in: "RelayResponseFrame", code: code)
            elements += [.string(sub ?? ""), .string(negentropy ?? "")]
        case "NEG-ERR": elements += [.string(sub ?? ""), .string(message ?? "")]
        default:
            throw ffiFailure(code, "RelayResponseFrame verb \(verb) cannot be rebuilt")
        }
        self = try parseRelayResponseFrame(JSONValue.array(elements).jsonText)
    }
}

extension DeliveryClaim: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue {
        .object(JSONObject(["leaseId": .string(leaseID), "relayUrl": .string(relayURL), "expiresAt": .integer(expiresAt)]))
    }

    /// Only the lease id and relay matter: whether the lease is live is the account's decision.
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        let o = try ffiObject(value, "DeliveryClaim", code: code)
        self.init(
            leaseID: try ffiField(o, "leaseId", in: "DeliveryClaim", code: code),
            relayURL: try ffiField(o, "relayUrl", in: "DeliveryClaim", code: code))
    }
}
