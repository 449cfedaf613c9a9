import SoftchatCore
import SoftchatJSON
import Testing

/// NIP-45 COUNT: HyperLogLog registers (hex, merge, estimate, relay-side add), the deterministic
/// offset for a filter, and combining answers from several relays.
@Suite struct WireCountTests {
    static let nip45HLL = WireRelayFrameTests.nip45HLL

    /// `n` distinct random 32-byte pubkeys, the same on every run for a seed.
    static func keys(_ n: Int, seed: UInt64) -> [[UInt8]] {
        var rng = WireRNG(seed: seed)
        return (0..<n).map { _ in rng.bytes(32) }
    }

    static func sketch(_ keys: some Sequence<[UInt8]>, offset: Int = 16) -> HyperLogLog {
        var hll = HyperLogLog()
        for key in keys { hll.add(pubkey: key, offset: offset) }
        return hll
    }

    static func hll(_ registers: [Int: UInt8]) -> HyperLogLog {
        var bytes = [UInt8](repeating: 0, count: 256)
        for (i, r) in registers { bytes[i] = r }
        return HyperLogLog(hex: Hex.encode(bytes))!
    }

    // MARK: Registers

    @Test func hexRoundTripsAndOnlyExactly512LowercaseHexIsAccepted() throws {
        let h = try #require(HyperLogLog(hex: Self.nip45HLL))
        #expect(h.hex == Self.nip45HLL && h.registers.count == HyperLogLog.registerCount && HyperLogLog.registerCount == 256)
        #expect(h.registers.prefix(4) == [6, 7, 7, 5] && h.registers.last == 8)
        #expect(HyperLogLog().hex == String(repeating: "0", count: 512))
        #expect(HyperLogLog(hex: HyperLogLog().hex) == HyperLogLog())
        for bad in [
            String(Self.nip45HLL.dropLast(2)), Self.nip45HLL + "00", String(Self.nip45HLL.dropLast()), Self.nip45HLL.uppercased(),
            "", "0g" + Self.nip45HLL.dropFirst(2),
        ] {
            #expect(HyperLogLog(hex: bad) == nil, "\(bad.count) characters")
        }
    }

