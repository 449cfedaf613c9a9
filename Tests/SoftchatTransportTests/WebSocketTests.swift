import Foundation
import SoftchatClient
import SoftchatCore
import SoftchatSync
import SoftchatTestRelay
import Testing

@testable import SoftchatTransport

/// A raw server socket on loopback that the test drives byte by byte, to feed the client
/// frames a well-behaved server would never send.
final class RawServer: @unchecked Sendable {
    let listener: TCPListener
    var port: Int { listener.port }
    init() throws { listener = try TCPListener() }

    /// Accepts one client and completes the opening handshake; returns the server side.
    func acceptWebSocket() throws -> WebSocket {
        for _ in 0..<200 {
            if let tcp = try listener.accept(timeoutMilliseconds: 25) {
                guard case .websocket(let ws) = try ServerHandshake.accept(tcp, timeoutMilliseconds: 2000) else {
                    throw TransportError(.handshake, "expected an upgrade")
                }
                return ws
            }
        }
        throw TransportError(.timeout, "no client")
    }

    func acceptRaw() throws -> TCPStream {
        for _ in 0..<200 { if let tcp = try listener.accept(timeoutMilliseconds: 25) { return tcp } }
        throw TransportError(.timeout, "no client")
    }
}

/// Connects a client while the server side is accepted on another thread.
func connectedPair(maxMessageBytes: Int = RelayWireContract.maxFrameBytes.value) throws -> (client: WebSocket, server: WebSocket) {
    let server = try RawServer()
    nonisolated(unsafe) var accepted: Result<WebSocket, any Error>? = nil
    let done = DispatchSemaphore(value: 0)
    DispatchQueue(label: "softchat.test").async {
        accepted = Result { try server.acceptWebSocket() }
        done.signal()
    }
    let client = try WebSocketClient.connect(
        try RelayEndpoint("ws://127.0.0.1:\(server.port)"),
        options: ConnectionOptions(connectTimeoutMilliseconds: 2000, maxMessageBytes: maxMessageBytes))
    done.wait()
    return (client, try accepted!.get())
}

@Suite struct WebSocketTests {
    @Test func textMessagesTravelBothWaysMaskedFromTheClient() throws {
        let (client, server) = try connectedPair()
        try client.send(text: "[\"REQ\",\"s\",{}]")
        #expect(try server.receive(timeoutMilliseconds: 2000) == .text("[\"REQ\",\"s\",{}]"))
        let big = String(repeating: "é", count: 40_000)  // 80,000 bytes: 64-bit length form
        try server.send(text: big)
        #expect(try client.receive(timeoutMilliseconds: 2000) == .text(big))
        try server.send(text: String(repeating: "a", count: 300))  // 16-bit length form
        #expect(try client.receive(timeoutMilliseconds: 2000) == .text(String(repeating: "a", count: 300)))
    }

