import SoftchatCore
import SoftchatTestSupport
import Testing

/// Relay URLs are attacker input (relay lists come from other people's events): only printable
/// ASCII in the URL grammar passes, and a refusal never echoes the raw text.
@Suite struct RelayURLTests {
    @Test(arguments: [
        "ws://relay.example/\r\nX-Injected: 1",
        "ws://relay.example/ HTTP/1.1\r\nHost: evil\r\n\r\nGET /",
        "wss://relay.example\r\n",
        "wss://relay.example/\n",
        "wss://relay.example/a b",
        "wss://relay.example/\t",
        "wss://relay.example/\u{0}",
        "wss://relay.example/\u{1B}[2J",
        "wss://relay.example/\u{7F}",
        "wss://relay.exämple",
        "wss://relay.example/ü",
        "wss://re lay.example",
        "wss://relay.example:44 3",
        "wss://relay.example/\"q\"",
        "wss://relay.example/<script>",
        "wss://relay.example/a\\b",
        "wss://relay.example/a^b",
        "wss://relay.example/a{b}",
        "wss://relay.example/a|b",
        "wss://relay.example/a`b",
        "wss://relay.example/#fragment",
        "wss://relay.example#fragment",
        "wss://relay.example/%zz",
        "wss://relay.example/%4",
        "wss://relay.example/[x]",
        "wss://relay..example",
        "wss://.relay.example",
        "wss://relay.example./",
        "wss://rel%61y.example",
        "wss://relay!.example",
        "wss://[::1]x:80",
        "wss://[zz::1]",
        "wss://[]",
        "wss://relay.example:+443",
        "wss://relay.example:0443x",
        "noise://relay.example:9000/\r\n?pattern=IK",
    ])
    func aURLWithACharacterOutsideItsGrammarIsRefused(_ text: String) {
        let error = expectSoftchatError(.invalidRelayUrl, mentioning: ["relay URL"]) { _ = try RelayURL(text) }
        // The message shows the text escaped: no control character, no raw non-ASCII byte.
        #expect(error?.message.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F } == true, "\(String(describing: error?.message))")
    }

    @Test func aURLOverTheBoundIsRefusedAndOneAtItPasses() throws {
        let limit = Int(RelaySessionContract.maxRelayUrlBytes.value)
        let prefix = "wss://relay.example/"
        let atLimit = prefix + String(repeating: "a", count: limit - prefix.utf8.count)
        #expect(try RelayURL(atLimit).path.utf8.count == limit - "wss://relay.example".utf8.count)
        expectSoftchatError(.invalidRelayUrl, mentioning: ["over \(limit) bytes"]) { _ = try RelayURL(atLimit + "a") }
    }

    @Test(arguments: [
        ("wss://relay.example", "wss://relay.example"),
        ("WSS://Relay.Example:443/", "wss://relay.example"),
        ("ws://127.0.0.1:7447", "ws://127.0.0.1:7447"),
        ("ws://[::1]:7447/nostr", "ws://[::1]:7447/nostr"),
        ("ws://[::ffff:127.0.0.1]:80", "ws://[::ffff:127.0.0.1]"),
        ("wss://relay.example/path%20with%2Fescapes?x=1&y=a:b@c", "wss://relay.example/path%20with%2Fescapes?x=1&y=a:b@c"),
        ("wss://relay_1.example-host.io/~me/(x)!*'$,;=", "wss://relay_1.example-host.io/~me/(x)!*'$,;="),
        ("noise://relay.example:9000?pattern=IK&key=00", "noise://relay.example:9000/?pattern=IK&key=00"),
    ])
    func wellFormedURLsPassAndNormalize(_ text: String, _ normalized: String) throws {
        #expect(try RelayURL(text).description == normalized)
    }

    @Test func displayedTextEscapesEveryScalarOutsidePrintableASCIIAndIsBounded() {
        #expect(RelayURL.displayed("a\r\nb\u{1B}\"\\é") == #""a\u{d}\u{a}b\u{1b}\u{22}\u{5c}\u{e9}""#)
        #expect(RelayURL.displayed(String(repeating: "x", count: 1000)).count == 203)
    }

    @Test func everyCallThatTakesAURLRefusesAnInjectedOne() {
        let me = SoftchatIdentity.generate()
        expectSoftchatError(.invalidRelayAuthentication, mentioning: ["control character"]) {
            _ = try me.createNip42Authentication(challenge: "c", relayURL: "wss://r.example/\r\nX: 1", createdAt: 1_764_000_000)
        }
        expectSoftchatError(.invalidRelaySession, mentioning: ["relayURL"]) {
            _ = try RelaySession(config: RelaySessionConfig(relayURL: "wss://r.example/\r\nX: 1"))
        }
    }
}
