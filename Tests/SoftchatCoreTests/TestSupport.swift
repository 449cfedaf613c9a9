import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// Paths the core tests read: the repository root and its test fixtures (`Tests/Fixtures`).
enum Paths {
    /// `<repo>` (this file is `<repo>/Tests/SoftchatCoreTests/TestSupport.swift`).
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// `<repo>/Tests/Fixtures`: third-party vectors copied into the repository (see its README).
    static let testFixtures = repository.appendingPathComponent("Tests/Fixtures")
    /// The NIP-01 message and event fixtures of nostr-sdk-ios.
    static let fixtures = testFixtures.appendingPathComponent("nostr-sdk-ios")

    static func fixtureText(_ name: String) throws -> String {
        try String(contentsOf: fixtures.appendingPathComponent("\(name).json"), encoding: .utf8)
    }
}

extension String {
    /// The same hex string with the character at `index` changed to another hex digit.
    func flippingHexDigit(at index: Int = 0) -> String {
        var chars = Array(self)
        chars[index] = chars[index] == "0" ? "1" : "0"
        return String(chars)
    }
}

/// A fixed, valid draft for tests that need some event.
func sampleDraft(
    content: String = "hello", tags: [[String]] = [["t", "softchat"]], kind: Int = 1,
    createdAt: Int64 = 1_700_000_000
) -> UnsignedEvent {
    UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content)
}

// MARK: Wire test helpers (WireClientFrameTests, WireRelayFrameTests, WireFilterTests, WireCountTests)

/// The wire property tests' seeded generator (the same cases on every run).
typealias WireRNG = SplitMix64

extension SplitMix64 {
    mutating func hex(_ count: Int) -> String { String(Hex.encode(bytes((count + 1) / 2)).prefix(count)) }
}

/// Deterministic identities for the wire tests: the secret key is the SHA-256 of a label.
enum WireKeys {
    static func identity(_ label: String) -> SoftchatIdentity {
        try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat wire test \(label)".utf8))))
    }
    static let alice = identity("alice")
    static let bob = identity("bob")
    static let carol = identity("carol")
    static let relay = "wss://relay.example.com"
    static let challenge = "challenge-7f3a"
}

/// A frame's compact JSON text from its elements: `wireFrame("CLOSE", "sub")`.
func wireFrame(_ elements: JSONValue...) -> String { JSONValue.array(elements).jsonText }

extension VerifiedEvent {
    /// The event's JSON with its signature broken (id still honest).
    var badSignatureJSON: JSONValue { jsonValue.setting("sig", .string(sig.flippingHexDigit(at: 77))) }
    /// The event's JSON with its content changed, so the id no longer matches.
    var tamperedContentJSON: JSONValue { jsonValue.setting("content", .string(content + "!")) }
}

// MARK: Session test helpers (Session*Tests, PublishTests, SessionModelTests)

/// Signed events and relay text for the RelaySession tests. Keys are the deterministic wire keys.
enum SessionFixtures {
    static let relay = "wss://relay.example.com"
    static let baseTime: Int64 = 1_700_000_000

    /// A signed note; `n` makes the content (and so the id) unique.
    static func note(
        _ n: Int, kind: Int = 1, createdAt: Int64 = baseTime, by author: SoftchatIdentity = WireKeys.alice,
        tags: [[String]] = [], content: String? = nil
    ) -> VerifiedEvent {
        try! author.sign(UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content ?? "note \(n)"))
    }

    /// 1,100 distinct kind-1 notes, signed once per test run, for the 1,024/1,025 bounds.
    static let many: [VerifiedEvent] = (0..<1100).map { note(10_000 + $0, createdAt: baseTime + Int64($0 % 500)) }

    /// NIP-42 answer for `challenge` by `identity`.
    static func auth(_ challenge: String, by identity: SoftchatIdentity = WireKeys.alice) -> VerifiedEvent {
        try! identity.createNip42Authentication(challenge: challenge, relayURL: relay, createdAt: baseTime)
    }

    static func event(_ sub: String, _ e: VerifiedEvent) -> String { wireFrame("EVENT", .string(sub), e.jsonValue) }
    static func event(_ sub: String, json: JSONValue) -> String { wireFrame("EVENT", .string(sub), json) }
    static func ok(_ id: String, _ accepted: Bool, _ message: String = "") -> String {
        wireFrame("OK", .string(id), .bool(accepted), .string(message))
    }
    static func closed(_ sub: String, _ message: String) -> String { wireFrame("CLOSED", .string(sub), .string(message)) }
    static func authChallenge(_ challenge: String) -> String { wireFrame("AUTH", .string(challenge)) }
    static func countAnswer(_ id: String, _ n: Int64) -> String { wireFrame("COUNT", .string(id), .object(JSONObject(["count": .integer(n)]))) }
    static let kind1 = #"{"kinds":[1]}"#
}

extension RelaySession {
    /// A session that went connect → transportConnected.
    static func connected(_ config: RelaySessionConfig = RelaySessionConfig(), now: Int64? = nil) throws -> RelaySession {
        let session = try RelaySession(config: config)
        _ = try session.connect()
        try session.transportConnected(now: now)
        return session
    }

    /// Drains until nothing is left, without confirming anything.
    func drainAll() throws -> [OutboundRelayFrame] {
        var all: [OutboundRelayFrame] = []
        while true {
            let batch = try drainOutbound(max: 256)
            if batch.isEmpty { return all }
            all += batch
        }
    }

    /// transportLost (when a transport is active), connect, transportConnected.
    func reconnect(readyAt: Int64? = nil) throws {
        if ["ready", "authenticating", "connecting"].contains(snapshot().state) { _ = try transportLost(now: nil) }
        _ = try connect()
        try transportConnected(now: readyAt)
    }

    /// Drains everything and confirms every frame written, as a host does; returns the frames' text.
    @discardableResult
    func sendAll() throws -> [String] {
        let frames = try drainAll()
        for f in frames { try confirmSent(f.deliveryEventIDs) }
        return frames.map(\.frame)
    }
}

extension Array where Element == RelaySessionAction {
    var kinds: [RelaySessionActionKind] { map(\.kind) }
    /// `(eventId, state, category)` of every deliveryChanged, in order.
    var decisions: [DeliveryDecision] { compactMap(\.decision) }
}

/// The verb of a client frame's text (`["REQ",…` → "REQ").
func clientVerb(_ frame: String) -> String {
    (try? parseClientRelayFrame(frame))?.verb ?? "?"
}

/// A call that must fail with `code` and leave the session's snapshot exactly as it was.
func expectSessionRejected(
    _ code: SoftchatErrorCode, _ session: RelaySession, mentioning: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    let before = session.snapshot()
    expectSoftchatError(code, mentioning: mentioning, sourceLocation: sourceLocation, body)
    #expect(session.snapshot() == before, "a rejected call changed the snapshot", sourceLocation: sourceLocation)
}
