import Foundation
import SoftchatCore
import SoftchatTestRelay
import Testing

@testable import SoftchatTransport

/// A relay's HTTP answers are an attacker's bytes: each hostile NIP-11 answer through the I/O
/// driver ends as "no document" (the connection closed, the driver alive), never a trap.
@Suite struct HostileHTTPTests {
    /// Serves `answer` to one NIP-11 request through the driver; returns what the driver reported.
    static func nip11(_ answer: [UInt8]) throws -> RelayInformation?? {
        let listener = try TCPListener()
        defer { listener.close() }
        let f = DriverFixture()
        try f.open(1, "ws://127.0.0.1:\(listener.port)", purpose: .relayInformation)
        let tcp = try #require(try listener.accept(timeoutMilliseconds: 5000))
        defer { tcp.close() }
        _ = try WebSocketClient.readHead(tcp, timeoutMilliseconds: 3000)
        try? tcp.write(answer)
        _ = f.probe.wait { $0.information(ConnectionID(1)) != nil }
        // The driver still serves: a second request to the same kind of answer completes.
        return f.probe.events.information(ConnectionID(1))
    }

    @Test(arguments: ["-1", "-0", "+5", "0x10", "99999999999999999999999", "2, 3", "18446744073709551616", "1 1"])
    func aBadContentLengthEndsTheRequestWithoutADocument(length: String) throws {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\nContent-Type: application/json\r\n\r\n{}"
        let reported = try Self.nip11(Array(answer.utf8))
        #expect(reported != nil, "the driver reported nothing for Content-Length: \(length)")
        #expect((reported ?? nil) == nil)
    }
}

/// A relay that trickles its answer a byte at a time, each just inside a read's timeout, held the
/// blocking `RelayInformation.fetch` and `WebSocketClient.connect` for hours: their timeout was
/// per read. It is per exchange now (`Deadline`).
@Suite struct TrickleTests {
    /// Accepts one connection, reads the request head, then sends `answer` one byte every 40 ms
    /// (300 bytes: 12 s) and holds the connection until the test ends.
    static func trickle(_ answer: String, _ body: (Int) throws -> Void) throws {
        let listener = try TCPListener()
        defer { listener.close() }
        let done = DispatchSemaphore(value: 0)
        let bytes = Array(answer.utf8)
        let port = listener.port
        Thread.detachNewThread {
            guard let tcp = try? listener.accept(timeoutMilliseconds: 5_000) else { return }
            defer { tcp.close() }
            _ = try? WebSocketClient.readHead(tcp, timeoutMilliseconds: 3_000)
            for byte in bytes {
                if done.wait(timeout: .now() + .milliseconds(40)) == .success { return }
                guard (try? tcp.write([byte])) != nil else { return }
            }
            _ = done.wait(timeout: .now() + .seconds(30))
        }
        defer { done.signal() }
        try body(Int(port))
    }

    static let head = "HTTP/1.1 200 OK\r\nX-Padding: " + String(repeating: "p", count: 280) + "\r\n\r\n{}"

    @Test func aNIP11AnswerTrickledAByteAtATimeTimesOutWithinTheConnectTimeout() throws {
        try Self.trickle(Self.head) { port in
            var options = ConnectionOptions()
            options.connectTimeoutMilliseconds = 500
            let started = IODriver.monotonicMilliseconds()
            #expect(throws: TransportError.self) { _ = try RelayInformation.fetch(try RelayEndpoint("ws://127.0.0.1:\(port)"), options: options) }
            let took = IODriver.monotonicMilliseconds() - started
            // Per read, it would have lasted the whole trickle (12 s).
            #expect(took < 4_000, "\(took) ms")
        }
    }

    @Test func aWebSocketUpgradeTrickledAByteAtATimeTimesOutWithinTheConnectTimeout() throws {
        try Self.trickle(Self.head.replacingOccurrences(of: "200 OK", with: "101 Switching Protocols")) { port in
            var options = ConnectionOptions()
            options.connectTimeoutMilliseconds = 500
            let started = IODriver.monotonicMilliseconds()
            do throws(TransportError) {
                _ = try WebSocketClient.connect(try RelayEndpoint("ws://127.0.0.1:\(port)"), options: options)
                Issue.record("the upgrade completed")
            } catch {
                #expect(error.kind == .timeout, "\(error)")
            }
            let took = IODriver.monotonicMilliseconds() - started
            #expect(took < 4_000, "\(took) ms")
        }
    }
}

/// `ws://0x7f.1:PORT` reached 127.0.0.1, and nothing let an app that dials relay URLs from
/// other people's events keep them off its own machine and network. `allowsPrivateAddresses`
/// is that policy, checked on the resolved addresses however the URL spells the host.
@Suite struct PrivateAddressTests {
    static func address(_ host: String) -> SocketAddress? {
        guard case .success(let list)? = SocketAddress.resolve(host: host, port: 80, numericOnly: true) else { return nil }
        return list.first
    }

