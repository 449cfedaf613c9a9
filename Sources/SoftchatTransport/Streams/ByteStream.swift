/// Why a connection failed, said plainly. Transport failures are conditions of the network
/// or the peer, not of the caller's input, so they carry no contract error code; the managed
/// transport reacts to every one of them the same way: transportLost, then backoff.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case resolve, connect, timeout, closed, io, tls, certificate, handshake, protocolViolation, messageTooLarge, http
    }
    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}

/// A bidirectional byte stream (TCP, TLS over TCP, Noise over TCP). WebSocket runs on any of
/// them unchanged, so everything above the stream is shared.
public protocol ByteStream: AnyObject {
    /// Reads at least one byte into `buffer`, waiting at most `timeoutMilliseconds` (-1: no
    /// limit). Returns 0 only at end of stream; throws `.timeout` when nothing arrived.
    func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int
    /// Writes all of `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError)
    /// True when a read would not block (buffered plaintext, or readable socket).
    func hasBufferedInput() -> Bool
    func close()
}

extension ByteStream {
    public func write(_ bytes: [UInt8]) throws(TransportError) {
        let result: Result<Void, TransportError> = bytes.withUnsafeBytes { raw in
            Result { () throws(TransportError) in try write(raw) }
        }
        try result.get()
    }
}
