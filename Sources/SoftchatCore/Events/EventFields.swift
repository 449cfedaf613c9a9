public import SoftchatJSON

/// Why an event is not acceptable, said precisely (`tags[2]: a tag must have at least one
/// string`). The caller decides the error code: the same bad event is `invalid_relay_frame`
/// in an EVENT frame, `invalid_relay_batch` inside EVENTS, `invalid_relay_authentication` in AUTH.
package struct EventIssue: Error, Sendable, Equatable {
    package var message: String
    package init(_ message: String) { self.message = message }
}

/// An event's seven NIP-01 fields, checked for shape but not yet for id or signature.
///
/// Socket text becomes one of these first; only ``UnverifiedEvent/verified()`` turns it into a
/// ``VerifiedEvent``.
public struct UnverifiedEvent: Sendable, Hashable {
    /// The claimed event id: 64 lowercase hex characters, not yet checked against the serialization.
    public let id: String
    /// The author's x-only public key as 64 lowercase hex characters, not yet checked to be a curve point.
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
    /// The claimed BIP-340 signature: 128 lowercase hex characters, not yet verified.
    public let sig: String

    static let fieldNames: Set<String> = ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"]

    /// Reads an event object strictly: all seven fields, no others, NIP-01 types and hex rules.
    ///
    /// - Parameter json: The event object.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the value is not an object, a
    ///   field is missing or unknown, or a value has the wrong type or breaks NIP-01's hex, kind,
    ///   `created_at` or tag rules.
    public init(json: JSONValue) throws(SoftchatError) {
        do throws(EventIssue) {
            self = try Self.parse(json)
        } catch {
            throw .invalidRelayFrame("event: \(error.message)")
        }
    }

    /// Parses event JSON text strictly (see ``UnverifiedEvent/init(json:)``).
    ///
    /// - Parameter text: The JSON text of one event object; whitespace around it is allowed.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the text is not JSON or the
    ///   event breaks any rule of ``UnverifiedEvent/init(json:)``.
    public init(text: String) throws(SoftchatError) {
        if let event = EventReader.read(text: text) {
            self = event
            return
        }
        // Anything off the fast path's shape: the full reader, which says exactly what is wrong.
        let value: JSONValue
        do throws(JSONError) {
            value = try JSONReader().parse(text)
        } catch {
            throw .invalidRelayFrame("event: not JSON: \(error)")
        }
        try self.init(json: value)
    }

    static func parse(_ json: JSONValue) throws(EventIssue) -> UnverifiedEvent {
        guard case .object(let object) = json else { throw EventIssue("an event must be a JSON object, not \(json.typeName)") }
        var id: String?
        var pubkey: String?
        var sig: String?
        var content: String?
        var createdAt: Int64?
        var kind: Int?
        var tags: [[String]]?
        for member in object {
            switch member.key {
            case "id": id = try Self.hex(member.value, field: "id", count: 64)
            case "pubkey": pubkey = try Self.hex(member.value, field: "pubkey", count: 64)
            case "sig": sig = try Self.hex(member.value, field: "sig", count: 128)
            case "content":
                guard case .string(let s) = member.value else {
                    throw EventIssue("content must be a string, not \(member.value.typeName)")
                }
                content = s
            case "created_at": createdAt = try Self.createdAt(member.value)
            case "kind": kind = try Self.kind(member.value)
            case "tags": tags = try Self.tags(member.value)
            default: throw EventIssue("unknown field \"\(member.key)\"")
            }
        }
        guard let id else { throw EventIssue("missing field \"id\"") }
        guard let pubkey else { throw EventIssue("missing field \"pubkey\"") }
        guard let createdAt else { throw EventIssue("missing field \"created_at\"") }
        guard let kind else { throw EventIssue("missing field \"kind\"") }
        guard let tags else { throw EventIssue("missing field \"tags\"") }
        guard let content else { throw EventIssue("missing field \"content\"") }
        guard let sig else { throw EventIssue("missing field \"sig\"") }
        return UnverifiedEvent(
            unchecked: id, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags,
            content: EventContent(content), sig: sig)
    }

    init(unchecked id: String, pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: EventContent, sig: String) {
        self.id = id
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.contentStorage = content
        self.sig = sig
    }

    static func hex(_ value: JSONValue, field: String, count: Int) throws(EventIssue) -> String {
        guard case .string(let s) = value else { throw EventIssue("\(field) must be a string, not \(value.typeName)") }
        guard Hex.isLowercase(s, count: count) else {
            throw EventIssue("\(field) must be \(count) lowercase hex characters")
        }
        return s
    }

    static func createdAt(_ value: JSONValue) throws(EventIssue) -> Int64 {
        switch value {
        case .integer(let n) where n >= 0: return n
        case .integer(let n): throw EventIssue("created_at \(n) is negative")
        case .number(let literal): throw EventIssue("created_at \(literal) is not an integer timestamp in range")
        default: throw EventIssue("created_at must be an integer, not \(value.typeName)")
        }
    }

