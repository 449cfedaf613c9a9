import CSecp256k1
import SoftchatCore
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev bench events`: signing and parse+verify throughput on the deterministic corpus,
/// each beside raw libsecp256k1 verify + SHA-256 of the same events measured in this run.
public enum EventBenchmarks {
    /// `smallFile`/`largeFile`: JSON-lines corpora to measure instead of the generated ones
    /// (scripts/bench/bench-peers passes the peers kit's files, so both sides read the same bytes).
    /// `smallOnly`: parse+verify of the small corpus alone, one core (scripts/bench/bench-wasm's native
    /// figure beside the WebAssembly build's).
    public static func run(quick: Bool, smallFile: String? = nil, largeFile: String? = nil, smallOnly: Bool = false) -> [BenchResult] {
        let reps = quick ? 1 : 5
        var results: [BenchResult] = []

        let small = smallFile.map(loadCorpus) ?? BenchCorpus.small(quick: quick)
        var corpora = [("small (~200 B content)", small)]
        if !smallOnly { corpora.append(("large (~50 KB content)", largeFile.map(loadCorpus) ?? BenchCorpus.large(quick: quick))) }
        if largeFile == nil && !smallOnly {
            // The worst case beside it: chat-style content at 50 KB, an escape every ~35 bytes.
            corpora.append(("large (~50 KB, dense escapes: worst case)", BenchCorpus.dense(quick: quick)))
        }

        for (label, corpus) in corpora {
            let lines = corpus.map(\.jsonText)
            let raw = RawVerifyBaseline(corpus)
            /// `work` over the whole corpus, interleaved with the raw baseline on the same events.
            func againstRaw(_ name: String, _ work: () -> Void) {
                let (ours, rawSeconds) = bestOfInterleaved(reps, work) { precondition(raw.run() == corpus.count) }
                results.append(
                    BenchResult(
                        name: name, items: corpus.count, seconds: ours,
                        baselineName: "raw SHA-256 + schnorrsig_verify", baselinePerSecond: Double(corpus.count) / rawSeconds,
                        peakMiB: peakMemoryMiB()))
            }
            againstRaw("parse+verify \(label)") {
                var ok = 0
                for line in lines where (try? VerifiedEvent(text: line)) != nil { ok += 1 }
                precondition(ok == corpus.count, "corpus failed to verify")
            }
            if corpus.first!.content.utf8.count > EventContent.lazyThreshold {
                // Long escaped content is decoded on first read, not during verification: what
                // reading every message's text costs on top, for an app that displays them all.
                againstRaw("parse+verify, then read content, \(label)") {
                    var bytes = 0
                    for line in lines { bytes &+= (try! VerifiedEvent(text: line)).content.utf8.count }
                    blackHole(bytes)
                }
            }
        }

        if smallOnly { return results }
        let identity = BenchCorpus.authors(1)[0]
        let drafts = small.prefix(quick ? 200 : 5_000).map {
            UnsignedEvent(createdAt: $0.createdAt, kind: $0.kind, tags: $0.tags, content: $0.content)
        }
        let signSeconds = bestOf(reps) {
            for d in drafts { blackHole(try! identity.sign(d)) }
        }
        let rawSign = RawSignBaseline(drafts.map { Array($0.content.utf8.prefix(32)) })
        let rawSignSeconds = bestOf(reps) { rawSign.run() }
        results.append(
            BenchResult(
                name: "sign (id + BIP-340 + self-verify)", items: drafts.count, seconds: signSeconds,
                baselineName: "raw schnorrsig_sign32", baselinePerSecond: Double(drafts.count) / rawSignSeconds,
                peakMiB: peakMemoryMiB()))
        return results
    }
}

/// Reads and verifies a JSON-lines corpus (one event per line).
func loadCorpus(_ path: String) -> [VerifiedEvent] {
    guard let f = fopen(path, "rb") else { fatalError("cannot open \(path)") }
    defer { fclose(f) }
    var out: [VerifiedEvent] = []
    var line: UnsafeMutablePointer<CChar>? = nil
    var capacity = 0
    while getline(&line, &capacity, f) > 0 {
        let text = String(cString: line!).trimmingNewline
        if text.isEmpty { continue }
        out.append(try! VerifiedEvent(text: text))
    }
    free(line)
    return out
}

extension String {
    var trimmingNewline: String {
        var s = Substring(self)
        while s.last == "\n" || s.last == "\r" { s.removeLast() }
        return String(s)
    }
}

/// The hardware floor for verification: SHA-256 of each event's precomputed NIP-01
/// serialization and `secp256k1_schnorrsig_verify` with pre-parsed keys, no JSON at all.
struct RawVerifyBaseline {
    let serialized: [[UInt8]]
    let signatures: [[UInt8]]
    let keys: [secp256k1_xonly_pubkey]

    init(_ events: [VerifiedEvent]) {
        serialized = events.map {
            CanonicalSerialization.bytes(pubkey: $0.pubkey, createdAt: $0.createdAt, kind: $0.kind, tags: $0.tags, content: $0.content)
        }
        signatures = events.map { Hex.decodeLowercase($0.sig)! }
        keys = events.map { Schnorr.parsePublicKey(Hex.decodeLowercase($0.pubkey)!)! }
    }

    func run() -> Int {
        var ok = 0
        var digest = [UInt8](repeating: 0, count: 32)
        for i in serialized.indices {
            serialized[i].withUnsafeBytes { SHA256.hash($0, into: &digest) }
            var key = keys[i]
            let valid = signatures[i].withUnsafeBufferPointer { s in
                digest.withUnsafeBufferPointer { m in secp256k1_schnorrsig_verify(Schnorr.context, s.baseAddress!, m.baseAddress, 32, &key) }
            }
            if valid == 1 { ok += 1 }
        }
        return ok
    }
}

/// The floor for signing: `secp256k1_schnorrsig_sign32` over 32-byte messages with one keypair.
struct RawSignBaseline {
    let messages: [[UInt8]]
    init(_ messages: [[UInt8]]) { self.messages = messages.map { Array(($0 + [UInt8](repeating: 1, count: 32)).prefix(32)) } }

    func run() {
        var keypair = secp256k1_keypair()
        let secret = [UInt8](repeating: 0x42, count: 32)
        precondition(secp256k1_keypair_create(Schnorr.context, &keypair, secret) == 1)
        var sig = [UInt8](repeating: 0, count: 64)
        let aux = [UInt8](repeating: 7, count: 32)
        for m in messages {
            precondition(secp256k1_schnorrsig_sign32(Schnorr.context, &sig, m, &keypair, aux) == 1)
        }
        blackHole(sig)
    }
}
