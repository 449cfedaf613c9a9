public import SoftchatCore

/// A WebSocket (RFC 6455) over any `ByteStream`, as client or server: masking, fragmentation,
/// ping/pong, the close handshake, UTF-8 validation of text, and a message size limit
/// (relay.wire's 512 KiB by default) enforced from the frame headers before payloads are read.
public final class WebSocket: @unchecked Sendable {
    // @unchecked: one owner drives a connection at a time (the managed loop or a relay thread).
    /// Which end of the connection this side is: a `client` masks the frames it sends and
    /// refuses masked ones; a `server` requires masked frames and sends its own unmasked.
    public enum Role: Sendable {
        /// The connecting side: masks the frames it sends, refuses masked ones (RFC 6455 §5.1).
        case client
        /// The accepting side: requires masked frames, sends its own unmasked.
        case server
    }

    /// What ``WebSocket/receive(timeoutMilliseconds:)`` returns: a text message or the peer's close.
    public enum Message: Sendable, Equatable {
        /// One complete, UTF-8-valid text message, its fragments joined.
        case text(String)
        /// The peer's close frame: its status code (1005 when it sent none) and reason. The
        /// close has been answered and the connection is closed.
        case close(code: UInt16, reason: String)
    }

    enum Opcode: UInt8 {
        case continuation = 0x0
        case text = 0x1
        case binary = 0x2
        case close = 0x8
        case ping = 0x9
        case pong = 0xA
    }

    /// The byte stream (TCP, TLS or Noise) the frames travel over.
    public let stream: any ByteStream
    /// Which end of the connection this side is.
    public let role: Role
    /// The largest message accepted, in bytes; a larger one is refused with close code 1009.
    public let maxMessageBytes: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var closeSent = false
    /// Whether the connection is over: after ``WebSocket/close(code:reason:waitMilliseconds:)``,
    /// the peer's close, a protocol violation, or the stream's end.
    public private(set) var isClosed = false
    /// The fragments of a message received so far. They outlive a `receive` that times out
    /// between two fragments: a relay may pause longer than one read inside a message.
    private var partial: [UInt8] = []
    private var partialOpcode: Opcode? = nil

    /// Wraps an open stream whose handshake is done; `leftover` is what the handshake read past
    /// the blank line (the first frames).
    /// - Parameters:
    ///   - stream: The stream, its opening handshake already done.
    ///   - role: Which end of the connection this side is.
    ///   - leftover: Bytes the handshake read past its blank line, taken as the first frames.
    ///   - maxMessageBytes: The largest message accepted (relay.wire's frame bound by default).
    public init(
        stream: any ByteStream, role: Role, leftover: [UInt8] = [],
        maxMessageBytes: Int = RelayWireContract.maxFrameBytes.value
    ) {
        self.stream = stream
        self.role = role
        self.maxMessageBytes = maxMessageBytes
        buffer = leftover
    }

    // MARK: Sending

    /// Sends `text` as one unfragmented text frame, masked when this side is the client.
    /// - Parameter text: The message to send.
    /// - Throws: ``TransportError``, as the stream's write throws it (`.closed` once the
    ///   connection is closed).
    public func send(text: String) throws(TransportError) {
        try sendFrame(.text, Array(text.utf8))
    }

    func sendFrame(_ opcode: Opcode, _ payload: [UInt8]) throws(TransportError) {
        try stream.write(payload.withUnsafeBytes { WebSocketCodec.encode(opcode, $0, role: role) })
    }

    /// Starts the close handshake (idempotent) and waits briefly for the peer's close.
    /// Messages that arrive meanwhile are discarded; the stream is closed in every case.
    /// - Parameters:
    ///   - code: The close status code to send (1000: normal closure).
    ///   - reason: The close reason; only its first 123 UTF-8 bytes are sent.
    ///   - waitMilliseconds: How long each read waits for the peer's close while draining;
    ///     0 closes the stream without waiting.
    public func close(code: UInt16 = 1000, reason: String = "", waitMilliseconds: Int32 = 1000) {
        guard !isClosed else { return }
        sendClose(code: code, reason: reason)
        if waitMilliseconds > 0 {
            // Drain until the peer answers the close or the wait ends.
            let deadline = waitMilliseconds
            while !isClosed {
                do {
                    if case .close = try receive(timeoutMilliseconds: deadline) { break }
                } catch {
                    break
                }
            }
        }
        isClosed = true
        stream.close()
    }

    private func sendClose(code: UInt16, reason: String) {
        guard !closeSent else { return }
        closeSent = true
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        payload += Array(reason.utf8.prefix(123))
        try? sendFrame(.close, payload)
    }

    // MARK: Receiving

