import SoftchatTestSupport
import Testing

@testable import SoftchatCore

/// A random reconciliation world: two sets with a shared part and parts of their own.
struct NegentropyWorld {
    var ours: [NegentropyItem] = []
    var theirs: [NegentropyItem] = []

    /// `shared` items on both sides, `onlyOurs` and `onlyTheirs` on one; timestamps drawn from
    /// `0..<timeSpan`, so a small span makes runs of equal timestamps (bounds then need id prefixes).
    init(seed: UInt64, shared: Int, onlyOurs: Int, onlyTheirs: Int, timeSpan: Int, sharedPrefixBytes: Int = 0) {
        var rng = SplitMix64(seed: seed)
        let common = rng.bytes(sharedPrefixBytes)
        var used: Set<NegentropyID> = []
        // Ids are unique (an event has one created_at), so a reused id is drawn again.
        func item() -> NegentropyItem {
            while true {
                let id = NegentropyID(prefix: common + rng.bytes(32 - sharedPrefixBytes))
                if used.insert(id).inserted { return NegentropyItem(timestamp: UInt64(1_700_000_000 + rng.below(timeSpan)), id: id) }
            }
        }
        for _ in 0..<shared {
            let i = item()
            ours.append(i)
            theirs.append(i)
        }
        for _ in 0..<onlyOurs { ours.append(item()) }
        for _ in 0..<onlyTheirs { theirs.append(item()) }
    }

    var expectedHave: Set<NegentropyID> { Set(ours.map(\.id)).subtracting(theirs.map(\.id)) }
    var expectedNeed: Set<NegentropyID> { Set(theirs.map(\.id)).subtracting(ours.map(\.id)) }
}

/// The outcome of running both roles to the end.
struct NegentropyRun {
    var have: [NegentropyID] = []
    var need: [NegentropyID] = []
    var rounds = 0
    var largestMessage = 0
    var bytesSent = 0
    var bytesReceived = 0
}

