import Foundation
import SoftchatClient
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatSync
import SoftchatTestRelay
import SoftchatTransport
import Testing

/// Runs a full demo-like exchange against a relay that requires NIP-42, collects every piece of
/// text Softchat produces — transport events and states, session snapshots, error messages,
/// identity descriptions, the SQLite files — and scans it all for the secret keys and for every
/// challenge the relay issued.
@Suite struct SecretHygieneTests {
    final class Collected: @unchecked Sendable {
        private let lock = NSLock()
        private var texts: [String] = []
        func add(_ s: String) {
            lock.lock()
            texts.append(s)
            lock.unlock()
        }
        var all: [String] {
            lock.lock()
            defer { lock.unlock() }
            return texts
        }
    }

    /// Every needle that occurs in any haystack (as text or as raw bytes of a file).
    static func leaks(of needles: [String], in texts: [String], files: [String]) -> [String] {
        var found: [String] = []
        let blobs = files.compactMap { FileManager.default.contents(atPath: $0) }
        for needle in needles where !needle.isEmpty {
            let variants = [needle, needle.uppercased()]
            if texts.contains(where: { t in variants.contains { t.contains($0) } }) { found.append(needle) }
            for blob in blobs where variants.contains(where: { blob.range(of: Data($0.utf8)) != nil }) { found.append(needle) }
        }
        return found
    }

    @Test func aFullExchangeLeaksNoSecretKeyAndNoChallenge() throws {
        var options = TestRelayOptions()
        options.requireAuth = true
        let relay = try TestRelay(options: options)
        defer { relay.stop() }
        let scratch = Scratch()
        let alice = SoftchatIdentity.generate()
        let bob = SoftchatIdentity.generate()
        let sender = try scratch.account("alice")
        let receiver = try scratch.account("bob")
        let collected = Collected()
        var policy = quickPolicy()
        policy.observer = { collected.add(String(describing: $0)) }
        _ = try sender.outgoing.enqueueSigned(
            operationID: "op", events: try chatEvents(alice, to: bob.publicKeyHex, count: 20),
            relayURLs: [relay.url], now: 1)
        try receiver.setSubscription(id: "chat", filtersJSON: ["{\"kinds\":[14],\"#p\":[\"\(bob.publicKeyHex)\"]}"])
        let a = try sender.startManagedTransport(relayURL: relay.url, identity: alice, policy: policy)
        let b = try receiver.startManagedTransport(relayURL: relay.url, identity: bob, policy: policy)
        let chat = try RelayFilter.fromJSON("{\"kinds\":[14]}")
        #expect(
            try eventually { try sender.delivery.stateCounts()[.accepted] == 20 && receiver.events(matching: [chat], now: 2_000_000_000).count == 20 }
        )
        collected.add(a.state.description)
        collected.add(b.state.description)
        a.stop()
        b.stop()

        // A session taken through an authentication round, snapshotted at every step.
        let session = RelaySession()
        _ = try session.connect()
        try session.transportConnected(now: 1)
        let challenge = "hygiene-challenge-\(UUID().uuidString)"
        _ = try session.receive(#"["AUTH","\#(challenge)"]"#)
        collected.add(session.snapshot().description)
        collected.add(session.snapshot().jsonValue.jsonText)
        try session.authenticate(try alice.createNip42Authentication(challenge: challenge, relayURL: "wss://r.example", createdAt: 1))
        collected.add(session.snapshot().description)
        collected.add(session.snapshot().jsonValue.jsonText)

        // Error messages from calls that fail around the secrets and the challenge.
        let secret = try alice.exportSecretHex()
        for attempt: () throws -> Void in [
            { _ = try SoftchatIdentity.importSecretHex(String(secret.dropLast()) + "g") },
            { _ = try SoftchatIdentity.importSecretHex(String(repeating: "f", count: 64)) },
            { try session.authenticate(try bob.createNip42Authentication(challenge: "other", relayURL: "wss://r.example", createdAt: 1)) },
            {
                try Nip42.verify(
                    try alice.createNip42Authentication(challenge: challenge, relayURL: "wss://r.example", createdAt: 1),
                    challenge: "x", relayURL: "wss://r.example", now: 1)
            },
            { _ = try alice.createNip42Authentication(challenge: "", relayURL: "https://nope", createdAt: 1) },
        ] {
            do { try attempt() } catch { collected.add(String(describing: error)) }
        }
        collected.add(String(describing: alice))
        collected.add(String(reflecting: alice))
        var dumped = ""
        dump(alice, to: &dumped)
        collected.add(dumped)
        sender.close()
        receiver.close()

        let files = (try FileManager.default.contentsOfDirectory(atPath: scratch.dir)).map { scratch.dir + "/" + $0 }
        #expect(files.count >= 2)
        let needles = [secret, try bob.exportSecretHex(), challenge] + relay.issuedChallenges
        #expect(relay.issuedChallenges.count >= 2)
        #expect(collected.all.count > 20)
        #expect(Self.leaks(of: needles, in: collected.all, files: files).isEmpty)
        // The scan finds what is there (so an empty result means something).
        #expect(Self.leaks(of: [secret], in: ["key " + secret.uppercased()], files: []) == [secret])
        #expect(!Self.leaks(of: [relay.issuedChallenges[0]], in: [], files: []).contains("x"))
    }
}
