public import SoftchatJSON

/// A NIP-45 COUNT answer: the count, whether it is approximate, and optionally the relay's
/// HyperLogLog registers so counts from several relays can be merged without double counting.
public struct CountResult: Sendable, Hashable {
    /// The number of matching events (never negative in a parsed answer).
    public let count: Int64
    /// Whether the count is an estimate: the relay said so, or ``CountResult/combine(_:)`` made it.
    public let approximate: Bool
    /// The relay's HyperLogLog registers, when it sent them.
    public let hll: HyperLogLog?

    /// A result from its fields.
    ///
    /// - Parameters:
    ///   - count: The number of matching events.
    ///   - approximate: Whether the count is an estimate (default false).
    ///   - hll: The HyperLogLog registers, if any (default none).
    public init(count: Int64, approximate: Bool = false, hll: HyperLogLog? = nil) {
        self.count = count
        self.approximate = approximate
        self.hll = hll
    }

    init(json value: JSONValue) throws(SoftchatError) {
        guard case .object(let o) = value else { throw .invalidRelayFrame("COUNT result must be an object, not \(value.typeName)") }
        var count: Int64?
        var approximate = false
        var hll: HyperLogLog?
        for m in o {
            switch m.key {
            case "count":
                guard case .integer(let n) = m.value, n >= 0 else {
                    throw .invalidRelayFrame("COUNT result \"count\" must be a non-negative integer, not \(m.value.jsonText)")
                }
                count = n
            case "approximate":
                guard case .bool(let b) = m.value else { throw .invalidRelayFrame("COUNT result \"approximate\" must be a boolean") }
                approximate = b
            case "hll":
                guard case .string(let s) = m.value, let registers = HyperLogLog(hex: s) else {
                    throw .invalidRelayFrame("COUNT result \"hll\" must be \(HyperLogLog.registerCount * 2) lowercase hex characters")
                }
                hll = registers
            default:
                throw .invalidRelayFrame("COUNT result has unknown key \"\(m.key)\"")
            }
        }
        guard let count else { throw .invalidRelayFrame("COUNT result has no \"count\"") }
        self.init(count: count, approximate: approximate, hll: hll)
    }

    /// The result as NIP-45 writes it: `count`, plus `approximate` only when true and `hll` (hex)
    /// only when present.
    public var jsonValue: JSONValue {
        var o = JSONObject()
        o.append("count", .integer(count))
        if approximate { o.append("approximate", true) }
        if let hll { o.append("hll", .string(hll.hex)) }
        return .object(o)
    }

    /// Combines answers for the same query from several relays: with every answer carrying
    /// registers, the merged HyperLogLog estimate (approximate, at most `Int64.max` whatever the
    /// registers say); otherwise the largest count,
    /// a lower bound (approximate when the answers disagree or any was approximate).
    ///
    /// - Parameter results: The relays' answers.
    /// - Returns: The combined answer, or nil when `results` is empty.
    public static func combine(_ results: [CountResult]) -> CountResult? {
        guard let first = results.first else { return nil }
        if results.allSatisfy({ $0.hll != nil }) {
            var merged = first.hll!
            for r in results.dropFirst() { merged.merge(r.hll!) }
            return CountResult(count: Self.saturatingCount(merged.estimate()), approximate: true, hll: merged)
        }
        let maximum = results.map { $0.count }.max()!
        let exact = results.allSatisfy { !$0.approximate } && Set(results.map { $0.count }).count == 1
        return CountResult(count: maximum, approximate: !exact)
    }

    /// An estimate as a count: rounded, and held to 0…`Int64.max`. A relay chooses the
    /// registers, and 256 registers of 255 estimate about 10^79, which `Int64(_:)` would trap on.
    static func saturatingCount(_ estimate: Double) -> Int64 {
        let rounded = estimate.rounded()
        guard rounded.isFinite, rounded < Double(Int64.max) else { return rounded.isNaN ? 0 : .max }
        return rounded <= 0 ? 0 : Int64(rounded)
    }
}

/// NIP-45's HyperLogLog: 256 one-byte registers (m = 256), merged register-wise by maximum.
public struct HyperLogLog: Sendable, Hashable {
    /// The number of registers, NIP-45's m = 256.
    public static let registerCount = 256
    /// The 256 registers, each the highest rank added at its index.
    public private(set) var registers: [UInt8]

    /// An empty sketch: every register 0.
    public init() { registers = [UInt8](repeating: 0, count: Self.registerCount) }

    /// A sketch from its registers as 512 lowercase hex characters (NIP-45's `hll`); nil for any
    /// other text.
    ///
    /// - Parameter hex: The registers' text.
    public init?(hex: String) {
        guard let bytes = Hex.decodeLowercase(hex), bytes.count == Self.registerCount else { return nil }
        registers = bytes
    }

    /// The registers as 512 lowercase hex characters (NIP-45's `hll`).
    public var hex: String { Hex.encode(registers) }

    /// Register-wise maximum: the sketch of the union of both sets.
    ///
    /// - Parameter other: The sketch to merge into this one.
    public mutating func merge(_ other: HyperLogLog) {
        for i in 0..<Self.registerCount { registers[i] = max(registers[i], other.registers[i]) }
    }

    /// The cardinality estimate (Flajolet et al.), with linear counting for small sets.
    ///
    /// - Returns: The estimated number of distinct pubkeys added to the sketch, and to any merged
    ///   into it.
    public func estimate() -> Double {
        let m = Double(Self.registerCount)
        let alpha = 0.7213 / (1 + 1.079 / m)
        var sum = 0.0
        var zeros = 0
        for r in registers {
            sum += Double(sign: .plus, exponent: -Int(r), significand: 1)
            if r == 0 { zeros += 1 }
        }
        let raw = alpha * m * m / sum
        if raw <= 2.5 * m && zeros > 0 { return m * Math.log(m / Double(zeros)) }
        return raw
    }

    /// Adds one event the way NIP-45 relays do: the register index is the byte at `offset` of
    /// the 32-byte pubkey, the rank the leading zero bits after it plus one.
    ///
    /// - Parameters:
    ///   - pubkey: The event's 32-byte pubkey; any other length traps.
    ///   - offset: The filter's offset (``HyperLogLog/offset(for:)``), 0–30; any other value traps.
    public mutating func add(pubkey: [UInt8], offset: Int) {
        precondition(pubkey.count == 32 && offset >= 0 && offset < 31)
        let index = Int(pubkey[offset])
        var zeros = 0
        for byte in pubkey[(offset + 1)...] {
            if byte == 0 {
                zeros += 8
                continue
            }
            zeros += byte.leadingZeroBitCount
            break
        }
        registers[index] = max(registers[index], UInt8(min(zeros + 1, 255)))
    }

    /// NIP-45's deterministic offset for a filter: from the first value of its first tag
    /// condition (hex id or pubkey as is, an address's pubkey, anything else hashed), the hex
    /// digit at position 32 plus 8.
    ///
    /// - Parameter filter: The COUNT's filter.
    /// - Returns: An offset of 8–23, or nil when the filter has no tag condition.
    public static func offset(for filter: RelayFilter) -> Int? {
        guard let first = filter.tagConditions.first?.values.first else { return nil }
        var hex = first
        let parts = first.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count >= 3, Hex.isLowercase(String(parts[1]), count: 64) {
            hex = String(parts[1])
        } else if !Hex.isLowercase(first, count: 64) {
            hex = Hex.encode(SHA256.hash(Array(first.utf8)))
        }
        let digit = Array(hex.utf8)[32]
        return Int(Hex.nibble(digit)!) + 8
    }
}