    @Test func fragmentedMessagesAreReassembledAndPingsAnswered() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server)
        // "hel" + ping + "lo" as a fragmented text message, unmasked as a server sends.
        try raw.stream.write([0x01, 3] + Array("hel".utf8) + [0x89, 2, 0x70, 0x71] + [0x80, 2] + Array("lo".utf8))
        #expect(try raw.client.receive(timeoutMilliseconds: 2000) == .text("hello"))
        // The client answered the ping with a masked pong carrying the same payload.
        var header = [UInt8](repeating: 0, count: 8)
        let n = try header.withUnsafeMutableBytes { try raw.stream.read(into: $0, timeoutMilliseconds: 2000) }
        #expect(n == 8)
        #expect(header[0] == 0x8A && header[1] == 0x82)
        #expect([header[6] ^ header[2], header[7] ^ header[3]] == [0x70, 0x71])
    }

    /// A fragmented message whose fragments arrive further apart than one read's timeout is
    /// still one message: the fragments received so far are kept across `receive` calls (it
    /// used to drop them, then close with 1002 on the continuation).
    @Test func aFragmentedMessageSurvivesAGapLongerThanTheReadTimeout() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server)
        try raw.stream.write([0x01, 3] + Array("hel".utf8))
        #expect(throws: TransportError.self) { _ = try raw.client.receive(timeoutMilliseconds: 50) }
        try raw.stream.write([0x00, 1] + Array("l".utf8))
        #expect(throws: TransportError.self) { _ = try raw.client.receive(timeoutMilliseconds: 50) }
        try raw.stream.write([0x80, 1] + Array("o".utf8))
        #expect(try raw.client.receive(timeoutMilliseconds: 2000) == .text("hello"))
        // and the next message starts afresh
        try raw.stream.write([0x81, 2] + Array("hi".utf8))
        #expect(try raw.client.receive(timeoutMilliseconds: 2000) == .text("hi"))
    }

    @Test func maskedFramesFromTheServerAreAProtocolViolation() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server)
        try raw.stream.write([0x81, 0x81, 1, 2, 3, 4, UInt8(ascii: "a") ^ 1])
        #expect(throws: TransportError.self) { try raw.client.receive(timeoutMilliseconds: 2000) }
        #expect(raw.client.isClosed)
    }

    @Test func invalidUTF8TextIsRefusedWithClose1007() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server)
        try raw.stream.write([0x81, 2, 0xC3, 0x28])
        do {
            _ = try raw.client.receive(timeoutMilliseconds: 2000)
            Issue.record("invalid UTF-8 was accepted")
        } catch {
            #expect(error.kind == .protocolViolation)
            #expect(error.message.contains("1007"))
        }
    }

    @Test func messagesOverTheLimitAreRefusedFromTheHeaderAlone() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server, maxMessageBytes: 1024)
        // Announce 2,000 bytes but send none: the client must refuse on the header.
        try raw.stream.write([0x81, 126, 0x07, 0xD0])
        do {
            _ = try raw.client.receive(timeoutMilliseconds: 2000)
            Issue.record("an oversized message was accepted")
        } catch {
            #expect(error.kind == .messageTooLarge)
            #expect(error.message.contains("1009"))
        }
    }

    @Test func fragmentsAddingUpOverTheLimitAreRefused() throws {
        let server = try RawServer()
        let raw = try startRawHandshake(server, maxMessageBytes: 1000)
        try raw.stream.write([0x01, 126, 0x02, 0x58] + [UInt8](repeating: 97, count: 600) + [0x80, 126, 0x02, 0x58])
        #expect(throws: TransportError.self) { try raw.client.receive(timeoutMilliseconds: 2000) }
    }

    @Test func closeHandshakeReturnsTheCodeAndReason() throws {
        let (client, server) = try connectedPair()
        DispatchQueue(label: "softchat.test").async { server.close(code: 4001, reason: "bye", waitMilliseconds: 1000) }
        #expect(try client.receive(timeoutMilliseconds: 2000) == .close(code: 4001, reason: "bye"))
        #expect(client.isClosed)
    }

    @Test func aWrongAcceptKeyFailsTheHandshake() throws {
        let server = try RawServer()
        DispatchQueue(label: "softchat.test").async {
            guard let tcp = try? server.acceptRaw() else { return }
            _ = try? WebSocketClient.readHead(tcp, timeoutMilliseconds: 2000)
            try? tcp.write(
                Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n".utf8))
        }
        do {
            _ = try WebSocketClient.connect(
                try RelayEndpoint("ws://127.0.0.1:\(server.port)"), options: ConnectionOptions(connectTimeoutMilliseconds: 2000))
            Issue.record("a wrong accept key was accepted")
        } catch {
            #expect(error.kind == .handshake)
            #expect(error.message.contains("Sec-WebSocket-Accept"))
        }
    }

    @Test func connectTimesOutAndRefusedPortsFailQuickly() throws {
        let listener = try TCPListener()
        let port = listener.port
        listener.close()
        #expect(throws: TransportError.self) {
            _ = try WebSocketClient.connect(try RelayEndpoint("ws://127.0.0.1:\(port)"), options: ConnectionOptions(connectTimeoutMilliseconds: 500))
        }
    }

    @Test func theHandshakeAcceptValueMatchesRFC6455() {
        // RFC 6455 §1.3's example key and accept value.
        #expect(HandshakeCrypto.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    struct RawPair {
        let client: WebSocket
        let stream: TCPStream
    }

    /// A client connected to a raw TCP server that answered the handshake by hand.
    func startRawHandshake(_ server: RawServer, maxMessageBytes: Int = 524_288) throws -> RawPair {
        nonisolated(unsafe) var serverSide: TCPStream? = nil
        let done = DispatchSemaphore(value: 0)
        DispatchQueue(label: "softchat.test").async {
            defer { done.signal() }
            guard let tcp = try? server.acceptRaw(), let (head, _) = try? WebSocketClient.readHead(tcp, timeoutMilliseconds: 2000),
                let key = head.header("sec-websocket-key")
            else { return }
            try? tcp.write(
                Array(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(HandshakeCrypto.acceptValue(forKey: key))\r\n\r\n"
                        .utf8))
            serverSide = tcp
        }
        let client = try WebSocketClient.connect(
            try RelayEndpoint("ws://127.0.0.1:\(server.port)"),
            options: ConnectionOptions(connectTimeoutMilliseconds: 2000, maxMessageBytes: maxMessageBytes))
        done.wait()
        return RawPair(client: client, stream: try #require(serverSide))
    }
}
