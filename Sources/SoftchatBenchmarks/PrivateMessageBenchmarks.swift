import SoftchatClient
public import SoftchatCore
import SoftchatJSON
import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench dm`: NIP-17 private messages, each figure beside its floor in one run.
///
/// - Unwrap throughput on one core (`GiftWrap.unwrap`: two NIP-44 layers, the seal's id and
///   signature, the rumor's id and parse) beside its crypto floor on precomputed inputs: the two
///   ECDH multiplications, HKDF and the HMAC-SHA256 passes, the ChaCha20 passes over the same
///   byte counts, and the seal's BIP-340 verification — nothing but the arithmetic NIP-44/59
///   requires, with every parse and allocation taken out.
/// - Durable ingestion of the wraps into an unlocked account (each unwrapped in the ingest
///   transaction) beside ingestion of the same wraps into a locked account (stored only).
/// - A W-wrap inbox synced over loopback from a relay (a `softchat relay` child preloaded with
///   the wraps, or `--relay URL`, e.g. LocalRelay loaded with them) into a fresh unlocked
///   account: seconds until its room list is ready (goal ≤ 2 s for 5,000); then a cold reopen to
///   the room list (goal ≤ 100 ms), with the decryptions the reopened account made (must be 0).
///
/// The keys are fixed (alice and bob are the SHA-256 of `softchat bench dm alice|bob`) so a
/// peer (scripts/bench/bench-dm: rust-nostr) can unwrap the same wraps as bob.
public enum PrivateMessageBenchmarks {
    public struct Options: Sendable {
        public var quick = false
        public var wraps = 5_000
        /// Read the wraps from this JSON-lines file instead of making them.
        public var wrapsFile: String?
        /// A relay holding exactly the wraps (default: a `softchat relay` child preloaded with them).
        public var relayURL: String?
        public init() {}
    }

    public static let alice = try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat bench dm alice".utf8))))
    public static let bob = try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat bench dm bob".utf8))))

    /// `count` wraps of messages from alice to bob (bob's copies), contents of 20–200 characters.
    public static func makeWraps(count: Int) -> [VerifiedEvent] {
        let now = Int64(time(nil))
        var rng = SplitMix64(seed: 17)
        return (0..<count).map { i in
            let text = "message \(i): " + String(repeating: "héllo 🤙 ", count: Int(rng.next() % 20) + 1)
            let rumor = try! Rumor(
                pubkey: alice.publicKeyHex, createdAt: now - Int64(count - i), kind: 14, tags: [["p", bob.publicKeyHex]], content: text)
            return try! GiftWrap.wrap(rumor, from: alice, to: bob.publicKeyHex, now: now)
        }
    }

    public static func run(_ options: Options, executable: String, directory: String) -> [ManagedFigure] {
        let wraps: [VerifiedEvent]
        let file = "\(directory)/dm-wraps.jsonl"
        if let given = options.wrapsFile {
            wraps = NegentropyBenchmarks.readEvents(given)
        } else {
            wraps = makeWraps(count: options.quick ? 200 : options.wraps)
        }
        NegentropyBenchmarks.writeEvents(wraps, to: file)
        defer { unlink(file) }
        var figures = unwrapBesideFloor(Array(wraps.prefix(options.quick ? 200 : 2_000)), repetitions: options.quick ? 1 : 5)
        figures += ingestion(wraps, directory: directory)
        figures += syncAndReopen(wraps, file: file, relayURL: options.relayURL, executable: executable, directory: directory)
        return figures
    }

    /// The precomputed inputs of one wrap's crypto: what the floor computes on.
    struct FloorInput {
        var wrapKey: [UInt8]
        var sealKey: [UInt8]
        var wrapNonce: [UInt8]
        var sealNonce: [UInt8]
        var wrapCiphertext: [UInt8]
        var sealCiphertext: [UInt8]
        var sealID: [UInt8]
        var sealSignature: [UInt8]
        var sealPubkey: [UInt8]
    }

    static func floorInputs(_ wraps: [VerifiedEvent]) -> [FloorInput] {
        wraps.map { w in
            let seal = try! VerifiedEvent(text: try! bob.nip44Decrypt(w.content, from: w.pubkey))
            func split(_ payload: String) -> ([UInt8], [UInt8]) {
                let data = Base64.decode(Array(payload.utf8))!
                return (Array(data[1..<33]), Array(data[33..<(data.count - 32)]))
            }
            let (wn, wc) = split(w.content)
            let (sn, sc) = split(seal.content)
            return FloorInput(
                wrapKey: Hex.decodeLowercase(w.pubkey)!, sealKey: Hex.decodeLowercase(seal.pubkey)!, wrapNonce: wn, sealNonce: sn,
                wrapCiphertext: wc, sealCiphertext: sc, sealID: Hex.decodeLowercase(seal.id)!, sealSignature: Hex.decodeLowercase(seal.sig)!,
                sealPubkey: Hex.decodeLowercase(seal.pubkey)!)
        }
    }

    /// The floor of one wrap: two ECDH, HKDF-Extract and -Expand, the MAC and ChaCha20 passes of
    /// both layers, the seal's Schnorr verification.
    @inline(never)
    static func floor(_ input: FloorInput, secret: [UInt8]) -> Int {
        var acc = 0
        for (key, nonce, ciphertext) in [
            (input.wrapKey, input.wrapNonce, input.wrapCiphertext), (input.sealKey, input.sealNonce, input.sealCiphertext),
        ] {
            let shared = try! Nip44.sharedX(secretKey: secret, publicKey: key)
            let conversation = HMACSHA256.extract(salt: Array("nip44-v2".utf8), inputKeyMaterial: shared)
            let keys = Nip44.MessageKeys(conversationKey: conversation, nonce: nonce)
            acc &+= Int(HMACSHA256.mac(key: keys.hmacKey, nonce, ciphertext)[0])
            var text = ciphertext
            ChaCha20.xor(&text, key: keys.chachaKey, nonce: keys.chachaNonce)
            acc &+= Int(text[0])
        }
        acc &+= Schnorr.verify(signature: input.sealSignature, message: input.sealID, publicKey: input.sealPubkey) ? 1 : 0
        return acc
    }

    static func unwrapBesideFloor(_ wraps: [VerifiedEvent], repetitions: Int) -> [ManagedFigure] {
        let inputs = floorInputs(wraps)
        var secret = Hex.decodeLowercase(try! bob.exportSecretHex())!
        defer { secret.withUnsafeMutableBytes { p in for i in p.indices { p[i] = 0 } } }
        var ok = 0
        let t = bestOfInterleaved(repetitions) {
            for w in wraps { if (try? GiftWrap.unwrap(w, with: bob)) != nil { ok += 1 } }
        } baseline: {
            var acc = 0
            for i in inputs { acc &+= floor(i, secret: secret) }
            blackHole(acc)
        }
        precondition(ok % wraps.count == 0, "every benchmark wrap must unwrap")
        let n = Double(wraps.count)
        return [
            ManagedFigure(
                name: "dm: unwrap, 1 core (\(wraps.count) wraps)", value: n / t.figure, unit: "/s",
                baselineName: "crypto floor (2 ECDH, HKDF+HMAC, ChaCha20, 1 Schnorr verify; precomputed inputs)", baselineValue: n / t.baseline)
        ]
    }

    static func ingestion(_ wraps: [VerifiedEvent], directory: String) -> [ManagedFigure] {
        func ingest(unlocked: Bool) -> (Double, Int) {
            let path = "\(directory)/dm-ingest-\(unlocked).db"
            defer { for s in ["", "-wal", "-shm"] { unlink(path + s) } }
            let account = try! SoftchatAccount.open(path: path)
            defer { account.close() }
            if unlocked { try! account.messages.unlock(bob, now: Int64(time(nil))) }
            let t0 = monotonicSeconds()
            var offset = 0
            while offset < wraps.count {
                let batch = Array(wraps[offset..<min(offset + 256, wraps.count)])
                _ = try! account.incoming.ingest(batch, receivedAt: Int64(time(nil)))
                offset += batch.count
            }
            let seconds = monotonicSeconds() - t0
            let rooms = try! account.messages.rooms(ownerKey: bob.publicKeyHex, now: Int64(time(nil)) + 1)
            return (seconds, rooms.first?.messages ?? 0)
        }
        let (locked, _) = ingest(unlocked: false)
        let (unlocked, messages) = ingest(unlocked: true)
        precondition(messages == wraps.count, "every wrap must become a message (\(messages) of \(wraps.count))")
        let n = Double(wraps.count)
        return [
            ManagedFigure(
                name: "dm: durable ingestion, each wrap unwrapped in its transaction (\(wraps.count) wraps, batches of 256)", value: n / unlocked,
                unit: "/s", baselineName: "the same wraps stored without unwrapping", baselineValue: n / locked)
        ]
    }

    static func syncAndReopen(_ wraps: [VerifiedEvent], file: String, relayURL: String?, executable: String, directory: String) -> [ManagedFigure] {
        var relay: RelayProcess?
        let url: String
        if let relayURL {
            url = relayURL
        } else {
            relay = RelayProcess(executable: executable, arguments: ["--count", "1", "--cap", "500", "--preload", file], lines: 1)
            url = relay!.urls[0]
        }
        defer { relay?.stop() }
        let path = "\(directory)/dm-sync.db"
        defer { for s in ["", "-wal", "-shm"] { unlink(path + s) } }
        let t0 = monotonicSeconds()
        let account = try! SoftchatAccount.open(path: path)
        try! account.messages.unlock(bob, now: Int64(time(nil)))
        try! account.setSubscription(id: "inbox", filtersJSON: ["{\"kinds\":[1059],\"#p\":[\"\(bob.publicKeyHex)\"]}"])
        let synced = Flag()
        var policy = ManagedTransportPolicy()
        policy.observer = { if case .synced(_, "inbox", _, _) = $0 { synced.set() } }
        let transport = try! account.startManagedTransport(relays: [url], identity: bob, policy: policy)
        let deadline = monotonicSeconds() + 120
        var rooms: [PrivateRoom] = []
        while monotonicSeconds() < deadline {
            if synced.isSet {
                rooms = try! account.messages.rooms(ownerKey: bob.publicKeyHex, now: Int64(time(nil)) + 1)
                break
            }
            usleep(2_000)
        }
        let ready = monotonicSeconds() - t0
        transport.stop()
        let held = rooms.first?.messages ?? 0
        account.close()
        let r0 = monotonicSeconds()
        let reopened = try! SoftchatAccount.open(path: path)
        let list = try! reopened.messages.rooms(ownerKey: bob.publicKeyHex, now: Int64(time(nil)) + 1)
        let reopen = monotonicSeconds() - r0
        let decrypted = reopened.messages.decryptions
        reopened.close()
        return [
            ManagedFigure(
                name: "dm: \(wraps.count)-wrap inbox synced into a fresh account, to its room list (\(held) messages held)", value: ready * 1000,
                unit: "ms", baselineName: "goal", baselineValue: 2_000),
            ManagedFigure(
                name: "dm: cold reopen to the room list (\(list.count) room, latest \(list.first?.latest != nil ? "shown" : "missing"))",
                value: reopen * 1000, unit: "ms", baselineName: "goal", baselineValue: 100),
            ManagedFigure(name: "dm: wraps the reopened account decrypted", value: Double(decrypted), unit: "wraps"),
        ]
    }
}

final class Flag: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = Lock()
    private var value = false
    func set() { lock.with { value = true } }
    var isSet: Bool { lock.with { value } }
}
