package import SoftchatJSON
import Synchronization

/// An event's content as it was read: a `String`, or — for long content with escapes — the
/// JSON text between its quotes, decoded on first use.
///
/// Verification does not need the decoded text: when the escapes are already NIP-01's (what
/// every common encoder writes), the id is hashed over the text exactly as it arrived. Turning
/// 50 KB of escaped, non-ASCII text into a `String` costs as much again as the hash (the
/// standard library validates it byte by byte), so it is left to the first reader of
/// `content`; an event that is a duplicate, rejected or only stored never pays it.
package struct EventContent: Sendable, Hashable {
    package enum Storage: Sendable {
        case decoded(String)
        case escaped(EscapedText)
    }

    package let storage: Storage

    package init(_ text: String) { storage = .decoded(text) }

    /// Content bodies with escapes at least this long are kept escaped until read.
    package static let lazyThreshold = 4096

    /// From a string token of a fast-path read: decoded now when that is cheap.
    package init(_ token: JSONCursor.StringToken, in cursor: JSONCursor) {
        if !token.hasEscapes || token.count < Self.lazyThreshold {
            storage = .decoded(cursor.decode(token))
        } else {
            storage = .escaped(EscapedText(body: String(cursor.body(token)), isCanonical: token.isCanonical))
        }
    }

    /// The decoded text (decoded once, then kept).
    package var string: String {
        switch storage {
        case .decoded(let s): s
        case .escaped(let e): e.decoded
        }
    }

    /// The body as written when it is kept escaped and already in the writer's escaping.
    package var escapedBody: String? {
        if case .escaped(let e) = storage, e.isCanonical { return e.body }
        return nil
    }

    package static func == (a: EventContent, b: EventContent) -> Bool { a.string == b.string }
    package func hash(into hasher: inout Hasher) { hasher.combine(string) }
}

/// Checked JSON string text (escapes as written), with its decoding made once on demand.
package final class EscapedText: Sendable {
    /// The JSON text between the quotes; its escapes and UTF-8 were checked when it was read.
    package let body: String
    /// True when `body` is exactly how `JSONWriter` (and NIP-01) would write the decoded text.
    package let isCanonical: Bool
    private let cache = Mutex<String?>(nil)

    init(body: String, isCanonical: Bool) {
        self.body = body
        self.isCanonical = isCanonical
    }

    package var decoded: String {
        cache.withLock { cached in
            if let cached { return cached }
            var body = body
            let text = body.withUTF8 { raw in
                String(unsafeUninitializedCapacity: raw.count) { out in JSONScan.unescape(raw, into: out) }
            }
            cached = text
            return text
        }
    }
}
