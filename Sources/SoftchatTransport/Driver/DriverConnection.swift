#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One connection of an `IODriver`, as a state machine driven by socket readiness and
/// deadlines: resolve → TCP connect (each address in turn) → TLS or Noise handshake → the
/// HTTP exchange (WebSocket upgrade, or the NIP-11 GET) → open, and on the way out a bounded
/// linger that sends the close frame before the fd is closed. Everything runs on the driver
/// thread; nothing blocks. Events go to the driver's queue, never straight to the handler.
final class DriverConnection {
    enum Stage: Equatable {
        case resolving, connecting, securing, requesting, open, lingering, finished
    }

    /// How long a closing connection may take to flush its close frame and see the peer's
    /// end of stream before the fd is closed regardless.
    static let lingerMilliseconds: Int64 = 1000
    /// The most one connection reads in one round, so one busy peer cannot starve the others
    /// (poll is level-triggered: the rest is read next round).
    static let readBudgetPerRound = 1 << 20
    /// How often a connection reports bytes that completed no message (`IOEvent.bytesArrived`):
    /// enough for a keepalive counted in tens of seconds, few enough not to flood the handler.
    static let bytesArrivedIntervalMilliseconds: Int64 = 1000

    unowned let driver: IODriver
    let id: ConnectionID
    /// Unique for the driver's lifetime (ids are reused; serials are not).
    let serial: UInt64
    let endpoint: RelayEndpoint
    let options: ConnectionOptions
    let purpose: ConnectionPurpose

    private(set) var fd: Int32 = -1
    private(set) var stage: Stage = .resolving
    /// When the open times out, or the linger ends.
    private(set) var deadline: Int64?
    /// The handler closed it, or its last event was delivered: its events are dropped.
    var suppressed = false
    /// Its last event (`.closed` / `.information`) was queued, or the handler closed it.
    private(set) var reported = false

    private var addresses: [SocketAddress] = []
    private var nextAddress = 0
    private var lastConnectError: TransportError?
    private var tls: TLSChannel?
    private var noise: NoiseChannel?
    private var codec: WebSocketCodec
    private var wire = WireQueue()
    private let key = HandshakeCrypto.randomKey()
    /// The relay's HTTP answer: the upgrade's head, or NIP-11's head and bounded body.
    private var http: HTTPMessageReader
    /// Where the last pong queued ends on the wire, and the reply to a ping that came while it
    /// was unwritten (sent once it is).
    private var pongEnd: UInt64?
    private var waitingPong: [UInt8]?
    /// Sends made before the WebSocket opened, carried once it does.
    private var early: [(text: String, token: Int)] = []
    private var readEnded = false
    private var writeShut = false
    /// Arrivals queued for the handler (texts, oversized messages, pings and pongs): a read round
    /// that adds none reports its bytes as `.bytesArrived`.
    private var arrivals: UInt64 = 0
    /// When `.bytesArrived` was last queued (driver clock).
    private var bytesArrivedAt: Int64?

    init(
        driver: IODriver, id: ConnectionID, serial: UInt64, endpoint: RelayEndpoint, options: ConnectionOptions,
        purpose: ConnectionPurpose, now: Int64
    ) {
        self.driver = driver
        self.id = id
        self.serial = serial
        self.endpoint = endpoint
        self.options = options
        self.purpose = purpose
        codec = WebSocketCodec(role: .client, maxMessageBytes: options.maxMessageBytes, skipsOversized: true)
        http = purpose == .webSocket ? WebSocketClient.answerReader() : RelayInformation.answerReader()
        deadline = now + Int64(max(options.connectTimeoutMilliseconds, 1))
    }

    private var target: String { "\(endpoint.host):\(endpoint.port)" }

    /// What poll should watch for: always readability (data, end of stream, errors) until
    /// the end of stream; writability only while bytes wait or a connect is in progress.
    var pollEvents: Int16 {
        guard fd >= 0 else { return 0 }
        if stage == .connecting { return Int16(POLLOUT) }
        var events: Int16 = readEnded ? 0 : Int16(POLLIN)
        if !wire.isEmpty { events |= Int16(POLLOUT) }
        return events
    }

