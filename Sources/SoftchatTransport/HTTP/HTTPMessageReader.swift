/// The one reader of HTTP/1.1 messages: every NIP-11 answer, every WebSocket upgrade answer,
/// and the embedded relay's request heads go through it.
///
/// It is sans-I/O, in the manner of h11: bytes go in as they arrive (``feed(_:)``), the end of the
/// stream is announced (``finish()``), and what comes out is a ``Progress``. Everything in it is
/// bounded — the head's bytes and header count, a declared `Content-Length`, the chunk-size lines,
/// the decoded body — and every malformed or over-limit message is a ``TransportError`` of the
/// reader's kind (`.http` or `.handshake`), never a trap. The caller owns the clock: a deadline for
/// the whole exchange is the connection's (``IODriver`` opens with one), not the reader's.
package struct HTTPMessageReader {
    /// What follows the head.
    enum Framing: Equatable {
        /// Nothing the reader reads: the head alone (a 101 upgrade answer, a request head); the
        /// bytes after it are handed back as they are.
        case headOnly
        /// A response body of at most `maxBytes`, framed by `Content-Length`, by chunked
        /// transfer coding, or by the end of the stream.
        case body(maxBytes: Int)
    }

    /// What a call produced.
    package enum Progress: Equatable {
        /// More bytes are needed.
        case needMore
        /// `.headOnly`: the head, and the bytes that followed it.
        case head(HTTPHead, rest: [UInt8])
        /// `.body`: the head and the whole decoded body.
        case message(HTTPHead, body: [UInt8])
    }

    /// The limits, one definition each.
    enum Limits {
        /// The largest head (start line and header fields, with their line ends).
        static let maxHeadBytes = 16 * 1024
        /// The most header fields in a head.
        static let maxHeaderFields = 64
        /// The longest chunk-size line (size, extensions, line end).
        static let maxChunkLineBytes = 1024
        /// The largest trailer section of a chunked body.
        static let maxTrailerBytes = 4 * 1024
    }

    private enum Stage: Equatable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
    }

    private let framing: Framing
    private let kind: TransportError.Kind
    private let what: String
    private var stage = Stage.head
    private var buffer: [UInt8] = []
    private var scanned = 0
    private var head: HTTPHead?
    private var body: [UInt8] = []
    private var trailerBytes = 0

    /// A reader of one message.
    /// - Parameters:
    ///   - framing: Whether a body follows the head.
    ///   - kind: The error kind of every refusal (`.http` for NIP-11, `.handshake` for upgrades).
    ///   - what: The exchange, for messages: "the NIP-11 answer", "the upgrade answer".
    init(framing: Framing, kind: TransportError.Kind, what: String) {
        self.framing = framing
        self.kind = kind
        self.what = what
    }

    private func refuse(_ why: String) -> TransportError { TransportError(kind, "\(what): \(why)") }

    /// Bytes as they arrived.
    package mutating func feed(_ bytes: some Collection<UInt8>) throws(TransportError) -> Progress {
        guard stage != .done else { return .needMore }
        buffer.append(contentsOf: bytes)
        return try advance()
    }

    /// The peer closed its side: a body framed by the end of the stream ends here; anything else
    /// unfinished was cut short.
    package mutating func finish() throws(TransportError) -> Progress {
        switch stage {
        case .done: return .needMore
        case .untilClose:
            stage = .done
            return .message(head!, body: body)
        case .head: throw refuse("the connection closed before the head ended")
        default: throw refuse("the connection closed before the body ended")
        }
    }

    private mutating func advance() throws(TransportError) -> Progress {
        while true {
            switch stage {
            case .head:
                guard let end = try lineEnd(blank: true, limit: Limits.maxHeadBytes, what: "the head") else { return .needMore }
                let parsed = try HTTPHead.parse(buffer[..<end], refuse: refuse)
                buffer.removeFirst(end + 4)
                scanned = 0
                head = parsed
                guard case .body(let maxBytes) = framing else {
                    stage = .done
                    return .head(parsed, rest: buffer)
                }
                stage = try bodyStage(parsed, maxBytes: maxBytes)
                if stage == .done { return .message(parsed, body: []) }
            case .fixed(let remaining):
                let left = moveToBody(remaining)
                guard left == 0 else {
                    stage = .fixed(remaining: left)
                    return .needMore
                }
                stage = .done
                return .message(head!, body: body)
            case .untilClose:
                body += buffer
                buffer = []
                try checkBodySize()
                return .needMore
            case .chunkSize:
                guard let end = try lineEnd(blank: false, limit: Limits.maxChunkLineBytes, what: "a chunk-size line") else { return .needMore }
                let size = try chunkSize(buffer[..<end])
                buffer.removeFirst(end + 2)
                scanned = 0
                if size == 0 {
                    stage = .trailers
                } else {
                    guard case .body(let maxBytes) = framing, size <= maxBytes - body.count else {
                        throw refuse("the chunked body grows over \(maxBodyBytes) bytes")
                    }
                    stage = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let left = moveToBody(remaining)
                guard left == 0 else {
                    stage = .chunkData(remaining: left)
                    return .needMore
                }
                stage = .chunkDataEnd
            case .chunkDataEnd:
                guard buffer.count >= 2 else { return .needMore }
                guard buffer[0] == 13 && buffer[1] == 10 else { throw refuse("a chunk does not end with CRLF") }
                buffer.removeFirst(2)
                stage = .chunkSize
            case .trailers:
                guard let end = try lineEnd(blank: false, limit: Limits.maxTrailerBytes - trailerBytes, what: "the trailers") else {
                    return .needMore
                }
                trailerBytes += end + 2
                let line = buffer[..<end]
                buffer.removeFirst(end + 2)
                scanned = 0
                if line.isEmpty {
                    stage = .done
                    return .message(head!, body: body)
                }
                guard line.allSatisfy(HTTPHead.isFieldByte) else { throw refuse("a trailer holds a control character") }
            case .done:
                return .needMore
            }
        }
    }

    /// Moves up to `remaining` buffered bytes into the body; returns how many are still to come.
    private mutating func moveToBody(_ remaining: Int) -> Int {
        let take = min(remaining, buffer.count)
        body += buffer.prefix(take)
        buffer.removeFirst(take)
        return remaining - take
    }

    private var maxBodyBytes: Int {
        if case .body(let maxBytes) = framing { return maxBytes }
        return 0
    }

    private func checkBodySize() throws(TransportError) {
        if body.count > maxBodyBytes { throw refuse("the body is over \(maxBodyBytes) bytes") }
    }

    /// How the body is framed (RFC 9112 §6.3), refusing what a client must not guess at.
    private func bodyStage(_ head: HTTPHead, maxBytes: Int) throws(TransportError) -> Stage {
        let status = head.status ?? 0
        if (100..<200).contains(status) || status == 204 || status == 304 { return .done }
        let lengths = head.values("content-length")
        if let coding = head.header("transfer-encoding") {
            guard lengths.isEmpty else { throw refuse("both Transfer-Encoding and Content-Length") }
            guard coding.lowercasedTokens.last == "chunked" else { throw refuse("an unsupported Transfer-Encoding") }
            return .chunkSize
        }
        guard let first = lengths.first else { return .untilClose }
        // Every value identical (a list of equal values is allowed), digits only: no sign, no
        // space, no hex. The length is known before any byte of the body is read.
        let values = lengths.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingCharacters(in: " \t") }
        guard values.allSatisfy({ $0 == values[0] }), !first.isEmpty else { throw refuse("conflicting Content-Length values") }
        guard let length = Self.decimal(values[0]) else { throw refuse("a Content-Length that is not a non-negative decimal") }
        guard length <= maxBytes else { throw refuse("a Content-Length of \(length) bytes, over the limit of \(maxBytes)") }
        return length == 0 ? .done : .fixed(remaining: length)
    }

    /// A non-negative decimal of at most 18 digits (so it fits an Int with room to spare).
    static func decimal(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(text)
    }

    /// The chunk size of a chunk-size line: hex digits, then optional `;extensions`.
    private func chunkSize(_ line: ArraySlice<UInt8>) throws(TransportError) -> Int {
        let digits = line.prefix { $0 != 59 }  // up to ";"
        guard !digits.isEmpty, digits.count <= 15 else { throw refuse("a malformed chunk size") }
        var size = 0
        for byte in digits {
            let value: Int
            switch byte {
            case 48...57: value = Int(byte) - 48
            case 65...70: value = Int(byte) - 55
            case 97...102: value = Int(byte) - 87
            default: throw refuse("a malformed chunk size")
            }
            size = size * 16 + value
        }
        guard line.allSatisfy(HTTPHead.isFieldByte) else { throw refuse("a chunk-size line holds a control character") }
        return size
    }

    /// Where the next line (or, with `blank`, the head's blank line) ends in the buffer: the index
    /// of its CRLF (CRLFCRLF), nil when it has not arrived. Each byte is searched about once; a
    /// line longer than `limit` is refused without waiting for its end.
    private mutating func lineEnd(blank: Bool, limit: Int, what part: String) throws(TransportError) -> Int? {
        let width = blank ? 4 : 2
        var i = max(0, scanned - (width - 1))
        while i + width <= buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 && (!blank || (buffer[i + 2] == 13 && buffer[i + 3] == 10)) {
                guard i <= limit else { break }
                return i
            }
            i += 1
        }
        scanned = buffer.count
        if buffer.count > limit + width { throw refuse("\(part) is over \(limit) bytes") }
        return nil
    }
}
