import Foundation
import SoftchatCore
import SoftchatJSON
import SoftchatTestSupport
import Testing

/// NIP-01 filters with exact semantics: prefixes, inclusive time bounds, generic tags on the
/// second element only, limit never used for matching, strict parsing and exact round-trips.
@Suite struct WireFilterTests {
    static let authors = [WireKeys.alice, WireKeys.bob, WireKeys.carol].map(\.publicKeyHex)
    /// Values the pool's tags and the random filters draw from.
    static let eValues = (0..<4).map { Hex.encode(SHA256.hash(Array("referenced event \($0)".utf8))) }
    static let tValues = ["nostr", "softchat", "wire", "Nostr"]
    static let thirdValues = ["wss://relay.example.com", "reply", "root"]
    static let addresses = authors.map { "30023:\($0):post" }

    /// ~20 signed events with a few authors, kinds, tags and shared created_at values, built once.
    static let pool: [VerifiedEvent] = {
        var rng = WireRNG(seed: 0xF117_E500)
        let identities = [WireKeys.alice, WireKeys.bob, WireKeys.carol]
        let kinds = [0, 1, 7, 30023]
        return (0..<20).map { i in
            var tags: [[String]] = []
            if Bool.random(using: &rng) {
                tags.append(["e", eValues.randomElement(using: &rng)!, thirdValues.randomElement(using: &rng)!])
            }
            if Bool.random(using: &rng) { tags.append(["p", authors.randomElement(using: &rng)!]) }
            if Bool.random(using: &rng) { tags.append(["t", tValues.randomElement(using: &rng)!]) }
            if Int.random(in: 0..<4, using: &rng) == 0 { tags.append(["P", authors.randomElement(using: &rng)!]) }
            if Int.random(in: 0..<4, using: &rng) == 0 { tags.append(["a", addresses.randomElement(using: &rng)!]) }
            if Int.random(in: 0..<5, using: &rng) == 0 { tags.append(["t"]) }
            let draft = UnsignedEvent(
                createdAt: 1_700_000_000 + Int64.random(in: 0..<8, using: &rng) * 100,
                kind: kinds[i % 4], tags: tags, content: "pool \(i)")
            return try! identities[i % 3].sign(draft)
        }
    }()

