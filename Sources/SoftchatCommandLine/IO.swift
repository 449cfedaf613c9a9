#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Exit statuses every subcommand uses.
public enum ExitStatus: Int32 {
    case success = 0
    case inputRejected = 1
    case usage = 2
    case runtimeFailure = 3
}

/// A usage problem: printed with the subcommand's help, exit 2.
public struct UsageError: Error {
    /// What is wrong with the command line.
    public var message: String
    /// A usage error saying `message`.
    public init(_ message: String) { self.message = message }
}

/// A failure of the machine rather than the input (a file that cannot be read), exit 3.
public struct RuntimeFailure: Error {
    /// The stable code printed with it.
    public var code: String
    /// What failed.
    public var message: String

    /// A failure with its stable code and message.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}

/// Buffered standard output: one write(2) per 64 KiB instead of one per line, so piping
/// data through the CLI costs what the library costs.
public final class Output {
    /// Standard output.
    nonisolated(unsafe) public static let standard = Output(fd: 1)
    /// Standard error.
    nonisolated(unsafe) public static let error = Output(fd: 2)

    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Buffered output to the file descriptor `fd`.
    public init(fd: Int32) {
        self.fd = fd
        buffer.reserveCapacity(1 << 16)
    }

    /// Appends `text` and a newline, writing when 64 KiB are buffered.
    public func line(_ text: String) {
        var text = text
        text.withUTF8 { buffer.append(contentsOf: $0) }
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { flush() }
    }

    /// Writes everything buffered.
    public func flush() {
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }  // a closed pipe: nothing more can be said
                offset += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads a file descriptor (standard input by default) in 256 KiB reads straight into one
/// buffer and hands out lines (without the newline, a trailing `\r` removed): one at a time as
/// byte arrays, or in batches as views into the buffer. Each byte is searched for a newline
/// once, however many reads a long line spans.
public final class LineReader {
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var start = 0
    private var end = 0
    private var scanned = 0
    private var eof = false
    private let fd: Int32
    private static let readSize = 1 << 18

    /// A reader of `fd` (standard input by default).
    public init(fd: Int32 = 0) {
        self.fd = fd
        capacity = 4 * Self.readSize
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

    /// The next non-blank lines, up to `maxLines` of them or `maxBytes` in all, as views into
    /// the read buffer (no copy), valid until the next call; nil at the end of the input.
    public func nextBatch(maxLines: Int, maxBytes: Int) -> [UnsafeBufferPointer<UInt8>]? {
        compact()
        var ranges: [Range<Int>] = []
        var bytes = 0
        while ranges.count < maxLines && bytes < maxBytes, let range = nextRange(moving: false) {
            let line = UnsafeBufferPointer(start: storage + range.lowerBound, count: range.count)
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            bytes += range.count
            ranges.append(range)
        }
        // Offsets, not pointers, were kept: reads may have moved the buffer while it grew.
        return ranges.isEmpty ? nil : ranges.map { UnsafeBufferPointer(start: storage + $0.lowerBound, count: $0.count) }
    }

    /// The next line as a copy.
    public func next() -> [UInt8]? {
        nextRange(moving: true).map { Array(UnsafeBufferPointer(start: storage + $0.lowerBound, count: $0.count)) }
    }

    /// Where the next line lies in the buffer. `moving` lets a read move unread bytes to the
    /// front first; without it the buffer only grows, so earlier ranges stay valid.
    private func nextRange(moving: Bool) -> Range<Int>? {
        while true {
            let from = max(start, scanned)
            if from < end, let found = memchr(storage + from, 0x0A, end - from) {
                let nl = UnsafeMutableRawPointer(found).assumingMemoryBound(to: UInt8.self) - storage
                var lineEnd = nl
                if lineEnd > start && storage[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let line = start..<lineEnd
                start = nl + 1
                scanned = start
                return line
            }
            scanned = end
            if eof {
                guard start < end else { return nil }
                let line = start..<end
                start = end
                return line
            }
            if end + Self.readSize > capacity {
                if moving { compact() }
                if end + Self.readSize > capacity { grow(to: 2 * (end + Self.readSize)) }
            }
            var n: Int
            repeat {
                n = read(fd, storage + end, Self.readSize)
            } while n < 0 && errno == EINTR
            if n <= 0 { eof = true } else { end += n }
        }
    }

    /// Moves the unread bytes to the front of the buffer.
    private func compact() {
        guard start > 0 else { return }
        let pending = end - start
        if pending > 0 { memmove(storage, storage + start, pending) }  // the regions may overlap
        scanned -= start
        start = 0
        end = pending
    }

    private func grow(to newCapacity: Int) {
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: storage, count: end)
        storage.deallocate()
        storage = grown
        capacity = newCapacity
    }
}

/// Parsed `--flag value` options and positional arguments of one subcommand.
public struct Arguments {
    /// The arguments that are not options, in order.
    public var positional: [String] = []
    /// Each valued option's (last) value.
    public var options: [String: String] = [:]
    /// The switches given.
    public var flags: Set<String> = []
    /// Every value of options that may repeat (`--relay A --relay B`).
    public var repeated: [String: [String]] = [:]

    /// Splits `args`; `valued` names options that take a value, `switches` those that don't.
    /// A value follows its option as the next argument or after `=` (`--db x.db`, `--db=x.db`).
    public init(_ args: ArraySlice<String>, valued: Set<String>, switches: Set<String>, repeatable: Set<String> = []) throws(UsageError) {
        var i = args.startIndex
        while i < args.endIndex {
            let a = args[i]
            if a.hasPrefix("--"), let equals = a.firstIndex(of: "=") {
                let name = String(a[..<equals])
                guard valued.contains(name) else {
                    throw UsageError(switches.contains(name) ? "\(name) takes no value" : "unknown option \(name)")
                }
                try set(name, String(a[a.index(after: equals)...]), repeatable: repeatable)
                i += 1
                continue
            }
            if valued.contains(a) {
                guard i + 1 < args.endIndex else { throw UsageError("\(a) needs a value") }
                try set(a, args[i + 1], repeatable: repeatable)
                i += 2
                continue
            }
            if switches.contains(a) {
                flags.insert(a)
            } else if a.hasPrefix("--") {
                throw UsageError("unknown option \(a)")
            } else {
                positional.append(a)
            }
            i += 1
        }
    }

    private mutating func set(_ option: String, _ value: String, repeatable: Set<String>) throws(UsageError) {
        if options[option] != nil && !repeatable.contains(option) { throw UsageError("\(option) given twice") }
        options[option] = value
        repeated[option, default: []].append(value)
    }

    /// Whether the switch `flag` was given.
    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// An integer option, or nil when absent; a non-integer is a usage error.
    public func int(_ option: String) throws(UsageError) -> Int64? {
        guard let text = options[option] else { return nil }
        guard let n = Int64(text) else { throw UsageError("\(option) needs an integer, not \(text)") }
        return n
    }
}

/// Whether `fd` is a terminal.
public func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

/// `text` safe to print on a terminal: C0 and C1 control characters (escape, bell, carriage
/// return, backspace, line breaks…), DEL and the Unicode bidirectional overrides are shown as
/// `\u{…}`, so relay text (a NOTICE, a CLOSED reason, an error) cannot move the cursor, retitle
/// the window, hide text or add lines. Printable text, emoji included, is kept as it is.
public func terminalSafe(_ text: String) -> String {
    var out = ""
    out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
        let v = scalar.value
        let control = v < 0x20 || (0x7F...0x9F).contains(v) || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
        if control {
            out += "\\u{" + String(v, radix: 16) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}
