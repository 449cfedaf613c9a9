import COpenSSL

/// A TLS client session for the event-driven driver, over memory BIOs: the driver moves the
/// ciphertext between the socket and OpenSSL itself (non-blocking `recv`/`send` with
/// MSG_NOSIGNAL), so OpenSSL never touches the fd and never blocks. OpenSSL's WANT_READ
/// becomes "wait for the socket to be readable" and whatever it wants written is queued on
/// the connection's wire queue, which makes the socket's poll interest include POLLOUT until
/// it drains. SNI, the trusted roots and hostname/IP verification are `TLSStream`'s own
/// (`TLSStream.makeClientContext`, `configureClient`, `checkVerified`, `handshakeFailure`).
final class TLSChannel {
    private let ssl: OpaquePointer
    /// Ciphertext from the peer, read by OpenSSL (owned by `ssl`).
    private let input: OpaquePointer
    /// Ciphertext OpenSSL produced for the peer (owned by `ssl`).
    private let output: OpaquePointer
    let host: String
    private(set) var isEstablished = false
    /// The peer's close_notify arrived: no more plaintext will.
    private(set) var peerClosed = false
    /// Reused for every record read or written (no allocation per send).
    private var chunk = [UInt8](repeating: 0, count: 16384)

    /// Prepares a client session under `context` (which it retains) for `host`.
    init(context: OpaquePointer, host: String) throws(TransportError) {
        guard let ssl = SSL_new(context) else { throw TLSStream.error(.tls, "SSL_new failed") }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSStream.error(.tls, "BIO_new failed")
        }
        SSL_set_bio(ssl, input, output)
        // Writes may complete record by record and be retried from another buffer address.
        _ = SSL_ctrl(ssl, SSL_CTRL_MODE, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
        SSL_set_connect_state(ssl)
        do {
            try TLSStream.configureClient(ssl, host: host)
        } catch {
            SSL_free(ssl)
            throw error
        }
        self.ssl = ssl
        self.input = input
        self.output = output
        self.host = host
    }

    deinit { SSL_free(ssl) }

    /// Hands OpenSSL ciphertext received from the socket.
    func receive(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let n = BIO_write(input, bytes.baseAddress! + offset, Int32(min(bytes.count - offset, Int(Int32.max))))
            if n <= 0 { break }  // a memory BIO takes everything; nothing else can happen
            offset += Int(n)
        }
    }

    /// Advances the handshake as far as the received bytes allow. True once it is complete
    /// and the certificate verified; throws `.certificate` or `.tls` when it failed.
    func handshake() throws(TransportError) -> Bool {
        guard !isEstablished else { return true }
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            try TLSStream.checkVerified(ssl, host: host)
            isEstablished = true
            return true
        }
        let e = SSL_get_error(ssl, rc)
        if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE { return false }
        throw TLSStream.handshakeFailure(ssl, host: host)
    }

    /// Decrypts every complete record received so far, appending the plaintext to `out`.
    func readPlaintext(into out: inout [UInt8]) throws(TransportError) {
        while !peerClosed {
            ERR_clear_error()
            var n = 0
            let rc = chunk.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &n) }
            if rc == 1 {
                out += chunk[0..<n]
                continue
            }
            switch SSL_get_error(ssl, rc) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return
            case SSL_ERROR_ZERO_RETURN:
                peerClosed = true
            default:
                throw TLSStream.error(.tls, "TLS read from \(host) failed")
            }
        }
    }

    /// Encrypts `plaintext` (whole: a memory BIO never pushes back).
    func write(_ plaintext: UnsafeRawBufferPointer) throws(TransportError) {
        var offset = 0
        while offset < plaintext.count {
            ERR_clear_error()
            var n = 0
            let rc = SSL_write_ex(ssl, plaintext.baseAddress! + offset, plaintext.count - offset, &n)
            guard rc == 1 else { throw TLSStream.error(.tls, "TLS write to \(host) failed") }
            offset += n
        }
    }

    /// Queues our close_notify (best effort: the WebSocket close already said goodbye).
    func shutdown() {
        guard isEstablished else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Moves the ciphertext OpenSSL produced onto `wire`.
    func drainOutput(into wire: inout WireQueue) {
        while BIO_ctrl_pending(output) > 0 {
            let n = chunk.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress, Int32($0.count)) }
            guard n > 0 else { break }
            chunk.withUnsafeBytes { wire.append(UnsafeRawBufferPointer(rebasing: $0[0..<Int(n)])) }
        }
    }
}