    @Test func loopbackAndPrivateNetworksArePrivateAndPublicAddressesAreNot() throws {
        for host in [
            "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.0.1", "100.64.0.1",
            "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fc00::1", "fd12::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1",
            "::ffff:10.0.0.1", "0x7f.1", "2130706433", "198.18.0.1", "fec0::1", "64:ff9b::a00:1", "2002:a00:1::1",
        ] {
            let address = try #require(Self.address(host), "\(host) did not parse")
            #expect(address.isPrivate, "\(host)")
        }
        for host in ["1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:1.1.1.1", "64:ff9b::101:101", "2002:101:101::1"] {
            let address = try #require(Self.address(host), "\(host) did not parse")
            #expect(!address.isPrivate, "\(host)")
        }
    }

    @Test(arguments: ["127.0.0.1", "0x7f.1", "localhost"])
    func aRelayOnThisMachineIsRefusedWhenTheAppKeepsToPublicAddresses(host: String) throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let url = "ws://\(host):\(relay.port)"
        var options = ConnectionOptions(connectTimeoutMilliseconds: 3_000)
        options.allowsPrivateAddresses = false
        do throws(TransportError) {
            _ = try WebSocketClient.connect(try RelayEndpoint(url), options: options)
            Issue.record("\(url) was dialled")
        } catch {
            #expect(error.kind == .connect && error.message.contains("allowsPrivateAddresses"), "\(error)")
        }
        // The event-driven driver keeps the same policy.
        let f = DriverFixture()
        try f.open(1, url, options: options)
        #expect(f.probe.wait { $0.closed(ConnectionID(1)) != nil })
        #expect(f.probe.events.closed(ConnectionID(1))?.message.contains("allowsPrivateAddresses") == true)
        // Allowed (the default), the same relay is reached.
        let ws = try WebSocketClient.connect(try RelayEndpoint(url), options: ConnectionOptions(connectTimeoutMilliseconds: 3_000))
        ws.close()
    }
}

/// A NIP-11 document's numbers are the relay's: each `limitation` is taken only from 1 to
/// 2^31 − 1 (`RelayStatedNumber`), so `-9223372036854775808` states nothing instead of reaching
/// the engine's frame arithmetic as `Int.min`.
@Suite struct RelayInformationBoundsTests {
    static func limits(_ value: String) throws -> RelayInformation {
        let text = #"{"limitation":{"max_message_length":\#(value),"max_subscriptions":\#(value),"max_filters":\#(value),"max_limit":\#(value)}}"#
        return try RelayInformation.decode(Array(text.utf8))
    }

    @Test(arguments: ["-9223372036854775808", "9223372036854775807", "-1", "0", "2147483648", "\"16384\"", "1.5e3", "null", "true"])
    func aLimitationOutsideTheStatedRangeIsNotStated(value: String) throws {
        let info = try Self.limits(value)
        #expect(info.maxMessageLength == nil && info.maxSubscriptions == nil && info.maxFilters == nil && info.maxLimit == nil)
    }

    @Test func aLimitationInsideTheStatedRangeIsTaken() throws {
        let info = try Self.limits("16384")
        #expect(info.maxMessageLength == 16_384 && info.maxSubscriptions == 16_384 && info.maxFilters == 16_384 && info.maxLimit == 16_384)
        #expect(try Self.limits("2147483647").maxMessageLength == 2_147_483_647)
    }
}

/// The reader itself, without a socket: every framing, every limit, bytes fed in any split.
@Suite struct HTTPMessageReaderTests {
    static func document(maxBytes: Int = 1024) -> HTTPMessageReader {
        HTTPMessageReader(framing: .body(maxBytes: maxBytes), kind: .http, what: "the answer")
    }

