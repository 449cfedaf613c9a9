import Dispatch
public import SoftchatCore
public import SoftchatJSON
public import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the embedded relay behaves; the defaults are an open relay that understands EVENTS.
public struct TestRelayOptions: Sendable {
    /// NIP-42: send a challenge on connect and refuse EVENT/REQ/COUNT until authenticated.
    public var requireAuth = false
    /// Accept Softchat's EVENTS batch (one OK per event). Off imitates a standard relay.
    public var acceptEventsBatch = true
    /// Reject events whose content is longer than this (OK false, `invalid:`), like nostr-relay.
    public var maxContentLength: Int? = nil
    /// Silently cap the events answered per REQ, like LocalRelay's 500.
    public var reqCap: Int? = nil
    /// PEM certificate chain and key: serve wss instead of ws.
    public var certificateFile: String? = nil
    public var keyFile: String? = nil
    /// Serve WebSocket over Noise (noise://) as the responder with this static key and these
    /// patterns, instead of plain ws.
    public var noise: TestRelayNoise? = nil
    /// How NEG-OPEN is met (NIP-77).
    public var negentropy = TestRelayNegentropy.answer
    /// The largest negentropy message it writes, in bytes of binary (0: what fits its own
    /// frame bound as hex).
    public var negentropyFrameLimit = 0

    public init() {}
}

/// How the embedded relay meets NIP-77.
public enum TestRelayNegentropy: Sendable, Hashable {
    /// As a negentropy responder (and `supported_nips` lists 77).
    case answer
    /// With a NOTICE, as relays that do not know the verb do.
    case notice
    /// Not at all.
    case silent
    /// With `NEG-ERR blocked:`.
    case blocked
}

/// The embedded relay's Noise responder: its static key pair and the handshake patterns it
/// accepts (tried in order on the client's first message; see `NoiseStream(server:)`).
public struct TestRelayNoise: Sendable {
    public var staticKey: NoiseKeyPair
    public var patterns: [NoiseHandshakePattern]
    /// Transport messages per key in each direction before rekeying; clients must use the
    /// same `ConnectionOptions.noiseRekeyAfterMessages`.
    public var rekeyAfterMessages: UInt64

    public init(
        staticKey: NoiseKeyPair = .generate(), patterns: [NoiseHandshakePattern] = [.IK, .XX],
        rekeyAfterMessages: UInt64 = NoiseStream.defaultRekeyAfterMessages
    ) {
        self.staticKey = staticKey
        self.patterns = patterns
        self.rekeyAfterMessages = rekeyAfterMessages
    }
}

/// A small NIP-01 relay on 127.0.0.1 for the demo and tests: EVENT, EVENTS (one OK per event),
/// REQ with stored events then EOSE then live events, CLOSE, COUNT (NIP-45), optional NIP-42,
/// and the NIP-11 document. Events are kept in memory and verified on arrival. No production
/// path depends on it.
public final class TestRelay: @unchecked Sendable {
    // @unchecked: all mutable state sits behind `lock`.
    public let options: TestRelayOptions
    public let port: Int
    /// ws://, wss:// or, with Noise, `noise://127.0.0.1:PORT?pattern=P&key=<its static public
    /// key>` for its first accepted pattern P.
    public var url: String {
        if let noise = options.noise { return noiseURL(pattern: noise.patterns.first ?? .XX) }
        return "\(options.certificateFile != nil ? "wss" : "ws")://127.0.0.1:\(port)"
    }

    /// The noise:// URL of this relay for `pattern`, with its static key when the pattern has
    /// one (pinned for XX, required for IK and NK), else `unauthenticated=yes` (NN, XN, IN: the
    /// relay has no static key to pin).
    public func noiseURL(pattern: NoiseHandshakePattern) -> String {
        let key = options.noise.map { "&key=" + $0.staticKey.publicKeyHex } ?? ""
        return "noise://127.0.0.1:\(port)?pattern=\(pattern.name)" + (pattern.responderHasStatic ? key : "&unauthenticated=yes")
    }

    /// Why Noise connections to this relay were refused or ended (handshake failures,
    /// transport messages that failed authentication), oldest first.
    public var noiseFailures: [String] { lock.with { noiseFailureLog } }

