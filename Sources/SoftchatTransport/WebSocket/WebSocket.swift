public import SoftchatCore

/// A blocking WebSocket (RFC 6455) over any `ByteStream`, as client or server, framed by the
/// driver's own `WebSocketCodec` (one implementation of the protocol): masking, fragmentation,
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
    public var maxMessageBytes: Int { codec.maxMessageBytes }
    /// The framing, the same codec the event-driven driver runs: this class only moves bytes
    /// between it and the stream, blocking. Partial frames and the fragments of a message
    /// outlive a `receive` that times out: a relay may pause longer than one read inside one.
    private var codec: WebSocketCodec
    private var chunk = [UInt8](repeating: 0, count: 16_384)
    /// Whether the connection is over: after ``WebSocket/close(code:reason:waitMilliseconds:)``,
    /// the peer's close, a protocol violation, or the stream's end.
    public private(set) var isClosed = false

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
        codec = WebSocketCodec(role: role, maxMessageBytes: maxMessageBytes)
        codec.feed(leftover)
    }

    // MARK: Sending

    /// Sends `text` as one unfragmented text frame, masked when this side is the client.
    /// - Parameter text: The message to send.
    /// - Throws: ``TransportError``, as the stream's write throws it (`.closed` once the
    ///   connection is closed).
    public func send(text: String) throws(TransportError) {
        try stream.write(codec.textFrame(text))
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
        if let frame = codec.closeFrame(code: code, reason: reason) { try? stream.write(frame) }
        if waitMilliseconds > 0 {
            // Drain until the peer answers the close or the wait ends.
            while !isClosed {
                do {
                    if case .close = try receive(timeoutMilliseconds: waitMilliseconds) { break }
                } catch {
                    break
                }
            }
        }
        isClosed = true
        stream.close()
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
        guard !isClosed else { throw TransportError(.closed, "the WebSocket is closed") }
        while true {
            let event: WebSocketCodec.Event?
            do {
                event = try codec.next()
            } catch {
                // A violation: tell the peer why (the codec names the close code), then end.
                if let code = codec.failureCloseCode, let frame = codec.closeFrame(code: code, reason: error.message) {
                    try? stream.write(frame)
                }
                end()
                throw error
            }
            switch event {
            case .text(let text):
                return .text(text)
            case .ping(_, let reply):
                try stream.write(reply)
            case .pong, .oversized:
                // `.oversized` cannot come: this codec refuses such a message (1009).
                continue
            case .close(let code, let reason, let reply):
                if let reply { try? stream.write(reply) }
                end()
                return .close(code: code, reason: reason)
            case nil:
                let n = try readChunk(stream, &chunk, timeoutMilliseconds: timeoutMilliseconds)
                if n == 0 {
                    isClosed = true
                    throw TransportError(.closed, "the peer closed the connection without a close frame")
                }
                chunk.withUnsafeBytes { codec.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            }
        }
    }

    private func end() {
        isClosed = true
        stream.close()
    }

    /// True when a complete frame may already be buffered (the loop can read without waiting).
    public var hasBufferedInput: Bool { codec.bufferedByteCount > 0 || stream.hasBufferedInput() }
}
