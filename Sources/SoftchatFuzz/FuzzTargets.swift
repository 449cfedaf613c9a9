// libFuzzer targets for every parser Softchat exposes to untrusted bytes. Built by scripts/fuzz/fuzz
// (SOFTCHAT_FUZZ=1: `-sanitize=fuzzer,address`, FUZZING defined) it runs libFuzzer's driver on
// the target named by SOFTCHAT_FUZZ_TARGET; built normally it is a replay runner:
// `softchat-fuzz TARGET FILE…` runs saved inputs (seed corpora, findings) through the same code.
import SoftchatCore
import SoftchatJSON
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One fuzz target: bytes in; crashes, traps and sanitizer reports are the findings.
enum FuzzTarget: String, CaseIterable {
    case json, event, filter
    case clientFrame = "client-frame"
    case relayFrame = "relay-frame"
    case nip11, websocket, session, negentropy
    /// A hostile relay against the whole engine (`HostileRelayRun`).
    case relay
    /// NIP-44 payloads and NIP-59 layers: what a gift wrap from anyone decrypts to.
    case giftwrap

    /// The responder's and initiator's set for the negentropy target: 300 items, runs of equal
    /// timestamps, ids sharing prefixes.
    static let negentropyStorage: NegentropyStorage = {
        var rng = SplitMix64(seed: 77)
        return NegentropyStorage(
            items: (0..<300).map { i in
                NegentropyItem(timestamp: 1_700_000_000 + UInt64(i / 7), id: NegentropyID(prefix: [UInt8(i % 3)] + rng.bytes(31)))
            })
    }()

    /// The giftwrap target's fixed parties: the sender (seals), the recipient, a wrap's one-time key.
    static let giftwrapKeys: (alice: SoftchatIdentity, bob: SoftchatIdentity, oneTime: SoftchatIdentity) = {
        func key(_ label: String) -> SoftchatIdentity {
            try! SoftchatIdentity.importSecretHex(Hex.encode(SHA256.hash(Array("softchat fuzz giftwrap \(label)".utf8))))
        }
        return (key("alice"), key("bob"), key("one-time"))
    }()
    /// The conversation key of NIP-44's first encrypt_decrypt vector (its payloads seed the corpus).
    static let vectorKey = Hex.decodeLowercase("c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d")!

    /// First byte 0: the rest is a NIP-44 payload; what decrypts must encrypt back to the same
    /// payload under its own nonce. 1: the rest is what a seal decrypts to (a rumor), sealed by
    /// alice and wrapped for bob. 2: the rest is what a wrap decrypts to (a seal). Unwrapping
    /// must accept exactly what it should and never trap.
    func giftwrap(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
        let (alice, bob, oneTime) = Self.giftwrapKeys
        let nonce = [UInt8](repeating: 7, count: 32)
        switch mode % 3 {
        case 0:
            if let plaintext = try? Nip44.decrypt(text, conversationKey: Self.vectorKey) {
                let data = Base64.decode(Array(text.utf8))!
                let again = try? Nip44.encrypt(plaintext, conversationKey: Self.vectorKey, nonce: Array(data[1..<33]))
                precondition(again == text, "a payload that decrypts does not encrypt back to itself")
            }
        default:
            let sealText: String
            if mode % 3 == 1 {
                guard let content = try? Nip44.encrypt(text, conversationKey: try! alice.conversationKey(with: bob.publicKeyHex), nonce: nonce),
                    let seal = try? alice.sign(UnsignedEvent(createdAt: 1, kind: 13, content: content), auxRandom: nonce)
                else { return }
                sealText = seal.jsonText
            } else {
                sealText = text
            }
            guard let content = try? Nip44.encrypt(sealText, conversationKey: try! oneTime.conversationKey(with: bob.publicKeyHex), nonce: nonce),
                let wrap = try? oneTime.sign(
                    UnsignedEvent(createdAt: 1, kind: 1059, tags: [["p", bob.publicKeyHex]], content: content), auxRandom: nonce)
            else { return }
            switch Result(catching: { () throws(SoftchatError) in try GiftWrap.unwrap(wrap, with: bob) }) as Result<UnwrappedMessage, SoftchatError> {
            case .success(let message):
                precondition(message.wrapID == wrap.id && Rumor.kinds.contains(message.rumor.kind), "an unwrapped message is not the wrap's")
                if mode % 3 == 1 { precondition(message.sender == alice.publicKeyHex, "a message's sender is not its seal's signer") }
            case .failure(let error):
                precondition(error.code == .invalidPrivateMessage, "an unwrap failed with \(error.code.rawValue)")
            }
        }
    }

