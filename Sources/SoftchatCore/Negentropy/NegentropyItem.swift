/// A 32-byte event id as four big-endian words: ids compare lexically (by first differing
/// byte) word by word, and add as the little-endian 256-bit integers negentropy's fingerprints
/// sum without being reassembled byte by byte.
public struct NegentropyID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Bytes 0–7 of the id, big-endian.
    public var w0: UInt64
    /// Bytes 8–15 of the id, big-endian.
    public var w1: UInt64
    /// Bytes 16–23 of the id, big-endian.
    public var w2: UInt64
    /// Bytes 24–31 of the id, big-endian.
    public var w3: UInt64

    /// An id from its four words.
    ///
    /// - Parameters:
    ///   - w0: Bytes 0–7, big-endian.
    ///   - w1: Bytes 8–15, big-endian.
    ///   - w2: Bytes 16–23, big-endian.
    ///   - w3: Bytes 24–31, big-endian.
    public init(w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64) {
        (self.w0, self.w1, self.w2, self.w3) = (w0, w1, w2, w3)
    }

    /// The id whose bytes are `bytes` (32 of them), or, for a shorter prefix, those bytes
    /// followed by zeros (how a bound's id prefix reads).
    ///
    /// - Parameter bytes: The id's first bytes; any past the 32nd are ignored.
    public init(prefix bytes: some Collection<UInt8>) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var i = 0
        for b in bytes.prefix(32) {
            let shift = UInt64(56 - 8 * (i & 7))
            switch i >> 3 {
            case 0: words.0 |= UInt64(b) << shift
            case 1: words.1 |= UInt64(b) << shift
            case 2: words.2 |= UInt64(b) << shift
            default: words.3 |= UInt64(b) << shift
            }
            i += 1
        }
        (w0, w1, w2, w3) = words
    }

    /// The id written as 64 lowercase hex characters (an event id as NIP-01 writes it); nil for
    /// any other text.
    ///
    /// - Parameter hex: The id's text.
    public init?(hex: String) {
        var text = hex
        guard let id = text.withUTF8({ NegentropyID(hexUTF8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = id
    }

    /// The id whose text is `utf8`, 64 lowercase hex characters; nil for any other bytes. It
    /// reads the text where it lies (a database row, a received frame) and makes no string or
    /// array of it: reading a chat's 50,000 items from the account is this, 50,000 times.
    ///
    /// - Parameter utf8: The id's text as UTF-8 bytes.
    public init?(hexUTF8 utf8: UnsafeRawBufferPointer) {
        guard utf8.count == 64 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        for w in 0..<4 {
            var word: UInt64 = 0
            for k in 0..<16 {
                let c = utf8[16 * w + k]
                let nibble: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c &- UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c &- UInt8(ascii: "a") &+ 10
                default: return nil
                }
                word = word << 4 | UInt64(nibble)
            }
            switch w {
            case 0: words.0 = word
            case 1: words.1 = word
            case 2: words.2 = word
            default: words.3 = word
            }
        }
        (w0, w1, w2, w3) = words
    }

    /// The all-zero id, the lowest of all.
    public static let zero = NegentropyID(w0: 0, w1: 0, w2: 0, w3: 0)

    /// The 32 bytes, in order.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(32)
        for w in [w0, w1, w2, w3] {
            for k in 0..<8 { out.append(UInt8(truncatingIfNeeded: w >> UInt64(56 - 8 * k))) }
        }
        return out
    }

    /// The id as 64 lowercase hex characters.
    public var hex: String { Hex.encode(bytes) }
    /// The id as 64 lowercase hex characters, as ``NegentropyID/hex`` gives it.
    public var description: String { hex }

    /// Orders ids lexically by their bytes, as negentropy sorts them.
    ///
    /// - Parameters:
    ///   - a: One id.
    ///   - b: The other id.
    /// - Returns: True when `a`'s bytes sort before `b`'s.
    public static func < (a: NegentropyID, b: NegentropyID) -> Bool {
        if a.w0 != b.w0 { return a.w0 < b.w0 }
        if a.w1 != b.w1 { return a.w1 < b.w1 }
        if a.w2 != b.w2 { return a.w2 < b.w2 }
        return a.w3 < b.w3
    }

    /// Bytes shared at the start of both ids (0–32).
    func sharedPrefixLength(_ other: NegentropyID) -> Int {
        let pairs = [(w0, other.w0), (w1, other.w1), (w2, other.w2), (w3, other.w3)]
        for (k, (a, b)) in pairs.enumerated() where a != b {
            return 8 * k + (a ^ b).leadingZeroBitCount / 8
        }
        return 32
    }
}

