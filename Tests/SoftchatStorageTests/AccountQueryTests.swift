import Foundation
import SoftchatCore
import SoftchatJSON
import Testing

@testable import SoftchatStorage

/// `events(matching:limit:now:)` equals `RelayFilter.matches` over every served stored event
/// (not deleted, not replaced, not expired), newest first with ties by lowest id, each filter's
/// own limit per filter, then the overall limit — on a randomized store, plus pinned examples.
@Suite struct AccountQueryTests {
    static let identities = ["alice", "bob", "carol", "dave", "erin"].map(StorageKeys.identity)
    static let pubkeys = identities.map(\.publicKeyHex)
    static let topics = ["nostr", "softchat", "chat", "Nostr", "zap"]
    static let dTags = ["a", "b", "c", ""]

    /// The randomized store: what was ingested, in arrival order, with its arrival time.
    struct Store {
        var events: [VerifiedEvent] = []
        /// (event, receivedAt) in arrival order; some events arrive more than once.
        var arrivals: [(VerifiedEvent, Int64)] = []
        var batches: [(events: [VerifiedEvent], receivedAt: Int64)] = []
    }

    static func randomStore(seed: UInt64, count: Int = 320) -> Store {
        var rng = StorageRNG(seed: seed)
        var store = Store()
        let kinds = [1, 1, 1, 1, 7, 14, 14, 0, 3, 10_002, 30_023, 30_023, 5, 5]
        for i in 0..<count {
            let a = Int.random(in: 0..<identities.count, using: &rng)
            let kind = rng.pick(kinds)
            let createdAt = t0 + Int64.random(in: 0..<300, using: &rng)
            var tags: [[String]] = []
            func earlierID(sameAuthor: Bool) -> String {
                let pool = store.events.filter { !sameAuthor || $0.pubkey == pubkeys[a] }
                if pool.isEmpty || rng.chance(10) { return Hex.encode(SHA256.hash(Array("missing \(i)".utf8))) }
                return rng.pick(pool).id
            }
            switch kind {
            case 7: tags += [["e", earlierID(sameAuthor: false)], ["p", rng.pick(pubkeys)]]
            case 14: tags.append(["p", rng.pick(pubkeys)])
            case 30_023: if !rng.chance(15) { tags.append(["d", rng.pick(dTags)]) }
            case 5:
                for _ in 0..<Int.random(in: 1...2, using: &rng) {
                    if rng.chance(65) {
                        tags.append(["e", earlierID(sameAuthor: rng.chance(75))])
                    } else {
                        let owner = rng.chance(80) ? pubkeys[a] : rng.pick(pubkeys)
                        tags.append(["a", "30023:\(owner):\(rng.pick(dTags))"])
                    }
                }
            default: break
            }
            if rng.chance(40) { tags.append(["t", rng.pick(topics)]) }
            if rng.chance(15) { tags.append(["e", earlierID(sameAuthor: false), "wss://r.example", "reply"]) }
            if rng.chance(15) { tags.append(["p", rng.pick(pubkeys)]) }
            if rng.chance(12) { tags.append(["expiration", "\(t0 + Int64.random(in: 0..<500, using: &rng))"]) }
            // Some events pass the tag index's bound (many tags, or one long value): stored with
            // the overflow marker, they must be found by tag all the same.
            if rng.chance(4) {
                tags.insert(contentsOf: (0...TagIndex.maxIndexedTagsPerEvent).map { ["x", "pad \($0)"] }, at: 0)
            } else if rng.chance(2) {
                tags.append(["x", String(repeating: "v", count: TagIndex.maxIndexedTagValueBytes + 1)])
            }
            let content = "event \(i) \(rng.chance(10) ? "\u{0}\u{1F600}" : "")"
            store.events.append(try! identities[a].sign(UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content)))
        }
        // Arrival: shuffled (targets after deletions, older after newer), some twice, in batches.
        var order = store.events
        order.shuffle(using: &rng)
        for _ in 0..<20 { order.insert(rng.pick(store.events), at: Int.random(in: 0...order.count, using: &rng)) }
        var receivedAt = t0 + 50
        var rest = order[...]
        while !rest.isEmpty {
            let n = min(rest.count, Int.random(in: 1...40, using: &rng))
            let batch = Array(rest.prefix(n))
            rest = rest.dropFirst(n)
            store.batches.append((batch, receivedAt))
            store.arrivals += batch.map { ($0, receivedAt) }
            receivedAt += Int64.random(in: 0...20, using: &rng)
        }
        return store
    }

    // MARK: The reference: NIP-01/09/40 over everything that arrived, decided in Swift

    struct Reference {
        let stored: [VerifiedEvent]
        let replacedOrDeleted: Set<String>

        init(_ store: Store) {
            func expiration(_ e: VerifiedEvent) -> Int64? { e.firstTagValue("expiration").flatMap { Int64($0) } }
            // A participant arrived (first time) before it expired.
            var firstArrival: [String: Int64] = [:]
            for (e, at) in store.arrivals where firstArrival[e.id] == nil { firstArrival[e.id] = at }
            let participants = store.events.filter { e in
                guard let at = firstArrival[e.id] else { return false }
                return expiration(e).map { $0 > at } ?? true
            }
            func group(_ e: VerifiedEvent) -> String? {
                switch e.kind {
                case 0, 3, 10_000..<20_000: "\(e.kind):\(e.pubkey)"
                case 30_000..<40_000: "\(e.kind):\(e.pubkey):\(e.firstTagValue("d") ?? "")"
                default: nil
                }
            }
            var winner: [String: VerifiedEvent] = [:]
            for e in participants {
                guard let g = group(e) else { continue }
                if let w = winner[g], w.createdAt > e.createdAt || (w.createdAt == e.createdAt && w.id < e.id) { continue }
                winner[g] = e
            }
            var hidden: Set<String> = []
            for e in participants {
                if let g = group(e), winner[g]?.id != e.id { hidden.insert(e.id) }
                guard e.kind != 5 else { continue }
                let deleted = participants.contains { d in
                    d.kind == 5 && d.pubkey == e.pubkey
                        && d.tags.contains { tag in
                            guard tag.count >= 2 else { return false }
                            if tag[0] == "e" { return tag[1] == e.id }
                            if tag[0] == "a", (30_000..<40_000).contains(e.kind) {
                                return tag[1] == "\(e.kind):\(e.pubkey):\(e.firstTagValue("d") ?? "")" && d.createdAt >= e.createdAt
                            }
                            return false
                        }
                }
                if deleted { hidden.insert(e.id) }
            }
            // Replaced events are not stored at all; the rest are, served or not.
            stored = participants.filter { e in group(e).map { winner[$0]?.id == e.id } ?? true }
            replacedOrDeleted = hidden
        }

        func served(now: Int64) -> [VerifiedEvent] {
            stored.filter { e in
                !replacedOrDeleted.contains(e.id) && (e.firstTagValue("expiration").flatMap { Int64($0) }.map { $0 > now } ?? true)
            }
        }

        static func newestFirst(_ a: VerifiedEvent, _ b: VerifiedEvent) -> Bool {
            a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.id < b.id
        }

        func query(_ filters: [RelayFilter], limit: Int?, now: Int64) -> [String] {
            let served = served(now: now).sorted(by: Self.newestFirst)
            var union: [String: VerifiedEvent] = [:]
            for f in filters {
                var matched = served.filter { f.matches($0) }
                if let l = f.limit { matched = Array(matched.prefix(Int(l))) }
                for e in matched { union[e.id] = e }
            }
            var all = union.values.sorted(by: Self.newestFirst)
            if let limit { all = Array(all.prefix(limit)) }
            return all.map(\.id)
        }
    }

    static func randomFilter(_ rng: inout StorageRNG, _ store: Store) -> RelayFilter {
        var members: [(String, JSONValue)] = []
        func hexValues(_ pool: [String]) -> JSONValue {
            let n = rng.chance(5) ? 0 : Int.random(in: 1...3, using: &rng)
            return .array(
                (0..<n).map { _ in
                    let base = rng.pick(pool)
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0..<5: return .string(base)
                    case 5..<9: return .string(String(base.prefix(Int.random(in: 1...8, using: &rng))))
                    default: return .string(Hex.encode(SHA256.hash(Array("random \(rng.next())".utf8))))
                    }
                })
        }
        func strings(_ pool: [String]) -> JSONValue {
            .array((0..<(rng.chance(5) ? 0 : Int.random(in: 1...3, using: &rng))).map { _ in .string(rng.pick(pool)) })
        }
        let ids = store.events.map(\.id)
        if rng.chance(20) { members.append(("ids", hexValues(ids))) }
        if rng.chance(30) { members.append(("authors", hexValues(pubkeys))) }
        if rng.chance(45) {
            let n = rng.chance(3) ? 0 : Int.random(in: 1...3, using: &rng)
            members.append(("kinds", .array((0..<n).map { _ in .integer(Int64(rng.pick([0, 1, 3, 5, 7, 14, 10_002, 30_023, 42]))) })))
        }
        if rng.chance(15) { members.append(("#e", strings(ids))) }
        if rng.chance(15) { members.append(("#p", strings(pubkeys))) }
        if rng.chance(20) { members.append(("#t", strings(topics + ["none"]))) }
        if rng.chance(5) { members.append(("#d", strings(dTags))) }
        if rng.chance(30) { members.append(("since", .integer(t0 + Int64.random(in: 0..<300, using: &rng)))) }
        if rng.chance(30) { members.append(("until", .integer(t0 + Int64.random(in: 0..<300, using: &rng)))) }
        if rng.chance(40) { members.append(("limit", .integer(Int64.random(in: 0...30, using: &rng)))) }
        members.shuffle(using: &rng)
        return try! RelayFilter(json: .object(JSONObject(members: members.map { JSONObject.Member(key: $0.0, value: $0.1) })))
    }

    @Test(arguments: [UInt64(0x5EED_0001), 0x5EED_0002])
    func queriesEqualRelayFilterMatchesOverServedEventsOnARandomizedStore(seed: UInt64) throws {
        let t = try TestAccount()
        let store = Self.randomStore(seed: seed)
        for batch in store.batches { try t.account.incoming.ingest(batch.events, receivedAt: batch.receivedAt) }
        let reference = Reference(store)
        #expect(try t.scalar("SELECT COUNT(*) FROM events") == Int64(reference.stored.count))
        // The store exercises every rule.
        let servedNow = reference.served(now: t0 + 150)
        #expect(servedNow.count > 100)
        let deletedButStored = reference.stored.filter { reference.replacedOrDeleted.contains($0.id) }.count
        #expect(deletedButStored > 5, "NIP-09 hid some stored events")
        #expect(reference.replacedOrDeleted.count - deletedButStored > 10, "replaced events")
        #expect(reference.served(now: t0).count - reference.served(now: t0 + 1_000).count > 3, "events that expire later")
        #expect(try t.scalar("SELECT COUNT(*) FROM quarantine") > 3, "events expired on arrival")
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = ''") > 5, "events past the tag index's bound")

        var rng = StorageRNG(seed: seed ^ 0xF11_7E55)
        var nonEmpty = 0
        for round in 0..<600 {
            let filters = (0..<Int.random(in: 1...3, using: &rng)).map { _ in Self.randomFilter(&rng, store) }
            let limit: Int? = rng.chance(50) ? nil : Int.random(in: 0...40, using: &rng)
            let now = rng.pick([t0, t0 + 150, t0 + 300, t0 + 1_000])
            let got = try t.account.events(matching: filters, limit: limit, now: now).map(\.id)
            let want = reference.query(filters, limit: limit, now: now)
            #expect(got == want, "round \(round): \(filters.map(\.description)) limit \(limit.map(String.init) ?? "nil") now \(now)")
            if got != want { break }
            if !got.isEmpty { nonEmpty += 1 }
        }
        #expect(nonEmpty > 250, "the random filters mostly select something")
        #expect(try t.account.check(now: t0).ok)
    }

    /// NIP-77's items: every stored event the filter matches without its limit, hidden ones
    /// (deleted, expired) included, as (created_at, id) ascending, each once; from the tag index
    /// for tag filters and from the events otherwise.
    @Test(arguments: [UInt64(0x5EED_0003), 0x5EED_0004])
    func reconciliationItemsAreEveryStoredMatchOnceInTimeThenIdOrder(seed: UInt64) throws {
        let t = try TestAccount()
        let store = Self.randomStore(seed: seed)
        for batch in store.batches { try t.account.incoming.ingest(batch.events, receivedAt: batch.receivedAt) }
        let reference = Reference(store)
        #expect(try t.scalar("SELECT COUNT(*) FROM event_tags WHERE name = ''") > 5, "events past the tag index's bound")
        var rng = StorageRNG(seed: seed ^ 0x0E6E_17)
        var tagged = 0
        var nonEmpty = 0
        for round in 0..<600 {
            let filter = Self.randomFilter(&rng, store)
            let got = try t.account.reconciliationItems(matching: filter)
            let want = reference.stored.filter { filter.withoutLimit().matches($0) }
                .compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }.sorted()
            #expect(got == want, "round \(round): \(filter)")
            if got != want { break }
            if filter.ids == nil && filter.authors == nil && !filter.tagConditions.isEmpty { tagged += 1 }
            if !got.isEmpty { nonEmpty += 1 }
        }
        #expect(tagged > 60 && nonEmpty > 250, "\(tagged) tag-driven, \(nonEmpty) non-empty")
    }

    @Test func theChatHistoryFilterReturnsTheNewestHundredKind14MessagesToARecipient() throws {
        let t = try TestAccount()
        let me = StorageKeys.alice.publicKeyHex
        var toMe: [VerifiedEvent] = []
        var events: [VerifiedEvent] = []
        for i in 0..<130 {
            let sender = [StorageKeys.bob, StorageKeys.carol][i % 2]
            let e = signed(sender, kind: 14, tags: [["p", me]], content: "dm \(i)", createdAt: t0 + Int64(i / 3))
            toMe.append(e)
            events.append(e)
            events.append(signed(sender, kind: 14, tags: [["p", StorageKeys.bob.publicKeyHex]], content: "to bob \(i)", createdAt: t0 + Int64(i)))
            events.append(signed(sender, kind: 1, tags: [["p", me]], content: "note \(i)", createdAt: t0 + Int64(i)))
        }
        for start in stride(from: 0, to: events.count, by: 256) {
            try t.account.incoming.ingest(Array(events[start..<min(start + 256, events.count)]), receivedAt: t0 + 500)
        }
        let got = try t.served(["{\"kinds\":[14],\"#p\":[\"\(me)\"],\"limit\":100}"], now: t0 + 500)
        let want = toMe.sorted(by: Reference.newestFirst).prefix(100).map(\.id)
        #expect(got.count == 100)
        #expect(got == Array(want))
        // Ties on created_at come lowest id first.
        let tied = toMe.filter { $0.createdAt == t0 + 42 }.map(\.id).sorted()
        #expect(got.filter { tied.contains($0) } == tied)
    }

    @Test func eachFiltersLimitAppliesToItThenTheUnionIsSortedAndLimited() throws {
        let t = try TestAccount()
        let notes = (0..<5).map { signed(kind: 1, content: "n\($0)", createdAt: t0 + Int64($0) * 10) }
        let reactions = (0..<5).map { signed(StorageKeys.bob, kind: 7, content: "r\($0)", createdAt: t0 + Int64($0) * 10 + 5) }
        try t.account.incoming.ingest(notes + reactions, receivedAt: t0 + 100)
        let two = [#"{"kinds":[1],"limit":2}"#, #"{"kinds":[7],"limit":2}"#]
        #expect(try t.served(two, now: t0 + 100) == [reactions[4].id, notes[4].id, reactions[3].id, notes[3].id])
        #expect(try t.served(two, limit: 3, now: t0 + 100) == [reactions[4].id, notes[4].id, reactions[3].id])
        // Overlapping filters name an event once.
        #expect(
            try t.served([#"{"kinds":[1]}"#, #"{"authors":["\#(StorageKeys.alice.publicKeyHex.prefix(6))"]}"#], now: t0 + 100)
                == notes.reversed().map(\.id))
        // Limit 0 and empty lists select nothing; so does an overall limit of 0.
        #expect(try t.served([#"{"limit":0}"#, #"{"ids":[]}"#, ##"{"#t":[]}"##], now: t0 + 100).isEmpty)
        #expect(try t.served(["{}"], limit: 0, now: t0 + 100).isEmpty)
        #expect(try t.served([#"{"since":\#(t0 + 20),"until":\#(t0 + 30)}"#], now: t0 + 100) == [notes[3].id, reactions[2].id, notes[2].id])
    }

    @Test func tagNamesAndValuesMatchByteForByteNotByUnicodeEquivalence() throws {
        let t = try TestAccount()
        let e = signed(tags: [["t", "caf\u{E9}"], ["\u{212A}", "kelvin"]], content: "normalization")
        try t.account.incoming.ingest([e], receivedAt: t0)
        func filter(_ key: String, _ value: String) throws -> RelayFilter {
            try RelayFilter(json: .object(JSONObject([key: .array([.string(value)])])))
        }
        let exact = try filter("#t", "caf\u{E9}")
        let decomposed = try filter("#t", "cafe\u{301}")
        let kelvinAsK = try filter("#K", "kelvin")
        #expect(try t.account.events(matching: [exact], now: t0).map(\.id) == [e.id])
        #expect(try t.account.events(matching: [decomposed], now: t0).isEmpty)
        #expect(try t.account.events(matching: [kelvinAsK], now: t0).isEmpty)
        // Storage and RelayFilter.matches both compare bytes (NIP-01: exact match), not
        // canonical equivalence as Swift's String == would.
        #expect(exact.matches(e))
        #expect(!decomposed.matches(e))
        #expect(!kelvinAsK.matches(e))
    }

    // MARK: Reads see every commit

    @Test func readsSeeEveryCommitAfterAnyEarlierRead() throws {
        // Every read API once, each followed by a commit the next read must see (a statement
        // left mid-result used to pin the reader to an old snapshot).
        let t = try TestAccount()
        var expected: [String] = []
        func commitOne(_ i: Int) throws {
            let e = signed(content: "read \(i)", createdAt: t0 + Int64(i))
            try t.account.incoming.ingest([e], receivedAt: t0)
            expected.insert(e.id, at: 0)
            #expect(try t.served(now: t0) == expected, "after read \(i)")
        }
        try commitOne(0)
        _ = try t.account.check(now: t0)
        try commitOne(1)
        _ = try t.account.schemaVersion()
        try commitOne(2)
        try t.account.advanceSyncCursor(relayURL: StorageKeys.relayA, subscriptionID: "s", createdAt: 5, now: t0)
        #expect(try t.account.syncCursor(relayURL: StorageKeys.relayA, subscriptionID: "s") == 5)
        try commitOne(3)
        try t.account.advanceSyncCursor(relayURL: StorageKeys.relayA, subscriptionID: "s", createdAt: 9, now: t0)
        #expect(try t.account.syncCursor(relayURL: StorageKeys.relayA, subscriptionID: "s") == 9)
        _ = try t.account.delivery.stateCounts()
        _ = try t.account.subscriptions()
        try commitOne(4)
        #expect(try t.account.check(now: t0).events == 5)
    }

    @Test func aWriteFromAnotherConnectionBetweenCallsDoesNotBreakTheNextWrite() throws {
        let t = try TestAccount()
        try t.account.incoming.ingest([signed(content: "first")], receivedAt: t0)
        let other = try SQLiteConnection(path: t.path)
        try other.execute("INSERT INTO sync_cursors (relay_url, subscription_id, newest_created_at, updated_at) VALUES ('wss://o', 's', 1, 1)")
        try t.account.incoming.ingest([signed(content: "second")], receivedAt: t0)
        #expect(try t.account.syncCursor(relayURL: "wss://o", subscriptionID: "s") == 1)
        #expect(try t.served(now: t0).count == 2)
    }

    @Test func aTagHistoryWithALimitWalksTheTagIndexAndEqualsTheFilterSemantics() throws {
        let t = try TestAccount()
        let recipients = [StorageKeys.bob.publicKeyHex, StorageKeys.alice.publicKeyHex]
        var events: [VerifiedEvent] = []
        for i in 0..<300 {
            var tags = [["p", recipients[i % 2]]]
            if i % 7 == 0 { tags.append(["p", recipients[i % 2]]) }  // the same tag value twice
            events.append(signed(kind: i % 5 == 0 ? 7 : 14, tags: tags, content: "m\(i)", createdAt: t0 + Int64(i / 4)))
        }
        _ = try t.account.incoming.ingest(events, receivedAt: t0)
        // Hide some: a deletion by the author.
        let doomed = events.filter { $0.content.hasSuffix("3") }.prefix(5).map(\.id)
        _ = try t.account.incoming.ingest([signed(kind: 5, tags: doomed.map { ["e", $0] }, content: "", createdAt: t0 + 500)], receivedAt: t0)
        for limit in [1, 10, 57, 500] {
            for since in [nil, t0 + 20] as [Int64?] {
                var json = "{\"kinds\":[14],\"#p\":[\"\(recipients[0])\"],\"limit\":\(limit)"
                if let since { json += ",\"since\":\(since)" }
                json += "}"
                let limited = try t.account.events(matching: [RelayFilter.fromJSON(json)], now: t0)
                // The same filter without a limit takes the general path; its first `limit` are the answer.
                let unlimited = try t.account.events(
                    matching: [RelayFilter.fromJSON(json.replacingOccurrences(of: ",\"limit\":\(limit)", with: ""))], now: t0)
                #expect(limited.map(\.id) == Array(unlimited.prefix(limit)).map(\.id), "limit \(limit), since \(String(describing: since))")
                #expect(!limited.contains { doomed.contains($0.id) })
            }
        }
    }
}