    func run(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data.bindMemory(to: UInt8.self))
        let text = String(decoding: bytes, as: UTF8.self)
        switch self {
        case .json:
            if let value = try? JSONReader().parse(bytes) {
                // What the reader accepts, the writer must write back to the same value.
                let again = try? JSONReader().parse(value.jsonText)
                precondition(again == value, "JSON round-trip changed the value")
            }
        case .event:
            // The fast path may only accept what the full reader accepts, with equal fields.
            if let fast = EventReader.read(text: text) {
                let full = try? UnverifiedEvent(json: JSONReader().parse(text))
                precondition(full == fast, "fast path accepted what the full reader reads differently")
                precondition(fast.content == full?.content && fast.tags == full?.tags, "fast path fields differ")
            }
            if let e = try? VerifiedEvent(text: text) {
                precondition((try? VerifiedEvent(text: e.jsonText)) == e, "event round-trip failed")
            }
        case .filter:
            if let f = try? RelayFilter.fromJSON(text) {
                precondition((try? RelayFilter.fromJSON(f.toJSON())) == f, "filter round-trip failed")
            }
        case .clientFrame:
            if let f = try? parseClientRelayFrame(text) {
                precondition((try? parseClientRelayFrame(f.toJSON())) == f, "client frame round-trip failed")
            }
        case .relayFrame:
            if let f = try? parseRelayResponseFrame(text) {
                precondition((try? parseRelayResponseFrame(f.toJSON())) == f, "relay frame round-trip failed")
                // A relay's COUNT answer, merged as an app merges several relays' answers.
                if case .count(_, let result) = f { _ = CountResult.combine([result, result]) }
            }
        case .nip11:
            if let doc = try? JSONReader().parse(bytes) {
                let info = RelayInformation(document: doc)
                _ = (info.maxMessageLength, info.maxFilters, info.maxLimit, info.authRequired, info.supportedNIPs, info.acceptsEventsBatch)
            }
        case .websocket:
            // The bytes are what a server sent after the handshake.
            let ws = WebSocket(stream: ReplayStream(bytes), role: .client, leftover: [], maxMessageBytes: 65536)
            for _ in 0..<64 {
                guard let message = try? ws.receive(timeoutMilliseconds: 0) else { break }
                if case .close = message { break }
            }
        case .session:
            // Each line is relay text fed to a connected session with one subscription.
            let session = RelaySession()
            _ = try? session.connect()
            _ = try? session.transportConnected(now: 1)
            try? session.subscribe(id: "s", filtersJSON: [#"{"kinds":[1,14]}"#])
            for line in text.split(separator: "\n", omittingEmptySubsequences: true).prefix(64) {
                if let actions = try? session.receive(String(line)) {
                    for a in actions where a.kind == .persistEvent { try? session.confirmIngested(a.event!.id) }
                }
                _ = try? session.drainOutbound()
            }
            let snapshot = session.snapshot()
            precondition(snapshot.awaitingPersistence <= RelayIngestionContract.maxAwaitingPersistence.value)
        case .relay:
            HostileRelayRun().run(bytes)
        case .giftwrap:
            giftwrap(bytes)
        case .negentropy:
            // The bytes are a negentropy message from the other side.
            if let message = try? NegentropyMessage.decode(bytes) {
                precondition((try? NegentropyMessage.decode(message.encoded)) == message, "negentropy round-trip changed the message")
            }
            let responder = Negentropy(storage: Self.negentropyStorage, frameSizeLimit: 4096)
            if let answer = try? responder.respond(bytes) {
                precondition(answer.count <= 4096, "a response passed its frame limit")
                precondition((try? NegentropyMessage.decode(answer)) != nil, "a response does not decode")
            }
            if let step = try? responder.reconcile(bytes), let next = step.next {
                precondition(next.count <= 4096, "a next message passed its frame limit")
                precondition((try? NegentropyMessage.decode(next)) != nil, "a next message does not decode")
            }
        }
    }
}

/// A ByteStream that hands out fixed bytes, then end of stream; writes go nowhere.
final class ReplayStream: ByteStream {
    private var bytes: [UInt8]
    private var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int {
        let n = min(buffer.count, bytes.count - offset)
        for i in 0..<n { buffer[i] = bytes[offset + i] }
        offset += n
        return n
    }
    func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {}
    func hasBufferedInput() -> Bool { offset < bytes.count }
    func close() {}
}

nonisolated(unsafe) var selectedTarget: FuzzTarget = {
    let name = getenv("SOFTCHAT_FUZZ_TARGET").map { String(cString: $0) } ?? "json"
    guard let target = FuzzTarget(rawValue: name) else {
        fatalError("SOFTCHAT_FUZZ_TARGET=\(name) is not one of \(FuzzTarget.allCases.map(\.rawValue))")
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selectedTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

#if FUZZING
    import CFuzzerDriver

    /// SwiftPM renames an executable's main to `<product>_main`; under libFuzzer that entry hands
    /// control to libFuzzer's driver with our target.
    @_cdecl("softchat_fuzz_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var values = argv
        return LLVMFuzzerRunDriver(&count, &values) { data, size in fuzzOneInput(data, size) }
    }
#else
    @main
    struct ReplayRunner {
        static func main() {
            let args = CommandLine.arguments
            guard args.count >= 3, let target = FuzzTarget(rawValue: args[1]) else {
                print("usage: softchat-fuzz TARGET FILE…   targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: " "))")
                exit(2)
            }
            var ran = 0
            for path in args.dropFirst(2) {
                guard let f = fopen(path, "rb") else { continue }
                var data: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = fread(&chunk, 1, chunk.count, f)
                    data += chunk[0..<n]
                    if n < chunk.count { break }
                }
                fclose(f)
                data.withUnsafeBytes { target.run($0) }
                ran += 1
            }
            print("\(target.rawValue): \(ran) inputs replayed without a finding")
        }
    }
#endif
