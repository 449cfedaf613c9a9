/// RFC 6455 framing without I/O, for the event-driven driver: bytes go in as they arrive —
/// any length, any gap in time — and whole messages come out. Partial frames and the
/// fragments of an unfinished message are kept across `feed` calls. Pings are answered (the
/// pong frame to send comes with the event), the message size limit is enforced from the
/// frame headers before any payload is buffered in full, text is validated as UTF-8, frames
/// a client sends are masked, and every protocol violation names the close code to send.
///
/// A data message over the limit is either refused (close code 1009) or, with
/// `skipsOversized`, skipped as its bytes arrive — never buffered — and reported with its first
/// ``headBytes`` bytes and its size, so one relay message over our bound does not end a
/// connection that would meet the same message again on every reconnect.
package struct WebSocketCodec {
    package typealias Role = WebSocket.Role
    typealias Opcode = WebSocket.Opcode

    /// What a run of received bytes amounted to.
    package enum Event: Equatable {
        /// A complete text message.
        case text(String)
        /// A ping arrived; `reply` is the pong frame to send (the same payload).
        case ping([UInt8], reply: [UInt8])
        /// A pong arrived.
        case pong([UInt8])
        /// The peer started or answered the close handshake; `reply` is the close frame to
        /// send back, nil when ours was already sent. No event follows.
        case close(code: UInt16, reason: String, reply: [UInt8]?)
        /// A data message over `maxMessageBytes` was skipped (with `skipsOversized`): its first
        /// bytes (at most ``WebSocketCodec/headBytes``, not validated) and its whole size.
        case oversized(head: [UInt8], bytes: UInt64)
    }

    /// How much of a skipped message is kept: enough for its verb, subscription id, event id
    /// and, in the usual field order, `created_at`.
    static let headBytes = 1024

    /// A message being skipped: what is kept of it, and the frame whose payload is passing.
    private struct Skip {
        var head: [UInt8]
        var bytes: UInt64
        /// Payload bytes of the current frame still to pass.
        var frameLeft: UInt64 = 0
        var frameFin = false
        var mask: (UInt8, UInt8, UInt8, UInt8)? = nil
        var maskOffset = 0
    }

    let role: Role
    let maxMessageBytes: Int
    /// Whether a message over the limit is skipped (`.oversized`) rather than refused.
    let skipsOversized: Bool
    private var skip: Skip? = nil
    /// Set when a frame header started or continued a skip (so `next()` goes on reading).
    private var skipStarted = false
    /// Received bytes not yet parsed: `buffer[start...]`.
    private var buffer: [UInt8] = []
    private var start = 0
    /// The fragments of the message in progress.
    private var partial: [UInt8] = []
    private var partialOpcode: Opcode? = nil
    /// A close frame was encoded by `closeFrame` (so a peer's close is not answered twice).
    private(set) var closeSent = false
    /// The peer's close arrived, or a violation ended the stream: nothing more is parsed.
    private(set) var isFinished = false
    /// The close code a violation calls for, once `next()` threw.
    private(set) var failureCloseCode: UInt16? = nil

    package init(role: Role, maxMessageBytes: Int, skipsOversized: Bool = false) {
        self.role = role
        self.maxMessageBytes = maxMessageBytes
        self.skipsOversized = skipsOversized
    }

    /// Bytes received and not yet consumed by a complete frame.
    var bufferedByteCount: Int { buffer.count - start + partial.count }

    // MARK: Receiving

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !isFinished, bytes.count > 0 else { return }
        if start > 0 && (start == buffer.count || start >= 65536) {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    package mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The next event the buffered bytes complete, nil when more bytes are needed. A
    /// protocol violation throws (`.protocolViolation`, or `.messageTooLarge` for 1009) and
    /// sets `failureCloseCode`; the codec then stays finished.
    package mutating func next() throws(TransportError) -> Event? {
        while !isFinished {
            if let current = skip {
                if current.frameLeft > 0 {
                    passSkipped()
                    if skip!.frameLeft > 0 { return nil }
                }
                if skip!.frameFin {
                    let done = skip!
                    skip = nil
                    return .oversized(head: done.head, bytes: done.bytes)
                }
            }
            guard let (fin, opcode, payload) = try nextFrame() else {
                if skipStarted {
                    skipStarted = false
                    continue
                }
                return nil
            }
            switch opcode {
            case .ping:
                return .ping(payload, reply: frame(.pong, payload))
            case .pong:
                return .pong(payload)
            case .close:
                return try closeReceived(payload)
            case .text, .binary:
                guard partialOpcode == nil, skip == nil else { throw fail(1002, "a new data frame arrived inside a fragmented message") }
                if fin {
                    // The common case, a whole message in one frame: no reassembly copy.
                    return try complete(opcode, payload)
                }
                partialOpcode = opcode
                partial = payload
            case .continuation:
                guard let kind = partialOpcode else { throw fail(1002, "a continuation frame arrived with no message to continue") }
                partial += payload
                if fin {
                    let message = partial
                    partial = []
                    partialOpcode = nil
                    return try complete(kind, message)
                }
            }
        }
        return nil
    }

    private mutating func complete(_ kind: Opcode, _ message: [UInt8]) throws(TransportError) -> Event {
        guard kind == .text else { throw fail(1003, "binary messages are not part of the Nostr protocol") }
        guard let text = String(validating: message, as: UTF8.self) else {
            throw fail(1007, "a text message is not valid UTF-8")
        }
        return .text(text)
    }

    private mutating func closeReceived(_ payload: [UInt8]) throws(TransportError) -> Event {
        guard payload.count != 1 else { throw fail(1002, "a close frame with a 1-byte payload") }
        let code: UInt16 = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
        if payload.count >= 2 && !Self.isValidCloseCode(code) { throw fail(1002, "close code \(code) is not one a peer may send") }
        guard let reason = String(validating: payload.dropFirst(2), as: UTF8.self) else {
            throw fail(1007, "the close reason is not valid UTF-8")
        }
        isFinished = true
        return .close(code: code, reason: reason, reply: closeFrame(code: code == 1005 ? 1000 : code))
    }

    /// Codes a close frame may carry (RFC 6455 §7.4): the defined ones except those reserved
    /// for local use (1004, 1005, 1006, 1015), and the registered and private ranges.
    static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014: true
        case 3000...4999: true
        default: false
        }
    }

    /// Marks the stream failed with `code` and returns the error to throw.
    private mutating func fail(_ code: UInt16, _ message: String) -> TransportError {
        isFinished = true
        failureCloseCode = code
        buffer = []
        start = 0
        partial = []
        return TransportError(code == 1009 ? .messageTooLarge : .protocolViolation, "\(message) (closed with \(code))")
    }

    private var available: Int { buffer.count - start }

    /// The next whole frame, nil while its bytes are incomplete.
    private mutating func nextFrame() throws(TransportError) -> (Bool, Opcode, [UInt8])? {
        guard available >= 2 else { return nil }
        let b0 = buffer[start]
        let b1 = buffer[start + 1]
        guard b0 & 0x70 == 0 else { throw fail(1002, "reserved bits set without a negotiated extension") }
        guard let opcode = Opcode(rawValue: b0 & 0x0F) else { throw fail(1002, "unknown opcode \(b0 & 0x0F)") }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        if role == .client && masked { throw fail(1002, "the server masked a frame") }
        if role == .server && !masked { throw fail(1002, "the client sent an unmasked frame") }
        guard let header = WebSocketFrameHeader.parse(buffer, at: start) else { return nil }
        let length = header.payloadLength
        let headerLength = header.lengthFieldEnd
        guard length >> 63 == 0 else { throw fail(1002, "frame length has its top bit set") }
        let isControl = opcode.rawValue >= 0x8
        if isControl && (length > 125 || !fin) { throw fail(1002, "control frames must be unfragmented and at most 125 bytes") }
        let maskLength = masked ? 4 : 0
        // The size limit is enforced from the header, before the payload is read.
        if !isControl && (skip != nil || UInt64(partial.count) + length > UInt64(maxMessageBytes)) {
            guard skipsOversized else { throw fail(1009, "message of over \(maxMessageBytes) bytes refused") }
            return try beginSkipping(fin: fin, opcode: opcode, length: length, headerLength: headerLength, masked: masked)
        }
        let total = headerLength + maskLength + Int(length)
        guard available >= total else { return nil }
        let payloadStart = start + headerLength + maskLength
        var payload = Array(buffer[payloadStart..<(start + total)])
        if masked {
            let key = (
                buffer[start + headerLength], buffer[start + headerLength + 1], buffer[start + headerLength + 2], buffer[start + headerLength + 3]
            )
            Self.mask(&payload, key)
        }
        start += total
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 17)
            start = 0
        }
        return (fin, opcode, payload)
    }

    /// Starts skipping a message over the limit (or its next fragment): the header and mask
    /// key are consumed, the payload passes through `passSkipped()` as it arrives. Nil, with
    /// `skipStarted` set, once the header is consumed; nil alone while it is incomplete.
    private mutating func beginSkipping(
        fin: Bool, opcode: Opcode, length: UInt64, headerLength: Int, masked: Bool
    ) throws(TransportError) -> (Bool, Opcode, [UInt8])? {
        if skip != nil {
            guard opcode == .continuation else { throw fail(1002, "a new data frame arrived inside a fragmented message") }
        } else if opcode == .continuation {
            guard partialOpcode != nil else { throw fail(1002, "a continuation frame arrived with no message to continue") }
        } else if partialOpcode != nil {
            throw fail(1002, "a new data frame arrived inside a fragmented message")
        }
        let maskLength = masked ? 4 : 0
        guard available >= headerLength + maskLength else { return nil }
        var current = skip ?? Skip(head: Array(partial.prefix(Self.headBytes)), bytes: UInt64(partial.count))
        partial = []
        partialOpcode = nil
        let k = start + headerLength
        current.mask = masked ? (buffer[k], buffer[k + 1], buffer[k + 2], buffer[k + 3]) : nil
        current.maskOffset = 0
        current.frameLeft = length
        current.frameFin = fin
        current.bytes += length
        skip = current
        start += headerLength + maskLength
        skipStarted = true
        return nil
    }

    /// Passes over what has arrived of the skipped frame's payload, keeping the message's head.
    private mutating func passSkipped() {
        guard var current = skip else { return }
        let n = Int(min(UInt64(available), current.frameLeft))
        let keep = min(n, Self.headBytes - current.head.count)
        if keep > 0 {
            var kept = Array(buffer[start..<(start + keep)])
            if let key = current.mask {
                let k = [key.0, key.1, key.2, key.3]
                for i in kept.indices { kept[i] ^= k[(current.maskOffset + i) & 3] }
            }
            current.head += kept
        }
        start += n
        current.maskOffset += n
        current.frameLeft -= UInt64(n)
        skip = current
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 17)
            start = 0
        }
    }

    // MARK: Sending

    /// A text frame carrying `text`.
    func textFrame(_ text: String) -> [UInt8] {
        var utf8 = Array(text.utf8)
        return utf8.withUnsafeMutableBytes { frame(.text, UnsafeRawBufferPointer($0)) }
    }

    /// A ping frame (empty payload).
    func pingFrame() -> [UInt8] { frame(.ping, []) }

    /// The close frame with `code` (and a reason cut to fit 125 bytes), or nil when one was
    /// already produced: a close is sent once.
    mutating func closeFrame(code: UInt16, reason: String = "") -> [UInt8]? {
        guard !closeSent else { return nil }
        closeSent = true
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        var cut = Array(reason.utf8.prefix(123))
        while !cut.isEmpty && String(validating: cut, as: UTF8.self) == nil { cut.removeLast() }
        payload += cut
        return frame(.close, payload)
    }

    func frame(_ opcode: Opcode, _ payload: [UInt8]) -> [UInt8] {
        payload.withUnsafeBytes { Self.encode(opcode, $0, role: role) }
    }

    func frame(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) -> [UInt8] {
        Self.encode(opcode, payload, role: role)
    }

    /// One final frame with `payload`, masked with a fresh key when `role` is the client
    /// (RFC 6455 §5.3). The blocking `WebSocket` sends through it too.
    static func encode(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer, role: Role) -> [UInt8] {
        var out = WebSocketFrameHeader.bytes(fin: true, opcode: opcode.rawValue, masked: role == .client, payloadLength: payload.count)
        out.reserveCapacity(out.count + 4 + payload.count)
        guard role == .client else {
            out.append(contentsOf: payload)
            return out
        }
        let k = UInt32.random(in: 0...UInt32.max)
        let key = (UInt8(k >> 24), UInt8((k >> 16) & 0xFF), UInt8((k >> 8) & 0xFF), UInt8(k & 0xFF))
        out += [key.0, key.1, key.2, key.3]
        let bodyStart = out.count
        out.append(contentsOf: payload)
        out.withUnsafeMutableBytes { raw in mask(UnsafeMutableRawBufferPointer(rebasing: raw[bodyStart...]), key) }
        return out
    }

    private static func mask(_ bytes: inout [UInt8], _ key: (UInt8, UInt8, UInt8, UInt8)) {
        bytes.withUnsafeMutableBytes { mask($0, key) }
    }

    /// XORs `bytes` with the 4-byte masking key (masking and unmasking are the same), eight
    /// bytes at a time: every byte a client sends passes through here.
    static func mask(_ bytes: UnsafeMutableRawBufferPointer, _ key: (UInt8, UInt8, UInt8, UInt8)) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let k = [key.0, key.1, key.2, key.3]
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { p in
            for i in 0..<8 { p[i] = k[i & 3] }
        }
        var i = 0
        while i + 8 <= bytes.count {
            let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            base.storeBytes(of: word ^ pattern, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            bytes[i] ^= k[i & 3]
            i += 1
        }
    }
}
