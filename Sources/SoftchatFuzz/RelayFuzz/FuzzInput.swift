/// The fuzzer's bytes read as choices: each call takes what it needs from the front and, once
/// they run out, reads zeros, so every input is a complete script and a prefix of an input is
/// a shorter script (libFuzzer's mutations then act on choices, not on JSON syntax).
struct FuzzInput {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isExhausted: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A number from 0 to `count` − 1.
    mutating func below(_ count: Int) -> Int {
        precondition(count > 0)
        if count <= 256 { return Int(byte()) % count }
        return (Int(byte()) << 8 | Int(byte())) % count
    }

    mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// Up to `max` raw bytes, for garbage text.
    mutating func bytes(max: Int) -> [UInt8] {
        let n = below(max + 1)
        var out: [UInt8] = []
        out.reserveCapacity(n)
        for _ in 0..<n { out.append(byte()) }
        return out
    }
}

/// The values a hostile relay reaches for: Int64's edges, zero, one, the edges of our own
/// bounds, and the numbers just past them.
enum Extremes {
    static let integers: [Int64] = [
        .min, .min + 1, -1_000_000, -256, -2, -1, 0, 1, 2, 255, 256, 257, 4_095, 4_096, 16_384, 65_535, 65_536, 524_288, 524_289,
        Int64(Int32.max), Int64(Int32.max) + 1, Int64(UInt32.max), 1 << 53, .max - 1, .max,
    ]

    /// JSON texts of every type, for fields that want a number or a boolean.
    static let wrongTypes = [#""16384""#, "1.5e3", "-0.0", "1e400", "null", "true", "false", "[]", "{}", #""""#]

    /// Pieces of relay text: plain, control and bidi characters, long scalars.
    static let textPieces = ["N", "ok", "é", "😀", "\u{1B}[2J", "\r\n", "\u{202E}", "\u{2066}", "\u{0}", "\u{85}", "\\\"", ":", " "]
    static let textLengths = [0, 1, 8, 64, 300, 600, 4_000, 70_000, 400_000]
}