/// What negentropy reconciles: an event's `created_at` and id. Items sort by timestamp, then
/// by id.
public struct NegentropyItem: Sendable, Hashable, Comparable {
    /// The event's `created_at`, in Unix seconds.
    public var timestamp: UInt64
    /// The event's id.
    public var id: NegentropyID

    /// An item from its timestamp and id.
    ///
    /// - Parameters:
    ///   - timestamp: The event's `created_at`, in Unix seconds.
    ///   - id: The event's id.
    public init(timestamp: UInt64, id: NegentropyID) {
        self.timestamp = timestamp
        self.id = id
    }

    /// An event's item; nil for a negative `created_at` or an id that is not 64 lowercase hex.
    ///
    /// - Parameters:
    ///   - createdAt: The event's `created_at`, in Unix seconds.
    ///   - idHex: The event's id as 64 lowercase hex characters.
    public init?(createdAt: Int64, idHex: String) {
        guard createdAt >= 0, let id = NegentropyID(hex: idHex) else { return nil }
        self.init(timestamp: UInt64(createdAt), id: id)
    }

    /// Orders items by timestamp, then by id.
    ///
    /// - Parameters:
    ///   - a: One item.
    ///   - b: The other item.
    /// - Returns: True when `a` sorts before `b`.
    public static func < (a: NegentropyItem, b: NegentropyItem) -> Bool {
        a.timestamp != b.timestamp ? a.timestamp < b.timestamp : a.id < b.id
    }
}

/// A range's exclusive upper bound: a timestamp (`UInt64.max` is infinity) and an id prefix of
/// 0–32 bytes, the missing bytes read as zeros.
public struct NegentropyBound: Sendable, Hashable {
    /// The bound's timestamp; `UInt64.max` is infinity, above every item.
    public var timestamp: UInt64
    /// The first 0–32 bytes of the bounding id; the missing bytes read as zeros.
    public var idPrefix: [UInt8]

    /// A bound from a timestamp and an id prefix.
    ///
    /// - Parameters:
    ///   - timestamp: The timestamp; `UInt64.max` is infinity.
    ///   - idPrefix: The first 0–32 bytes of the bounding id; none by default, so the bound is the
    ///     timestamp alone.
    public init(timestamp: UInt64, idPrefix: [UInt8] = []) {
        self.timestamp = timestamp
        self.idPrefix = idPrefix
    }

    /// The bound above every item, where a message's last range ends.
    public static let infinity = NegentropyBound(timestamp: .max)

    /// True for the infinity bound (timestamp `UInt64.max`).
    public var isInfinity: Bool { timestamp == .max }

    /// The smallest item the bound admits into the range above it.
    var item: NegentropyItem { NegentropyItem(timestamp: timestamp, id: NegentropyID(prefix: idPrefix)) }

    /// The shortest bound that separates `previous` (below) from `next` (at or above): the
    /// timestamp alone when they differ, else the id prefix one byte past what they share.
    static func minimal(between previous: NegentropyItem, and next: NegentropyItem) -> NegentropyBound {
        guard previous.timestamp == next.timestamp else { return NegentropyBound(timestamp: next.timestamp) }
        let shared = previous.id.sharedPrefixLength(next.id)
        return NegentropyBound(timestamp: next.timestamp, idPrefix: Array(next.id.bytes.prefix(shared + 1)))
    }
}
