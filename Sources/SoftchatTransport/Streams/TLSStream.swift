import COpenSSL
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// TLS settings. Verification is always on: the peer's chain must reach a trusted root (the
/// system store, or `caFile` for tests and private CAs) and name the host (DNS or IP).
public struct TLSOptions: Sendable, Hashable {
    /// PEM file of CA certificates to trust instead of the system store.
    public var caFile: String?
    /// CA certificates to trust instead of the system store, as PEM text: what an app gives on
    /// a platform with no OpenSSL store to read (a phone), or for a private CA. With `caFile`
    /// too, both are trusted.
    public var caPEM: String?
    /// Creates TLS settings that trust `caFile` and `caPEM`, or the system store when both are nil.
    /// - Parameters:
    ///   - caFile: A PEM file of CA certificates to trust instead of the system store.
    ///   - caPEM: PEM text of CA certificates to trust instead of the system store.
    public init(caFile: String? = nil, caPEM: String? = nil) {
        self.caFile = caFile
        self.caPEM = caPEM
    }
}

/// A TLS 1.2+ connection over a TCP stream through OpenSSL: SNI, certificate chain and
/// hostname verification on the client side; certificate and key for the test relay's side.
/// A peer that vanished makes a write fail with EPIPE, never raise SIGPIPE (`withoutSIGPIPE`).
public final class TLSStream: ByteStream, @unchecked Sendable {
    // @unchecked: one owner drives a stream at a time.
    private let tcp: TCPStream
    private let ctx: OpaquePointer
    private let ssl: OpaquePointer
    /// Set by the first close(), which may come from another thread than a blocked read's.
    private let closed = Atomic(false)

    /// Client side: handshakes with `host` and verifies its certificate.
    /// - Parameters:
    ///   - tcp: The connected TCP stream to run TLS over; closing the TLS stream closes it.
    ///   - host: The name (sent as SNI) or IP literal the certificate must carry.
    ///   - options: Which CAs to trust.
    ///   - timeoutMilliseconds: The longest wait for the whole handshake.
    /// - Throws: ``TransportError``: `.certificate` when the chain or the name fails
    ///   verification, `.timeout` when the handshake stalls, `.tls` for any other OpenSSL
    ///   failure (including a CA file that cannot be loaded).
    public init(client tcp: TCPStream, host: String, options: TLSOptions, timeoutMilliseconds: Int32) throws(TransportError) {
        let ctx = try Self.makeClientContext(options)
        self.tcp = tcp
        self.ctx = ctx
        guard let ssl = SSL_new(ctx) else {
            SSL_CTX_free(ctx)
            throw Self.error(.tls, "SSL_new failed")
        }
        self.ssl = ssl
        SSL_set_fd(ssl, tcp.fd)
        try Self.configureClient(ssl, host: host)
        try handshake(connect: true, timeoutMilliseconds: timeoutMilliseconds, host: host)
        try Self.checkVerified(ssl, host: host)
    }

    // MARK: Client setup shared with the event-driven driver (IODriver's TLS channel)

    /// TLS 1.2's cipher suites a client offers: forward-secret (ephemeral ECDH) AEAD suites
    /// only, so a recorded session cannot be decrypted with the server's key later. (Every TLS
    /// 1.3 suite is forward-secret.)
    static let tls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20"

