import SoftchatClient
import SoftchatCore
import SoftchatJSON
import SoftchatSync
import SoftchatTransport

/// The `relay` fuzz target: one `SyncEngine` with two relays, a hostile one (index 0) whose
/// every move the input chooses, and an honest one (index 1) holding a dozen notes. The input
/// is a script: the hostile relay's NIP-11 document (every field at its extremes or of the
/// wrong type), sent as an HTTP answer framed as the input chooses (an exact, wrong, negative
/// or doubled `Content-Length`, chunked, to the end of the stream, a bad status) and read by the
/// driver's own `HTTPMessageReader` in the pieces the input chooses; then up to 256 moves, each
/// message sent as WebSocket frames (whole, fragmented, with pings between, split into reads of
/// any size, or raw bytes: reserved bits, masks, lengths at 2^63) through the driver's own
/// `WebSocketCodec`, as the I/O driver decodes them (NOTICE, AUTH, CLOSED, EOSE, EVENT, OK, COUNT, NEG-MSG,
/// NEG-ERR floods with texts up to 400,000 characters, numbers at Int64's edges, garbage, an
/// oversized message, a cut, a late NIP-11 answer, time passing, honest answers to what the
/// engine asked). After the script, two simulated minutes with the hostile relay silent.
///
/// Invariants, checked on every input (a violation is a `fatalError`, which libFuzzer keeps as
/// a finding, as it keeps every trap):
/// - no report carries more than `maxReportTextBytes` of text;
/// - no more AUTH answers go to the hostile relay than one per connection plus one per
///   `authenticationIntervalSeconds` of simulated time;
/// - no input makes the engine return more than `maxActions` actions (a spin), or a timer stay
///   due after it fired 1,000 times at one instant;
/// - every note the honest relay holds ends up in the account, whatever the hostile relay did.
final class HostileRelayRun {
    static let urls = ["wss://hostile.test", "wss://honest.test"]
    static let startUnix: Int64 = 1_750_000_000
    static let notes = #"{"kinds":[1]}"#
    static let maxActions = 400_000
    static let maxMoves = 256

    /// One identity for every run: it answers challenges (signing costs only when the policy
    /// lets an answer through).
    static let identity = SoftchatIdentity.generate()
    static let author = SoftchatIdentity.generate()

    /// What the honest relay holds: a dozen notes within the hour behind the account's cursor.
    static let honestNotes: [VerifiedEvent] = (0..<12).map { i in
        try! author.sign(UnsignedEvent(createdAt: startUnix - 3_000 + Int64(i * 240), kind: 1, content: "honest \(i)"))
    }

    /// Signed notes whose `created_at` sits at the edges a relay may choose.
    static let extremeNotes: [VerifiedEvent] = [0, 1, startUnix + 3_600, startUnix + 10 * 31_557_600, Int64(UInt32.max), 1 << 53, .max - 1, .max]
        .compactMap { try? author.sign(UnsignedEvent(createdAt: $0, kind: 1, content: "edge \($0)")) }

    /// Event texts the hostile relay sends: the edges, the honest notes themselves, and honest
    /// notes with a broken signature or content (same id): a copy that fails verification must
    /// not keep the honest relay's good copy out.
    static let eventTexts: [String] = {
        var texts = (extremeNotes + honestNotes).map(\.jsonText)
        for note in honestNotes.prefix(4) {
            let text = note.jsonText
            let sig = note.sig
            let broken = String(sig.dropLast()) + (sig.hasSuffix("0") ? "1" : "0")
            texts.append(text.replacingFirst(sig, with: broken))
            texts.append(text.replacingFirst("\"honest ", with: "\"forged "))
        }
        return texts
    }()

