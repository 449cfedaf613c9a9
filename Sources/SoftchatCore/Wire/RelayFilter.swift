public import SoftchatJSON

/// A NIP-01 filter with exact semantics.
///
/// `ids` and `authors` hold lowercase hex of 1–64 characters: 64 is an exact match, fewer is a
/// prefix (the legacy NIP-01 form the page keeps). `kinds` are 0–65535. `#x` (one letter a–z or
/// A–Z) lists values matched exactly against the second element of the event's `x` tags.
/// `since`/`until` are inclusive. `limit` applies to stored events only, never to live
/// matching. An empty list matches nothing. Unknown and duplicate keys are rejected, and
/// values are kept exactly (member order included), so a filter round-trips through JSON.
public struct RelayFilter: Sendable, Hashable, CustomStringConvertible {
    /// Event ids (64 lowercase hex characters) or id prefixes (fewer); nil when the filter has none.
    public private(set) var ids: [String]?
    /// Author pubkeys (64 lowercase hex characters) or prefixes (fewer); nil when the filter has none.
    public private(set) var authors: [String]?
    /// Event kinds, 0–65535; nil when the filter has none.
    public private(set) var kinds: [Int]?
    /// Tag conditions by letter, in document order.
    public private(set) var tagConditions: [(letter: Character, values: [String])]
    /// The earliest `created_at` matched, inclusive; nil when the filter has none.
    public private(set) var since: Int64?
    /// The latest `created_at` matched, inclusive; nil when the filter has none.
    public private(set) var until: Int64?
    /// How many stored events the relay should return at most; never applied to live matching.
    public private(set) var limit: Int64?
    /// The members as given, for exact re-serialization.
    public let json: JSONObject

    // Precomputed matchers: exact ids/authors in sets, prefixes in lists.
    private let exactIDs: Set<String>?
    private let idPrefixes: [String]
    private let exactAuthors: Set<String>?
    private let authorPrefixes: [String]
    private let kindSet: Set<Int>?
    /// Tag names and values as UTF-8 bytes: NIP-01 matches strings exactly, while Swift's
    /// String equality treats canonically equivalent text ("é" and "e\u{301}") as equal.
    private let tagSets: [(name: [UInt8], values: Set<[UInt8]>)]

    /// Parses filter JSON text strictly.
    ///
    /// - Parameter text: The JSON text of one filter object.
    /// - Returns: The filter.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_filter` when the text is not JSON or not a
    ///   valid filter (see ``RelayFilter/init(json:index:)``).
    public static func fromJSON(_ text: String) throws(SoftchatError) -> RelayFilter {
        let value: JSONValue
        do {
            value = try JSONReader().parse(text)
        } catch {
            throw .invalidRelayFilter("filter is not valid JSON: \(error)")
        }
        return try RelayFilter(json: value, index: nil)
    }

    /// Reads one filter object strictly.
    ///
    /// - Parameters:
    ///   - value: The filter object.
    ///   - index: The filter's place in its frame, named in messages (`filter 3: …`); nil for none.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_filter` when the value is not an object, a
    ///   key is unknown or names no single-letter tag, or a value has the wrong type or range:
    ///   `ids` and `authors` entries must be 1–64 lowercase hex characters, `kinds` 0–65535, tag
    ///   values strings, and `since`, `until` and `limit` non-negative integers.
    public init(json value: JSONValue, index: Int? = nil) throws(SoftchatError) {
        let place = index.map { "filter \($0)" } ?? "filter"
        func fail(_ message: String) -> SoftchatError { .invalidRelayFilter("\(place): \(message)") }
        guard case .object(let object) = value else { throw fail("must be a JSON object, not \(value.typeName)") }
        json = object
        tagConditions = []
        for member in object {
            let key = member.key
            switch key {
            case "ids", "authors":
                let list = try Self.strings(member.value, key: key, fail: fail)
                for (i, s) in list.enumerated() where !Hex.isLowercasePrefix(s, max: 64) {
                    throw fail("key \"\(key)\" element \(i) must be 1 to 64 lowercase hex characters")
                }
                if key == "ids" { ids = list } else { authors = list }
            case "kinds":
                guard case .array(let list) = member.value else { throw fail("key \"kinds\" must be an array of integers") }
                var out: [Int] = []
                for (i, k) in list.enumerated() {
                    guard case .integer(let n) = k, n >= 0, n <= 65535 else {
                        throw fail("key \"kinds\" element \(i) must be an integer from 0 to 65535, not \(k.jsonText)")
                    }
                    out.append(Int(n))
                }
                kinds = out
            case "since", "until", "limit":
                guard case .integer(let n) = member.value, n >= 0 else {
                    throw fail("key \"\(key)\" must be a non-negative integer, not \(member.value.jsonText)")
                }
                switch key {
                case "since": since = n
                case "until": until = n
                default: limit = n
                }
            default:
                let scalars = Array(key.unicodeScalars)
                guard scalars.count == 2, scalars[0] == "#", let letter = scalars.last, letter.isASCII,
                    (letter.value >= 65 && letter.value <= 90) || (letter.value >= 97 && letter.value <= 122)
                else {
                    if key.hasPrefix("#") { throw fail("key \"\(key)\" is not a single-letter tag") }
                    throw fail("unknown key \"\(key)\"")
                }
                tagConditions.append((Character(letter), try Self.strings(member.value, key: key, fail: fail)))
            }
        }
        exactIDs = ids.map { Set($0.filter { $0.utf8.count == 64 }) }
        idPrefixes = ids?.filter { $0.utf8.count < 64 } ?? []
        exactAuthors = authors.map { Set($0.filter { $0.utf8.count == 64 }) }
        authorPrefixes = authors?.filter { $0.utf8.count < 64 } ?? []
        kindSet = kinds.map(Set.init)
        tagSets = tagConditions.map { (Array(String($0.letter).utf8), Set($0.values.map { Array($0.utf8) })) }
    }

