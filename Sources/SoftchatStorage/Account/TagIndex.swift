public import SoftchatCore

/// The account's tag index (`event_tags`) and its bound per event.
///
/// NIP-01 filters select by single-letter tags (`#p`, `#e`, `#t`…), so the account indexes each
/// stored event's single-letter tags by (name, value). Each index row repeats the event id in
/// three indexes: unbounded, one event of many small tags (a 750 KB event of `["t", "…"]` tags
/// made 31 MB of account) would let any relay multiply the account's size. An event is
/// therefore indexed only while it stays inside the bound: at most ``maxIndexedTagsPerEvent``
/// distinct (name, value) pairs, none longer than ``maxIndexedTagValueBytes``. An event past the
/// bound is stored whole (nothing is lost) with one marker row instead of its tags, and every
/// read that selects by tag — `SoftchatAccount.events(matching:limit:now:)`, its paged and
/// history forms, and the NIP-77 items — also reads the marked events and lets
/// `RelayFilter.matches` decide on them. Such events are rare (a contact list of many follows, a
/// large group's message), so that second read is small; answers are the filter's exact
/// semantics either way.
public enum TagIndex {
    /// The most distinct single-letter (name, value) pairs indexed for one event: an event with
    /// more is stored with the overflow marker instead (64).
    public static let maxIndexedTagsPerEvent = 64
    /// The longest tag value indexed, in UTF-8 bytes: an event with a longer single-letter tag
    /// value is stored with the overflow marker instead (512, room for an `a` address with a
    /// long identifier).
    public static let maxIndexedTagValueBytes = 512

    /// The marker row's name: empty, which no single-letter tag has.
    static let overflowName = ""

    /// The (name, value) rows to index for `event`: its distinct single-letter tags in order, or
    /// just the overflow marker when they pass the bound.
    static func rows(of event: VerifiedEvent) -> [(String, String)] {
        var rows: [(String, String)] = []
        var seen: Set<[UInt8]> = []
        for tag in event.tags where tag.count >= 2 && tag[0].unicodeScalars.count == 1 {
            let (name, value) = (tag[0], tag[1])
            // The name is one scalar, so name, NUL, value names the pair unambiguously. Compared
            // as bytes, as SQL and filters compare them: Swift's string equality calls "é" and
            // "e\u{301}" equal, and the second of such a pair went unindexed.
            guard seen.insert(Array((name + "\u{0}" + value).utf8)).inserted else { continue }
            if rows.count == maxIndexedTagsPerEvent || value.utf8.count > maxIndexedTagValueBytes {
                return [(overflowName, "")]
            }
            rows.append((name, value))
        }
        return rows
    }
}