    /// Bytes wait for the kernel, or a closing connection has yet to end its sending side.
    var needsFlush: Bool { fd >= 0 && (!wire.isEmpty || (stage == .lingering && !writeShut)) }

    // MARK: Opening

    /// The addresses of the relay (or why there are none): connect to the first.
    func resolved(_ result: Result<[SocketAddress], TransportError>) {
        guard stage == .resolving, !reported else { return }
        switch result {
        case .success(let list):
            addresses = options.allowsPrivateAddresses ? list : list.filter { !$0.isPrivate }
            guard !addresses.isEmpty else {
                fail(TransportError(.connect, SocketAddress.privateRefusal(endpoint.host)))
                return
            }
            stage = .connecting
            connectNext()
        case .failure(let error):
            fail(error)
        }
    }

    private func connectNext() {
        while nextAddress < addresses.count {
            let address = addresses[nextAddress]
            nextAddress += 1
            switch DriverSocket.startConnect(address, describing: target) {
            case .success(let started):
                fd = started.fd
                if started.connected { connected() }
                return
            case .failure(let error):
                lastConnectError = error
            }
        }
        fail(lastConnectError ?? TransportError(.connect, "no address for \(endpoint.host)"))
    }

    /// TCP is up: start TLS or Noise, or go straight to the HTTP exchange.
    private func connected() {
        do throws(TransportError) {
            if let parameters = endpoint.noise {
                stage = .securing
                try options.checkNoiseAuthentication(parameters)
                let localStatic = parameters.pattern.initiatorSendsStatic ? try options.noiseStaticKey(for: endpoint) : nil
                let channel = try NoiseChannel(
                    pattern: parameters.pattern, localStatic: localStatic, remoteStatic: parameters.relayStaticKey,
                    rekeyAfterMessages: options.noiseRekeyAfterMessages)
                noise = channel
                var out: [UInt8] = []
                try channel.handshakeOutput(into: &out)
                queueWire(out)
            } else if endpoint.secure {
                stage = .securing
                let channel = try TLSChannel(context: try driver.tlsContext(options.tls), host: endpoint.host)
                tls = channel
                if try channel.handshake() { try sendRequest() }
                channel.drainOutput(into: &wire)
                driver.markDirty(self)
            } else {
                try sendRequest()
            }
        } catch {
            fail(error)
        }
    }

    /// The secure layer (if any) is up: send the upgrade or the NIP-11 GET.
    private func sendRequest() throws(TransportError) {
        stage = .requesting
        let request = purpose == .webSocket ? WebSocketClient.upgradeRequest(endpoint, key: key) : RelayInformation.request(endpoint)
        try queuePlaintext(request, token: nil)
    }

    // MARK: Readiness

    /// Handles what poll reported for the fd; `scratch` is the driver's shared read buffer.
    func handle(revents: Int16, scratch: UnsafeMutableRawBufferPointer) {
        guard fd >= 0 else { return }
        if stage == .connecting {
            guard revents & Int16(POLLOUT | POLLERR | POLLHUP) != 0 else { return }
            if let error = DriverSocket.connectResult(fd, describing: target) {
                posixClose(fd)
                fd = -1
                lastConnectError = error
                connectNext()
            } else {
                connected()
            }
            return
        }
        if revents & Int16(POLLNVAL) != 0 {
            fail(TransportError(.io, "the socket of \(endpoint) became invalid"))
            return
        }
        if revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 { readAvailable(scratch) }
        if revents & Int16(POLLOUT) != 0 && fd >= 0 { flush() }
    }

