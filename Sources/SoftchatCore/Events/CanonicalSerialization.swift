package import SoftchatJSON

/// NIP-01's serialization of an event for hashing: `[0,pubkey,created_at,kind,tags,content]`,
/// UTF-8, no whitespace, `\n` `\"` `\\` `\r` `\t` `\b` `\f` escaped, everything else verbatim.
///
/// One corner is ambiguous in practice: the 27 other C0 control characters. NIP-01's text says
/// verbatim (raw bytes, which is not valid JSON); rust-nostr (serde_json), nostr-tools and NDK
/// (JSON.stringify), go-nostr and nostr-relay (json.dumps) all write them as `\u00XX`. Softchat
/// signs in that interoperable form, which is byte-identical to NIP-01's for every event
/// without such a character, and verifies either form: an id is honest if it is the SHA-256 of
/// either serialization of the same values.
package enum CanonicalSerialization {
    /// `.json`: NIP-01's escapes plus `\u00XX` for the other control characters (what Softchat
    /// signs). `.nip01`: NIP-01's escapes with the other control characters verbatim.
    package static func bytes(
        pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String,
        escaping: JSONWriter.StringEscaping = .json
    ) -> [UInt8] {
        var w = JSONWriter(escaping: escaping, reserve: 128 + content.utf8.count)
        write(into: &w, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: EventContent(content))
        return w.bytes
    }

    /// Writes the serialization to any output: a buffer (`bytes`) or a running digest (`digest`).
    static func write<Output: JSONOutput & ~Copyable>(
        into out: inout Output, pubkey: String, createdAt: Int64, kind: Int,
        tags: [[String]], content: EventContent
    ) {
        out.write("[0,")
        out.writeString(pubkey)
        out.write(UInt8(ascii: ","))
        out.writeInteger(createdAt)
        out.write(UInt8(ascii: ","))
        out.writeInteger(Int64(kind))
        out.write(UInt8(ascii: ","))
        out.writeTags(tags)
        out.write(UInt8(ascii: ","))
        out.writeContent(content)
        out.write(UInt8(ascii: "]"))
    }

    /// True when a string holds a control character NIP-01 leaves verbatim but common JSON
    /// encoders (JavaScript's JSON.stringify, serde_json) escape as `\u00XX`.
    package static func hasUnlistedControlCharacter(_ s: String) -> Bool {
        s.utf8.contains { $0 < 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 && $0 != 0x08 && $0 != 0x0C }
    }
}

extension JSONOutput where Self: ~Copyable {
    /// An event's tags: an array of arrays of strings.
    mutating func writeTags(_ tags: [[String]]) {
        write(UInt8(ascii: "["))
        for (i, tag) in tags.enumerated() {
            if i > 0 { write(UInt8(ascii: ",")) }
            write(UInt8(ascii: "["))
            for (j, item) in tag.enumerated() {
                if j > 0 { write(UInt8(ascii: ",")) }
                writeString(item)
            }
            write(UInt8(ascii: "]"))
        }
        write(UInt8(ascii: "]"))
    }

    /// An event's content as a JSON string: content kept escaped in exactly this output's
    /// escaping is copied as it arrived, without being decoded (see `EventContent`).
    mutating func writeContent(_ content: EventContent) {
        if escaping == .json, let body = content.escapedBody {
            write(UInt8(ascii: "\""))
            writeVerbatim(body)
            write(UInt8(ascii: "\""))
        } else {
            writeString(content.string)
        }
    }
}
