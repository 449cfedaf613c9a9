import Foundation
import SoftchatClient
import SoftchatCore
import SoftchatSync
import SoftchatTestRelay
import Testing

@testable import SoftchatTransport

/// A throwaway PKI made with the openssl command line: a test CA, and server certificates that
/// are valid, expired, for the wrong host, or self-signed (untrusted).
final class TestPKI: Sendable {
    let dir: String

    init() throws {
        dir = NSTemporaryDirectory() + "softchat-pki-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try run([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem",
            "-days", "2", "-subj", "/CN=Softchat Test CA",
        ])
        // `openssl ca` takes explicit validity dates, which the expired certificate needs.
        try "".write(toFile: "\(dir)/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: "\(dir)/serial", atomically: true, encoding: .utf8)
        try """
        [ca]
        default_ca = test
        [test]
        dir = \(dir)
        database = \(dir)/index.txt
        serial = \(dir)/serial
        new_certs_dir = \(dir)
        certificate = \(dir)/ca.pem
        private_key = \(dir)/ca.key
        default_md = sha256
        policy = anything
        copy_extensions = copy
        unique_subject = no
        [anything]
        commonName = supplied
        """.write(toFile: "\(dir)/ca.cnf", atomically: true, encoding: .utf8)
        try issue("valid", san: "IP:127.0.0.1,DNS:localhost", start: nil, end: nil)
        try issue("wronghost", san: "DNS:other.example", start: nil, end: nil)
        try issue("expired", san: "IP:127.0.0.1,DNS:localhost", start: "20200101000000Z", end: "20200102000000Z")
        // The name only in the subject's common name, no subjectAltName: RFC 6125 says a client
        // must not fall back to the CN; OpenSSL does unless told never to.
        try issue("cnonly", cn: "localhost", san: nil, start: nil, end: nil)
        try run([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/selfsigned.key", "-out", "\(dir)/selfsigned.pem",
            "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ])
    }

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    func certificate(_ name: String) -> String { "\(dir)/\(name).pem" }
    func key(_ name: String) -> String { "\(dir)/\(name).key" }
    var caFile: String { "\(dir)/ca.pem" }

    private func issue(_ name: String, cn: String? = nil, san: String?, start: String?, end: String?) throws {
        try run(
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key(name), "-out", "\(dir)/\(name).csr",
                "-subj", "/CN=\(cn ?? name)",
            ] + (san.map { ["-addext", "subjectAltName=\($0)"] } ?? []))
        var args = ["ca", "-batch", "-config", "\(dir)/ca.cnf", "-in", "\(dir)/\(name).csr", "-out", certificate(name)]
        if let start, let end { args += ["-startdate", start, "-enddate", end] } else { args += ["-days", "2"] }
        try run(args)
    }

    private func run(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TransportError(.tls, "openssl \(args.first ?? "") failed") }
    }
}

@Suite(.serialized) struct TLSTests {
    static let pki = Result { try TestPKI() }

    func relay(_ name: String) throws -> TestRelay {
        let pki = try Self.pki.get()
        var options = TestRelayOptions()
        options.certificateFile = pki.certificate(name)
        options.keyFile = pki.key(name)
        return try TestRelay(options: options)
    }

    func connect(_ relay: TestRelay, trusting caFile: String?) throws(TransportError) -> WebSocket {
        try WebSocketClient.connect(
            try RelayEndpoint(relay.url),
            options: ConnectionOptions(tls: TLSOptions(caFile: caFile), connectTimeoutMilliseconds: 3000))
    }

