import Foundation
import SoftchatCore
import SoftchatTestRelay
import Testing

@testable import SoftchatTransport

/// A hand-driven WebSocket server on loopback for the driver's client: it accepts one
/// connection, answers the upgrade, then writes exactly the bytes a test scripts — frames a
/// well-behaved relay would never send, or at a pace no relay would.
final class ScriptedServer: @unchecked Sendable {
    let listener: TCPListener
    var url: String { "ws://127.0.0.1:\(listener.port)" }
    init() throws { listener = try TCPListener() }
    deinit { listener.close() }

    /// Accepts the client and completes the opening handshake; returns the raw socket.
    func accept() throws -> TCPStream {
        guard let tcp = try listener.accept(timeoutMilliseconds: 5000) else { throw TransportError(.timeout, "no client") }
        let (head, _) = try WebSocketClient.readHead(tcp, timeoutMilliseconds: 3000)
        guard let key = head.header("sec-websocket-key") else { throw TransportError(.handshake, "no key") }
        try tcp.write(
            Array(
                ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Accept: \(HandshakeCrypto.acceptValue(forKey: key))\r\n\r\n").utf8))
        return tcp
    }

    /// Reads one client frame (masked, as a client must send) from `tcp`: opcode and payload.
    /// Bytes read past that frame are lost, so it is for the last frame a test expects.
    static func readClientFrame(_ tcp: TCPStream) throws -> (opcode: UInt8, payload: [UInt8]) {
        try ClientFrameReader(tcp).next()
    }
}

/// Reads the client's masked frames from a raw server socket, keeping what it read ahead.
final class ClientFrameReader {
    let tcp: TCPStream
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 4096)
    init(_ tcp: TCPStream) { self.tcp = tcp }

    private func need(_ n: Int) throws {
        while buffer.count < n {
            let got = try readChunk(tcp, &chunk, timeoutMilliseconds: 3000)
            if got == 0 { throw TransportError(.closed, "eof") }
            buffer += chunk[0..<got]
        }
    }

    func next() throws -> (opcode: UInt8, payload: [UInt8]) {
        try need(2)
        #expect(buffer[1] & 0x80 != 0, "client frames are masked")
        let length = Int(buffer[1] & 0x7F)
        precondition(length < 126)
        try need(6 + length)
        let key = Array(buffer[2..<6])
        let payload = (0..<length).map { buffer[6 + $0] ^ key[$0 & 3] }
        let opcode = buffer[0] & 0x0F
        buffer.removeFirst(6 + length)
        return (opcode, payload)
    }
}

@Suite struct DriverTestsWire {
    /// One text message in three fragments with a ping between them, every frame written a
    /// byte at a time with 350 ms between frames: delivered whole, once, and the ping answered.
    @Test func aSlowFragmentedMessageArrivesWholeOnce() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        #expect(f.probe.wait { $0.opened(ConnectionID(1)) })
        let frames: [[UInt8]] = [
            [0x01, 3] + Array("hel".utf8),  // text, not final
            [0x89, 2, 0x70, 0x71],  // ping inside the message
            [0x00, 1] + Array("l".utf8),  // continuation
            [0x80, 2] + Array("o!".utf8),  // final continuation
            [0x81, 4] + Array("next".utf8),  // the next message, afresh
        ]
        for (k, frame) in frames.enumerated() {
            for byte in frame {
                try tcp.write([byte])
                usleep(3_000)  // pacing of the scripted peer: each byte its own TCP segment
            }
            if k < frames.count - 1 { usleep(350_000) }  // a gap longer than any read timeout
            if k == 2 { #expect(f.probe.events.texts(ConnectionID(1)).isEmpty) }
        }
        #expect(f.probe.wait { $0.texts(ConnectionID(1)).count >= 2 })
        #expect(f.probe.events.texts(ConnectionID(1)) == ["hello!", "next"])
        #expect(f.probe.events.pongs(ConnectionID(1)) == 1)
        // The driver answered the ping with a masked pong carrying its payload.
        let pong = try ScriptedServer.readClientFrame(tcp)
        #expect(pong.opcode == 0xA && pong.payload == [0x70, 0x71])
    }

