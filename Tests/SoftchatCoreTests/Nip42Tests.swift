import SoftchatCore
import SoftchatTestSupport
import Testing

@Suite struct Nip42Tests {
    static let identity = SoftchatIdentity.generate()
    static let relay = "wss://relay.example.com"
    static let challenge = "challenge-7f3a"
    static let createdAt: Int64 = 1_714_625_219

    func auth(challenge: String = Nip42Tests.challenge, relay: String = Nip42Tests.relay) throws -> VerifiedEvent {
        try Self.identity.createNip42Authentication(challenge: challenge, relayURL: relay, createdAt: Self.createdAt)
    }

    /// A signed event with arbitrary kind and tags, for the shapes createNip42Authentication never makes.
    func signed(kind: Int = Nip42.authenticationKind, tags: [[String]]) throws -> VerifiedEvent {
        try Self.identity.sign(UnsignedEvent(createdAt: Self.createdAt, kind: kind, tags: tags, content: ""))
    }

    func expectRefused(
        _ event: VerifiedEvent, challenge: String = Nip42Tests.challenge, relay: String = Nip42Tests.relay,
        now: Int64 = Nip42Tests.createdAt, window: Int64 = Nip42.defaultWindowSeconds,
        mentioning parts: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectSoftchatError(.invalidRelayAuthentication, mentioning: parts, sourceLocation: sourceLocation) {
            try Nip42.verify(event, challenge: challenge, relayURL: relay, now: now, window: window)
        }
    }

    // MARK: Creating

    @Test func authenticationEventHasExactlyTheRelayAndChallengeTags() throws {
        let event = try auth()
        #expect(event.kind == 22242)
        #expect(event.tags == [["relay", Self.relay], ["challenge", Self.challenge]])
        #expect(event.content == "")
        #expect(event.createdAt == Self.createdAt)
        #expect(event.pubkey == Self.identity.publicKeyHex)
        #expect(try VerifiedEvent(text: event.jsonText) == event)
    }