    private func readAvailable(_ scratch: UnsafeMutableRawBufferPointer) {
        var budget = Self.readBudgetPerRound
        let (wasOpen, arrivalsBefore) = (stage == .open, arrivals)
        // Bytes that completed no message are life too (issue 45, path 11): a large message on a
        // slow link looked like silence to the keepalive, which dropped the connection mid-message.
        defer { if wasOpen && budget < Self.readBudgetPerRound && arrivals == arrivalsBefore { partialMessageArrived() } }
        while fd >= 0 && budget > 0 {
            switch DriverSocket.receive(fd, into: scratch) {
            case .bytes(0):
                endOfStream()
                return
            case .bytes(let n):
                driver.countRead(n)
                budget -= n
                if stage == .lingering { continue }  // after our close only the end of stream matters
                received(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
            case .wouldBlock:
                return
            case .failed(let error):
                if stage == .lingering { closeNow() } else { fail(error) }
                return
            }
        }
    }

    /// Raw bytes from the socket, through the secure layer to the HTTP or WebSocket layer.
    private func received(_ raw: UnsafeRawBufferPointer) {
        do throws(TransportError) {
            if let tls {
                tls.receive(raw)
                if !tls.isEstablished {
                    if try tls.handshake() { try sendRequest() }
                }
                var plaintext: [UInt8] = []
                if tls.isEstablished { try tls.readPlaintext(into: &plaintext) }
                tls.drainOutput(into: &wire)
                driver.markDirty(self)
                if !plaintext.isEmpty { try withBytes(plaintext) { raw throws(TransportError) in try receivedPlaintext(raw) } }
                if tls.peerClosed && stage != .finished && stage != .lingering { endOfStream() }
            } else if let noise {
                let wasEstablished = noise.isEstablished
                var plaintext: [UInt8] = []
                var out: [UInt8] = []
                try noise.receive(raw, plaintext: &plaintext, out: &out)
                queueWire(out)
                if !wasEstablished && noise.isEstablished { try sendRequest() }
                if !plaintext.isEmpty { try withBytes(plaintext) { raw throws(TransportError) in try receivedPlaintext(raw) } }
            } else {
                try receivedPlaintext(raw)
            }
        } catch {
            fail(error)
        }
    }

    private func receivedPlaintext(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        switch stage {
        case .requesting:
            try httpProgress(try http.feed(bytes))
        case .open:
            codec.feed(bytes)
            pumpCodec()
        case .resolving, .connecting, .securing, .lingering, .finished:
            break
        }
    }

    /// What the relay's HTTP answer produced: the upgrade opens the WebSocket; the NIP-11
    /// document, once whole, is reported (nil when it is not a 200 with a JSON document).
    private func httpProgress(_ progress: HTTPMessageReader.Progress) throws(TransportError) {
        switch progress {
        case .needMore:
            return
        case .head(let head, let rest):
            try WebSocketClient.checkUpgradeResponse(head, key: key)
            opened(rest)
        case .message(let head, let body):
            let document = (try? RelayInformation.checkStatus(head)).flatMap { try? RelayInformation.decode(body) }
            reported = true
            driver.enqueue(self, .information(id, document))
            closeNow()
        }
    }

    private func opened(_ leftover: [UInt8]) {
        stage = .open
        deadline = nil
        driver.enqueue(self, .opened(id))
        let waiting = early
        early = []
        for (text, token) in waiting { send(text: text, token: token) }
        guard stage == .open else { return }
        codec.feed(leftover)
        pumpCodec()
    }

    /// Turns every complete frame buffered into events (and pongs to send).
    /// Control frames cost the peer two bytes each, so what they cause is bounded here: one
    /// `.pong` event per batch of frames however many pings and pongs it held, and at most one
    /// pong on the wire (RFC 6455 §5.5.3 lets an endpoint answer only the most recent ping): a
    /// ping flood neither grows the outbound queue nor floods the handler.
    private func pumpCodec() {
        var heard = false
        defer { if heard { driver.enqueue(self, .pong(id)) } }
        while stage == .open {
            let event: WebSocketCodec.Event?
            do {
                event = try codec.next()
            } catch {
                fail(error, closeCode: codec.failureCloseCode)
                return
            }
            guard let event else { return }
            switch event {
            case .text(let text):
                if heard {
                    driver.enqueue(self, .pong(id))
                    heard = false
                }
                driver.enqueue(self, .text(id, text))
                arrivals &+= 1
            case .oversized(let head, let bytes):
                if heard {
                    driver.enqueue(self, .pong(id))
                    heard = false
                }
                // The head is cut at a byte count, so its last character may be split: decoded
                // with replacement, it is for reading, not for parsing as a whole.
                driver.enqueue(self, .oversized(id, head: String(decoding: head, as: UTF8.self), bytes: Int(clamping: bytes)))
                arrivals &+= 1
            case .ping(_, let reply):
                answerPing(reply)
                heard = true
                arrivals &+= 1
            case .pong:
                heard = true
                arrivals &+= 1
            case .close(let code, let reason, let reply):
                if let reply { queueFrame(reply) }
                let why = reason.isEmpty ? "" : ": \(reason)"
                fail(TransportError(.closed, "the relay closed the connection with code \(code)\(why)"), linger: true)
                return
            }
        }
    }

    /// Bytes arrived that completed no message: `.bytesArrived`, at most once per
    /// `bytesArrivedIntervalMilliseconds` (the handler learns the connection is alive, not how
    /// much arrived).
    private func partialMessageArrived() {
        guard stage == .open, !reported else { return }
        let now = IODriver.monotonicMilliseconds()
        if let last = bytesArrivedAt, now - last < Self.bytesArrivedIntervalMilliseconds { return }
        bytesArrivedAt = now
        driver.enqueue(self, .bytesArrived(id))
    }

    /// Queues the pong `reply` unless an earlier pong is still unwritten; then it waits, and a
    /// later ping's reply replaces it (only the most recent ping is answered).
    private func answerPing(_ reply: [UInt8]) {
        if let end = pongEnd, wire.sentTotal < end {
            waitingPong = reply
            return
        }
        waitingPong = nil
        queueFrame(reply)
        pongEnd = wire.queuedTotal
    }

    private func endOfStream() {
        readEnded = true
        switch stage {
        case .lingering, .finished:
            closeNow()
        case .open:
            fail(noise?.endOfStreamError() ?? TransportError(.closed, "the relay closed the connection without a close frame"))
        case .requesting where purpose == .relayInformation:
            do {
                try httpProgress(try http.finish())
            } catch {
                fail(error)
            }
        case .securing, .requesting:
            if let error = noise?.endOfStreamError() {
                fail(error)
                return
            }
            let during = purpose == .webSocket ? "the WebSocket handshake" : "the NIP-11 request"
            fail(TransportError(.handshake, "the connection closed during \(during) with \(endpoint)"))
        case .resolving, .connecting:
            fail(TransportError(.connect, "the connection to \(target) closed while connecting"))
        }
    }

    // MARK: Sending

    /// Queues one text message (or keeps it until the WebSocket opens).
    func send(text: String, token: Int) {
        guard !reported, purpose == .webSocket else { return }
        guard stage == .open else {
            early.append((text, token))
            return
        }
        queueFrame(codec.textFrame(text), token: token)
    }

    func ping() {
        guard !reported, stage == .open else { return }
        queueFrame(codec.pingFrame())
    }

    private func queueFrame(_ frame: [UInt8], token: Int? = nil) {
        do {
            try queuePlaintext(frame, token: token)
        } catch {
            fail(error)
        }
    }

    /// Through the secure layer onto the wire queue; `token` completes after its last byte.
    private func queuePlaintext(_ bytes: [UInt8], token: Int?) throws(TransportError) {
        try withBytes(bytes) { raw throws(TransportError) in
            if let tls {
                try tls.write(raw)
                tls.drainOutput(into: &wire)
            } else if let noise {
                var out: [UInt8] = []
                try noise.seal(raw, into: &out)
                wire.append(out)
            } else {
                wire.append(raw)
            }
        }
        if let token { wire.mark(token) }
        driver.markDirty(self)
    }

    private func queueWire(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        wire.append(bytes)
        driver.markDirty(self)
    }

    /// Sends what the kernel takes now; reports the tokens that completed.
    func flush() {
        guard needsFlush else { return }
        switch wire.flush(fd) {
        case .success(let n):
            driver.countWritten(n)
            let done = wire.takeCompletedTokens()
            if !reported { for token in done { driver.enqueue(self, .written(id, token: token)) } }
            if let reply = waitingPong, stage == .open { answerPing(reply) }
            if stage == .lingering && wire.isEmpty && !writeShut {
                // Everything said: tell the peer, and wait (bounded) for its end of stream.
                writeShut = true
                DriverSocket.shutdownWrite(fd)
            }
        case .failure(let error):
            if stage == .lingering { closeNow() } else { fail(error) }
        }
    }

    // MARK: Closing

    /// The connection is over for the handler: its last event is queued (`.closed`, or
    /// `.information(nil)` for NIP-11). With `closeCode` an open WebSocket first sends that
    /// close frame; with `linger` (a close already queued) it lingers to flush it.
    func fail(_ error: TransportError, closeCode: UInt16? = nil, linger: Bool = false) {
        guard !reported else { return }
        reported = true
        driver.enqueue(self, purpose == .relayInformation ? .information(id, nil) : .closed(id, error))
        if stage == .open, let closeCode, let frame = codec.closeFrame(code: closeCode, reason: error.message) {
            queueFrame(frame)
            startLinger()
        } else if stage == .open && linger {
            startLinger()
        } else {
            closeNow()
        }
    }

    /// The handler's close: no event follows. An open WebSocket sends its close frame after
    /// what is queued and lingers (bounded) to flush it; anything else closes now.
    func closeByHandler(code: UInt16) {
        suppressed = true
        guard !reported else { return }
        reported = true
        if stage == .open, let frame = codec.closeFrame(code: code) {
            queueFrame(frame)
            startLinger()
        } else {
            closeNow()
        }
    }

    private func startLinger() {
        guard fd >= 0, !readEnded else {
            closeNow()
            return
        }
        tls?.shutdown()
        tls?.drainOutput(into: &wire)
        stage = .lingering
        deadline = IODriver.monotonicMilliseconds() + Self.lingerMilliseconds
        driver.markDirty(self)
    }

    /// The deadline passed: the open timed out, or the linger is over.
    func expire(now: Int64) {
        guard let deadline, now >= deadline else { return }
        self.deadline = nil
        if stage == .lingering {
            closeNow()
            return
        }
        let during: String
        switch stage {
        case .resolving: during = "resolving \(endpoint.host)"
        case .connecting: during = "connecting to \(target)"
        case .securing: during = noise?.handshakeDescription ?? "the TLS handshake with \(endpoint.host)"
        case .requesting: during = purpose == .webSocket ? "the WebSocket handshake with \(endpoint)" : "the NIP-11 request to \(endpoint)"
        default: during = "reading the NIP-11 document of \(endpoint)"
        }
        fail(TransportError(.timeout, "\(during) timed out after \(options.connectTimeoutMilliseconds) ms"))
    }

    /// Closes the fd now (after one last non-blocking attempt to send what is queued) and
    /// leaves the driver's socket set.
    func closeNow() {
        if fd >= 0 {
            if !wire.isEmpty, case .success(let n) = wire.flush(fd) { driver.countWritten(n) }
            posixClose(fd)
            fd = -1
        }
        stage = .finished
        deadline = nil
        driver.retire(self)
    }

    /// The driver is stopping: a going-away close for an open WebSocket, one attempt to send
    /// it, then the fd closes. No event.
    func abandon() {
        suppressed = true
        reported = true
        if stage == .open, let frame = codec.closeFrame(code: 1001) { try? queuePlaintext(frame, token: nil) }
        closeNow()
    }
}

/// `body` over the bytes of `array`, keeping the typed throw (Array.withUnsafeBytes rethrows
/// untyped).
func withBytes(_ array: [UInt8], _ body: (UnsafeRawBufferPointer) throws(TransportError) -> Void) throws(TransportError) {
    let result: Result<Void, TransportError> = array.withUnsafeBytes { raw in
        Result { () throws(TransportError) in try body(raw) }
    }
    try result.get()
}