    /// The next complete text message (or the peer's close), answering pings on the way.
    /// Throws `.timeout` when nothing complete arrived in time; partial data is kept, both a
    /// frame not yet whole and the fragments of a message not yet finished.
    /// - Parameter timeoutMilliseconds: The longest wait for each read from the stream, or -1
    ///   to wait without limit.
    /// - Returns: The next text message, or ``WebSocket/Message/close(code:reason:)`` when the
    ///   peer closed.
    /// - Throws: ``TransportError``: `.timeout` when no complete message arrived in time;
    ///   `.closed` when the connection is already closed or the stream ended without a close
    ///   frame; `.protocolViolation` for a frame RFC 6455 forbids, a binary message or text that
    ///   is not UTF-8; `.messageTooLarge` for a message over ``WebSocket/maxMessageBytes``; or
    ///   the stream's own failures. After a violation the peer has been sent a close frame
    ///   (1002, 1003, 1007 or 1009) and the connection is closed.
    public func receive(timeoutMilliseconds: Int32) throws(TransportError) -> Message {
        while true {
            let (fin, opcode, payload) = try readFrame(timeoutMilliseconds: timeoutMilliseconds, messageSoFar: partial.count)
            switch opcode {
            case .ping:
                try sendFrame(.pong, payload)
                continue
            case .pong:
                continue
            case .close:
                let code: UInt16 = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                let reason = payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : ""
                sendClose(code: code == 1005 ? 1000 : code, reason: "")
                isClosed = true
                stream.close()
                return .close(code: code, reason: reason)
            case .text, .binary:
                guard partialOpcode == nil else { throw fail(1002, "a new data frame arrived inside a fragmented message") }
                partialOpcode = opcode
                partial = payload
            case .continuation:
                guard partialOpcode != nil else { throw fail(1002, "a continuation frame arrived with no message to continue") }
                partial += payload
            }
            if fin, let kind = partialOpcode {
                let message = partial
                partial = []
                partialOpcode = nil
                guard kind == .text else { throw fail(1003, "binary messages are not part of the Nostr protocol") }
                guard let text = String(validating: message, as: UTF8.self) else {
                    throw fail(1007, "a text message is not valid UTF-8")
                }
                return .text(text)
            }
        }
    }

    /// Reports a protocol violation to the peer with a close code, then fails.
    private func fail(_ code: UInt16, _ message: String) -> TransportError {
        sendClose(code: code, reason: message)
        isClosed = true
        stream.close()
        return TransportError(code == 1009 ? .messageTooLarge : .protocolViolation, "\(message) (closed with \(code))")
    }

    private var available: Int { buffer.count - start }

    /// Ensures `count` unread bytes are buffered, reading from the stream as needed.
    private func fill(_ count: Int, timeoutMilliseconds: Int32) throws(TransportError) {
        if start > 0 && (start > 65536 || available == 0) {
            buffer.removeFirst(start)
            start = 0
        }
        while available < count {
            var chunk = [UInt8](repeating: 0, count: max(16384, count - available))
            let n = try readChunk(stream, &chunk, timeoutMilliseconds: timeoutMilliseconds)
            if n == 0 {
                isClosed = true
                throw TransportError(.closed, "the peer closed the connection without a close frame")
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    private func readFrame(timeoutMilliseconds: Int32, messageSoFar: Int) throws(TransportError) -> (Bool, Opcode, [UInt8]) {
        guard !isClosed else { throw TransportError(.closed, "the WebSocket is closed") }
        try fill(2, timeoutMilliseconds: timeoutMilliseconds)
        let b0 = buffer[start]
        let b1 = buffer[start + 1]
        guard b0 & 0x70 == 0 else { throw fail(1002, "reserved bits set without a negotiated extension") }
        guard let opcode = Opcode(rawValue: b0 & 0x0F) else { throw fail(1002, "unknown opcode \(b0 & 0x0F)") }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        if role == .client && masked { throw fail(1002, "the server masked a frame") }
        if role == .server && !masked { throw fail(1002, "the client sent an unmasked frame") }
        try fill(WebSocketFrameHeader.lengthFieldEnd(secondByte: b1), timeoutMilliseconds: timeoutMilliseconds)
        // Cannot be nil: the whole length field is buffered.
        let header = WebSocketFrameHeader.parse(buffer, at: start)!
        let length = header.payloadLength
        let headerLength = header.lengthFieldEnd
        guard length >> 63 == 0 else { throw fail(1002, "frame length has its top bit set") }
        let isControl = opcode.rawValue >= 0x8
        if isControl && (length > 125 || !fin) { throw fail(1002, "control frames must be unfragmented and at most 125 bytes") }
        // The size limit is enforced from the header, before the payload is read.
        if !isControl && UInt64(messageSoFar) + length > UInt64(maxMessageBytes) {
            throw fail(1009, "message of over \(maxMessageBytes) bytes refused")
        }
        let maskLength = masked ? 4 : 0
        let total = headerLength + maskLength + Int(length)
        try fill(total, timeoutMilliseconds: timeoutMilliseconds)
        var payload = Array(buffer[(start + headerLength + maskLength)..<(start + total)])
        if masked {
            let key = Array(buffer[(start + headerLength)..<(start + headerLength + 4)])
            for i in payload.indices { payload[i] ^= key[i & 3] }
        }
        start += total
        return (fin, opcode, payload)
    }

    /// True when a complete frame may already be buffered (the loop can read without waiting).
    public var hasBufferedInput: Bool { available > 0 || stream.hasBufferedInput() }
}