    /// A client context: TLS 1.2 or later with forward-secret suites only, peer verification
    /// on, trusting `options.caFile` or else the system store. The caller owns (frees) it.
    static func makeClientContext(_ options: TLSOptions) throws(TransportError) -> OpaquePointer {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw Self.error(.tls, "SSL_CTX_new failed") }
        SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        guard SSL_CTX_set_cipher_list(ctx, tls12Ciphers) == 1 else {
            SSL_CTX_free(ctx)
            throw Self.error(.tls, "cannot set the TLS 1.2 cipher suites")
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let caFile = options.caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                SSL_CTX_free(ctx)
                throw Self.error(.tls, "cannot load CA file \(caFile)")
            }
        }
        if let pem = options.caPEM {
            do throws(TransportError) {
                try addCertificates(pem, to: ctx)
            } catch {
                SSL_CTX_free(ctx)
                throw error
            }
        }
        if options.caFile == nil && options.caPEM == nil {
            SSL_CTX_set_default_verify_paths(ctx)
        }
        return ctx
    }

    /// The most PEM text read as trusted CA certificates (a bundle of a few hundred CAs is
    /// about 200 KB).
    static let maxCAPEMBytes = 4 << 20

    /// Adds every certificate in `pem` to the context's trust store; text with none, or with a
    /// block that does not parse, is refused, never trusted in part.
    static func addCertificates(_ pem: String, to ctx: OpaquePointer) throws(TransportError) {
        let bytes = Array(pem.utf8)
        guard bytes.count <= maxCAPEMBytes else { throw Self.error(.tls, "CA PEM text is over \(maxCAPEMBytes) bytes") }
        guard let store = SSL_CTX_get_cert_store(ctx) else { throw Self.error(.tls, "the TLS context has no certificate store") }
        var added = 0
        var failure: String?
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                failure = "cannot read CA PEM text"
                return
            }
            defer { BIO_free(bio) }
            while true {
                ERR_clear_error()
                guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
                    // The end of the text, or a block that is not a certificate.
                    let reason = ERR_peek_last_error()
                    let endOfText = ERR_GET_LIB(reason) == ERR_LIB_PEM && ERR_GET_REASON(reason) == PEM_R_NO_START_LINE
                    if !endOfText || added == 0 {
                        failure = added == 0 ? "CA PEM text holds no certificate" : "CA PEM text has a block that does not parse"
                    }
                    ERR_clear_error()
                    return
                }
                defer { X509_free(certificate) }
                guard X509_STORE_add_cert(store, certificate) == 1 else {
                    failure = "cannot trust a certificate of the CA PEM text"
                    return
                }
                added += 1
            }
        }
        if let failure { throw Self.error(.tls, failure) }
    }

    /// What the certificate must name: an IP literal is checked against the IP SANs; a host
    /// name is sent as SNI and checked against the DNS SANs only — never the subject's common
    /// name, whatever the certificate holds (`X509_CHECK_FLAG_NEVER_CHECK_SUBJECT`), and no
    /// partial wildcards. Each setting is checked: a host OpenSSL would not verify is refused
    /// before the handshake, never connected to unverified.
    static func configureClient(_ ssl: OpaquePointer, host: String) throws(TransportError) {
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let param = SSL_get0_param(ssl)
        X509_VERIFY_PARAM_set_hostflags(param, UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        if Self.isIPAddress(bareHost) {
            guard X509_VERIFY_PARAM_set1_ip_asc(param, bareHost) == 1 else {
                throw Self.error(.tls, "cannot set \(host) as the address the certificate must name")
            }
        } else {
            // SNI, and the name the certificate must carry.
            let sni = bareHost.withCString {
                SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0))
            }
            guard sni == 1 else { throw Self.error(.tls, "cannot send \(host) as the TLS server name") }
            guard SSL_set1_host(ssl, bareHost) == 1 else { throw Self.error(.tls, "cannot set \(host) as the name the certificate must carry") }
        }
    }

    /// After a completed handshake: the chain and name verified (belt and braces: with
    /// SSL_VERIFY_PEER a failed verification already fails the handshake).
    static func checkVerified(_ ssl: OpaquePointer, host: String) throws(TransportError) {
        let verify = SSL_get_verify_result(ssl)
        guard verify == X509_V_OK else {
            throw TransportError(.certificate, "certificate of \(host) rejected: \(String(cString: X509_verify_cert_error_string(verify)))")
        }
    }

    /// Why a handshake failed: `.certificate` when verification refused the peer, else the
    /// OpenSSL reason as `.tls`.
    static func handshakeFailure(_ ssl: OpaquePointer, host: String) -> TransportError {
        let verify = SSL_get_verify_result(ssl)
        if verify != X509_V_OK {
            ERR_clear_error()
            return TransportError(.certificate, "certificate of \(host) rejected: \(String(cString: X509_verify_cert_error_string(verify)))")
        }
        return Self.error(.tls, "TLS handshake with \(host) failed")
    }

    /// Server side (the embedded test relay): presents `certificateFile` (PEM chain) and `keyFile`.
    /// - Parameters:
    ///   - tcp: The accepted TCP stream to run TLS over; closing the TLS stream closes it.
    ///   - certificateFile: A PEM file holding the certificate chain, leaf first.
    ///   - keyFile: A PEM file holding the certificate's private key.
    ///   - timeoutMilliseconds: The longest wait for the whole handshake.
    /// - Throws: ``TransportError``: `.tls` when the certificate or key cannot be loaded or the
    ///   handshake fails, `.timeout` when the handshake stalls.
    public init(server tcp: TCPStream, certificateFile: String, keyFile: String, timeoutMilliseconds: Int32) throws(TransportError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw Self.error(.tls, "SSL_CTX_new failed") }
        self.tcp = tcp
        self.ctx = ctx
        SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1,
            SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM) == 1
        else {
            SSL_CTX_free(ctx)
            throw Self.error(.tls, "cannot load certificate \(certificateFile) or key")
        }
        guard let ssl = SSL_new(ctx) else {
            SSL_CTX_free(ctx)
            throw Self.error(.tls, "SSL_new failed")
        }
        self.ssl = ssl
        SSL_set_fd(ssl, tcp.fd)
        try handshake(connect: false, timeoutMilliseconds: timeoutMilliseconds, host: "client")
    }

    deinit {
        close()
        SSL_free(ssl)
        SSL_CTX_free(ctx)
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The most recent OpenSSL error queue entry, or `fallback`.
    static func error(_ kind: TransportError.Kind, _ fallback: String) -> TransportError {
        let code = ERR_get_error()
        guard code != 0 else { return TransportError(kind, fallback) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        ERR_clear_error()
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return TransportError(kind, "\(fallback): \(text)")
    }

    /// The whole handshake within `timeoutMilliseconds`, however the peer trickles its records.
    private func handshake(connect: Bool, timeoutMilliseconds: Int32, host: String) throws(TransportError) {
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        while true {
            let rc = withoutSIGPIPE { connect ? SSL_connect(ssl) : SSL_accept(ssl) }
            if rc == 1 { return }
            let e = SSL_get_error(ssl, rc)
            if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE {
                var p = pollfd(fd: tcp.fd, events: Int16(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), revents: 0)
                if deadline.hasPassed || poll(&p, 1, deadline.remaining) <= 0 {
                    throw TransportError(.timeout, "TLS handshake with \(host) timed out")
                }
                continue
            }
            throw Self.handshakeFailure(ssl, host: host)
        }
    }

    /// Reads decrypted bytes, up to `buffer.count`, waiting at most `timeoutMilliseconds` for
    /// the network each time OpenSSL needs more.
    /// - Parameters:
    ///   - buffer: Where the plaintext goes.
    ///   - timeoutMilliseconds: The longest wait for the socket, or -1 to wait without limit.
    /// - Returns: The number of bytes read, or 0 at end of stream (a close_notify, or the peer
    ///   closing the TCP connection without one).
    /// - Throws: ``TransportError``: `.closed` once the stream is closed, `.timeout` when
    ///   nothing arrived in time, `.tls` when OpenSSL fails.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32) throws(TransportError) -> Int {
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        // One deadline for the whole call: a peer trickling a record a byte at a time must not
        // get the full timeout again for each byte.
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        while true {
            var n = 0
            let rc = withoutSIGPIPE { SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &n) }
            if rc == 1 { return n }
            let e = SSL_get_error(ssl, rc)
            switch e {
            case SSL_ERROR_ZERO_RETURN: return 0
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                var p = pollfd(fd: tcp.fd, events: Int16(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), revents: 0)
                let ready = deadline.hasPassed ? 0 : poll(&p, 1, deadline.remaining)
                if ready == 0 { throw TransportError(.timeout, "no data within \(timeoutMilliseconds) ms") }
            case SSL_ERROR_SYSCALL:
                ERR_clear_error()
                return 0  // the peer closed without close_notify: end of stream
            default:
                throw Self.error(.tls, "TLS read failed")
            }
        }
    }

    /// Encrypts and sends all of `bytes`, waiting up to 30 seconds each time the socket
    /// cannot take more.
    /// - Parameter bytes: The plaintext to send.
    /// - Throws: ``TransportError``: `.closed` once the stream is closed, `.timeout` when the
    ///   socket stayed unavailable for 30 seconds, `.tls` when OpenSSL fails (a peer that is
    ///   gone included).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        guard !closed.load(ordering: .acquiring) else { throw TransportError(.closed, "the connection is closed") }
        var offset = 0
        while offset < bytes.count {
            var n = 0
            let rc = withoutSIGPIPE { SSL_write_ex(ssl, bytes.baseAddress! + offset, bytes.count - offset, &n) }
            if rc == 1 {
                offset += n
                continue
            }
            let e = SSL_get_error(ssl, rc)
            if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE {
                var p = pollfd(fd: tcp.fd, events: Int16(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), revents: 0)
                if poll(&p, 1, 30_000) <= 0 { throw TransportError(.timeout, "TLS write stalled for 30 s") }
                continue
            }
            throw Self.error(.tls, "TLS write failed")
        }
    }

    /// Whether a read would not block: OpenSSL holds decrypted bytes, or the socket is readable.
    /// - Returns: `true` when plaintext is buffered or the TCP stream has input.
    public func hasBufferedInput() -> Bool { SSL_pending(ssl) > 0 || tcp.hasBufferedInput() }

    /// Sends a TLS close_notify (if the connection still takes it) and shuts the TCP stream
    /// down. Idempotent; the OpenSSL objects are freed when the stream is released.
    public func close() {
        guard closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        _ = withoutSIGPIPE { SSL_shutdown(ssl) }
        tcp.close()
    }
}