    @Test func mergeIsRegisterWiseMaximumCommutativeAndIdempotent() throws {
        let a = Self.hll([0: 3, 1: 9, 7: 1, 255: 4])
        let b = Self.hll([0: 5, 1: 2, 8: 6, 255: 4])
        var ab = a
        var ba = b
        ab.merge(b)
        ba.merge(a)
        #expect(ab == ba)
        #expect(ab == Self.hll([0: 5, 1: 9, 7: 1, 8: 6, 255: 4]))
        var aa = a
        aa.merge(a)
        #expect(aa == a)
        var withEmpty = a
        withEmpty.merge(HyperLogLog())
        #expect(withEmpty == a)
        let real = try #require(HyperLogLog(hex: Self.nip45HLL))
        var merged = real
        merged.merge(ab)
        for i in 0..<256 { #expect(merged.registers[i] == max(real.registers[i], ab.registers[i]), "register \(i)") }
    }

    @Test func addUsesTheByteAtOffsetAsIndexAndLeadingZerosAfterItPlusOneAsRank() {
        var pubkey = [UInt8](repeating: 0xFF, count: 32)
        pubkey[10] = 42  // register index
        pubkey[11] = 0b0001_0000  // 3 leading zero bits → rank 4
        var h = HyperLogLog()
        h.add(pubkey: pubkey, offset: 10)
        #expect(h.registers[42] == 4 && h.registers.enumerated().allSatisfy { $0.offset == 42 || $0.element == 0 })

        pubkey[11] = 0
        pubkey[12] = 0b0100_0000  // 8 + 1 zeros → rank 10
        h.add(pubkey: pubkey, offset: 10)
        #expect(h.registers[42] == 10)
        pubkey[11] = 0xFF  // rank 1 never lowers a register
        h.add(pubkey: pubkey, offset: 10)
        #expect(h.registers[42] == 10)

        var allZero = [UInt8](repeating: 0, count: 32)
        allZero[8] = 7
        var z = HyperLogLog()
        z.add(pubkey: allZero, offset: 8)
        #expect(z.registers[7] == 23 * 8 + 1, "all 23 bytes after offset 8 are zero")
    }

    @Test func emptySketchEstimatesZero() {
        #expect(HyperLogLog().estimate() == 0)
        #expect(CountResult.combine([CountResult(count: 0, hll: HyperLogLog())])?.count == 0)
    }

    @Test(arguments: [10, 100, 1_000, 10_000])
    func estimateOfNDistinctKeysIsWithin15Percent(_ n: Int) {
        for (seed, offset) in [(UInt64(1), 8), (2, 16), (3, 23)] {
            let estimate = Self.sketch(Self.keys(n, seed: seed &* 0x1000 &+ UInt64(n)), offset: offset).estimate()
            let tolerance = n == 10 ? 3.0 : 0.15 * Double(n)
            #expect(abs(estimate - Double(n)) <= tolerance, "n \(n), offset \(offset): estimate \(estimate)")
        }
    }

    @Test func mergedSketchesOfOverlappingSetsEstimateTheUnion() {
        let all = Self.keys(10_000, seed: 0xC0FFEE)
        let left = Self.sketch(all[0..<6_000])
        let right = Self.sketch(all[4_000...])
        var union = left
        union.merge(right)
        // Register-wise maximum of two sketches is exactly the sketch of the union.
        #expect(union == Self.sketch(all))
        #expect(abs(union.estimate() - 10_000) <= 1_500, "\(union.estimate())")
        #expect(left.estimate() < 7_000 && right.estimate() < 7_000 && union.estimate() > 8_500, "the overlap is not double counted")
    }

    // MARK: CountResult.combine

    @Test func combineWithEveryAnswerCarryingRegistersMergesThemAndIsApproximate() throws {
        let all = Self.keys(3_000, seed: 0xAB)
        let a = Self.sketch(all[0..<2_000])
        let b = Self.sketch(all[1_000...])
        let combined = try #require(CountResult.combine([CountResult(count: 2_000, hll: a), CountResult(count: 2_000, hll: b)]))
        var merged = a
        merged.merge(b)
        #expect(combined.hll == merged && combined.approximate)
        #expect(combined.count == Int64(merged.estimate().rounded()))
        #expect(abs(Double(combined.count) - 3_000) <= 450, "\(combined.count), not 4,000")
    }

    @Test func combineWithoutRegistersTakesTheMaximumAndIsApproximateWhenCountsDiffer() throws {
        let differ = try #require(CountResult.combine([CountResult(count: 5), CountResult(count: 9), CountResult(count: 7)]))
        #expect(differ == CountResult(count: 9, approximate: true))
        let agree = try #require(CountResult.combine([CountResult(count: 5), CountResult(count: 5)]))
        #expect(agree == CountResult(count: 5, approximate: false))
        let oneApproximate = try #require(CountResult.combine([CountResult(count: 5), CountResult(count: 5, approximate: true)]))
        #expect(oneApproximate == CountResult(count: 5, approximate: true))
        #expect(CountResult.combine([CountResult(count: 4)]) == CountResult(count: 4))
        #expect(CountResult.combine([]) == nil)
    }

    @Test func combineWithSomeAnswersMissingRegistersFallsBackToTheMaximum() throws {
        let sketch = Self.sketch(Self.keys(100, seed: 5))
        let mixed = try #require(CountResult.combine([CountResult(count: 100, hll: sketch), CountResult(count: 120)]))
        #expect(mixed == CountResult(count: 120, approximate: true) && mixed.hll == nil)
    }

    @Test func countResultsRoundTripThroughRelayCountFrames() throws {
        let sketch = Self.sketch(Self.keys(50, seed: 6))
        for result in [CountResult(count: 238), CountResult(count: 50, approximate: true, hll: sketch), CountResult(count: 0, hll: sketch)] {
            let frame = RelayResponseFrame.count(subscriptionID: "cnt", result: result)
            #expect(try parseRelayResponseFrame(frame.toJSON()) == frame)
        }
        // "approximate": false is the default and is not written back.
        let explicit = try parseRelayResponseFrame(#"["COUNT","c",{"count":3,"approximate":false}]"#)
        #expect(explicit == .count(subscriptionID: "c", result: CountResult(count: 3)))
    }

    // MARK: NIP-45 offset

    func offset(_ text: String) throws -> Int? { HyperLogLog.offset(for: try RelayFilter.fromJSON(text)) }

    /// 64 hex characters with `digit` at position 32.
    static func hex(digit: Character, filler: Character = "0") -> String {
        String(repeating: filler, count: 32) + String(digit) + String(repeating: filler, count: 31)
    }

    @Test func offsetOfAHexIdOrPubkeyIsItsCharacterAt32Plus8() throws {
        #expect(try offset(##"{"#e":["\##(Self.hex(digit: "f"))"],"kinds":[7]}"##) == 23)
        #expect(try offset(##"{"kinds":[3],"#p":["\##(Self.hex(digit: "0", filler: "f"))"]}"##) == 8)
        #expect(try offset(##"{"#E":["\##(Self.hex(digit: "a"))"]}"##) == 18)
        let pk = WireKeys.bob.publicKeyHex
        let expected = Int(pk[pk.index(pk.startIndex, offsetBy: 32)].hexDigitValue!) + 8
        #expect(try offset(##"{"#p":["\##(pk)"]}"##) == expected)
    }

    @Test func offsetOfAnAddressUsesItsPubkey() throws {
        let pk = Self.hex(digit: "c")
        #expect(try offset(##"{"#a":["30023:\##(pk):my-article"]}"##) == 20)
        #expect(try offset(##"{"#a":["30023:\##(pk):"]}"##) == 20, "empty d tag")
        #expect(try offset(##"{"#a":["30023:\##(pk):with:colons"]}"##) == 20, "colons in the d tag")
    }

    @Test func offsetOfAnyOtherStringIsFromItsSHA256() throws {
        // sha256("hello") = 2cf24dba5fb0a30e26e83b2ac5b9e29e 1b161e…: character 32 is "1".
        #expect(Hex.encode(SHA256.hash(Array("hello".utf8))) == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        #expect(try offset(##"{"#t":["hello"]}"##) == 9)
        for other in [
            "nostr", "30023:not-a-pubkey:d", "30023:\(Self.hex(digit: "c"))", Self.hex(digit: "c").uppercased(),
            String(Self.hex(digit: "c").dropLast()), "", "🤙",
        ] {
            let digest = Array(Hex.encode(SHA256.hash(Array(other.utf8))))
            let text = JSONValue.object(JSONObject(["#t": [.string(other)]])).jsonText
            #expect(try offset(text) == digest[32].hexDigitValue! + 8, "\(other)")
        }
    }

    @Test func offsetUsesTheFirstTagConditionAndItsFirstValue() throws {
        let f = Self.hex(digit: "f")
        let one = Self.hex(digit: "1")
        #expect(try offset(##"{"#p":["\##(f)","\##(one)"],"#e":["\##(one)"]}"##) == 23)
        #expect(try offset(##"{"#e":["\##(one)"],"#p":["\##(f)"]}"##) == 9)
        #expect(try offset(##"{"kinds":[7],"#e":["\##(one)"]}"##) == 9, "non-tag keys before it do not count")
    }

    @Test func offsetWithoutATagConditionIsNil() throws {
        #expect(try offset("{}") == nil)
        #expect(try offset(#"{"kinds":[1],"authors":["ab"],"ids":["cd"],"since":1,"until":2,"limit":3}"#) == nil)
        #expect(try offset(##"{"#e":[]}"##) == nil, "an empty first tag list has no first value")
    }

    @Test func relaySideSketchOfMatchingEventsEstimatesTheirAuthors() throws {
        // A relay answering {"kinds":[7],"#e":[id]} adds each matching event's pubkey at the filter's offset.
        let target = Self.hex(digit: "4")
        let filter = try RelayFilter.fromJSON(##"{"kinds":[7],"#e":["\##(target)"]}"##)
        let off = try #require(HyperLogLog.offset(for: filter))
        #expect(off == 12)
        let reactors = Self.keys(400, seed: 7)
        let sketch = Self.sketch(reactors, offset: off)
        let answer = try parseRelayResponseFrame(
            RelayResponseFrame.count(
                subscriptionID: "r",
                result:
                    CountResult(count: 400, hll: sketch)
            ).toJSON())
        guard case .count(_, let result) = answer else {
            Issue.record("not .count")
            return
        }
        #expect(abs((result.hll?.estimate() ?? 0) - 400) <= 60)
    }
}
