package import SoftchatJSON

/// NIP-01's serialization of an event for hashing: `[0,pubkey,created_at,kind,tags,content]`,
/// no whitespace, seven characters escaped and everything else verbatim.
package enum CanonicalSerialization {
    package static func bytes(pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String,
                      escaping: JSONWriter.StringEscaping = .nip01) -> [UInt8] {
        var w = JSONWriter(escaping: escaping, reserve: 128 + content.utf8.count)
        w.raw("[0,")
        w.string(pubkey)
        w.raw(UInt8(ascii: ","))
        w.integer(createdAt)
        w.raw(UInt8(ascii: ","))
        w.integer(Int64(kind))
        w.raw(",[")
        for (i, tag) in tags.enumerated() {
            if i > 0 { w.raw(UInt8(ascii: ",")) }
            w.raw(UInt8(ascii: "["))
            for (j, item) in tag.enumerated() {
                if j > 0 { w.raw(UInt8(ascii: ",")) }
                w.string(item)
            }
            w.raw(UInt8(ascii: "]"))
        }
        w.raw("],")
        w.string(content)
        w.raw(UInt8(ascii: "]"))
        return w.bytes
    }

    /// True when a string holds a control character NIP-01 leaves verbatim but common JSON
    /// encoders (JavaScript's JSON.stringify, serde_json) escape as `\u00XX`.
    static func hasUnlistedControlCharacter(_ s: String) -> Bool {
        s.utf8.contains { $0 < 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 && $0 != 0x08 && $0 != 0x0C }
    }
}
