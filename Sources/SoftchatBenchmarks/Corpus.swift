public import SoftchatCore
import SoftchatJSON

/// Deterministic benchmark corpora: kind-1 events from 50 authors with tags, JSON escapes and
/// non-ASCII text mixed in, signed with fixed auxiliary randomness so the bytes repeat.
public enum BenchCorpus {
    /// How content is written. `.chat` mixes escapes and non-ASCII into every few words (about
    /// one escape per 35 bytes): right for 200-byte messages, a worst case at 50 KB. `.prose`
    /// is long-form text: sentences, a line break every few sentences, a quotation or a
    /// non-ASCII word now and then (about one escape per 200 bytes).
    public enum Style: Sendable { case chat, prose }

    static let proseWords = [
        "the", "relay", "message", "and", "of", "to", "a", "in", "that", "is", "for", "it",
        "with", "as", "was", "on", "event", "key", "signature", "client", "we", "they", "this", "from", "by",
        "network", "people", "time", "about", "would", "there", "their", "what", "so", "up", "out", "if",
        "which", "when", "one", "all", "will", "chat", "sync", "server", "note", "history", "reply",
    ]
    static let proseSpecials = ["café", "naïve", "Grüße", "東京", "🤙", "señor", "über"]

    static func prose(_ rng: inout SplitMix64, bytes: Int) -> String {
        var s = ""
        var sentenceWords = 0
        var sentences = 0
        while s.utf8.count < bytes {
            var word = rng.below(50) == 0 ? proseSpecials[rng.below(proseSpecials.count)] : proseWords[rng.below(proseWords.count)]
            if rng.below(150) == 0 { word = "\"" + word + "\"" }
            if sentenceWords == 0 {
                if !s.isEmpty { s += sentences % 4 == 0 ? "\n" : " " }
                word = word.prefix(1).uppercased() + word.dropFirst()
            } else {
                s += rng.below(12) == 0 ? ", " : " "
            }
            s += word
            sentenceWords += 1
            if sentenceWords >= 8 + rng.below(12) {
                s += "."
                sentenceWords = 0
                sentences += 1
            }
        }
        return s
    }

    static let fragments = [
        "hello", "nostr", "relay", "chat", "sync", "café", "Grüße", "東京", "🤙", "line\nbreak",
        "tab\there", "quote\"d", "back\\slash", "naïve", "ñandú", "✓", "42", "softchat", "message", "über",
    ]

    public static func authors(_ count: Int = 50) -> [SoftchatIdentity] {
        (0..<count).map { i in
            try! SoftchatIdentity.importSecretHex(sha256Hex("softchat-bench-author-\(i)"))
        }
    }

    static func sha256Hex(_ text: String) -> String {
        Hex.encode(SHA256.hash(Array(text.utf8)))
    }

    static func content(_ rng: inout SplitMix64, bytes: Int) -> String {
        var s = ""
        while s.utf8.count < bytes {
            if !s.isEmpty { s += " " }
            s += fragments[rng.below(fragments.count)]
        }
        return s
    }

    /// The corpora, the same wherever they are measured or written out: 20,000 chat
    /// messages of ~200 bytes, 1,000 of ~50 KB prose, and 1,000 of ~50 KB chat-style text with
    /// an escape every ~35 bytes (the worst case). `quick` shrinks them for smoke tests.
    public static func small(quick: Bool) -> [VerifiedEvent] { events(count: quick ? 500 : 20_000, contentBytes: 200) }
    public static func large(quick: Bool) -> [VerifiedEvent] {
        events(count: quick ? 20 : 1_000, contentBytes: 50_000, seed: 2, style: .prose)
    }
    public static func dense(quick: Bool) -> [VerifiedEvent] { events(count: quick ? 20 : 1_000, contentBytes: 50_000, seed: 3) }

    /// `count` signed events with content of about `contentBytes` bytes, dated one a second from
    /// `firstCreatedAt`.
    public static func events(
        count: Int, contentBytes: Int, seed: UInt64 = 1, style: Style = .chat, firstCreatedAt: Int64 = 1_700_000_000
    ) -> [VerifiedEvent] {
        let keys = authors()
        var rng = SplitMix64(seed: seed)
        let aux = [UInt8](repeating: 7, count: 32)
        var out: [VerifiedEvent] = []
        out.reserveCapacity(count)
        for i in 0..<count {
            let author = keys[i % keys.count]
            var tags: [[String]] = [["t", "bench"]]
            if rng.below(10) < 3 { tags.append(["p", keys[rng.below(keys.count)].publicKeyHex]) }
            if rng.below(10) < 2, let last = out.last { tags.append(["e", last.id, "", "reply"]) }
            let draft = UnsignedEvent(
                createdAt: firstCreatedAt + Int64(i), kind: 1, tags: tags,
                content: style == .chat ? content(&rng, bytes: contentBytes) : prose(&rng, bytes: contentBytes))
            out.append(try! author.sign(draft, auxRandom: aux))
        }
        return out
    }
}