    static func event(
        kind: Int = 1, tags: [[String]] = [], createdAt: Int64 = 1_700_000_000,
        by identity: SoftchatIdentity = WireKeys.alice
    ) -> VerifiedEvent {
        try! identity.sign(UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: "filter test"))
    }

    func filter(_ text: String) throws -> RelayFilter { try RelayFilter.fromJSON(text) }

    /// The events of `events` that `text` matches, as indices.
    func matching(_ text: String, in events: [VerifiedEvent] = WireFilterTests.pool) throws -> [Int] {
        let f = try filter(text)
        return events.indices.filter { f.matches(events[$0]) }
    }

    // MARK: Matching semantics

    @Test func idsMatchExactlyAt64CharactersAndByPrefixBelow() throws {
        let e = Self.event()
        let other = Self.event(kind: 7)
        for length in [64, 63, 10, 1] {
            let f = try filter(#"{"ids":["\#(e.id.prefix(length))"]}"#)
            #expect(f.matches(e), "prefix length \(length)")
        }
        #expect(try !filter(#"{"ids":["\#(e.id)"]}"#).matches(other))
        #expect(try !filter(#"{"ids":["\#(e.id.prefix(20))\#(e.id.dropFirst(20).first == "0" ? "1" : "0")"]}"#).matches(e))
        #expect(try !filter(#"{"ids":["\#(e.id.dropFirst())"]}"#).matches(e), "a suffix is not a prefix")
    }

    @Test func authorsMatchExactlyAndByPrefix() throws {
        let byBob = Self.event(by: WireKeys.bob)
        let bob = WireKeys.bob.publicKeyHex
        #expect(try filter(#"{"authors":["\#(bob)"]}"#).matches(byBob))
        #expect(try filter(#"{"authors":["\#(bob.prefix(8))"]}"#).matches(byBob))
        #expect(try !filter(#"{"authors":["\#(WireKeys.alice.publicKeyHex)"]}"#).matches(byBob))
        #expect(try !filter(#"{"authors":["\#(bob.flippingHexDigit(at: 63))"]}"#).matches(byBob))
        #expect(try !filter(#"{"authors":["\#(bob.dropFirst(4).prefix(8))"]}"#).matches(byBob), "an infix is not a prefix")
    }

    @Test func kindsMatchAnyListedKind() throws {
        #expect(try filter(#"{"kinds":[0,7]}"#).matches(Self.event(kind: 7)))
        #expect(try !filter(#"{"kinds":[0,7]}"#).matches(Self.event(kind: 1)))
        #expect(try filter(#"{"kinds":[65535]}"#).matches(Self.event(kind: 65535)))
    }

    @Test func tagConditionMatchesTheSecondElementOnlyAndExactly() throws {
        let id = Self.eValues[0]
        let e = Self.event(tags: [["e", id, "wss://relay.example.com", "reply"], ["t", "nostr"], ["t"]])
        #expect(try filter(##"{"#e":["\##(id)"]}"##).matches(e))
        #expect(try !filter(##"{"#e":["wss://relay.example.com"]}"##).matches(e), "third element is not matched")
        #expect(try !filter(##"{"#e":["reply"]}"##).matches(e))
        #expect(try !filter(##"{"#e":["\##(id.prefix(10))"]}"##).matches(e), "tag values are exact, never prefixes")
        #expect(try !filter(##"{"#t":["Nostr"]}"##).matches(e), "case-sensitive")
        #expect(try !filter(##"{"#t":["nos"]}"##).matches(e))
        #expect(try !filter(##"{"#t":[""]}"##).matches(e), "a tag with only a name has no value to match")
        #expect(try filter(##"{"#t":[""]}"##).matches(Self.event(tags: [["t", ""]])))
        #expect(try !filter(##"{"#p":["\##(id)"]}"##).matches(e), "the letter must be the tag name")
        #expect(try !filter(##"{"#t":["\##(id)"]}"##).matches(e))
    }

    @Test func uppercaseTagLetterIsDistinctFromLowercase() throws {
        let pk = WireKeys.bob.publicKeyHex
        let upper = Self.event(tags: [["P", pk]])
        let lower = Self.event(tags: [["p", pk]])
        #expect(try filter(##"{"#P":["\##(pk)"]}"##).matches(upper))
        #expect(try !filter(##"{"#P":["\##(pk)"]}"##).matches(lower))
        #expect(try filter(##"{"#p":["\##(pk)"]}"##).matches(lower))
        #expect(try !filter(##"{"#p":["\##(pk)"]}"##).matches(upper))
    }

    @Test func sinceAndUntilAreInclusiveAtBothEdges() throws {
        let t: Int64 = 1_700_000_500
        let e = Self.event(createdAt: t)
        #expect(try filter(#"{"since":\#(t)}"#).matches(e))
        #expect(try !filter(#"{"since":\#(t + 1)}"#).matches(e))
        #expect(try filter(#"{"until":\#(t)}"#).matches(e))
        #expect(try !filter(#"{"until":\#(t - 1)}"#).matches(e))
        #expect(try filter(#"{"since":\#(t),"until":\#(t)}"#).matches(e))
        #expect(try filter(#"{"since":0}"#).matches(e))
        #expect(try !filter(#"{"since":\#(t + 1),"until":\#(t - 1)}"#).matches(e))
    }

    @Test func limitNeverAffectsMatching() throws {
        let everything = Array(Self.pool.indices)
        #expect(try matching(#"{"limit":0}"#) == everything)
        #expect(try matching(#"{"limit":1}"#) == everything)
        #expect(try matching(#"{"kinds":[1],"limit":0}"#) == matching(#"{"kinds":[1]}"#))
        #expect(try filter(#"{"limit":3}"#).limit == 3)
    }

    @Test func emptyFilterMatchesEverythingAndAnEmptyListMatchesNothing() throws {
        #expect(try matching("{}") == Array(Self.pool.indices))
        for key in ["ids", "authors", "kinds", "#e", "#t", "#P"] {
            #expect(try matching(#"{"\#(key)":[]}"#).isEmpty, "\(key): []")
            #expect(try matching(#"{"since":0,"\#(key)":[]}"#).isEmpty, "\(key): [] with other conditions")
        }
    }

    @Test func conditionsAndTogetherAndListValuesOrTogether() throws {
        let alice = WireKeys.alice.publicKeyHex
        let bob = WireKeys.bob.publicKeyHex
        let aliceNote = Self.event(kind: 1, tags: [["t", "wire"]])
        let aliceReaction = Self.event(kind: 7, tags: [["t", "wire"]])
        let bobNote = Self.event(kind: 1, tags: [["t", "wire"]], by: WireKeys.bob)
        let f = try filter(##"{"authors":["\##(alice)"],"kinds":[1],"#t":["wire"]}"##)
        #expect(f.matches(aliceNote) && !f.matches(aliceReaction) && !f.matches(bobNote))
        let either = try filter(##"{"authors":["\##(bob)","\##(alice)"],"kinds":[7,1],"#t":["x","wire"]}"##)
        #expect(either.matches(aliceNote) && either.matches(aliceReaction) && either.matches(bobNote))
        #expect(try !filter(##"{"kinds":[1],"#t":["wire"],"#p":["\##(bob)"]}"##).matches(aliceNote), "a missing tag fails the AND")
    }

    @Test func severalFiltersOrViaAnyMatches() throws {
        let reaction = Self.event(kind: 7)
        let note = Self.event(kind: 1)
        let metadata = Self.event(kind: 0)
        let filters = [try filter(#"{"kinds":[7]}"#), try filter(#"{"kinds":[1]}"#)]
        #expect(RelayFilter.anyMatches(filters, reaction) && RelayFilter.anyMatches(filters, note))
        #expect(!RelayFilter.anyMatches(filters, metadata))
        #expect(!RelayFilter.anyMatches([], note), "no filters match nothing")
    }

    @Test func withSinceAppendsOrReplacesInPlace() throws {
        let added = try filter(#"{"kinds":[1],"limit":5}"#).withSince(1_700_000_000)
        #expect(added.toJSON() == #"{"kinds":[1],"limit":5,"since":1700000000}"#)
        #expect(added.since == 1_700_000_000)
        let replaced = try filter(#"{"since":5,"kinds":[1],"until":99}"#).withSince(42)
        #expect(replaced.toJSON() == #"{"since":42,"kinds":[1],"until":99}"#)
        #expect(replaced.since == 42 && replaced.until == 99)
        #expect(try filter(#"{"since":5}"#).withSince(-3).since == 0, "negative clamps to 0")
        let e = Self.event(createdAt: 1_700_000_000)
        #expect(added.matches(e) && !added.withSince(1_700_000_001).matches(e))
        #expect(try RelayFilter.fromJSON(replaced.toJSON()) == replaced)
    }

    // MARK: Errors: invalid_relay_filter naming the filter index and key

    @Test(arguments: [
        (#"{"foo":1}"#, #"unknown key "foo""#),
        (#"{"e":["x"]}"#, #"unknown key "e""#),
        (#"{"Kinds":[1]}"#, #"unknown key "Kinds""#),
        (##"{"#pp":["x"]}"##, ##"key "#pp" is not a single-letter tag"##),
        (##"{"#1":["x"]}"##, ##"key "#1" is not a single-letter tag"##),
        (##"{"#":["x"]}"##, ##"key "#" is not a single-letter tag"##),
        (##"{"#é":["x"]}"##, ##"key "#é" is not a single-letter tag"##),
        (#"{"authors":["ABCDEF"]}"#, #"key "authors" element 0 must be 1 to 64 lowercase hex characters"#),
        (#"{"authors":["abcdef","abcdeF"]}"#, #"key "authors" element 1 must be 1 to 64 lowercase hex"#),
        (#"{"ids":["\#(String(repeating: "a", count: 65))"]}"#, #"key "ids" element 0 must be 1 to 64"#),
        (#"{"ids":[""]}"#, #"key "ids" element 0 must be 1 to 64"#),
        (#"{"ids":["xyz"]}"#, #"key "ids" element 0"#),
        (#"{"ids":[null]}"#, #"key "ids" element 0 must be a string, not null"#),
        (#"{"kinds":[65536]}"#, #"key "kinds" element 0 must be an integer from 0 to 65535, not 65536"#),
        (#"{"kinds":[1,"1"]}"#, #"key "kinds" element 1 must be an integer from 0 to 65535, not "1""#),
        (#"{"kinds":[-1]}"#, #"key "kinds" element 0 must be an integer from 0 to 65535, not -1"#),
        (#"{"kinds":[1.0]}"#, #"key "kinds" element 0 must be an integer"#),
        (#"{"kinds":1}"#, #"key "kinds" must be an array of integers"#),
        (#"{"since":-1}"#, #"key "since" must be a non-negative integer, not -1"#),
        (#"{"until":"5"}"#, #"key "until" must be a non-negative integer, not "5""#),
        (#"{"limit":1.5}"#, #"key "limit" must be a non-negative integer, not 1.5"#),
        (#"{"limit":null}"#, #"key "limit" must be a non-negative integer, not null"#),
        (#"{"authors":"abc"}"#, #"key "authors" must be an array of strings, not string"#),
        (##"{"#t":"x"}"##, ##"key "#t" must be an array of strings, not string"##),
        (##"{"#t":["x",1]}"##, ##"key "#t" element 1 must be a string, not number"##),
        ("[]", "must be a JSON object, not array"),
        (#""kinds""#, "must be a JSON object, not string"),
        ("null", "must be a JSON object, not null"),
    ])
    func badFilterIsInvalidRelayFilterNamingIndexAndKey(_ text: String, _ problem: String) {
        // Third filter of a REQ: the message says "filter 2".
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter 2: \(problem)"]) {
            _ = try parseClientRelayFrame(#"["REQ","s",{"kinds":[1]},{},\#(text)]"#)
        }
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter: \(problem)"]) { _ = try RelayFilter.fromJSON(text) }
    }

    @Test func boundsOfFilterValuesHoldAtNAndFailAtNPlusOne() throws {
        #expect(try filter(#"{"kinds":[0,65535]}"#).kinds == [0, 65535])
        #expect(try filter(#"{"ids":["\#(String(repeating: "f", count: 64))","a"]}"#).ids?.count == 2)
        #expect(try filter(#"{"since":0,"until":9223372036854775807,"limit":0}"#).until == Int64.max)
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter 0", #"key "kinds""#, "65536"]) {
            _ = try RelayFilter(json: JSONReader().parse(#"{"kinds":[65536]}"#), index: 0)
        }
    }

    @Test func duplicateKeyIsRejected() {
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter is not valid JSON", #"duplicate object key "kinds""#]) {
            _ = try RelayFilter.fromJSON(#"{"kinds":[1],"kinds":[2]}"#)
        }
    }

    // MARK: Fixtures and exact round-trips

    /// Replaces the fixtures' placeholder ids and pubkeys with hex, keeping keys and their order.
    func hexified(_ value: JSONValue) throws -> JSONValue {
        let object = try #require(value.objectValue)
        return .object(
            JSONObject(
                members: object.members.map { m in
                    guard ["ids", "authors", "#e", "#p"].contains(m.key), let list = m.value.arrayValue else { return m }
                    return .init(key: m.key, value: .array(list.map { .string(Hex.encode(SHA256.hash(Array(($0.stringValue ?? "").utf8)))) }))
                }))
    }

    @Test func filterFixturesParseOrAreRejectedAsExpected() throws {
        let minimal = try Paths.fixtureText("filter").trimmingCharacters(in: .whitespacesAndNewlines)
        let f = try filter(minimal)
        #expect(f.kinds == [3] && f.limit == 1 && f.authors?.first?.hasPrefix("d9fa3421") == true)
        #expect(f.toJSON() == minimal)

        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter:", #"key "ids" element 0"#]) {
            _ = try RelayFilter.fromJSON(Paths.fixtureText("filter_all_fields"))
        }
        let all = try RelayFilter(json: hexified(JSONReader().parse(Paths.fixtureText("filter_all_fields"))))
        #expect(all.json.keys == ["ids", "authors", "kinds", "#e", "#p", "#t", "since", "until", "limit"])
        #expect(all.tagConditions.map { $0.letter } == ["e", "p", "t"] && all.since == 1234 && all.until == 12345 && all.limit == 5)
        #expect(try RelayFilter.fromJSON(all.toJSON()) == all)

        let extra = try hexified(JSONReader().parse(Paths.fixtureText("filter_with_extra_fields")))
        expectSoftchatError(.invalidRelayFilter, mentioning: ["filter 0", ##"key "#unrecognized" is not a single-letter tag"##]) {
            _ = try RelayFilter(json: extra, index: 0)
        }
        expectSoftchatError(.invalidRelayFilter, mentioning: [#"unknown key "unrecognized""#]) {
            _ = try RelayFilter(json: extra.removing("#unrecognized"))
        }
    }

    @Test func toJSONKeepsMemberOrderAndValuesExactly() throws {
        let text =
            ##"{"limit":5,"#t":["b","a","b"],"kinds":[7,1,7],"until":9223372036854775807,"authors":["ab","\##(Self.authors[0])"],"#P":["é \" \\ \n"]}"##
        let f = try filter(text)
        #expect(f.toJSON() == text)
        #expect(f.kinds == [7, 1, 7], "duplicates are kept, not deduplicated or sorted")
        #expect(f.tagConditions.map { $0.letter } == ["t", "P"] && f.tagConditions[1].values == ["é \" \\ \n"])
        #expect(try filter(#"{"kinds":[1,7]}"#) != filter(#"{"kinds":[7,1]}"#), "order is part of the value")
        #expect(f.description == text)
    }

    // MARK: Properties

    /// A random valid filter as a JSON object: keys in random order, values anywhere in range.
    static func randomFilterObject(_ rng: inout WireRNG, hitting pool: [VerifiedEvent]? = nil) -> JSONObject {
        var keys =
            ["ids", "authors", "kinds", "since", "until", "limit"]
            + (pool == nil
                ? (0..<3).map { _ in randomTagKey(&rng) }
                : ["#e", "#p", "#t", "#P", "#a", "#x"])
        keys.shuffle(using: &rng)
        var object = JSONObject()
        for key in keys.prefix(Int.random(in: 0...(pool == nil ? 6 : 4), using: &rng)) where object[key] == nil {
            let n = Int.random(in: 0...3, using: &rng)
            let value: JSONValue
            switch key {
            case "ids", "authors":
                value = .array(
                    (0..<n).map { _ in
                        guard let pool else { return .string(rng.hex(Int.random(in: 1...64, using: &rng))) }
                        let full = key == "ids" ? pool.randomElement(using: &rng)!.id : authors.randomElement(using: &rng)!
                        switch Int.random(in: 0..<3, using: &rng) {
                        case 0: return .string(full)
                        case 1: return .string(String(full.prefix(Int.random(in: 1...63, using: &rng))))
                        default: return .string(rng.hex(Int.random(in: 1...64, using: &rng)))
                        }
                    })
            case "kinds":
                value = .array(
                    (0..<n).map { _ in
                        .integer(pool == nil ? Int64.random(in: 0...65535, using: &rng) : [0, 1, 3, 7, 30023, 65535].randomElement(using: &rng)!)
                    })
            case "since", "until":
                let t = pool?.randomElement(using: &rng)!.createdAt ?? Int64.random(in: 0...Int64.max, using: &rng)
                value = .integer(max(0, t + (pool == nil ? 0 : Int64.random(in: -1...1, using: &rng))))
            case "limit": value = .integer(Int64.random(in: 0...(pool == nil ? Int64.max : 5), using: &rng))
            default:
                let candidates = eValues + tValues + thirdValues + addresses + authors + ["", "é\"\\\n\u{1}🤙"]
                value = .array(
                    (0..<n).map { _ in
                        .string(
                            pool == nil && Bool.random(using: &rng)
                                ? rng.hex(Int.random(in: 0...70, using: &rng))
                                : candidates.randomElement(using: &rng)!)
                    })
            }
            object.append(key, value)
        }
        return object
    }

    /// `#a`…`#z` or `#A`…`#Z`.
    static func randomTagKey(_ rng: inout WireRNG) -> String {
        let base: UInt8 = Bool.random(using: &rng) ? 0x61 : 0x41
        return "#" + String(Character(Unicode.Scalar(base + UInt8.random(in: 0..<26, using: &rng))))
    }

    /// A direct reading of NIP-01 over the JSON members, independent of RelayFilter's matchers.
    static func referenceMatches(_ object: JSONObject, _ e: VerifiedEvent) -> Bool {
        object.allSatisfy { m in
            let strings = m.value.arrayValue?.compactMap(\.stringValue) ?? []
            switch m.key {
            case "ids": return strings.contains { e.id.hasPrefix($0) }
            case "authors": return strings.contains { e.pubkey.hasPrefix($0) }
            case "kinds": return m.value.arrayValue!.contains { $0.int64Value == Int64(e.kind) }
            case "since": return e.createdAt >= m.value.int64Value!
            case "until": return e.createdAt <= m.value.int64Value!
            case "limit": return true
            default:
                let name = String(m.key.dropFirst())
                return e.tags.contains { $0.count > 1 && $0[0] == name && strings.contains($0[1]) }
            }
        }
    }

    @Test func randomValidFiltersRoundTripExactly() throws {
        var rng = WireRNG(seed: 0x0F11_7E25)
        var keysSeen = Set<String>()
        for i in 0..<1_200 {
            let object = Self.randomFilterObject(&rng)
            keysSeen.formUnion(object.keys)
            let text = JSONValue.object(object).jsonText
            let f = try RelayFilter.fromJSON(text)
            #expect(f.toJSON() == text, "case \(i)")
            let again = try RelayFilter.fromJSON(f.toJSON())
            #expect(again == f && again.hashValue == f.hashValue, "case \(i)")
            #expect(f.ids == object["ids"]?.arrayValue?.compactMap(\.stringValue), "case \(i)")
            #expect(f.authors == object["authors"]?.arrayValue?.compactMap(\.stringValue), "case \(i)")
            #expect(f.kinds == object["kinds"]?.arrayValue?.compactMap { $0.int64Value.map(Int.init) }, "case \(i)")
            #expect(
                f.since == object["since"]?.int64Value && f.until == object["until"]?.int64Value
                    && f.limit == object["limit"]?.int64Value, "case \(i)")
            let tags = object.members.filter { $0.key.hasPrefix("#") }
            #expect(f.tagConditions.map { "#\($0.letter)" } == tags.map(\.key), "case \(i)")
            #expect(f.tagConditions.map { $0.values } == tags.map { $0.value.arrayValue!.compactMap(\.stringValue) }, "case \(i)")
        }
        #expect(keysSeen.isSuperset(of: ["ids", "authors", "kinds", "since", "until", "limit"]) && keysSeen.count > 40)
    }

    @Test func matchesAgreesWithAReferenceOverRandomFiltersAndEvents() throws {
        var rng = WireRNG(seed: 0x3A7C_4E5)
        var hits = 0
        var pairs = 0
        var prefixHits = 0
        var groups: [(filters: [RelayFilter], objects: [JSONObject])] = []
        for i in 0..<150 {
            let object = Self.randomFilterObject(&rng, hitting: Self.pool)
            let f = try RelayFilter.fromJSON(JSONValue.object(object).jsonText)
            let usesPrefix = (object["ids"]?.arrayValue ?? []).contains { ($0.stringValue?.count ?? 64) < 64 }
            for (j, e) in Self.pool.enumerated() {
                let expected = Self.referenceMatches(object, e)
                #expect(f.matches(e) == expected, "filter \(i) \(f) × event \(j) \(e.jsonText)")
                pairs += 1
                if expected {
                    hits += 1
                    if usesPrefix { prefixHits += 1 }
                }
            }
            if i % 3 == 0 { groups.append(([], [])) }
            groups[groups.count - 1].filters.append(f)
            groups[groups.count - 1].objects.append(object)
        }
        groups.append(([], []))  // no filters: nothing matches
        for (g, group) in groups.enumerated() {
            for e in Self.pool {
                #expect(RelayFilter.anyMatches(group.filters, e) == group.objects.contains { Self.referenceMatches($0, e) }, "group \(g)")
            }
        }
        #expect(pairs >= 2_000)
        // Not vacuous: both outcomes are common, and prefixes do hit.
        #expect(hits > pairs / 10 && hits < pairs * 9 / 10, "\(hits) of \(pairs)")
        #expect(prefixHits > 0)
    }
}
