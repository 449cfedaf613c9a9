/// Why a connection failed, said plainly. Transport failures are conditions of the network
/// or the peer, not of the caller's input, so they carry no contract error code; the managed
/// transport reacts to every one of them the same way: transportLost, then backoff.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category of a transport failure; its raw value opens ``TransportError/description``.
    public enum Kind: String, Sendable {
        /// The host name did not resolve to any address.
        case resolve
        /// No TCP connection could be made, or the relay URLs given (or their Noise parameters) are not
        /// usable.
        case connect
        /// Nothing arrived, or a connect, handshake or write did not finish, in time.
        case timeout
        /// The connection is closed, by this side or by the peer.
        case closed
        /// A socket call failed.
        case io
        /// OpenSSL failed: a context, a handshake, a read or a write.
        case tls
        /// The peer's certificate chain or name failed verification.
        case certificate
        /// The WebSocket opening handshake or the Noise handshake (its static key file included)
        /// failed.
        case handshake
        /// The peer broke RFC 6455 or sent a Noise transport message that failed authentication.
        case protocolViolation
        /// A WebSocket message exceeded the size limit (close code 1009).
        case messageTooLarge
        /// An HTTP exchange failed: a refused request, a NIP-11 answer other than 200, or a document
        /// that is too large or not JSON.
        case http
    }
    /// The category of the failure.
    public let kind: Kind
    /// A human-readable account of the failure, naming the host or operation involved.
    public let message: String

    /// Creates an error of `kind` explained by `message`.
    /// - Parameters:
    ///   - kind: The category of the failure.
    ///   - message: A human-readable explanation, shown after the kind in
    ///     ``TransportError/description``.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The kind's raw value and the message, as `"timeout: no data within 1000 ms"`.
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// A bidirectional byte stream (TCP, TLS over TCP, Noise over TCP). WebSocket runs on any of
/// them unchanged, so everything above the stream is shared.
public protocol ByteStream: AnyObject {
    /// Reads at least one byte into `buffer`, waiting at most `timeoutMilliseconds` (-1: no
    /// limit). Returns 0 only at end of stream; throws `.timeout` when nothing arrived.
    /// - Parameters:
    ///   - buffer: Where the bytes go; at most `buffer.count` are read.
    ///   - timeoutMilliseconds: The longest wait for data, or -1 to wait without limit.
    /// - Returns: The number of bytes read, at least 1, or 0 at end of stream.
    /// - Throws: ``TransportError``: `.timeout` when nothing arrived in time, `.closed` after
    ///   ``ByteStream/close()``, or the failure of the underlying connection.
    func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int
    /// Writes all of `bytes`, waiting for the connection to take them.
    /// - Parameter bytes: The bytes to send.
    /// - Throws: ``TransportError``: `.closed` after ``ByteStream/close()``, `.timeout` when the
    ///   peer stops taking data, or the failure of the underlying connection.
    func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError)
    /// Whether a read would return without waiting (buffered plaintext, or a readable socket).
    /// - Returns: `true` when data (or end of stream) is ready to be read.
    func hasBufferedInput() -> Bool
    /// Closes the stream, so that later reads and writes fail with `.closed`. Idempotent.
    func close()
}

extension ByteStream {
    /// Writes all of `bytes` through the stream's raw-buffer `write(_:)`.
    /// - Parameter bytes: The bytes to send.
    /// - Throws: ``TransportError``, as the stream's own write throws it.
    public func write(_ bytes: [UInt8]) throws(TransportError) {
        let result: Result<Void, TransportError> = bytes.withUnsafeBytes { raw in
            Result { () throws(TransportError) in try write(raw) }
        }
        try result.get()
    }
}