    /// Feeds `text` in pieces of `step` bytes, then announces the end if `close`.
    static func read(_ text: String, step: Int = .max, close: Bool = false, maxBytes: Int = 1024) throws(TransportError) -> HTTPMessageReader.Progress
    {
        var reader = document(maxBytes: maxBytes)
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let piece = bytes[i..<min(bytes.count, i + step)]
            i += piece.count
            let progress = try reader.feed(piece)
            if progress != .needMore { return progress }
        }
        return close ? try reader.finish() : .needMore
    }

    static func body(_ progress: HTTPMessageReader.Progress) -> String? {
        guard case .message(_, let body) = progress else { return nil }
        return String(decoding: body, as: UTF8.self)
    }

    static func refusal(_ text: String, close: Bool = false, maxBytes: Int = 1024) -> String? {
        do {
            _ = try read(text, close: close, maxBytes: maxBytes)
            return nil
        } catch {
            #expect(error.kind == .http)
            return error.message
        }
    }

    @Test(arguments: [1, 2, 3, 7, 1000])
    func everyFramingYieldsTheSameBodyHoweverTheBytesAreSplit(step: Int) throws {
        let fixed = try Self.read("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}\n", step: step)
        #expect(Self.body(fixed) == "{\"a\":\"bc\"}\n")
        let chunked = try Self.read(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\nA\r\n:\"bc\"}\n   \r\n0\r\nX-Trailer: t\r\n\r\n", step: step)
        #expect(Self.body(chunked) == "{\"a\":\"bc\"}\n   ")
        let untilClose = try Self.read("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":\"bc\"}", step: step, close: true)
        #expect(Self.body(untilClose) == "{\"a\":\"bc\"}")
    }

    @Test func bytesAfterAHeadOnlyMessageAreHandedBackUntouched() throws {
        var reader = HTTPMessageReader(framing: .headOnly, kind: .handshake, what: "the upgrade answer")
        let progress = try reader.feed(Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\u{81}\u{2}hi".utf8))
        guard case .head(let head, let rest) = progress else {
            Issue.record("no head: \(progress)")
            return
        }
        #expect(head.status == 101 && head.header("upgrade") == "websocket")
        #expect(rest == Array("\u{81}\u{2}hi".utf8))
    }

    @Test(arguments: [
        ("Content-Length: -1", "not a non-negative decimal"),
        ("Content-Length: +1", "not a non-negative decimal"),
        ("Content-Length: 1e3", "not a non-negative decimal"),
        ("Content-Length: 99999999999999999999", "not a non-negative decimal"),
        ("Content-Length: 2\r\nContent-Length: 3", "conflicting"),
        ("Content-Length: 2, 3", "conflicting"),
        ("Content-Length: 2000", "over the limit"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 2", "both"),
        ("Transfer-Encoding: gzip", "unsupported Transfer-Encoding"),
        ("X-Evil\u{1B}[2J: 1", "control character"),
        ("X-Value: a\u{7}b", "control character"),
        (" folded: line", "malformed header name"),
        ("no colon here", "without a colon"),
        ("Bad Name: 1", "malformed header name"),
    ])
    func aMalformedHeadIsRefusedWithTheReason(field: String, reason: String) {
        let refused = Self.refusal("HTTP/1.1 200 OK\r\n\(field)\r\n\r\n{}")
        #expect(refused?.contains(reason) == true, "\(field): \(refused ?? "accepted")")
    }

    @Test func endlessAndOversizedHeadsAreRefusedBeforeTheyEnd() {
        // One endless header line: refused once it passes the head limit, with no blank line in sight.
        let endless = "HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "a", count: HTTPMessageReader.Limits.maxHeadBytes + 10)
        #expect(Self.refusal(endless)?.contains("the head is over") == true)
        // Too many fields, each small.
        let many = (0...HTTPMessageReader.Limits.maxHeaderFields).map { "X-\($0): 1\r\n" }.joined()
        #expect(Self.refusal("HTTP/1.1 200 OK\r\n\(many)\r\n{}")?.contains("more than") == true)
    }

    @Test func chunkedBombsAreRefused() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        // A chunk announcing more than the document may hold, refused before its data arrives.
        #expect(Self.refusal(head + "FFFFFFFFFFFFFFF\r\n")?.contains("grows over") == true)
        #expect(Self.refusal(head + "FFFFFFFFFFFFFFFFFFFF\r\n")?.contains("malformed chunk size") == true)
        // Many small chunks adding up over the limit.
        let small = String(repeating: "100\r\n" + String(repeating: "x", count: 256) + "\r\n", count: 5)
        #expect(Self.refusal(head + small)?.contains("grows over") == true)
        // An endless chunk-size line, a bad size, a missing CRLF after the data, endless trailers.
        #expect(Self.refusal(head + String(repeating: "0", count: 2000))?.contains("chunk-size line is over") == true)
        #expect(Self.refusal(head + "zz\r\n")?.contains("malformed chunk size") == true)
        #expect(Self.refusal(head + "2\r\nabXY")?.contains("does not end with CRLF") == true)
        #expect(Self.refusal(head + "0\r\n" + String(repeating: "T: t\r\n", count: 1000))?.contains("trailers is over") == true)
    }

    @Test func aBodyEndedByTheStreamIsBoundedAndACutBodyIsRefused() {
        #expect(Self.refusal("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "x", count: 2000))?.contains("over 1024 bytes") == true)
        #expect(Self.refusal("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close: true)?.contains("before the body ended") == true)
        #expect(Self.refusal("HTTP/1.1 200 OK\r\nContent-Le", close: true)?.contains("before the head ended") == true)
    }

    @Test func aStatusIsReadOnlyFromAResponseLine() throws {
        var reader = Self.document()
        let progress = try reader.feed(Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".utf8))
        guard case .message(let head, let body) = progress else {
            Issue.record("no message: \(progress)")
            return
        }
        #expect(head.status == 404 && body.isEmpty)
        #expect(try HTTPHead.parse(ArraySlice("GET / HTTP/1.1".utf8), refuse: { TransportError(.http, $0) }).status == nil)
    }
}