    /// A ping flood (20,000 pings, none of our pongs read meanwhile) costs bounded work: the
    /// connection stays open and delivers the text after it, the handler hears a few coalesced
    /// `.pong` events rather than one per ping, and the pongs on the wire stay few (at most one
    /// queued at a time, the latest ping's).
    @Test func aPingFloodIsAnsweredWithinABoundAndTheConnectionKeepsWorking() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        #expect(f.probe.wait { $0.opened(ConnectionID(1)) })
        var flood: [UInt8] = []
        for i in 0..<20_000 { flood += [0x89, 4] + withUnsafeBytes(of: UInt32(i).bigEndian, Array.init) }
        try tcp.write(flood)
        try tcp.write([0x81, 5] + Array("after".utf8))
        #expect(f.probe.wait { $0.texts(ConnectionID(1)) == ["after"] }, "\(f.probe.events.about(ConnectionID(1)))")
        #expect(f.probe.events.closed(ConnectionID(1)) == nil)
        let pongEvents = f.probe.events.pongs(ConnectionID(1))
        #expect(pongEvents >= 1 && pongEvents <= 200, "\(pongEvents) pong events for 20,000 pings")
        // Read every pong the client wrote; the last one answers the last ping.
        let reader = ClientFrameReader(tcp)
        var pongs: [[UInt8]] = []
        while let frame = try? reader.next() {
            #expect(frame.opcode == 0xA)
            pongs.append(frame.payload)
            if frame.payload == withUnsafeBytes(of: UInt32(19_999).bigEndian, Array.init) { break }
        }
        #expect(!pongs.isEmpty && pongs.count <= 2_000, "\(pongs.count) pongs written for 20,000 pings")
        #expect(pongs.last == withUnsafeBytes(of: UInt32(19_999).bigEndian, Array.init), "the latest ping is answered")
    }