    let engine: SyncEngine
    let account: FuzzAccount
    var honest = HonestRelay(HostileRelayRun.honestNotes)
    /// Answers the hostile relay may give honestly (a move delivers them), from a relay holding
    /// a few of the same notes.
    var mirror = HonestRelay(Array(HostileRelayRun.honestNotes.prefix(3)) + HostileRelayRun.extremeNotes)
    var mirrored: [String] = []
    var mono: Int64 = 1_000_000
    var unix = HostileRelayRun.startUnix
    let startMono: Int64 = 1_000_000
    var connected = [false, false]
    var connecting = [false, false]
    var honestInbox: [String] = []
    var hostileLimits: RelayLimits?
    /// Subscription ids the engine used with the hostile relay (REQ, NEG-OPEN, COUNT), newest last.
    var askedIDs: [String] = []
    /// The driver's decoder of the hostile relay's WebSocket bytes, new for each connection.
    var codec = HostileRelayRun.newCodec()
    /// How the next messages are framed, and in what pieces the decoder reads them.
    var fragments = 1
    var pingBetween = false
    var readSize = Int.max
    var hostileConnections = 0
    var authAnswers = 0
    /// The ids of our AUTH events, so a move can accept or refuse one.
    var authIDs: [String] = []
    var actions = 0

    var now: EngineTime { EngineTime(monotonicMilliseconds: mono, unixSeconds: unix) }

    init() {
        account = FuzzAccount(policy: [("notes", [Self.notes])], cursor: Self.startUnix - 3_600, relayURLs: Self.urls)
        var config = SyncEngineConfiguration(relayURLs: Self.urls, identity: Self.identity, leasePrefix: "fuzz")
        config.publishes = false
        config.fetchRelayInformation = true
        engine = SyncEngine(configuration: config, now: EngineTime(monotonicMilliseconds: 1_000_000, unixSeconds: Self.startUnix))
    }

    // MARK: The script

