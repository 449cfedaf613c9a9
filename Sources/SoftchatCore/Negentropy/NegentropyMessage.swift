/// Negentropy's varint: base-128 digits, most significant first, the high bit set on every byte
/// but the last, as few digits as possible.
enum NegentropyVarint {
    static func append(_ value: UInt64, to out: inout [UInt8]) {
        var digits = 1
        while digits < 10 && value >> UInt64(7 * digits) != 0 { digits += 1 }
        for k in stride(from: digits - 1, through: 0, by: -1) {
            let digit = UInt8(truncatingIfNeeded: value >> UInt64(7 * k)) & 0x7F
            out.append(k == 0 ? digit : digit | 0x80)
        }
    }
}

/// How a range's payload reads.
public enum NegentropyPayload: Sendable, Hashable {
    /// The sender does not want this range processed further.
    case skip
    /// A digest of every id the sender has in the range.
    case fingerprint(NegentropyFingerprint)
    /// Every id the sender has in the range.
    case idList([NegentropyID])
}

/// One range of a message: it runs from the previous range's upper bound (or zero) up to
/// `upperBound`, exclusive.
public struct NegentropyRange: Sendable, Hashable {
    /// Where the range ends, exclusive.
    public var upperBound: NegentropyBound
    /// What the sender says about the range.
    public var payload: NegentropyPayload

    /// A range from its upper bound and payload.
    ///
    /// - Parameters:
    ///   - upperBound: Where the range ends, exclusive.
    ///   - payload: What the sender says about the range.
    public init(upperBound: NegentropyBound, payload: NegentropyPayload) {
        self.upperBound = upperBound
        self.payload = payload
    }
}

/// A Negentropy v1 message (hoytech/negentropy's `docs/negentropy-protocol-v1.md`): the
/// version byte 0x61, then ranges in ascending order. Decoding is strict and bounded by the
/// input: a truncated field, a varint over 64 bits or longer than needed, an id prefix over 32
/// bytes, an unknown mode, an id list longer than the bytes left, or a bound below the one
/// before it is `invalid_negentropy_message`.
public struct NegentropyMessage: Sendable, Hashable {
    /// Protocol version 1.
    public static let version: UInt8 = 0x61

    /// The ranges, ascending by upper bound.
    public var ranges: [NegentropyRange]

    /// A message of the given ranges.
    ///
    /// - Parameter ranges: The ranges, ascending by upper bound (``NegentropyMessage/encoded``
    ///   requires it).
    public init(ranges: [NegentropyRange]) { self.ranges = ranges }

    /// The message in its binary form.
    ///
    /// Timestamps are written as differences from the previous range's, so the ranges must ascend
    /// by timestamp (as decoded ones do): a range whose timestamp is below the one before it, or
    /// that follows an infinity bound without being one, traps.
    public var encoded: [UInt8] {
        var writer = NegentropyWriter()
        for range in ranges { writer.range(range) }
        return writer.bytes
    }

    /// Decodes a binary message strictly.
    ///
    /// - Parameter bytes: The message, version byte first.
    /// - Returns: The message, its ranges in order.
    /// - Throws: ``SoftchatError`` with code `invalid_negentropy_message` when the version byte is not
    ///   0x61, a field is truncated, a varint is over 64 bits or longer than needed, a timestamp
    ///   passes 2^64 - 2, an id prefix is over 32 bytes, a mode is unknown, an id list is longer than
    ///   the bytes left, or a bound is below the one before it.
    public static func decode(_ bytes: [UInt8]) throws(SoftchatError) -> NegentropyMessage {
        var reader = NegentropyReader(bytes)
        let version = try reader.byte("the protocol version")
        guard version == Self.version else {
            throw .invalidNegentropyMessage("protocol version 0x\(Hex.encode([version])) is not 0x61 (negentropy v1)")
        }
        var ranges: [NegentropyRange] = []
        var previous = NegentropyItem(timestamp: 0, id: .zero)
        while !reader.atEnd {
            let index = ranges.count
            let bound = try reader.bound(index)
            let item = bound.item
            guard !(item < previous) else {
                throw .invalidNegentropyMessage("range \(index): its upper bound is below the previous range's")
            }
            previous = item
            let mode = try reader.varint("range \(index) mode")
            switch mode {
            case 0:
                ranges.append(NegentropyRange(upperBound: bound, payload: .skip))
            case 1:
                let bytes = try reader.bytes(16, "range \(index) fingerprint")
                ranges.append(NegentropyRange(upperBound: bound, payload: .fingerprint(NegentropyFingerprint(unchecked: bytes))))
            case 2:
                let count = try reader.varint("range \(index) id count")
                guard count <= UInt64(reader.remaining / 32) else {
                    throw .invalidNegentropyMessage("range \(index): \(count) ids announced, \(reader.remaining) bytes left")
                }
                var ids: [NegentropyID] = []
                ids.reserveCapacity(Int(count))
                for _ in 0..<Int(count) { ids.append(NegentropyID(prefix: try reader.bytes(32, "range \(index) id"))) }
                ranges.append(NegentropyRange(upperBound: bound, payload: .idList(ids)))
            default:
                throw .invalidNegentropyMessage("range \(index): unknown mode \(mode)")
            }
        }
        return NegentropyMessage(ranges: ranges)
    }
}