    @Test func emptyChallengeIsRefused() {
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["challenge must not be empty"]) { _ = try auth(challenge: "") }
    }

    @Test func nonWebSocketRelayURLIsRefused() {
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["https", "is not ws, wss or noise"]) {
            _ = try auth(relay: "https://relay.example.com")
        }
    }

    // MARK: Verifying

    @Test func freshAuthenticationIsAccepted() throws {
        let event = try auth()
        try Nip42.verify(event, challenge: Self.challenge, relayURL: Self.relay, now: Self.createdAt)
        // Differently spelled but equal relay URL.
        try Nip42.verify(event, challenge: Self.challenge, relayURL: "WSS://Relay.Example.com:443/", now: Self.createdAt)
    }

    @Test func createdAtAtTheEdgesOfTheWindowIsAccepted() throws {
        let event = try auth()
        for now in [Self.createdAt - 600, Self.createdAt + 600] {
            try Nip42.verify(event, challenge: Self.challenge, relayURL: Self.relay, now: now)
        }
        #expect(Nip42.defaultWindowSeconds == 600)
    }

    @Test func createdAt601SecondsAwayIsRefused() throws {
        let event = try auth()
        expectRefused(event, now: Self.createdAt + 601, mentioning: ["created_at \(Self.createdAt)", "600 s"])
        expectRefused(event, now: Self.createdAt - 601, mentioning: ["created_at"])
    }

    @Test func customWindowIsHonoured() throws {
        let event = try auth()
        try Nip42.verify(event, challenge: Self.challenge, relayURL: Self.relay, now: Self.createdAt + 10, window: 10)
        expectRefused(event, now: Self.createdAt + 11, window: 10, mentioning: ["created_at", "10 s"])
        expectRefused(event, now: Self.createdAt - 1, window: 0, mentioning: ["created_at"])
    }

    /// A client's AUTH dated 2^63 − 1 against a clock before 1970 (or any pair at the Int64
    /// edges) is refused as far from now; `abs(createdAt - now)` trapped on the subtraction.
    @Test func createdAtAtTheInt64EdgesIsRefusedNotATrap() throws {
        let far = try Self.identity.sign(
            UnsignedEvent(
                createdAt: Int64.max, kind: Nip42.authenticationKind, tags: [["relay", Self.relay], ["challenge", Self.challenge]], content: ""))
        expectRefused(far, now: -1, mentioning: ["created_at \(Int64.max)"])
        expectRefused(far, now: Int64.min, window: Int64.max, mentioning: ["created_at"])
        expectRefused(try auth(), now: Int64.min, window: Int64.max, mentioning: ["created_at"])
        try Nip42.verify(far, challenge: Self.challenge, relayURL: Self.relay, now: Int64.max, window: 0)
        #expect(Int64.max.isWithin(Int64.max, of: 0) && !Int64.max.isWithin(Int64.max, of: -1) && !Int64(0).isWithin(-1, of: 0))
        #expect(Int64.min.isWithin(0, of: Int64.min) && !Int64.min.isWithin(Int64.max, of: 0) && Int64(-5).isWithin(5, of: 0))
    }

    @Test func wrongKindIsRefused() throws {
        let event = try signed(kind: 1, tags: [["relay", Self.relay], ["challenge", Self.challenge]])
        expectRefused(event, mentioning: ["kind is 1, not 22242"])
    }

    @Test func wrongChallengeIsRefused() throws {
        expectRefused(try auth(), challenge: "another-challenge", mentioning: ["challenge tag does not match"])
        expectRefused(try auth(challenge: "Challenge-7f3a"), mentioning: ["challenge tag does not match"])
    }

    @Test func missingRelayTagIsRefused() throws {
        expectRefused(try signed(tags: [["challenge", Self.challenge]]), mentioning: ["relay tag", "found 0"])
    }

    @Test func duplicateRelayTagIsRefused() throws {
        let event = try signed(tags: [["relay", Self.relay], ["relay", Self.relay], ["challenge", Self.challenge]])
        expectRefused(event, mentioning: ["relay tag", "found 2"])
    }

    @Test func relayTagWithoutAValueIsRefused() throws {
        expectRefused(try signed(tags: [["relay"], ["challenge", Self.challenge]]), mentioning: ["relay tag"])
    }

    @Test func missingChallengeTagIsRefused() throws {
        expectRefused(try signed(tags: [["relay", Self.relay]]), mentioning: ["challenge tag", "found 0"])
    }

    @Test func duplicateChallengeTagIsRefused() throws {
        let event = try signed(tags: [["relay", Self.relay], ["challenge", Self.challenge], ["challenge", Self.challenge]])
        expectRefused(event, mentioning: ["challenge tag", "found 2"])
    }

    @Test func otherRelayIsRefused() throws {
        let event = try auth()
        expectRefused(event, relay: "wss://other.example.com", mentioning: ["relay tag \"\(Self.relay)\" does not name wss://other.example.com"])
        expectRefused(event, relay: "ws://relay.example.com", mentioning: ["relay tag"])
        expectRefused(event, relay: "wss://relay.example.com:8443", mentioning: ["relay tag"])
        expectRefused(event, relay: "wss://relay.example.com/nostr", mentioning: ["relay tag"])
    }

    @Test func relayTagThatIsNotAURLIsRefused() throws {
        let event = try signed(tags: [["relay", "https://relay.example.com"], ["challenge", Self.challenge]])
        expectRefused(event, mentioning: ["relay tag \"https://relay.example.com\""])
    }

    @Test func extraTagsDoNotMatter() throws {
        let event = try signed(tags: [["relay", Self.relay], ["t", "x"], ["challenge", Self.challenge]])
        try Nip42.verify(event, challenge: Self.challenge, relayURL: Self.relay, now: Self.createdAt)
    }

    @Test func fixtureAuthenticationEventIsAccepted() throws {
        let event = try VerifiedEvent(text: Paths.fixtureText("authentication_event"))
        try Nip42.verify(event, challenge: "some-challenge-string", relayURL: "wss://relay.example.com", now: 1_714_625_219)
        expectRefused(
            event, challenge: "some-challenge-string", relay: "wss://relay.example.com", now: 1_714_625_219 + 601,
            mentioning: ["created_at"])
    }

    // MARK: RelayURL

    func url(_ text: String) throws -> RelayURL { try RelayURL(text) }

    @Test func schemeHostAndDefaultPortAreNormalized() throws {
        #expect(try url("WSS://Relay.Example.com:443/") == url("wss://relay.example.com"))
        #expect(try url("wss://relay.example.com").description == "wss://relay.example.com")
        #expect(try url("WSS://Relay.Example.com:443/").description == "wss://relay.example.com")
        #expect(try url("ws://h:80") == url("ws://h/"))
        #expect(try url("ws://h").port == 80 && url("wss://h").port == 443)
    }

    @Test func explicitNonDefaultPortIsKept() throws {
        #expect(try url("ws://h:8080") != url("ws://h"))
        #expect(try url("ws://h:443") != url("wss://h"))
        #expect(try url("ws://h:8080").description == "ws://h:8080")
    }

    @Test func pathIsKeptAndItsTrailingSlashDropped() throws {
        #expect(try url("wss://h/nostr") != url("wss://h"))
        #expect(try url("wss://h/nostr/") == url("wss://h/nostr"))
        #expect(try url("wss://h/Nostr") != url("wss://h/nostr"))
        #expect(try url("wss://h/nostr").path == "/nostr")
        #expect(try url("wss://h").path == "/")
    }

    @Test func ipv6HostIsParsed() throws {
        let u = try url("ws://[::1]:7447")
        #expect(u.host == "[::1]" && u.port == 7447 && u.scheme == "ws")
        #expect(try url("ws://[::1]").port == 80)
        #expect(try url("ws://[::1]:80/") == url("ws://[::1]"))
        #expect(u.description == "ws://[::1]:7447")
    }

    @Test(arguments: [
        "https://x", "http://relay.example.com", "wss://", "wss:///path", "relay.example.com", "wss:/relay",
        "wss://h:0", "wss://h:65536", "wss://h:abc", "wss://user@h", "ws://[::1", "",
    ])
    func malformedRelayURLIsRejected(_ text: String) {
        expectSoftchatError(.invalidRelayUrl, mentioning: ["relay URL"]) { _ = try RelayURL(text) }
    }
}
