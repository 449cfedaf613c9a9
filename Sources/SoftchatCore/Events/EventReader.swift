import SoftchatJSON

/// The fast path from text to `UnverifiedEvent`: one pass over the bytes, no `JSONValue` tree,
/// long escaped content kept as written (see `EventContent`).
///
/// It reads only the shape it expects — the seven NIP-01 fields, each once, with the right
/// types — and returns nil for anything else; callers then take the `JSONReader` path, which
/// produces the exact diagnostic. Whatever it accepts, that path accepts with equal fields (a
/// differential test pins this).
package enum EventReader {
    /// Reads an event object at the cursor (leading whitespace allowed).
    static func read(_ c: inout JSONCursor) -> UnverifiedEvent? {
        guard c.consume(UInt8(ascii: "{")) else { return nil }
        var id: String?
        var pubkey: String?
        var sig: String?
        var content: EventContent?
        var createdAt: Int64?
        var kind: Int?
        var tags: [[String]]?
        if c.peek(UInt8(ascii: "}")) { return nil }
        repeat {
            guard let key = c.string(), !key.hasEscapes, c.consume(UInt8(ascii: ":")) else { return nil }
            if c.token(key, is: "id") {
                guard id == nil, let v = hex(&c, count: 64) else { return nil }
                id = v
            } else if c.token(key, is: "pubkey") {
                guard pubkey == nil, let v = hex(&c, count: 64) else { return nil }
                pubkey = v
            } else if c.token(key, is: "sig") {
                guard sig == nil, let v = hex(&c, count: 128) else { return nil }
                sig = v
            } else if c.token(key, is: "created_at") {
                guard createdAt == nil, let v = c.nonNegativeInteger() else { return nil }
                createdAt = v
            } else if c.token(key, is: "kind") {
                guard kind == nil, let v = c.nonNegativeInteger(), v <= 65535 else { return nil }
                kind = Int(v)
            } else if c.token(key, is: "tags") {
                guard tags == nil, let v = readTags(&c) else { return nil }
                tags = v
            } else if c.token(key, is: "content") {
                guard content == nil, let token = c.string() else { return nil }
                content = EventContent(token, in: c)
            } else {
                return nil
            }
        } while c.consume(UInt8(ascii: ","))
        guard c.consume(UInt8(ascii: "}")), let id, let pubkey, let sig, let content, let createdAt, let kind, let tags
        else { return nil }
        return UnverifiedEvent(unchecked: id, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content, sig: sig)
    }

    static func hex(_ c: inout JSONCursor, count: Int) -> String? {
        guard let token = c.string(), !token.hasEscapes, token.count == count else { return nil }
        guard Hex.isLowercase(UnsafeBufferPointer(rebasing: c.bytes[token.start..<token.end])) else { return nil }
        return c.decode(token)
    }

    static func readTags(_ c: inout JSONCursor) -> [[String]]? {
        guard c.consume(UInt8(ascii: "[")) else { return nil }
        var tags: [[String]] = []
        if c.consume(UInt8(ascii: "]")) { return tags }
        repeat {
            guard c.consume(UInt8(ascii: "[")), !c.peek(UInt8(ascii: "]")) else { return nil }  // a tag has a string
            var tag: [String] = []
            tag.reserveCapacity(4)
            repeat {
                guard let token = c.string() else { return nil }
                tag.append(c.decode(token))
            } while c.consume(UInt8(ascii: ","))
            guard c.consume(UInt8(ascii: "]")) else { return nil }
            tags.append(tag)
        } while c.consume(UInt8(ascii: ","))
        guard c.consume(UInt8(ascii: "]")) else { return nil }
        return tags
    }

    /// A whole text that is one event object (surrounding whitespace allowed), or nil.
    package static func read(text: String) -> UnverifiedEvent? {
        var text = text
        let source = text
        return text.withUTF8 { bytes -> UnverifiedEvent? in
            var c = JSONCursor(source: source, bytes: bytes)
            guard let event = read(&c) else { return nil }
            c.skipWhitespace()
            return c.atEnd ? event : nil
        }
    }
}