/// Runs initiator (over `ours`) against responder (over `theirs`) until the initiator is done,
/// checking every message against the frame limit and the codec's round trip.
func reconcile(
    _ world: NegentropyWorld, frameLimit: Int = 0, responderLimit: Int? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> NegentropyRun {
    let initiator = Negentropy(storage: NegentropyStorage(items: world.ours), frameSizeLimit: frameLimit)
    let responder = Negentropy(storage: NegentropyStorage(items: world.theirs), frameSizeLimit: responderLimit ?? frameLimit)
    var run = NegentropyRun()
    var message: [UInt8]? = initiator.initiate()
    while let query = message {
        run.rounds += 1
        #expect(run.rounds < 100, "reconciliation does not converge", sourceLocation: sourceLocation)
        guard run.rounds < 100 else { break }
        let answer = try responder.respond(query)
        for (m, limit) in [(query, initiator.frameSizeLimit), (answer, responder.frameSizeLimit)] {
            if limit > 0 { #expect(m.count <= limit, "a message of \(m.count) bytes passes the limit \(limit)", sourceLocation: sourceLocation) }
            #expect(try NegentropyMessage.decode(m).encoded == m, "a message does not survive decode → encode", sourceLocation: sourceLocation)
            run.largestMessage = max(run.largestMessage, m.count)
        }
        run.bytesSent += query.count
        run.bytesReceived += answer.count
        let step = try initiator.reconcile(answer)
        run.have += step.have
        run.need += step.need
        message = step.next
    }
    return run
}

@Suite struct NegentropyTests {
    // MARK: Encoding

    @Test func anIdIsReadFromItsHexTextInPlaceAndOnlyFromLowercaseHexOf64Characters() throws {
        let hex = "00ff10a9b8c7d6e5f4031221304f5e6d7c8b9aa0b1c2d3e4f5061728394a5b6c"
        let id = try #require(NegentropyID(hex: hex))
        #expect(id == NegentropyID(prefix: try #require(Hex.decodeLowercase(hex))))
        #expect(id.hex == hex)
        #expect(Array(hex.utf8).withUnsafeBytes { NegentropyID(hexUTF8: $0) } == id)
        let body = String(hex.dropLast())
        let refused: [String] = [
            "", body, hex + "0", hex.uppercased(), "g" + hex.dropFirst(), body + " ", body + "/", body + ":", body + "`",
            body + "G", body + "@",
            String(hex.dropLast(2)) + "é",  // 64 bytes, two of them past ASCII
        ]
        for bad in refused {
            #expect(NegentropyID(hex: bad) == nil, "\(bad)")
            #expect(Array(bad.utf8).withUnsafeBytes { NegentropyID(hexUTF8: $0) } == nil, "\(bad)")
        }
    }

    @Test func varintsAreBase128MostSignificantDigitFirstWithTheHighBitOnAllButTheLast() throws {
        func encoded(_ v: UInt64) -> [UInt8] {
            var out: [UInt8] = []
            NegentropyVarint.append(v, to: &out)
            return out
        }
        #expect(encoded(0) == [0x00])
        #expect(encoded(127) == [0x7F])
        #expect(encoded(128) == [0x81, 0x00])
        #expect(encoded(16_383) == [0xFF, 0x7F])
        #expect(encoded(16_384) == [0x81, 0x80, 0x00])
        #expect(encoded(.max) == [0x81] + [UInt8](repeating: 0xFF, count: 8) + [0x7F])
        for v: UInt64 in [0, 1, 127, 128, 300, 1 << 35, .max - 1, .max] {
            var reader = NegentropyReader(encoded(v))
            #expect(try reader.varint("v") == v)
            #expect(reader.atEnd)
        }
    }

    @Test func boundsEncodeTimestampsAsDeltasWithInfinityAsZeroAndTheShortestSeparatingPrefix() throws {
        let a = NegentropyItem(timestamp: 100, id: NegentropyID(prefix: [0xAB, 0xCD, 0x01] + [UInt8](repeating: 7, count: 29)))
        let b = NegentropyItem(timestamp: 100, id: NegentropyID(prefix: [0xAB, 0xCD, 0x02] + [UInt8](repeating: 0, count: 29)))
        let c = NegentropyItem(timestamp: 105, id: .zero)
        #expect(NegentropyBound.minimal(between: a, and: b) == NegentropyBound(timestamp: 100, idPrefix: [0xAB, 0xCD, 0x02]))
        #expect(NegentropyBound.minimal(between: b, and: c) == NegentropyBound(timestamp: 105))
        let message = NegentropyMessage(ranges: [
            NegentropyRange(upperBound: NegentropyBound(timestamp: 100, idPrefix: [0xAB, 0xCD, 0x02]), payload: .skip),
            NegentropyRange(upperBound: NegentropyBound(timestamp: 105), payload: .idList([a.id])),
            NegentropyRange(upperBound: .infinity, payload: .fingerprint(NegentropyFingerprint(bytes: [UInt8](repeating: 9, count: 16))!)),
        ])
        let bytes = message.encoded
        // 0x61; 101 (1 + 100) as a varint, prefix length 3, the prefix, mode 0; then 6 (1 + 5), no prefix, mode 2, one id…
        #expect(Array(bytes.prefix(8)) == [0x61, 0x00 | 0x65, 3, 0xAB, 0xCD, 0x02, 0, 6])
        #expect(Array(bytes[8..<11]) == [0, 2, 1])
        #expect(Array(bytes[43..<47]) == [0, 0, 1, 9])
        #expect(try NegentropyMessage.decode(bytes) == message)
    }

    // MARK: Fingerprints

    @Test func fingerprintsAddIdsAsLittleEndianIntegersModTwoTo256ThenHashWithTheCount() throws {
        // Two ids whose little-endian sum carries through every byte: 0xFF…FF + 1 = 0 (mod 2^256).
        let allOnes = NegentropyItem(timestamp: 1, id: NegentropyID(prefix: [UInt8](repeating: 0xFF, count: 32)))
        let one = NegentropyItem(timestamp: 2, id: NegentropyID(prefix: [1] + [UInt8](repeating: 0, count: 31)))
        let storage = NegentropyStorage(items: [one, allOnes])
        let expected = Array(SHA256.hash([UInt8](repeating: 0, count: 32) + [2]).prefix(16))
        #expect(storage.fingerprint(0, 2).bytes == expected)
        #expect(storage.scannedFingerprint(0, 2).bytes == expected)
        // The empty range: a zero sum and a count of 0.
        #expect(storage.fingerprint(1, 1).bytes == Array(SHA256.hash([UInt8](repeating: 0, count: 33)).prefix(16)))
        // One id alone is itself, little-endian: byte 0 first.
        #expect(storage.fingerprint(1, 2).bytes == Array(SHA256.hash([1] + [UInt8](repeating: 0, count: 31) + [1]).prefix(16)))
    }

    @Test(arguments: [1 as UInt64, 2, 3, 4])
    func prefixSumFingerprintsEqualRescannedOnesOnEveryRange(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        // Ids heavy in 0xFF bytes so the additions carry across limbs.
        let items = (0..<300).map { _ in
            NegentropyItem(
                timestamp: UInt64(rng.below(50)), id: NegentropyID(prefix: (0..<32).map { _ in rng.chance(60) ? 0xFF : UInt8(rng.below(256)) }))
        }
        let storage = NegentropyStorage(items: items)
        for _ in 0..<400 {
            let a = rng.below(storage.count + 1)
            let b = rng.below(storage.count + 1)
            #expect(storage.fingerprint(min(a, b), max(a, b)) == storage.scannedFingerprint(min(a, b), max(a, b)))
        }
    }

    @Test func storageSortsByTimestampThenIdAndKeepsExactDuplicatesOnce() {
        let x = NegentropyID(prefix: [2])
        let y = NegentropyID(prefix: [1])
        let storage = NegentropyStorage(items: [
            NegentropyItem(timestamp: 5, id: x), NegentropyItem(timestamp: 5, id: y), NegentropyItem(timestamp: 3, id: x),
            NegentropyItem(timestamp: 5, id: y),
        ])
        #expect(storage.items == [NegentropyItem(timestamp: 3, id: x), NegentropyItem(timestamp: 5, id: y), NegentropyItem(timestamp: 5, id: x)])
        #expect(storage.lowerBound(NegentropyBound(timestamp: 5, idPrefix: [2]), from: 0, to: 3) == 2)
        #expect(storage.lowerBound(NegentropyBound(timestamp: 5), from: 0, to: 3) == 1)
        #expect(storage.lowerBound(.infinity, from: 0, to: 3) == 3)
    }

    // MARK: Reconciliation

    @Test func identicalSetsSettleInOneRoundTrip() throws {
        let world = NegentropyWorld(seed: 7, shared: 5_000, onlyOurs: 0, onlyTheirs: 0, timeSpan: 86_400)
        let run = try reconcile(world)
        #expect(run.rounds == 1)
        #expect(run.have.isEmpty && run.need.isEmpty)
    }

    @Test func emptySidesLearnTheWholeOtherSet() throws {
        let download = try reconcile(NegentropyWorld(seed: 8, shared: 0, onlyOurs: 0, onlyTheirs: 2_000, timeSpan: 1_000), frameLimit: 4096)
        #expect(download.have.isEmpty)
        #expect(download.need.count == 2_000)
        #expect(Set(download.need).count == 2_000)
        let upload = try reconcile(NegentropyWorld(seed: 9, shared: 0, onlyOurs: 2_000, onlyTheirs: 0, timeSpan: 1_000), frameLimit: 4096)
        #expect(upload.need.isEmpty)
        #expect(upload.have.count == 2_000)
        let nothing = try reconcile(NegentropyWorld(seed: 10, shared: 0, onlyOurs: 0, onlyTheirs: 0, timeSpan: 1))
        #expect(nothing.rounds == 1 && nothing.have.isEmpty && nothing.need.isEmpty)
    }

    /// The property: for random sets and differences, with and without frame limits, with
    /// runs of equal timestamps and with ids sharing long prefixes, the initiator learns exactly
    /// the symmetric difference, each id once; and with the roles swapped, the same difference
    /// comes out mirrored.
    @Test(arguments: Array(UInt64(1)...UInt64(60)))
    func bothRolesReachExactlyTheSymmetricDifference(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed &* 0x9E37)
        let world = NegentropyWorld(
            seed: seed, shared: rng.below(3_000), onlyOurs: rng.below(seed % 3 == 0 ? 400 : 40),
            onlyTheirs: rng.below(seed % 4 == 0 ? 400 : 40), timeSpan: rng.pick([1, 3, 50, 100_000]),
            sharedPrefixBytes: rng.pick([0, 0, 3, 29]))
        let limit = rng.pick([0, 4096, 6000, 50_000])
        let run = try reconcile(world, frameLimit: limit, responderLimit: rng.pick([limit, 0, 4096]))
        #expect(Set(run.have) == world.expectedHave)
        #expect(Set(run.need) == world.expectedNeed)
        #expect(run.have.count == world.expectedHave.count, "an id reported twice")
        #expect(run.need.count == world.expectedNeed.count, "an id reported twice")

        var mirrored = world
        swap(&mirrored.ours, &mirrored.theirs)
        let back = try reconcile(mirrored, frameLimit: limit)
        #expect(Set(back.have) == world.expectedNeed)
        #expect(Set(back.need) == world.expectedHave)
    }

    @Test func aFrameLimitSpreadsALargeDifferenceOverMoreRoundsWithoutLosingAnyId() throws {
        let world = NegentropyWorld(seed: 11, shared: 1_000, onlyOurs: 300, onlyTheirs: 3_000, timeSpan: 10_000)
        let unlimited = try reconcile(world)
        let limited = try reconcile(world, frameLimit: 4096)
        #expect(limited.largestMessage <= 4096)
        #expect(unlimited.largestMessage > 4096)
        #expect(limited.rounds > unlimited.rounds)
        #expect(Set(limited.need) == world.expectedNeed)
        #expect(Set(limited.have) == world.expectedHave)
    }

    @Test func aSmallDifferenceInALargeSetCostsAFewRoundsAndLittleTraffic() throws {
        let world = NegentropyWorld(seed: 12, shared: 99_000, onlyOurs: 0, onlyTheirs: 1_000, timeSpan: 30 * 86_400)
        let run = try reconcile(world, frameLimit: 250_000)
        #expect(Set(run.need) == world.expectedNeed)
        // Sending the ids alone would be 3.2 MB (and the events about 45 MB). Each difference
        // costs about one bucket of under 32 ids each way at the last level.
        #expect(run.bytesSent + run.bytesReceived < 3_200_000 / 3, "\(run.bytesSent + run.bytesReceived) bytes")
        #expect(run.rounds <= 6, "\(run.rounds) rounds")
    }

    // MARK: Versions and bad input

    @Test func aResponderAnswersAnotherVersionWithTheOneByteOfItsOwnAndAnInitiatorRefusesIt() throws {
        let responder = Negentropy(storage: NegentropyStorage(items: []))
        #expect(try responder.respond([0x62, 0x00]) == [0x61])
        let initiator = Negentropy(storage: NegentropyStorage(items: []))
        expectSoftchatError(.invalidNegentropyMessage, mentioning: ["0x62", "0x61"]) { _ = try initiator.reconcile([0x62]) }
    }

    @Test(
        arguments: [
            ([], "ends before the protocol version"),
            ([0x50], "protocol version 0x50"),
            ([0x61, 0x01], "ends before range 0 id prefix length"),
            ([0x61, 0x01, 0x21], "33 bytes"),
            ([0x61, 0x01, 0x02, 0xAA], "ends inside range 0 id prefix"),
            ([0x61, 0x00, 0x00, 0x03], "unknown mode 3"),
            ([0x61, 0x00, 0x00, 0x01, 1, 2, 3], "ends inside range 0 fingerprint"),
            ([0x61, 0x00, 0x00, 0x02, 0x05] + [UInt8](repeating: 0, count: 64), "5 ids announced, 64 bytes left"),
            ([0x61, 0x80, 0x01, 0x00, 0x00], "leading zero digit"),
            ([0x61] + [UInt8](repeating: 0xFF, count: 10) + [0x7F], "over 64 bits"),
            ([0x61, 0x05, 0x00, 0x00, 0x01, 0x01, 0x00], "ends before range 1 mode"),
            ([0x61, 0x05, 0x01, 0x09, 0x00, 0x01, 0x01, 0x05, 0x00], "below the previous range"),
        ] as [([UInt8], String)])
    func malformedMessagesAreRefusedWithTheirPlace(bytes: [UInt8], mentioning: String) {
        expectSoftchatError(.invalidNegentropyMessage, mentioning: [mentioning]) { _ = try NegentropyMessage.decode(bytes) }
        let responder = Negentropy(storage: NegentropyStorage(items: []))
        if bytes.first.map({ $0 & 0xF0 != 0x60 || $0 == 0x61 }) ?? true {
            expectSoftchatError(.invalidNegentropyMessage) { _ = try responder.respond(bytes) }
        }
    }

    // MARK: NIP-77 frames

    @Test func nip77ClientFramesParseAndRoundTrip() throws {
        let filter = try RelayFilter.fromJSON(##"{"kinds":[1059],"#p":["\##(String(repeating: "a", count: 64))"]}"##)
        for frame: ClientRelayFrame in [
            .negOpen(subscriptionID: "neg-1", filter: filter, message: [0x61, 0x00, 0x00, 0x02, 0x00]),
            .negMessage(subscriptionID: "neg-1", message: [0x61]),
            .negClose(subscriptionID: "neg-1"),
        ] {
            let text = frame.toJSON()
            #expect(try parseClientRelayFrame(text) == frame)
            #expect(try parseClientRelayFrame(text).verb == frame.verb)
        }
        #expect(
            try parseClientRelayFrame(#"["NEG-OPEN","s",{"kinds":[1]},"6100000200"]"#)
                == .negOpen(subscriptionID: "s", filter: try RelayFilter.fromJSON(#"{"kinds":[1]}"#), message: [0x61, 0, 0, 2, 0]))
    }

    @Test func nip77RelayFramesParseAndRoundTripAndNegErrKeepsItsPrefix() throws {
        for frame: RelayResponseFrame in [
            .negMessage(subscriptionID: "neg-1", message: [0x61, 0x00, 0x00, 0x00]),
            .negError(subscriptionID: "neg-1", message: RelayMessage("blocked: this query is too big")),
        ] {
            #expect(try parseRelayResponseFrame(frame.toJSON()) == frame)
        }
        guard case .negError(_, let m) = try parseRelayResponseFrame(#"["NEG-ERR","x","blocked: too many records",50000]"#) else {
            Issue.record("NEG-ERR did not parse as one")
            return
        }
        #expect(m.prefix == "blocked")
    }

    @Test(arguments: [
        (#"["NEG-MSG","s","61AB"]"#, "lowercase hex"),
        (#"["NEG-MSG","s","610"]"#, "whole bytes"),
        (#"["NEG-MSG","s",""]"#, "non-empty"),
        (#"["NEG-MSG","s",97]"#, "must be a string"),
        (#"["NEG-MSG","","61"]"#, "subscription id"),
        (#"["NEG-MSG","s"]"#, "3 elements"),
        (#"["NEG-ERR","s"]"#, "3 or 4 elements"),
        (#"["NEG-ERR","s","blocked: x","many"]"#, "record limit"),
    ])
    func malformedNip77RelayFramesAreRefused(text: String, mentioning: String) {
        expectSoftchatError(.invalidRelayFrame, mentioning: [mentioning]) { _ = try parseRelayResponseFrame(text) }
    }

    @Test(arguments: [
        (#"["NEG-OPEN","s",{"kinds":[1]}]"#, SoftchatErrorCode.invalidRelayFrame, "4 elements"),
        (#"["NEG-OPEN","s",{"kinds":[1]},"6"]"#, .invalidRelayFrame, "whole bytes"),
        (#"["NEG-OPEN","s",{"kind":[1]},"61"]"#, .invalidRelayFilter, "kind"),
        (#"["NEG-OPEN","s",[],"61"]"#, .invalidRelayFilter, "object"),
        (#"["NEG-CLOSE","s","x"]"#, .invalidRelayFrame, "2 elements"),
    ])
    func malformedNip77ClientFramesAreRefused(text: String, code: SoftchatErrorCode, mentioning: String) {
        expectSoftchatError(code, mentioning: [mentioning]) { _ = try parseClientRelayFrame(text) }
    }
}