    /// A relay's message over our bound (an event of 600 KB, a NEG-MSG) used to end the
    /// connection — on every reconnect, so nothing behind it ever arrived. It is skipped as it
    /// arrives, never buffered, and the connection goes on.
    @Test func anOversizedMessageIsSkippedAndTheConnectionGoesOn() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url, options: ConnectionOptions(connectTimeoutMilliseconds: 5000, maxMessageBytes: 1024))
        let tcp = try server.accept()
        defer { tcp.close() }
        let big = Array(#"["EVENT","page-1",{"id":"ab","created_at":1700000000,"content":""#.utf8) + [UInt8](repeating: 97, count: 2000)
        // Announced over the bound in its header, sent in three writes.
        try tcp.write([0x81, 126, UInt8(big.count >> 8), UInt8(big.count & 0xFF)] + big.prefix(300))
        try tcp.write(Array(big[300..<1500]))
        try tcp.write(Array(big[1500...]) + [0x81, 5] + Array("after".utf8))
        #expect(f.probe.wait { $0.texts(ConnectionID(1)) == ["after"] })
        #expect(f.probe.events.closed(ConnectionID(1)) == nil, "the connection stays open")
        #expect(f.probe.events.oversized(ConnectionID(1)).map(\.bytes) == [big.count])
        #expect(f.probe.events.oversized(ConnectionID(1)).first?.head.hasPrefix(#"["EVENT","page-1",{"id":"ab","created_at":1700000000"#) == true)
    }

    /// Issue 45, path 11: a message arriving slowly (a 2,400-byte text frame in writes of 200
    /// bytes, 200 ms apart) completes nothing for more than two seconds. The reads that bring
    /// its bytes are reported as `.bytesArrived` — life, for the engine's keepalive, which counted
    /// whole messages only and dropped such a connection mid-message — at most once a second;
    /// the read that completes it is the message itself.
    @Test func bytesOfAMessageStillArrivingAreReportedAsLifeAtMostOnceASecond() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        let one = ConnectionID(1)
        #expect(f.probe.wait { $0.opened(one) })
        let payload = [UInt8](repeating: 97, count: 2_400)
        let frame = [0x81, 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
        let started = Date()
        for start in stride(from: 0, to: frame.count, by: 200) {
            try tcp.write(Array(frame[start..<min(start + 200, frame.count)]))
            usleep(200_000)  // the slow link
        }
        #expect(f.probe.wait { $0.texts(one).count == 1 })
        let elapsed = Date().timeIntervalSince(started)
        #expect(f.probe.events.texts(one) == [String(repeating: "a", count: 2_400)], "whole, once")
        let reports = f.probe.events.filter { if case .bytesArrived(one) = $0 { true } else { false } }.count
        #expect(reports >= 2, "bytes arrived for 2.4 s and were reported \(reports) times")
        #expect(reports <= Int(elapsed) + 1, "\(reports) reports in \(elapsed) s: more than one a second")
        #expect(f.probe.events.closed(one) == nil)
    }

    @Test func fragmentsAddingUpOverTheLimitAreSkippedAcrossAPing() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url, options: ConnectionOptions(connectTimeoutMilliseconds: 5000, maxMessageBytes: 1000))
        let tcp = try server.accept()
        defer { tcp.close() }
        // 600 + 600 bytes in two fragments, a ping between them, then a message that fits.
        try tcp.write([0x01, 126, 0x02, 0x58] + [UInt8](repeating: 97, count: 600) + [0x89, 1, 7])
        try tcp.write([0x80, 126, 0x02, 0x58] + [UInt8](repeating: 98, count: 600) + [0x81, 2] + Array("ok".utf8))
        #expect(f.probe.wait { $0.texts(ConnectionID(1)) == ["ok"] })
        #expect(f.probe.events.closed(ConnectionID(1)) == nil)
        #expect(f.probe.events.oversized(ConnectionID(1)).map(\.bytes) == [1200])
        let pong = try ScriptedServer.readClientFrame(tcp)
        #expect(pong.opcode == 0xA && pong.payload == [7], "the ping inside the skipped message is answered")
    }

    @Test func invalidUTF8IsAProtocolViolationWith1007() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        try tcp.write([0x81, 2, 0xC3, 0x28])
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        let error = f.probe.events.closed(ConnectionID(1))
        #expect(error?.kind == .protocolViolation, "\(String(describing: error))")
        #expect(error?.message.contains("1007") == true)
        let close = try ScriptedServer.readClientFrame(tcp)
        #expect(close.opcode == 0x8 && Array(close.payload.prefix(2)) == [0x03, 0xEF])
        #expect(f.probe.events.texts(ConnectionID(1)).isEmpty)
    }

    @Test func aMaskedServerFrameIsAProtocolViolation() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        try tcp.write([0x81, 0x81, 1, 2, 3, 4, UInt8(ascii: "a") ^ 1])
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.closed(ConnectionID(1))?.kind == .protocolViolation)
    }

    @Test func aPeerThatVanishesIsReported() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        #expect(f.probe.wait { $0.opened(ConnectionID(1)) })
        try tcp.write([0x81, 2] + Array("hi".utf8))
        tcp.close()
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.texts(ConnectionID(1)) == ["hi"])
        #expect(f.probe.events.closed(ConnectionID(1))?.kind == .closed)
    }

    @Test func thePeersCloseFrameIsAnsweredAndReported() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        #expect(f.probe.wait { $0.opened(ConnectionID(1)) })
        try tcp.write([0x88, 5, 0x0F, 0xA1] + Array("bye".utf8))  // 4001 "bye"
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        let error = f.probe.events.closed(ConnectionID(1))
        #expect(error?.kind == .closed && error?.message.contains("4001: bye") == true, "\(String(describing: error))")
        let reply = try ScriptedServer.readClientFrame(tcp)
        #expect(reply.opcode == 0x8 && reply.payload == [0x0F, 0xA1])
    }

    /// Sends made before `.opened` are carried once the WebSocket is open, in order.
    @Test func sendsBeforeOpenAreCarriedAfterIt() throws {
        let server = try ScriptedServer()
        let f = DriverFixture()
        try f.open(1, server.url)
        f.send(1, "one", token: 1)
        f.send(1, "two", token: 2)
        let tcp = try server.accept()
        defer { tcp.close() }
        let frames = ClientFrameReader(tcp)
        #expect(try frames.next().payload == Array("one".utf8))
        #expect(try frames.next().payload == Array("two".utf8))
        #expect(f.probe.wait { $0.written(ConnectionID(1)) == [1, 2] })
    }

    @Test func aSilentServerTimesTheOpenOut() throws {
        let listener = try TCPListener()
        defer { listener.close() }
        let f = DriverFixture()
        let started = IODriver.monotonicMilliseconds()
        try f.open(1, "ws://127.0.0.1:\(listener.port)", options: ConnectionOptions(connectTimeoutMilliseconds: 400))
        let tcp = try #require(try listener.accept(timeoutMilliseconds: 5000))
        defer { tcp.close() }
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        let error = f.probe.events.closed(ConnectionID(1))
        #expect(error?.kind == .timeout && error?.message.contains("WebSocket handshake") == true, "\(String(describing: error))")
        let took = IODriver.monotonicMilliseconds() - started
        #expect(took >= 400 && took < 3000, "\(took) ms")
    }

    @Test func aWrongAcceptValueFailsTheHandshake() throws {
        let listener = try TCPListener()
        defer { listener.close() }
        let f = DriverFixture()
        try f.open(1, "ws://127.0.0.1:\(listener.port)")
        let tcp = try #require(try listener.accept(timeoutMilliseconds: 5000))
        defer { tcp.close() }
        _ = try WebSocketClient.readHead(tcp, timeoutMilliseconds: 3000)
        try tcp.write(
            Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n".utf8))
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        let error = f.probe.events.closed(ConnectionID(1))
        #expect(error?.kind == .handshake && error?.message.contains("Sec-WebSocket-Accept") == true)
    }

    /// A peer that stops reading fills the socket: the driver keeps the rest queued without
    /// blocking (another connection carries on meanwhile), and the handler's close() of the
    /// stalled connection is bounded — about a second later the fd is closed regardless.
    @Test func aStalledPeerBlocksNothingAndCloseIsBounded() throws {
        let server = try ScriptedServer()
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.open(1, server.url)
        let tcp = try server.accept()
        defer { tcp.close() }
        #expect(f.probe.wait { $0.opened(ConnectionID(1)) })
        let megabyte = String(repeating: "m", count: 1 << 20)
        for k in 0..<24 { f.send(1, megabyte, token: k) }
        // The kernel takes a few megabytes at most; the other connection is not held up.
        try f.openAndWait(2, relay.url)
        try exerciseRelay(f, 2)
        let written = f.probe.events.written(ConnectionID(1))
        #expect(written.count < 24, "\(written.count) of 24 MB flushed to a peer that reads nothing")
        let closedAt = IODriver.monotonicMilliseconds()
        f.probe.run(on: f.driver) { $0.close(ConnectionID(1)) }
        // The peer stays stalled past the linger bound, then reads what the kernel holds.
        usleep(1_500_000)
        var total = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var ended = false
        while !ended {
            do {
                let n = try readChunk(tcp, &chunk, timeoutMilliseconds: 5000)
                if n == 0 { ended = true } else { total += n }
            } catch {
                ended = error.kind != .timeout
                if error.kind == .timeout { break }
            }
        }
        #expect(ended, "the driver still holds the stalled connection open")
        #expect(total < 24 << 20)
        #expect(IODriver.monotonicMilliseconds() - closedAt < 8000)
        #expect(f.probe.events.closed(ConnectionID(1)) == nil)
    }

    /// The handler may stop the driver from its own callbacks: the loop ends after that round.
    @Test func stopFromTheHandlerEndsTheLoop() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let f = DriverFixture()
        try f.openAndWait(1, relay.url)
        f.probe.run(on: f.driver) { $0.stop() }
        #expect(eventually(5) { relay.connectionCount == 0 })
        f.driver.stop()  // from another thread afterwards: returns, nothing left to do
        #expect(f.driver.statistics.connectionsOpen == 0)
    }

    /// A stop() from another thread right after the handler's own stop returns only once the
    /// thread has ended: every connection closed and the statistics say so. (It used to return
    /// at once, because the handler's stop had detached the thread; CI caught the window.)
    @Test func aStopAfterTheHandlersStopWaitsForTheThreadsEnd() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        for _ in 0..<10 {
            let f = DriverFixture()
            try f.openAndWait(3, relay.url)
            let requested = DispatchSemaphore(value: 0)
            f.probe.run(on: f.driver) { driver in
                driver.stop()
                requested.signal()
            }
            requested.wait()  // the handler's stop has detached the thread; its round is not over
            f.driver.stop()
            #expect(f.driver.statistics.connectionsOpen == 0)
        }
    }

    /// The handler's deadline is honored: the thread wakes for it and nothing else.
    @Test func theHandlersDeadlineWakesTheThread() throws {
        final class Ticker: IODriverHandler, @unchecked Sendable {
            let lock = NSLock()
            var calls: [Int64] = []
            var first: Int64 = 0
            func driver(_ driver: IODriver, handle event: IOEvent) {}
            func driverService(_ driver: IODriver, now: Int64) -> Int64? {
                lock.withLock {
                    if calls.isEmpty { first = now }
                    calls.append(now)
                    return calls.count < 4 ? first + Int64(calls.count) * 150 : nil
                }
            }
        }
        let ticker = Ticker()
        let driver = IODriver(handler: ticker)
        driver.start()
        defer { driver.stop() }
        #expect(eventually(5) { ticker.lock.withLock { ticker.calls.count } == 4 })
        let calls = ticker.lock.withLock { ticker.calls }
        for k in 1..<4 { #expect(calls[k] - calls[0] >= Int64(k) * 150, "\(calls)") }
        let wakeups = driver.statistics.wakeups
        #expect(wakeups >= 3 && wakeups <= 5, "\(wakeups)")
    }
}