    @Test func wssWithATrustedCertificateCarriesRelayFrames() throws {
        let relay = try relay("valid")
        defer { relay.stop() }
        #expect(relay.url.hasPrefix("wss://"))
        let ws = try connect(relay, trusting: try Self.pki.get().caFile)
        try ws.send(text: #"["REQ","s",{"kinds":[1]}]"#)
        #expect(try ws.receive(timeoutMilliseconds: 3000) == .text(#"["EOSE","s"]"#))
        ws.close()
    }

    @Test func anExpiredCertificateIsRefused() throws {
        let relay = try relay("expired")
        defer { relay.stop() }
        expectCertificateRefusal(try Self.pki.get().caFile, relay, mentioning: "expired")
    }

    @Test func aCertificateForAnotherHostIsRefused() throws {
        let relay = try relay("wronghost")
        defer { relay.stop() }
        expectCertificateRefusal(try Self.pki.get().caFile, relay, mentioning: "mismatch")
    }

    @Test func aSelfSignedCertificateIsRefused() throws {
        let relay = try relay("selfsigned")
        defer { relay.stop() }
        expectCertificateRefusal(try Self.pki.get().caFile, relay, mentioning: "self-signed")
    }

    @Test func aNameOnlyInTheCommonNameIsRefused() throws {
        let relay = try relay("cnonly")
        defer { relay.stop() }
        let url = relay.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let endpoint = try RelayEndpoint(url)
        let options = ConnectionOptions(tls: TLSOptions(caFile: try Self.pki.get().caFile), connectTimeoutMilliseconds: 3000)
        do throws(TransportError) {
            _ = try WebSocketClient.connect(endpoint, options: options)
            Issue.record("a certificate naming localhost only in its CN was accepted for \(url)")
        } catch {
            #expect(error.kind == .certificate, "\(error)")
            #expect(error.message.contains("mismatch"), "\(error)")
        }
    }

    /// A TLS 1.2 server that offers only suites without forward secrecy (RSA key exchange) is
    /// refused in the handshake; one that offers an ECDHE suite is accepted. `openssl s_server`
    /// plays the server.
    @Test(arguments: [("AES128-GCM-SHA256", false), ("AES256-SHA256", false), ("ECDHE-RSA-AES128-GCM-SHA256", true)])
    func tls12SuitesWithoutForwardSecrecyAreRefused(cipher: String, accepted: Bool) throws {
        let pki = try Self.pki.get()
        let listener = try TCPListener()
        let port = listener.port
        listener.close()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        server.arguments = [
            "s_server", "-accept", "127.0.0.1:\(port)", "-cert", pki.certificate("valid"), "-key", pki.key("valid"),
            "-tls1_2", "-cipher", cipher, "-naccept", "1", "-quiet",
        ]
        server.standardInput = Pipe()
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        var tcp: TCPStream?
        for _ in 0..<50 where tcp == nil {
            tcp = try? TCPStream.connect(host: "127.0.0.1", port: port, timeoutMilliseconds: 1000)
            if tcp == nil { usleep(100_000) }
        }
        let stream = try #require(tcp, "openssl s_server did not listen")
        do throws(TransportError) {
            let tls = try TLSStream(client: stream, host: "127.0.0.1", options: TLSOptions(caFile: pki.caFile), timeoutMilliseconds: 3000)
            #expect(accepted, "a TLS 1.2 handshake with \(cipher) succeeded")
            tls.close()
        } catch {
            #expect(!accepted, "\(cipher): \(error)")
            #expect(error.kind == .tls, "\(error)")
            stream.close()
        }
    }

    /// The trust an app gives as PEM text (a phone has no OpenSSL store to read).
    @Test func aCAGivenAsPEMTextIsTrusted() throws {
        let relay = try relay("valid")
        defer { relay.stop() }
        let pem = try String(contentsOfFile: try Self.pki.get().caFile, encoding: .utf8)
        let ws = try WebSocketClient.connect(
            try RelayEndpoint(relay.url), options: ConnectionOptions(tls: TLSOptions(caPEM: pem), connectTimeoutMilliseconds: 3000))
        try ws.send(text: #"["REQ","s",{"kinds":[1]}]"#)
        #expect(try ws.receive(timeoutMilliseconds: 3000) == .text(#"["EOSE","s"]"#))
        ws.close()
    }

    @Test(arguments: ["", "not a certificate at all", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"])
    func pemTextWithoutAUsableCertificateIsRefused(pem: String) throws {
        let relay = try relay("valid")
        defer { relay.stop() }
        do {
            _ = try WebSocketClient.connect(
                try RelayEndpoint(relay.url), options: ConnectionOptions(tls: TLSOptions(caPEM: pem), connectTimeoutMilliseconds: 3000))
            Issue.record("connected with CA PEM text \(pem.debugDescription)")
        } catch {
            #expect(error.kind == .tls, "\(error)")
        }
    }

    @Test func aValidCAFollowedByABrokenBlockIsRefused() throws {
        let relay = try relay("valid")
        defer { relay.stop() }
        let pem =
            try String(contentsOfFile: try Self.pki.get().caFile, encoding: .utf8) + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        do {
            _ = try WebSocketClient.connect(
                try RelayEndpoint(relay.url), options: ConnectionOptions(tls: TLSOptions(caPEM: pem), connectTimeoutMilliseconds: 3000))
            Issue.record("connected with a broken block after the CA")
        } catch {
            #expect(error.kind == .tls && error.message.contains("does not parse"), "\(error)")
        }
    }

    @Test func theSystemStoreDoesNotTrustTheTestCA() throws {
        let relay = try relay("valid")
        defer { relay.stop() }
        expectCertificateRefusal(nil, relay, mentioning: "certificate")
    }

    func expectCertificateRefusal(
        _ caFile: String?, _ relay: TestRelay, mentioning text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try connect(relay, trusting: caFile)
            Issue.record("the certificate was accepted", sourceLocation: sourceLocation)
        } catch {
            #expect(error.kind == .certificate, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text), "\(error)", sourceLocation: sourceLocation)
        }
    }
}
