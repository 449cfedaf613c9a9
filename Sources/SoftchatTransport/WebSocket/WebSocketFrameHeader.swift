/// The layout of an RFC 6455 frame header (§5.2): FIN, reserved bits, opcode, mask bit and the
/// 7-, 16- or 64-bit payload length. One reading and one writing of it, shared by the codec
/// (which validates what it reads) and the test relay's fault proxy (which only re-frames).
public struct WebSocketFrameHeader: Sendable, Equatable {
    /// The FIN bit: this frame ends its message.
    public var fin: Bool
    /// The three reserved bits (`b0 & 0x70`); nonzero only with a negotiated extension.
    public var reservedBits: UInt8
    /// The 4-bit opcode (`b0 & 0x0F`): 0x0 continuation, 0x1 text, 0x2 binary, 0x8 close,
    /// 0x9 ping, 0xA pong; other values are reserved.
    public var opcode: UInt8
    /// The mask bit: a 4-byte masking key follows the length field.
    public var masked: Bool
    /// As written: a 64-bit length may have its top bit set, which RFC 6455 forbids.
    public var payloadLength: UInt64
    /// Bytes before the masking key: 2, 4 or 10.
    public var lengthFieldEnd: Int

    /// Header bytes including the masking key.
    public var length: Int { lengthFieldEnd + (masked ? 4 : 0) }

    /// Where the length field ends (2, 4 or 10), from the header's second byte.
    /// - Parameter b1: The header's second byte (mask bit and 7-bit length).
    /// - Returns: 4 for a 16-bit length (126), 10 for a 64-bit length (127), else 2.
    public static func lengthFieldEnd(secondByte b1: UInt8) -> Int {
        switch b1 & 0x7F {
        case 126: 4
        case 127: 10
        default: 2
        }
    }

    /// The header at `start`, nil while its length field is incomplete. The masking key and
    /// the payload are not looked at.
    /// - Parameters:
    ///   - bytes: A buffer holding the frame, possibly only its beginning.
    ///   - start: The index of the frame's first byte in `bytes`.
    /// - Returns: The parsed header, or nil when `bytes` ends before the length field does.
    public static func parse(_ bytes: [UInt8], at start: Int) -> WebSocketFrameHeader? {
        guard bytes.count - start >= 2 else { return nil }
        let b0 = bytes[start]
        let b1 = bytes[start + 1]
        let end = lengthFieldEnd(secondByte: b1)
        guard bytes.count - start >= end else { return nil }
        var length = UInt64(b1 & 0x7F)
        if end > 2 {
            length = 0
            for k in 2..<end { length = length << 8 | UInt64(bytes[start + k]) }
        }
        return WebSocketFrameHeader(
            fin: b0 & 0x80 != 0, reservedBits: b0 & 0x70, opcode: b0 & 0x0F, masked: b1 & 0x80 != 0,
            payloadLength: length, lengthFieldEnd: end)
    }

    /// The header bytes of a frame, without a masking key (the caller appends it when `masked`).
    /// - Parameters:
    ///   - fin: Whether the frame ends its message.
    ///   - opcode: The opcode (0x0–0xF), written into the first byte's low bits.
    ///   - masked: Whether to set the mask bit.
    ///   - payloadLength: The payload's length, in the shortest of the 7-, 16- and 64-bit forms.
    /// - Returns: The 2, 4 or 10 header bytes.
    public static func bytes(fin: Bool, opcode: UInt8, masked: Bool, payloadLength: Int) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payloadLength < 126 {
            out.append(maskBit | UInt8(payloadLength))
        } else if payloadLength <= 0xFFFF {
            out += [maskBit | 126, UInt8(payloadLength >> 8), UInt8(payloadLength & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((UInt64(payloadLength) >> UInt64(shift)) & 0xFF)) }
        }
        return out
    }
}