// MARK: The sans-IO WebSocket codec

@Suite struct DriverTestsCodec {
    @Test func aMessageFedByteByByteComesOutOnceAtTheEnd() throws {
        var client = WebSocketCodec(role: .client, maxMessageBytes: 1 << 20)
        let text = String(repeating: "é", count: 40_000)  // 80,000 bytes: the 64-bit length form
        let server = WebSocketCodec(role: .server, maxMessageBytes: 1 << 20)
        let frame = server.textFrame(text)
        var got: [WebSocketCodec.Event] = []
        for byte in frame {
            client.feed([byte])
            while let event = try client.next() { got.append(event) }
        }
        #expect(got == [.text(text)])
        #expect(client.bufferedByteCount == 0)
    }

    @Test func clientFramesAreMaskedAndReadByAServer() throws {
        let client = WebSocketCodec(role: .client, maxMessageBytes: 1 << 20)
        var server = WebSocketCodec(role: .server, maxMessageBytes: 1 << 20)
        for text in ["", "short", String(repeating: "a", count: 300), String(repeating: "b", count: 70_000)] {
            let frame = client.textFrame(text)
            #expect(frame[1] & 0x80 != 0)
            if text.count > 8 { #expect(!frame.suffix(text.utf8.count).elementsEqual(text.utf8)) }
            server.feed(frame)
            #expect(try server.next() == .text(text))
        }
    }

    @Test func maskingMatchesTheBytewiseDefinitionAtEveryLength() {
        let key: (UInt8, UInt8, UInt8, UInt8) = (0x12, 0x34, 0xAB, 0xCD)
        let k = [key.0, key.1, key.2, key.3]
        for length in 0..<40 {
            let original = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 5) }
            var masked = original
            masked.withUnsafeMutableBytes { WebSocketCodec.mask($0, key) }
            #expect(masked == original.enumerated().map { $0.element ^ k[$0.offset & 3] })
        }
    }

    @Test func pingsAreAnsweredWithTheirPayload() throws {
        var client = WebSocketCodec(role: .client, maxMessageBytes: 1024)
        client.feed([0x89, 3, 1, 2, 3])
        guard case .ping(let payload, let reply)? = try client.next() else {
            Issue.record("no ping")
            return
        }
        #expect(payload == [1, 2, 3])
        var server = WebSocketCodec(role: .server, maxMessageBytes: 1024)
        server.feed(reply)
        #expect(try server.next() == .pong([1, 2, 3]))
    }

    @Test func closeFramesAreValidatedAndAnsweredOnce() throws {
        var a = WebSocketCodec(role: .client, maxMessageBytes: 1024)
        a.feed([0x88, 2, 0x03, 0xE8])
        guard case .close(1000, "", let reply?)? = try a.next() else {
            Issue.record("no close")
            return
        }
        #expect(reply.count == 2 + 4 + 2)
        #expect(try a.next() == nil)
        var b = WebSocketCodec(role: .client, maxMessageBytes: 1024)
        _ = b.closeFrame(code: 1000)
        b.feed([0x88, 0])
        #expect(try b.next() == .close(code: 1005, reason: "", reply: nil))
        for bad: [UInt8] in [
            [0x88, 1, 3],
            [0x88, 2, 0x03, 0xED],  // 1005
            [0x88, 2, 0x03, 0xEC],  // 1004
        ] {
            var c = WebSocketCodec(role: .client, maxMessageBytes: 1024)
            c.feed(bad)
            #expect(throws: TransportError.self) { _ = try c.next() }
            #expect(c.failureCloseCode == 1002)
        }
    }

    @Test func violationsNameTheirCloseCode() throws {
        let cases: [([UInt8], UInt16, TransportError.Kind)] = [
            ([0xC1, 0], 1002, .protocolViolation),  // RSV1
            ([0x83, 0], 1002, .protocolViolation),  // opcode 3
            ([0x80, 0], 1002, .protocolViolation),  // continuation of nothing
            ([0x01, 1, 97, 0x81, 1, 98], 1002, .protocolViolation),  // new message inside one
            ([0x09, 0], 1002, .protocolViolation),  // fragmented ping
            ([0x82, 1, 0], 1003, .protocolViolation),  // binary
            ([0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0], 1009, .messageTooLarge),  // 65,536 > 1,024, from the header
            ([0x81, 127, 0x80, 0, 0, 0, 0, 0, 0, 1], 1002, .protocolViolation),  // top bit
        ]
        for (bytes, code, kind) in cases {
            var codec = WebSocketCodec(role: .client, maxMessageBytes: 1024)
            codec.feed(bytes)
            do {
                while try codec.next() != nil {}
                Issue.record("\(bytes) was accepted")
            } catch {
                #expect(error.kind == kind, "\(bytes): \(error)")
                #expect(codec.failureCloseCode == code, "\(bytes): \(error)")
            }
            codec.feed([0x81, 1, 97])
            #expect(try codec.next() == nil, "a failed codec parses nothing more")
        }
    }
}
