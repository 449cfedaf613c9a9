/// SplitMix64 (Steele, Lea and Flood): a tiny, fast, seeded generator. Everything in Softchat
/// that needs reproducible choices uses it — reconnect jitter, benchmark corpora, the fault
/// proxy, the account torture and the property tests — so a seed replays a run exactly.
/// Not for secrets: keys and nonces come from the OS CSPRNG (`SecureRandom`).
package struct SplitMix64: RandomNumberGenerator, Sendable, Hashable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `0..<n` (modulo bias is irrelevant at these sizes and keeps runs stable).
    package mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// A uniformly distributed value in `0..<1`.
    package mutating func unitInterval() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// True `percent` times in a hundred.
    package mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }

    package mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &self)] }

    package mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}