    static func kind(_ value: JSONValue) throws(EventIssue) -> Int {
        switch value {
        case .integer(let n) where n >= 0 && n <= 65535: return Int(n)
        case .integer(let n): throw EventIssue("kind \(n) is outside 0–65535")
        case .number(let literal): throw EventIssue("kind \(literal) is not an integer in 0–65535")
        default: throw EventIssue("kind must be an integer, not \(value.typeName)")
        }
    }

    static func tags(_ value: JSONValue) throws(EventIssue) -> [[String]] {
        guard case .array(let list) = value else { throw EventIssue("tags must be an array, not \(value.typeName)") }
        var tags: [[String]] = []
        tags.reserveCapacity(list.count)
        for (i, element) in list.enumerated() {
            guard case .array(let items) = element else {
                throw EventIssue("tags[\(i)] must be an array of strings, not \(element.typeName)")
            }
            guard !items.isEmpty else { throw EventIssue("tags[\(i)] is empty; a tag has at least one string") }
            var tag: [String] = []
            tag.reserveCapacity(items.count)
            for (j, item) in items.enumerated() {
                guard case .string(let s) = item else {
                    throw EventIssue("tags[\(i)][\(j)] must be a string, not \(item.typeName)")
                }
                tag.append(s)
            }
            tags.append(tag)
        }
        return tags
    }

    /// Checks the id against the canonical serialization and the signature against the
    /// pubkey; the only way to obtain a ``VerifiedEvent`` from outside data.
    ///
    /// - Returns: The same event as a ``VerifiedEvent``.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the id is not the SHA-256 of
    ///   the event's NIP-01 serialization, the pubkey is not a valid x-only public key, or the
    ///   signature does not verify.
    public func verified() throws(SoftchatError) -> VerifiedEvent {
        do throws(EventIssue) {
            return try EventVerifier.verify(self)
        } catch {
            throw .invalidRelayFrame("event \(id): \(error.message)")
        }
    }
}

/// An event draft for ``SoftchatIdentity/sign(_:)``: everything but id and signature.
public struct UnsignedEvent: Sendable, Hashable {
    /// The signer's public key as 64 lowercase hex characters, or nil for the signing identity's;
    /// signing refuses any other identity's key.
    public var pubkey: String?
    /// The creation time in Unix seconds; signing refuses a negative one.
    public var createdAt: Int64
    /// The event kind; signing refuses one outside 0–65535.
    public var kind: Int
    /// The tags; signing refuses a tag without any string.
    public var tags: [[String]]
    /// The content, signed exactly as given.
    public var content: String

    /// A draft from its fields, unchecked: ``SoftchatIdentity/sign(_:)`` validates them.
    ///
    /// - Parameters:
    ///   - pubkey: The signer's public key (64 lowercase hex characters), or nil for the signing
    ///     identity's.
    ///   - createdAt: The creation time in Unix seconds.
    ///   - kind: The event kind, 0–65535.
    ///   - tags: The tags, each with at least one string; none by default.
    ///   - content: The content.
    public init(pubkey: String? = nil, createdAt: Int64, kind: Int, tags: [[String]] = [], content: String) {
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
    }

    /// Reads a draft object strictly: `kind`, `created_at` and `content` are required, `pubkey` and
    /// `tags` optional (no tags when absent), and no other key is allowed.
    ///
    /// - Parameter json: The draft object.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_frame` when the value is not an object, a
    ///   required field is missing, a key is unknown, or a value has the wrong type or breaks NIP-01's
    ///   hex, kind, `created_at` or tag rules.
    public init(json: JSONValue) throws(SoftchatError) {
        do throws(EventIssue) {
            guard case .object(let object) = json else {
                throw EventIssue("an unsigned event must be a JSON object, not \(json.typeName)")
            }
            var pubkey: String?
            var content: String?
            var createdAt: Int64?
            var kind: Int?
            var tags: [[String]]?
            for member in object {
                switch member.key {
                case "pubkey": pubkey = try UnverifiedEvent.hex(member.value, field: "pubkey", count: 64)
                case "content":
                    guard case .string(let s) = member.value else {
                        throw EventIssue("content must be a string, not \(member.value.typeName)")
                    }
                    content = s
                case "created_at": createdAt = try UnverifiedEvent.createdAt(member.value)
                case "kind": kind = try UnverifiedEvent.kind(member.value)
                case "tags": tags = try UnverifiedEvent.tags(member.value)
                default: throw EventIssue("unknown field \"\(member.key)\" in an unsigned event")
                }
            }
            guard let createdAt else { throw EventIssue("missing field \"created_at\"") }
            guard let kind else { throw EventIssue("missing field \"kind\"") }
            guard let content else { throw EventIssue("missing field \"content\"") }
            self = UnsignedEvent(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags ?? [], content: content)
        } catch {
            throw .invalidRelayFrame("unsigned event: \(error.message)")
        }
    }

    func validate() throws(EventIssue) {
        guard kind >= 0 && kind <= 65535 else { throw EventIssue("kind \(kind) is outside 0–65535") }
        guard createdAt >= 0 else { throw EventIssue("created_at \(createdAt) is negative") }
        for (i, tag) in tags.enumerated() where tag.isEmpty {
            throw EventIssue("tags[\(i)] is empty; a tag has at least one string")
        }
    }
}
