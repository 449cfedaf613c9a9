/// Relay text on its way to a report: a NOTICE, a CLOSED, OK or NEG-ERR message, a NIP-11
/// name. A relay chooses every byte of it, up to a whole frame (512 KiB), as often as it likes;
/// the app keeps reports in queues, logs and screens. So every report carries at most
/// `maxReportTextBytes` of UTF-8, cut on a Unicode scalar boundary, with control characters
/// (C0, DEL, C1) and bidirectional formatting characters replaced by U+FFFD, so relay text can
/// neither grow the app's memory past a bound nor move a log's lines or reorder a screen.
public enum RelayText {
    /// The most UTF-8 bytes of relay text a report carries (relay.recovery's bound).
    public static let maxReportBytes = RelayRecoveryContract.maxReportTextBytes.value

    /// What marks a cut text; the original size follows it.
    static let cutMark = "…("

    /// `text` as a report carries it: unchanged when it is printable and within `maxBytes`;
    /// otherwise with control and bidi characters replaced and, when longer, cut on a scalar
    /// boundary and ended with `…(N bytes)`, N the original size, all within `maxBytes`.
    ///
    /// - Parameters:
    ///   - text: Text a relay chose.
    ///   - maxBytes: The most UTF-8 bytes of the result (at least 32; smaller values are
    ///     raised to 32, room for the longest size mark).
    /// - Returns: The bounded text.
    public static func forReport(_ text: String, maxBytes: Int = maxReportBytes) -> String {
        let limit = max(32, maxBytes)
        let total = text.utf8.count
        if total <= limit && text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
        let suffix = total > limit ? cutMark + String(total) + " bytes)" : ""
        let budget = limit - suffix.utf8.count
        var out = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let shown = isSafe(scalar) ? scalar : "\u{FFFD}"
            let size = UTF8.width(shown)
            if used + size > budget { break }
            out.append(shown)
            used += size
        }
        return String(out) + suffix
    }

    /// False for C0 controls, DEL, C1 controls and the bidirectional formatting characters
    /// (ALM, LRM, RLM, LRE…RLO, LRI…PDI), which can hide or reorder text around them.
    static func isSafe(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x00...0x1F, 0x7F...0x9F: false
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: false
        default: true
        }
    }
}

/// A number a relay stated (a NIP-11 `limitation`): a count or size the client may lower its
/// own bounds to. A relay chooses it, so it is taken only within `statedRange` (positive, at
/// most 2^31 − 1); anything else (zero, negative, `Int64.min`, 2^63 − 1) reads as "not stated",
/// never as a value arithmetic further in could overflow on.
public enum RelayStatedNumber {
    /// The values a stated limit may take.
    public static let statedRange: ClosedRange<Int64> = 1...Int64(Int32.max)

    /// `value` when it is within ``statedRange``, else nil.
    ///
    /// - Parameter value: The relay's number, if it sent one.
    /// - Returns: The number as an `Int`, or nil for none or one out of range.
    public static func limit(_ value: Int64?) -> Int? {
        guard let value, statedRange.contains(value) else { return nil }
        return Int(value)
    }

    /// `value` when it is within ``statedRange``, else nil.
    ///
    /// - Parameter value: A limit taken from a relay, if any.
    /// - Returns: The same number, or nil for none or one out of range.
    public static func limit(_ value: Int?) -> Int? {
        guard let value else { return nil }
        return limit(Int64(value))
    }
}