/// Writes a message: the version byte, then ranges, their timestamps as deltas from the last
/// one written (the delta state is the writer's, reset with each message).
struct NegentropyWriter {
    private(set) var bytes: [UInt8] = [NegentropyMessage.version]
    private var lastTimestamp: UInt64 = 0

    var count: Int { bytes.count }

    mutating func bound(_ bound: NegentropyBound) {
        if bound.timestamp == .max {
            lastTimestamp = .max
            NegentropyVarint.append(0, to: &bytes)
        } else {
            NegentropyVarint.append(bound.timestamp - lastTimestamp + 1, to: &bytes)
            lastTimestamp = bound.timestamp
        }
        NegentropyVarint.append(UInt64(bound.idPrefix.count), to: &bytes)
        bytes += bound.idPrefix
    }

    mutating func range(_ range: NegentropyRange) {
        bound(range.upperBound)
        switch range.payload {
        case .skip:
            NegentropyVarint.append(0, to: &bytes)
        case .fingerprint(let f):
            fingerprint(f)
        case .idList(let ids):
            NegentropyVarint.append(2, to: &bytes)
            NegentropyVarint.append(UInt64(ids.count), to: &bytes)
            for id in ids { self.id(id) }
        }
    }

    /// Mode 1 and its 16 bytes.
    mutating func fingerprint(_ f: NegentropyFingerprint) {
        NegentropyVarint.append(1, to: &bytes)
        bytes += f.bytes
    }

    mutating func id(_ id: NegentropyID) { bytes += id.bytes }

    /// Appends what another writer wrote after its version byte (its timestamps continue this
    /// writer's deltas only if it was started with `continuing(from:)`).
    mutating func append(_ other: NegentropyWriter) {
        bytes += other.bytes.dropFirst()
        lastTimestamp = other.lastTimestamp
    }

    /// An empty writer whose timestamp deltas continue from this one's.
    func continuing() -> NegentropyWriter {
        var w = NegentropyWriter()
        w.lastTimestamp = lastTimestamp
        return w
    }
}

/// Reads a message strictly: every read is bounds-checked.
struct NegentropyReader {
    private let bytes: [UInt8]
    private var at = 0
    private var lastTimestamp: UInt64 = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { at == bytes.count }
    var remaining: Int { bytes.count - at }

    mutating func byte(_ what: String) throws(SoftchatError) -> UInt8 {
        guard at < bytes.count else { throw .invalidNegentropyMessage("the message ends before \(what)") }
        at += 1
        return bytes[at - 1]
    }

    mutating func bytes(_ n: Int, _ what: String) throws(SoftchatError) -> [UInt8] {
        guard remaining >= n else { throw .invalidNegentropyMessage("the message ends inside \(what)") }
        at += n
        return Array(bytes[(at - n)..<at])
    }

    mutating func varint(_ what: String) throws(SoftchatError) -> UInt64 {
        var value: UInt64 = 0
        var digits = 0
        while true {
            let b = try byte(what)
            if digits == 0 && b == 0x80 { throw .invalidNegentropyMessage("\(what): a varint with a leading zero digit") }
            guard value >> 57 == 0 else { throw .invalidNegentropyMessage("\(what): a varint over 64 bits") }
            value = value << 7 | UInt64(b & 0x7F)
            digits += 1
            if b & 0x80 == 0 { return value }
        }
    }

    mutating func bound(_ index: Int) throws(SoftchatError) -> NegentropyBound {
        let encoded = try varint("range \(index) timestamp")
        let timestamp: UInt64
        if encoded == 0 || lastTimestamp == .max {
            timestamp = .max
        } else {
            let (sum, overflow) = lastTimestamp.addingReportingOverflow(encoded - 1)
            guard !overflow, sum != .max else {
                throw .invalidNegentropyMessage("range \(index): the timestamp passes 2^64 - 2")
            }
            timestamp = sum
        }
        lastTimestamp = timestamp
        let length = try varint("range \(index) id prefix length")
        guard length <= 32 else { throw .invalidNegentropyMessage("range \(index): an id prefix of \(length) bytes (at most 32)") }
        return NegentropyBound(timestamp: timestamp, idPrefix: try bytes(Int(length), "range \(index) id prefix"))
    }
}
