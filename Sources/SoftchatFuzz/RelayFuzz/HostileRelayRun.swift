import SoftchatClient
import SoftchatCore
import SoftchatJSON
import SoftchatSync
import SoftchatTransport

/// The `relay` fuzz target: one `SyncEngine` with two relays, a hostile one (index 0) whose
/// every move the input chooses, and an honest one (index 1) holding a dozen notes. The input
/// is a script: the hostile relay's NIP-11 document (every field at its extremes or of the
/// wrong type), then up to 256 moves (NOTICE, AUTH, CLOSED, EOSE, EVENT, OK, COUNT, NEG-MSG,
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
    var hostileConnections = 0
    var authAnswers = 0
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
        hostileLimits = RelayLimits(information: RelayInformation(document: Self.information(&input)))
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
            let id = input.bool() ? input.pick(Self.honestNotes.map(\.id)) : String(repeating: "a", count: 64)
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
        case 9: say(String(decoding: input.bytes(max: 200), as: UTF8.self))
        case 10:
            let bytes = input.pick([0, 1, 524_289, Int(Int32.max), Int.max])
            hostile(.oversized(relay: 0, head: String(Self.text(&input).prefix(1_024)), bytes: bytes))
        case 11: advance(input.pick([0, 1, 50, 999, 1_000, 5_000, 30_000, 120_000, 700_000]))
        case 12:
            if connected[0] || connecting[0] {
                connected[0] = false
                connecting[0] = false
                mirror.dropConnection()
                mirrored.removeAll()
                handle(.lost(relay: 0, reason: Self.text(&input)))
            }
        case 13: hostile(.alive(relay: 0))
        case 14:
            // Unasked, or late: a NIP-11 answer from another document.
            handle(.relayInformation(relay: 0, RelayLimits(information: RelayInformation(document: Self.information(&input)))))
        default:
            // The honest answers to what the engine asked, up to a few.
            for _ in 0..<(1 + input.below(8)) where !mirrored.isEmpty { say(mirrored.removeFirst()) }
        }
    }

    /// The hostile relay sends `text` (when connected).
    func say(_ text: String) { hostile(.received(relay: 0, text: text)) }

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
        case .auth:
            authAnswers += 1
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
            if r == 0 { hostileConnections += 1 }
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
