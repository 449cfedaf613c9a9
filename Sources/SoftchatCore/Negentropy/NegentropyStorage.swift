/// 16 bytes: the first half of SHA-256 over a range's id sum (mod 2^256, little-endian) and
/// its item count as a varint.
public struct NegentropyFingerprint: Sendable, Hashable {
    /// The 16 bytes.
    public let bytes: [UInt8]

    /// A fingerprint from its bytes.
    ///
    /// - Parameter bytes: Exactly 16 bytes; any other count gives nil.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    init(unchecked bytes: [UInt8]) { self.bytes = bytes }
}

/// The sorted items of one side of a reconciliation, with prefix sums of their ids, so the
/// fingerprint of any range costs two subtractions and one SHA-256 instead of a rescan of the
/// range (`scannedFingerprint` is that rescan, kept as the benchmark's baseline and the tests'
/// reference). Building it sorts once: O(n log n), 72 bytes per item.
public struct NegentropyStorage: Sendable {
    /// Ascending by timestamp then id, without duplicates.
    public let items: [NegentropyItem]
    /// `sums[4*i ..< 4*i+4]`: the little-endian 64-bit limbs of the sum of the first `i` ids.
    private let sums: [UInt64]

    /// Sorts the items, keeps each once and builds the prefix sums.
    ///
    /// - Parameter items: This side's items, in any order; exact duplicates are kept once.
    public init(items: [NegentropyItem]) {
        var sorted = items
        if !Self.isStrictlyAscending(sorted) {
            sorted.sort()
            var unique: [NegentropyItem] = []
            unique.reserveCapacity(sorted.count)
            for item in sorted where unique.last != item { unique.append(item) }
            sorted = unique
        }
        self.items = sorted
        var sums = [UInt64](repeating: 0, count: 4 * (sorted.count + 1))
        var a: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        for (i, item) in sorted.enumerated() {
            a = Self.add(a, item.id)
            let base = 4 * (i + 1)
            sums[base] = a.0
            sums[base + 1] = a.1
            sums[base + 2] = a.2
            sums[base + 3] = a.3
        }
        self.sums = sums
    }

    private static func isStrictlyAscending(_ items: [NegentropyItem]) -> Bool {
        var i = 1
        while i < items.count {
            guard items[i - 1] < items[i] else { return false }
            i += 1
        }
        return true
    }

    /// The number of items.
    public var count: Int { items.count }

    /// The first index in `from..<to` whose item is at or above `bound` (`to` when none is).
    ///
    /// - Parameters:
    ///   - bound: The bound to search for.
    ///   - from: The first index to consider, at least 0.
    ///   - to: The end of the search, at most ``NegentropyStorage/count``.
    /// - Returns: The index, by binary search.
    public func lowerBound(_ bound: NegentropyBound, from: Int, to: Int) -> Int {
        let key = bound.item
        var lo = from
        var hi = to
        while lo < hi {
            let mid = (lo + hi) / 2
            if items[mid] < key { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The fingerprint of `items[lower..<upper]`, from the prefix sums.
    ///
    /// - Parameters:
    ///   - lower: The first item's index.
    ///   - upper: The index past the last item; `0 <= lower <= upper <= count`, or the call traps.
    /// - Returns: The range's fingerprint.
    public func fingerprint(_ lower: Int, _ upper: Int) -> NegentropyFingerprint {
        let b = 4 * upper
        let a = 4 * lower
        let (d0, c0) = sums[b].subtractingReportingOverflow(sums[a])
        var (d1, c1) = sums[b + 1].subtractingReportingOverflow(sums[a + 1])
        var x = d1.subtractingReportingOverflow(c0 ? 1 : 0)
        d1 = x.partialValue
        c1 = c1 || x.overflow
        var (d2, c2) = sums[b + 2].subtractingReportingOverflow(sums[a + 2])
        x = d2.subtractingReportingOverflow(c1 ? 1 : 0)
        d2 = x.partialValue
        c2 = c2 || x.overflow
        let d3 = sums[b + 3] &- sums[a + 3] &- (c2 ? 1 : 0)
        return Self.digest((d0, d1, d2, d3), count: upper - lower)
    }

    /// The same fingerprint, summing the range's ids one by one.
    ///
    /// - Parameters:
    ///   - lower: The first item's index.
    ///   - upper: The index past the last item; `0 <= lower <= upper <= count`, or the call traps.
    /// - Returns: The range's fingerprint, equal to ``NegentropyStorage/fingerprint(_:_:)``'s.
    public func scannedFingerprint(_ lower: Int, _ upper: Int) -> NegentropyFingerprint {
        var a: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        for i in lower..<upper { a = Self.add(a, items[i].id) }
        return Self.digest(a, count: upper - lower)
    }

    /// `a + id` mod 2^256, `id` read as a little-endian integer.
    @inline(__always)
    private static func add(_ a: (UInt64, UInt64, UInt64, UInt64), _ id: NegentropyID) -> (UInt64, UInt64, UInt64, UInt64) {
        let (s0, c0) = a.0.addingReportingOverflow(id.w0.byteSwapped)
        var (s1, c1) = a.1.addingReportingOverflow(id.w1.byteSwapped)
        var x = s1.addingReportingOverflow(c0 ? 1 : 0)
        s1 = x.partialValue
        c1 = c1 || x.overflow
        var (s2, c2) = a.2.addingReportingOverflow(id.w2.byteSwapped)
        x = s2.addingReportingOverflow(c1 ? 1 : 0)
        s2 = x.partialValue
        c2 = c2 || x.overflow
        let s3 = a.3 &+ id.w3.byteSwapped &+ (c2 ? 1 : 0)
        return (s0, s1, s2, s3)
    }

    private static func digest(_ sum: (UInt64, UInt64, UInt64, UInt64), count: Int) -> NegentropyFingerprint {
        var input = [UInt8]()
        input.reserveCapacity(42)
        for limb in [sum.0, sum.1, sum.2, sum.3] {
            for k in 0..<8 { input.append(UInt8(truncatingIfNeeded: limb >> UInt64(8 * k))) }
        }
        NegentropyVarint.append(UInt64(count), to: &input)
        return NegentropyFingerprint(unchecked: Array(SHA256.hash(input).prefix(16)))
    }
}