    private static func strings(_ value: JSONValue, key: String, fail: (String) -> SoftchatError) throws(SoftchatError) -> [String] {
        guard case .array(let list) = value else { throw fail("key \"\(key)\" must be an array of strings, not \(value.typeName)") }
        var out: [String] = []
        out.reserveCapacity(list.count)
        for (i, element) in list.enumerated() {
            guard case .string(let s) = element else {
                throw fail("key \"\(key)\" element \(i) must be a string, not \(element.typeName)")
            }
            out.append(s)
        }
        return out
    }

    /// True when every condition present holds (values within a list OR together).
    ///
    /// - Parameter event: The event to test.
    /// - Returns: Whether the filter selects the event.
    public func matches(_ event: VerifiedEvent) -> Bool {
        if let exactIDs {
            guard exactIDs.contains(event.id) || idPrefixes.contains(where: { event.id.hasPrefix($0) }) else { return false }
        }
        if let exactAuthors {
            guard exactAuthors.contains(event.pubkey) || authorPrefixes.contains(where: { event.pubkey.hasPrefix($0) })
            else { return false }
        }
        if let kindSet, !kindSet.contains(event.kind) { return false }
        if let since, event.createdAt < since { return false }
        if let until, event.createdAt > until { return false }
        for condition in tagSets {
            guard
                event.tags.contains(where: { tag in
                    tag.count >= 2 && tag[0].utf8.elementsEqual(condition.name) && condition.values.contains(Array(tag[1].utf8))
                })
            else { return false }
        }
        return true
    }

    /// True when any of `filters` matches (filters OR together).
    ///
    /// - Parameters:
    ///   - filters: The filters; an empty list matches nothing.
    ///   - event: The event to test.
    /// - Returns: Whether at least one filter selects the event.
    public static func anyMatches(_ filters: [RelayFilter], _ event: VerifiedEvent) -> Bool {
        filters.contains { $0.matches(event) }
    }

    /// The filter as compact JSON, members in their original order and values exactly.
    ///
    /// - Returns: The JSON object text.
    public func toJSON() -> String { JSONValue.object(json).jsonText }

    /// A copy with `since` set (added at the end, or replaced in place): what a resubscription
    /// after a reconnect sends.
    ///
    /// - Parameter value: The earliest `created_at` to match; a negative value is written as 0.
    /// - Returns: The changed filter.
    public func withSince(_ value: Int64) -> RelayFilter { with("since", value) }

    /// A copy with `until` set (added at the end, or replaced in place).
    ///
    /// - Parameter value: The latest `created_at` to match; a negative value is written as 0.
    /// - Returns: The changed filter.
    public func withUntil(_ value: Int64) -> RelayFilter { with("until", value) }

    /// A copy with `limit` set (added at the end, or replaced in place): a live query's window
    /// read, which needs no more than the window from each filter.
    ///
    /// - Parameter value: The most stored events to match; a negative value is written as 0.
    /// - Returns: The changed filter.
    public func withLimit(_ value: Int64) -> RelayFilter { with("limit", value) }

    private func with(_ key: String, _ value: Int64) -> RelayFilter {
        let value = max(0, value)
        var members = json.members
        if let i = members.firstIndex(where: { $0.key == key }) {
            members[i] = JSONObject.Member(key: key, value: .integer(value))
        } else {
            members.append(JSONObject.Member(key: key, value: .integer(value)))
        }
        // Cannot fail: the members were valid and a non-negative integer bound is valid.
        return try! RelayFilter(json: .object(JSONObject(members: members)))
    }

    /// A copy without `limit`: the whole set the filter selects (what NIP-77 reconciles).
    ///
    /// - Returns: The filter with its `limit` member removed, if it had one.
    public func withoutLimit() -> RelayFilter {
        // Cannot fail: removing a member leaves a valid filter.
        try! RelayFilter(json: .object(JSONObject(members: json.members.filter { $0.key != "limit" })))
    }

    /// The filter's JSON text.
    public var description: String { toJSON() }

    /// Filters are equal when their JSON members are, in the same order.
    ///
    /// - Parameters:
    ///   - a: One filter.
    ///   - b: The other filter.
    /// - Returns: True when both have the same members with the same values, in the same order.
    public static func == (a: RelayFilter, b: RelayFilter) -> Bool { a.json == b.json }
    /// Hashes the JSON members, as equality compares them.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) { hasher.combine(json) }
}