    private let listener: TCPListener
    private let lock = Lock()
    private var events: [VerifiedEvent] = []
    private var eventIDs: Set<String> = []
    /// The negentropy storage built per filter (its JSON), with the store's count it covers.
    private var negentropyStorages: [String: (count: Int, storage: NegentropyStorage)] = [:]
    private var connections: [Int: Connection] = [:]
    private var nextConnectionID = 0
    private var running = true
    private let group = DispatchGroup()
    private var acceptedFrames = 0
    private var challenges: [String] = []
    private var noiseFailureLog: [String] = []

    public init(options: TestRelayOptions = TestRelayOptions(), port: Int = 0) throws(TransportError) {
        self.options = options
        listener = try TCPListener(port: port)
        self.port = listener.port
        group.enter()
        DispatchQueue(label: "softchat.test-relay").async { [self] in  // own thread: the loop blocks
            acceptLoop()
            group.leave()
        }
    }

    /// Stops accepting, closes every connection and waits for their threads to end.
    public func stop() {
        let open: [Connection] = lock.with {
            running = false
            return Array(connections.values)
        }
        for c in open { c.cut() }
        group.wait()
        listener.close()
    }

    /// Cuts every open connection without a close handshake (to exercise client recovery).
    public func dropConnections() {
        for c in lock.with({ Array(connections.values) }) { c.cut() }
    }

    public var storedEventCount: Int { lock.with { events.count } }
    /// Every NIP-42 challenge the relay issued (for secret-hygiene tests that scan for them).
    public var issuedChallenges: [String] { lock.with { challenges } }
    fileprivate func recordChallenge(_ c: String) { lock.with { challenges.append(c) } }
    public var storedEventIDs: Set<String> { lock.with { eventIDs } }
    public var connectionCount: Int { lock.with { connections.count } }
    /// Client frames accepted so far (all connections).
    public var framesReceived: Int { lock.with { acceptedFrames } }

    private var isRunning: Bool { lock.with { running } }

    private func acceptLoop() {
        while isRunning {
            guard let tcp = try? listener.accept(timeoutMilliseconds: 50) else { continue }
            let id: Int = lock.with {
                nextConnectionID += 1
                return nextConnectionID
            }
            group.enter()
            DispatchQueue(label: "softchat.test-relay").async { [self] in  // own thread: the loop blocks
                serve(tcp, id: id)
                group.leave()
            }
        }
    }

    private func recordNoiseFailure(_ error: TransportError) {
        lock.with { noiseFailureLog.append(error.description) }
    }

    private func serve(_ tcp: TCPStream, id: Int) {
        var stream: any ByteStream = tcp
        defer {
            if let noise = stream as? NoiseStream, let failure = noise.failure { recordNoiseFailure(failure) }
        }
        if let noise = options.noise {
            do {
                stream = try NoiseStream(
                    server: tcp, patterns: noise.patterns, localStatic: noise.staticKey, timeoutMilliseconds: 5000,
                    rekeyAfterMessages: noise.rekeyAfterMessages)
            } catch {
                recordNoiseFailure(error)
                return
            }
        } else if let cert = options.certificateFile, let key = options.keyFile {
            guard let tls = try? TLSStream(server: tcp, certificateFile: cert, keyFile: key, timeoutMilliseconds: 5000) else {
                tcp.close()
                return
            }
            stream = tls
        }
        let handshake: ServerHandshake
        do {
            handshake = try ServerHandshake.accept(stream, timeoutMilliseconds: 5000)
        } catch {
            stream.close()
            return
        }
        switch handshake {
        case .http(_, let accept, let s):
            serveInformation(s, accept: accept)
        case .websocket(let ws):
            let connection = Connection(relay: self, socket: ws, id: id)
            let admitted: Bool = lock.with {
                guard running else { return false }
                connections[id] = connection
                return true
            }
            guard admitted else {
                ws.close(code: 1001, waitMilliseconds: 0)
                return
            }
            connection.run()
            _ = lock.with { connections.removeValue(forKey: id) }
        }
    }