    func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        hostileLimits = Self.overHTTP(Self.information(&input), &input)
        pump()
        completeOpens()
        var moves = 0
        while !input.isExhausted && moves < Self.maxMoves {
            moves += 1
            move(&input)
            completeOpens()
            deliverHonest()
        }
        // The hostile relay falls silent; up to two minutes pass, until the account holds every
        // honest note.
        var waited = 0
        while !Self.honestNotes.allSatisfy({ account.events[$0.id] != nil }) {
            guard waited < 120_000 else {
                let missing = Self.honestNotes.filter { account.events[$0.id] == nil }.count
                fatalError("relay fuzz: \(missing) of the honest relay's notes never reached the account")
            }
            advance(500)
            waited += 500
            completeOpens()
            deliverHonest()
        }
    }

    /// A NIP-11 document with each field absent, at an edge, or of the wrong type, built as a
    /// value (the document's parser has its own target, `nip11`).
    static func information(_ input: inout FuzzInput) -> JSONValue {
        var document = JSONObject()
        var limitation = JSONObject()
        for key in ["max_message_length", "max_subscriptions", "max_filters", "max_limit", "auth_required"] where input.bool() {
            limitation.append(key, input.below(3) == 0 ? input.pick(wrongTypes) : .integer(input.pick(Extremes.integers)))
        }
        if input.bool() { document.append("limitation", .object(limitation)) }
        if input.bool() { document.append("supported_nips", input.pick(nipLists)) }
        if input.bool() { document.append("software", .string(input.pick(["nostr_relay", "strfry"]) + text(&input))) }
        if input.bool() { document.append("name", .string(text(&input))) }
        return .object(document)
    }

    static let wrongTypes: [JSONValue] = Extremes.wrongTypes.compactMap { try? JSONReader().parse(Array($0.utf8)) }
    static let nipLists: [JSONValue] = [
        "[42]", "[77]", "[42,77]", "[1,11,42,45,77]", "\"77\"", "[\"77\"]", "[9223372036854775807,-1]", "{}",
    ].compactMap { try? JSONReader().parse(Array($0.utf8)) }

    /// Every relay text the moves use (a piece repeated up to a length at one of the edges),
    /// with its JSON string form, made once: building 400,000-character texts for each input
    /// would cost more than the engine's own work on them.
    static let texts: [(raw: String, json: String)] = Extremes.textPieces.flatMap { piece in
        Extremes.textLengths.map { length in
            let raw = String(repeating: piece, count: max(0, length / max(1, piece.utf8.count)))
            return (raw, JSONValue.string(raw).jsonText)
        }
    }

    /// Relay text: a piece repeated up to a length at one of the edges.
    static func text(_ input: inout FuzzInput) -> String { texts[input.below(texts.count)].raw }

    /// The same, as a JSON string.
    static func quoted(_ input: inout FuzzInput) -> String { texts[input.below(texts.count)].json }

    func subscriptionID(_ input: inout FuzzInput) -> String {
        if !askedIDs.isEmpty && input.below(4) != 0 { return askedIDs[input.below(askedIDs.count)] }
        return input.pick(["~live0", "notes~0~n0", "x", "", String(repeating: "s", count: 65), "~ahead0"])
    }

    func frame(_ items: [JSONValue]) -> String { JSONValue.array(items).jsonText }

    func move(_ input: inout FuzzInput) {
        switch input.below(16) {
        case 0: say(#"["NOTICE",\#(Self.quoted(&input))]"#)
        case 1:
            // A fresh challenge each time (a repeated one is the easy case), sometimes huge.
            say(input.bool() ? #"["AUTH","c\#(actions)-\#(input.byte())"]"# : #"["AUTH",\#(Self.quoted(&input))]"#)
        case 2:
            let prefix = input.pick([
                "auth-required: ", "restricted: ", "blocked: ", "error: ", "rate-limited: ", "invalid: ", "", "ERROR: ",
                String(repeating: "p", count: 300) + ": ",
            ])
            let id = JSONValue.string(subscriptionID(&input)).jsonText
            say(#"["CLOSED",\#(id),"\#(prefix)\#(Self.quoted(&input).dropFirst())]"#)
        case 3: say(frame([.string("EOSE"), .string(subscriptionID(&input))]))
        case 4:
            let text = input.pick(Self.eventTexts)
            say(#"["EVENT",\#(JSONValue.string(subscriptionID(&input)).jsonText),\#(text)]"#)
        case 5:
            // Our AUTH's OK (accepted or refused) when there is one to answer, a note's, or none.
            let id =
                !authIDs.isEmpty && input.bool()
                ? input.pick(authIDs) : input.bool() ? input.pick(Self.honestNotes.map(\.id)) : String(repeating: "a", count: 64)
            say(#"["OK","\#(id)",\#(input.bool()),\#(Self.quoted(&input))]"#)
        case 6:
            let count = input.pick(Extremes.integers)
            var result = JSONObject()
            result.append("count", .integer(count))
            if input.bool() { result.append("hll", .string(String(repeating: input.pick(["ff", "00", "80", "7f"]), count: 256))) }
            if input.bool() { result.append("approximate", .bool(input.bool())) }
            say(frame([.string("COUNT"), .string(subscriptionID(&input)), .object(result)]))
        case 7:
            let raw = input.bytes(max: 64)
            say(frame([.string("NEG-MSG"), .string(subscriptionID(&input)), .string(Hex.encode(raw))]))
        case 8: say(#"["NEG-ERR",\#(JSONValue.string(subscriptionID(&input)).jsonText),\#(Self.quoted(&input))]"#)
        case 9:
            if input.bool() {
                say(String(decoding: input.bytes(max: 200), as: UTF8.self))
            } else {
                // Raw bytes on the wire: any frame header, reserved bits, masks, 2^63 lengths.
                let raw = input.pick(Self.rawFrames) + input.bytes(max: 32)
                wire(raw)
            }
        case 10:
            let bytes = input.pick([0, 1, 524_289, Int(Int32.max), Int.max])
            hostile(.oversized(relay: 0, head: String(Self.text(&input).prefix(1_024)), bytes: bytes))
        case 11: advance(input.pick([0, 1, 50, 999, 1_000, 5_000, 30_000, 120_000, 700_000]))
        case 12: cutHostile(Self.text(&input))
        case 13:
            if input.bool() {
                hostile(.alive(relay: 0))
            } else {
                // How the next messages are framed and read.
                fragments = input.pick([1, 1, 2, 3, 64])
                pingBetween = input.bool()
                readSize = input.pick([Int.max, 1, 2, 7, 125, 126, 127, 4_096, 65_536])
            }
        case 14:
            // Unasked, or late: a NIP-11 answer from another document.
            handle(.relayInformation(relay: 0, Self.overHTTP(Self.information(&input), &input)))
        default:
            // The honest answers to what the engine asked, up to a few.
            for _ in 0..<(1 + input.below(8)) where !mirrored.isEmpty { say(mirrored.removeFirst()) }
        }
    }

    /// The most text the hostile relay sends for one input: 8 MiB, twenty of the longest texts.
    /// A flood's cost grows with its bytes, not its kind; bounding them keeps every input fast
    /// enough for libFuzzer's timeout however many moves it makes.
    static let maxBytesPerInput = 8 << 20
    var sentBytes = 0

    /// The hostile relay sends `text` (when connected and within ``maxBytesPerInput``) as one
    /// message in `fragments` frames (pings between them when asked), decoded by the driver's
    /// codec in reads of `readSize` bytes.
    func say(_ text: String) {
        guard sentBytes + text.utf8.count <= Self.maxBytesPerInput else { return }
        sentBytes += text.utf8.count
        let payload = Array(text.utf8)
        var bytes: [UInt8] = []
        let size = max(1, (payload.count + fragments - 1) / max(1, fragments))
        var offset = 0
        repeat {
            let end = min(payload.count, offset + size)
            bytes += Self.frame(fin: end == payload.count, opcode: offset == 0 ? 0x1 : 0x0, Array(payload[offset..<end]))
            if pingBetween && end < payload.count { bytes += Self.frame(fin: true, opcode: 0x9, [0x70]) }
            offset = end
        } while offset < payload.count
        wire(bytes)
    }

    /// A server frame (unmasked): FIN, the opcode, and the payload's length in the shortest form.
    static func frame(fin: Bool, opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        switch payload.count {
        case ..<126: out.append(UInt8(payload.count))
        case ..<65_536: out += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: out += [127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        return out + payload
    }

    /// Frame headers a hostile relay reaches for, to be followed by input bytes: reserved bits,
    /// a mask from the server, unknown opcodes, control frames too long or fragmented, a close
    /// with a bad code, a continuation with nothing started, lengths at 2^63 − 1 and 2^64 − 1.
    static let rawFrames: [[UInt8]] = [
        [0xF1, 0x01, 0x78], [0x81, 0x81, 1, 2, 3, 4, 0x78], [0x83, 0x00], [0x8B, 0x00], [0x89, 0x7E, 0x00, 0x7E], [0x09, 0x00],
        [0x88, 0x02, 0x03, 0xE7], [0x88, 0x01, 0x00], [0x80, 0x01, 0x78], [0x01, 0x01, 0x78, 0x81, 0x01, 0x78],
        [0x81, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0x81, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        [0x81, 0x7E, 0x00, 0x05], [0x82, 0x01, 0x00], [0x8A, 0x00], [0x81, 0x02, 0xC3, 0x28],
    ]

    static func newCodec() -> WebSocketCodec {
        WebSocketCodec(role: .client, maxMessageBytes: RelayWireContract.maxFrameBytes.value, skipsOversized: true)
    }

    /// Bytes from the hostile relay, decoded as the I/O driver decodes them and handed to the
    /// engine as the managed transport hands the driver's events: a text as `.received`, a
    /// skipped message as `.oversized`, a ping or pong as `.alive`; a close or a protocol
    /// violation ends the connection.
    func wire(_ bytes: [UInt8]) {
        guard connected[0] else { return }
        // Long messages are read in pieces of at least 4 KiB: split further, they would cost
        // time without reaching any other path of the decoder.
        let read = bytes.count > 65_536 ? max(readSize, 4_096) : readSize
        var offset = 0
        while offset < bytes.count && connected[0] {
            let end = min(bytes.count, offset + max(1, min(read, bytes.count - offset)))
            codec.feed(Array(bytes[offset..<end]))
            offset = end
            do {
                while connected[0], let event = try codec.next() {
                    switch event {
                    case .text(let text): hostile(.received(relay: 0, text: text))
                    case .oversized(let head, let size):
                        hostile(.oversized(relay: 0, head: String(decoding: head, as: UTF8.self), bytes: Int(clamping: size)))
                    case .ping, .pong: hostile(.alive(relay: 0))
                    case .close(let code, let reason, _): cutHostile("closed by the relay (\(code) \(reason))")
                    }
                }
            } catch {
                cutHostile(error.message)
            }
        }
    }

    func cutHostile(_ reason: String) {
        guard connected[0] || connecting[0] else { return }
        connected[0] = false
        connecting[0] = false
        mirror.dropConnection()
        mirrored.removeAll()
        handle(.lost(relay: 0, reason: reason))
    }

    /// The NIP-11 document as an HTTP answer framed as the input chooses, read by the driver's
    /// reader in pieces the input chooses; nil wherever the driver reports "no document".
    static func overHTTP(_ document: JSONValue, _ input: inout FuzzInput) -> RelayLimits? {
        let body = Array(document.jsonText.utf8)
        let status = input.pick([
            "HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.0 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 \u{1B}[2J", "HTTP/1.1 2000 OK",
        ])
        var head = status + "\r\nContent-Type: application/nostr+json\r\n"
        var payload = body
        switch input.below(6) {
        case 0: head += "Content-Length: \(body.count)\r\n"
        case 1: head += "Content-Length: \(input.pick(Extremes.integers))\r\n"
        case 2:
            head += "Transfer-Encoding: chunked\r\n"
            let size = input.bool() ? String(body.count, radix: 16) : input.pick(["FFFFFFFFFFFFFFFF", "-1", "0", "1;x=y", ""])
            payload = Array("\(size)\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8)
        case 3: break  // framed by the end of the stream
        case 4: head += "Content-Length: \(body.count)\r\nContent-Length: \(body.count + 1)\r\n"
        default: head += String(decoding: input.bytes(max: 40), as: UTF8.self) + "\r\n"
        }
        let answer = Array((head + "\r\n").utf8) + payload
        let step = answer.count > 65_536 ? 65_536 : input.pick([1, 7, 64, 4_096, Int.max])
        var reader = RelayInformation.answerReader()
        do throws(TransportError) {
            var offset = 0
            var progress = HTTPMessageReader.Progress.needMore
            while offset < answer.count, progress == .needMore {
                let end = min(answer.count, offset + min(step, answer.count - offset))
                progress = try reader.feed(answer[offset..<end])
                offset = end
            }
            if progress == .needMore { progress = try reader.finish() }
            guard case .message(let head, let body) = progress else { return nil }
            try RelayInformation.checkStatus(head)
            return RelayLimits(information: try RelayInformation.decode(body))
        } catch {
            return nil
        }
    }

    func hostile(_ input: SyncEngineInput) {
        guard connected[0] else { return }
        handle(input)
    }

    // MARK: Driving the engine

    func handle(_ input: SyncEngineInput) {
        engine.handle(input, now: now)
        pump()
    }

    func pump() {
        while let action = engine.pollAction() {
            actions += 1
            if actions > Self.maxActions { fatalError("relay fuzz: more than \(Self.maxActions) engine actions for one input (a spin)") }
            switch action {
            case .fetchInformation(let r, _):
                engine.handle(.relayInformation(relay: r, r == 0 ? hostileLimits : nil), now: now)
            case .open(let r, _):
                connecting[r] = true
            case .write(let r, let text, let token):
                guard connected[r] else { continue }
                if r == 1 { honestInbox += honest.receive(text) } else { written(text) }
                engine.handle(.written(relay: r, token: token), now: now)
            case .ping(let r):
                if r == 1 && connected[1] { honestInbox.append(Self.pong) }
            case .close(let r):
                connected[r] = false
                connecting[r] = false
                if r == 1 {
                    honest.dropConnection()
                    honestInbox.removeAll()
                } else {
                    mirror.dropConnection()
                    mirrored.removeAll()
                }
            case .account(let request):
                engine.handle(.account(account.answer(request)), now: now)
            case .report(let event):
                check(event)
            case .stopped:
                break
            }
        }
    }

    static let pong = "\u{0}pong"

    /// What the engine wrote to the hostile relay: AUTH answers counted against the policy,
    /// the ids it asked with remembered, the honest answers kept for a move to deliver.
    func written(_ text: String) {
        guard let frame = try? parseClientRelayFrame(text) else { return }
        switch frame {
        case .auth(let event):
            authAnswers += 1
            authIDs.append(event.id)
            if authIDs.count > 8 { authIDs.removeFirst() }
            let interval = Int64(RelaySessionContract.authenticationIntervalSeconds.value)
            let allowed = hostileConnections + Int((mono - startMono) / 1_000 / interval) + 1
            if authAnswers > allowed {
                fatalError("relay fuzz: \(authAnswers) AUTH answers in \((mono - startMono) / 1_000) s over \(hostileConnections) connections")
            }
        case .req(let id, _), .count(let id, _), .negOpen(let id, _, _):
            askedIDs.append(id)
            if askedIDs.count > 16 { askedIDs.removeFirst() }
        default:
            break
        }
        mirrored += mirror.receive(text)
        if mirrored.count > 256 { mirrored.removeFirst(mirrored.count - 256) }
    }

    func check(_ event: ManagedTransportEvent) {
        let bound = RelayText.maxReportBytes
        switch event {
        case .notice(_, let text), .connectionFailed(_, let text):
            if text.utf8.count > bound { fatalError("relay fuzz: a report of \(text.utf8.count) bytes of text") }
        case .delivery(_, _, let decision):
            if decision.message.utf8.count > bound { fatalError("relay fuzz: a delivery message of \(decision.message.utf8.count) bytes") }
        case .relayInformation(_, let limits):
            if (limits.name?.utf8.count ?? 0) > bound || (limits.software?.utf8.count ?? 0) > bound {
                fatalError("relay fuzz: a NIP-11 name or software over the report bound")
            }
        case .state, .relayState, .ingested, .synced:
            break
        }
    }

    func completeOpens() {
        for r in 0..<2 where connecting[r] {
            connecting[r] = false
            connected[r] = true
            if r == 0 {
                hostileConnections += 1
                codec = Self.newCodec()
            }
            handle(.opened(relay: r))
        }
    }

    func deliverHonest() {
        var n = 0
        while connected[1], !honestInbox.isEmpty, n < 10_000 {
            n += 1
            let text = honestInbox.removeFirst()
            handle(text == Self.pong ? .alive(relay: 1) : .received(relay: 1, text: text))
        }
    }

    /// Moves both clocks by `ms`, firing the engine's timer whenever it is due.
    func advance(_ ms: Int64) {
        let target = mono + ms
        var firedAtThisInstant = 0
        while let due = engine.pollTimeout(), due <= target {
            let next = max(mono, due)
            firedAtThisInstant = next == mono ? firedAtThisInstant + 1 : 0
            if firedAtThisInstant > 1_000 { fatalError("relay fuzz: a timer stays due at \(mono) after firing 1,000 times") }
            unix += next / 1_000 - mono / 1_000
            mono = next
            handle(.timer)
            completeOpens()
            deliverHonest()
        }
        unix += target / 1_000 - mono / 1_000
        mono = target
        handle(.timer)
    }
}

extension String {
    /// The text with the first occurrence of `target` replaced.
    fileprivate func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: replacement)
        return copy
    }
}
