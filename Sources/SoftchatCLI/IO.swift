#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Exit statuses every subcommand uses.
enum ExitStatus: Int32 {
    case success = 0
    case inputRejected = 1
    case usage = 2
    case runtimeFailure = 3
}

/// A usage problem: printed with the subcommand's help, exit 2.
struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// A failure of the machine rather than the input (a file that cannot be read), exit 3.
struct RuntimeFailure: Error {
    var code: String
    var message: String
}

/// Buffered standard output: one write(2) per 64 KiB instead of one per line, so piping
/// data through the CLI costs what the library costs.
final class Output {
    nonisolated(unsafe) static let standard = Output(fd: 1)
    nonisolated(unsafe) static let error = Output(fd: 2)

    private let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) {
        self.fd = fd
        buffer.reserveCapacity(1 << 16)
    }

    func line(_ text: String) {
        var text = text
        text.withUTF8 { buffer.append(contentsOf: $0) }
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { flush() }
    }

    func flush() {
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

/// Reads standard input in 64 KiB chunks and hands out lines (without the newline, a
/// trailing `\r` removed) as byte arrays.
struct LineReader {
    private var buffer: [UInt8] = []
    private var start = 0
    private var eof = false
    private let fd: Int32

    init(fd: Int32 = 0) { self.fd = fd }

    mutating func next() -> [UInt8]? {
        while true {
            if let nl = buffer[start...].firstIndex(of: 0x0A) {
                var end = nl
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                let line = Array(buffer[start..<end])
                start = nl + 1
                return line
            }
            if eof {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 {
                eof = true
            } else {
                buffer.append(contentsOf: chunk[0..<n])
            }
        }
    }
}

/// Parsed `--flag value` options and positional arguments of one subcommand.
struct Arguments {
    var positional: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []
    /// Every value of options that may repeat (`--relay A --relay B`).
    var repeated: [String: [String]] = [:]

    /// Splits `args`; `valued` names options that take a value, `switches` those that don't.
    init(_ args: ArraySlice<String>, valued: Set<String>, switches: Set<String>, repeatable: Set<String> = []) throws(UsageError) {
        var i = args.startIndex
        while i < args.endIndex {
            let a = args[i]
            if valued.contains(a) {
                guard i + 1 < args.endIndex else { throw UsageError("\(a) needs a value") }
                if options[a] != nil && !repeatable.contains(a) { throw UsageError("\(a) given twice") }
                options[a] = args[i + 1]
                repeated[a, default: []].append(args[i + 1])
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

    func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// An integer option, or nil when absent; a non-integer is a usage error.
    func int(_ option: String) throws(UsageError) -> Int64? {
        guard let text = options[option] else { return nil }
        guard let n = Int64(text) else { throw UsageError("\(option) needs an integer, not \(text)") }
        return n
    }
}

func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