    /// NIP-11: the relay information document for `Accept: application/nostr+json`.
    private func serveInformation(_ stream: any ByteStream, accept: String?) {
        defer { stream.close() }
        guard accept?.contains("application/nostr+json") == true else {
            try? stream.write(Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            return
        }
        let body = informationDocument.jsonText
        let response =
            "HTTP/1.1 200 OK\r\nContent-Type: application/nostr+json\r\nAccess-Control-Allow-Origin: *\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        try? stream.write(Array(response.utf8))
    }

    public var informationDocument: JSONValue {
        var limitation = JSONObject()
        limitation.append("max_message_length", .integer(Int64(RelayWireContract.maxFrameBytes.value)))
        limitation.append("max_subscriptions", .integer(Int64(RelaySessionContract.maxSubscriptions.value)))
        limitation.append("max_filters", .integer(Int64(RelayWireContract.maxFilters.value)))
        if let cap = options.reqCap { limitation.append("max_limit", .integer(Int64(cap))) }
        limitation.append("auth_required", .bool(options.requireAuth))
        var doc = JSONObject()
        doc.append("name", "softchat test relay")
        doc.append("description", "Embedded loopback relay for Softchat's demo and tests")
        doc.append("software", "softchat")
        doc.append("supported_nips", .array(options.negentropy == .answer ? [1, 11, 42, 45, 77] : [1, 11, 42, 45]))
        doc.append("limitation", .object(limitation))
        doc.append("softchat", .object(JSONObject(["events_batch": .bool(options.acceptEventsBatch)])))
        return .object(doc)
    }

    // MARK: Shared state used by connections

    /// Stores a verified event; false when it was already there. Live subscribers get it.
    /// Stores events as if they had been published before anyone connected (benchmarks and
    /// sync tests start from a relay that already holds history).
    public func preload(_ events: [VerifiedEvent]) {
        lock.with {
            for event in events where eventIDs.insert(event.id).inserted { self.events.append(event) }
            self.events.sort(by: Self.newestFirst)
        }
    }

    /// The order a relay answers in: newest first, ties by lowest id.
    static func newestFirst(_ a: VerifiedEvent, _ b: VerifiedEvent) -> Bool {
        a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.id < b.id
    }

    /// Where `event` belongs in `events` (kept newest first), by binary search.
    private func insertionIndex(_ event: VerifiedEvent) -> Int {
        var lo = 0
        var hi = events.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if Self.newestFirst(events[mid], event) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    fileprivate func store(_ event: VerifiedEvent) -> Bool {
        let (stored, subscribers): (Bool, [Connection]) = lock.with {
            guard eventIDs.insert(event.id).inserted else { return (false, []) }
            events.insert(event, at: insertionIndex(event))
            return (true, Array(connections.values))
        }
        for c in subscribers { c.offer(event) }
        return stored
    }

    fileprivate func countFrame() { lock.with { acceptedFrames += 1 } }

    /// The negentropy responder over the events matching `filter` (its limit applied, as a REQ
    /// would), its messages bounded so that each NEG-MSG fits the relay's frame bound.
    fileprivate func reconciler(_ filter: RelayFilter) -> Negentropy {
        let limit = options.negentropyFrameLimit > 0 ? options.negentropyFrameLimit : (RelayWireContract.maxFrameBytes.value - 256) / 2
        let key = filter.toJSON()
        // The store only grows, so its count says whether a storage built for this filter is
        // still the set: a relay keeps its index between NEG-OPENs rather than rescanning.
        if let kept = lock.with({ negentropyStorages[key].flatMap { $0.count == events.count ? $0.storage : nil } }) {
            return Negentropy(storage: kept, frameSizeLimit: limit)
        }
        let snapshot = lock.with { events }
        // The whole set: the REQ cap is a page size, not a bound on what the relay holds. The
        // store holds each event once, so one filter's matches need no merging: reversed, they
        // are oldest first (the ids of one second the other way round, which the storage puts
        // in order).
        var items: [NegentropyItem] = []
        Self.eachMatch(filter, in: snapshot) { event in
            if let item = NegentropyItem(createdAt: event.createdAt, idHex: event.id) { items.append(item) }
        }
        items.reverse()
        let storage = NegentropyStorage(items: items)
        lock.with { if events.count == snapshot.count { negentropyStorages[key] = (snapshot.count, storage) } }
        return Negentropy(storage: storage, frameSizeLimit: limit)
    }

    /// Each event of `snapshot` (newest first) that `f` matches, newest first, `f.limit` of them
    /// at most: from the first event at or before `until` until `since` is passed, an index
    /// walk as a real relay answers, not a sort per REQ.
    private static func eachMatch(_ f: RelayFilter, in snapshot: [VerifiedEvent], _ body: (VerifiedEvent) -> Void) {
        var lo = 0
        var hi = snapshot.count
        if let until = f.until {
            while lo < hi {
                let mid = (lo + hi) / 2
                if snapshot[mid].createdAt > until { lo = mid + 1 } else { hi = mid }
            }
        }
        let limit = f.limit.map { Int($0) } ?? Int.max
        var matched = 0
        var i = lo
        while i < snapshot.count, matched < limit {
            let e = snapshot[i]
            if let since = f.since, e.createdAt < since { break }
            if f.matches(e) {
                body(e)
                matched += 1
            }
            i += 1
        }
    }

    /// Stored events matching the filters, newest first, each filter's limit applied.
    fileprivate func query(_ filters: [RelayFilter], capped: Bool = true) -> [VerifiedEvent] {
        let snapshot = lock.with { events }  // newest first
        var out: [String: VerifiedEvent] = [:]
        for f in filters { Self.eachMatch(f, in: snapshot) { out[$0.id] = $0 } }
        var all = Array(out.values)
        all.sort { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
        if capped, let cap = options.reqCap { all = Array(all.prefix(cap)) }
        return all
    }
}

/// One client connection: its subscriptions, authentication and outbox of live events.
private final class Connection: @unchecked Sendable {
    unowned let relay: TestRelay
    let socket: WebSocket
    let id: Int
    let lock = Lock()
    var subscriptions: [String: [RelayFilter]] = [:]
    var outbox: [String] = []
    var challenge: String
    var authenticatedKeys: Set<String> = []
    var cutRequested = false
    /// Open NIP-77 reconciliations by subscription id (this connection's thread only).
    var reconciliations: [String: Negentropy] = [:]

    init(relay: TestRelay, socket: WebSocket, id: Int) {
        self.relay = relay
        self.socket = socket
        self.id = id
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        challenge = bytes.map { String($0, radix: 16) }.joined()
        relay.recordChallenge(challenge)
    }

    func cut() {
        lock.with { cutRequested = true }
        socket.stream.close()
    }

    func offer(_ event: VerifiedEvent) {
        lock.with {
            for (sub, filters) in subscriptions where RelayFilter.anyMatches(filters, event) {
                outbox.append(RelayResponseFrame.event(subscriptionID: sub, event: event).toJSON())
            }
        }
    }

    func send(_ frame: RelayResponseFrame) {
        try? socket.send(text: frame.toJSON())
    }

    func run() {
        if relay.options.requireAuth { send(.auth(challenge: challenge)) }
        while true {
            if lock.with({ cutRequested }) { return }
            for frame in lock.with({ () -> [String] in
                defer { outbox.removeAll() }
                return outbox
            }) {
                try? socket.send(text: frame)
            }
            let message: WebSocket.Message
            do {
                message = try socket.receive(timeoutMilliseconds: 20)
            } catch {
                if error.kind == .timeout { continue }
                return
            }
            guard case .text(let text) = message else { return }
            relay.countFrame()
            handle(text)
        }
    }

    var authenticated: Bool { !authenticatedKeys.isEmpty }

    func handle(_ text: String) {
        let frame: ClientRelayFrame
        do {
            frame = try parseClientRelayFrame(text)
        } catch {
            // Tell the client what was wrong; an invalid EVENT gets an OK naming its id if readable.
            if case .invalidRelayFrame = error.code, let id = Self.eventID(in: text) {
                send(.ok(eventID: id, accepted: false, message: RelayMessage("invalid: \(error.message)")))
            } else if case .invalidRelayAuthentication = error.code {
                send(.notice(RelayMessage("invalid: \(error.message)")))
            } else {
                send(.notice(RelayMessage("invalid: \(error.code.rawValue): \(error.message)")))
            }
            return
        }
        switch frame {
        case .event(let e): accept([e])
        case .events(let list):
            guard relay.options.acceptEventsBatch else {
                send(.notice(RelayMessage("invalid: unknown verb EVENTS")))
                return
            }
            accept(list)
        case .req(let sub, let filters):
            guard !relay.options.requireAuth || authenticated else {
                send(.closed(subscriptionID: sub, message: RelayMessage("auth-required: authenticate to read")))
                return
            }
            lock.with { subscriptions[sub] = filters }
            for e in relay.query(filters).reversed() { send(.event(subscriptionID: sub, event: e)) }
            send(.eose(subscriptionID: sub))
        case .close(let sub):
            lock.with { subscriptions[sub] = nil }
        case .count(let sub, let filters):
            guard !relay.options.requireAuth || authenticated else {
                send(.closed(subscriptionID: sub, message: RelayMessage("auth-required: authenticate to count")))
                return
            }
            let n = relay.query(filters.map { $0 }).count
            send(.count(subscriptionID: sub, result: CountResult(count: Int64(n))))
        case .negOpen(let sub, let filter, let message):
            switch relay.options.negentropy {
            case .notice: send(.notice(RelayMessage("invalid: unknown verb NEG-OPEN")))
            case .silent: break
            case .blocked: send(.negError(subscriptionID: sub, message: RelayMessage("blocked: negentropy is off here")))
            case .answer:
                guard !relay.options.requireAuth || authenticated else {
                    send(.negError(subscriptionID: sub, message: RelayMessage("auth-required: authenticate to reconcile")))
                    return
                }
                let reconciler = relay.reconciler(filter)
                reconciliations[sub] = reconciler
                negentropyAnswer(sub, reconciler, message)
            }
        case .negMessage(let sub, let message):
            guard relay.options.negentropy == .answer else { return }
            guard let reconciler = reconciliations[sub] else {
                send(.negError(subscriptionID: sub, message: RelayMessage("closed: no reconciliation \(sub) is open")))
                return
            }
            negentropyAnswer(sub, reconciler, message)
        case .negClose(let sub):
            reconciliations[sub] = nil
        case .auth(let e):
            do {
                try Nip42.verify(e, challenge: challenge, relayURL: relay.url, now: Int64(time(nil)))
                authenticatedKeys.insert(e.pubkey)
                send(.ok(eventID: e.id, accepted: true, message: RelayMessage("")))
            } catch {
                send(.ok(eventID: e.id, accepted: false, message: RelayMessage("auth-required: \(error.message)")))
            }
        }
    }

    func negentropyAnswer(_ sub: String, _ reconciler: Negentropy, _ message: [UInt8]) {
        do {
            send(.negMessage(subscriptionID: sub, message: try reconciler.respond(message)))
        } catch {
            reconciliations[sub] = nil
            send(.negError(subscriptionID: sub, message: RelayMessage("error: \(error.message)")))
        }
    }

    func accept(_ events: [VerifiedEvent]) {
        for e in events {
            if relay.options.requireAuth && !authenticated {
                send(.ok(eventID: e.id, accepted: false, message: RelayMessage("auth-required: authenticate to publish")))
                continue
            }
            if let max = relay.options.maxContentLength, e.content.count > max {
                send(.ok(eventID: e.id, accepted: false, message: RelayMessage("invalid: content over \(max) characters")))
                continue
            }
            if relay.store(e) {
                send(.ok(eventID: e.id, accepted: true, message: RelayMessage("")))
            } else {
                send(.ok(eventID: e.id, accepted: true, message: RelayMessage("duplicate: already have this event")))
            }
        }
    }

    static func eventID(in text: String) -> String? {
        guard let value = try? JSONReader().parse(text), case .array(let a) = value, a.count == 2,
            a[0] == "EVENT", case .string(let id)? = a[1]["id"], id.utf8.count == 64
        else { return nil }
        return id
    }
}
