import SoftchatCore

/// What the first bytes of a relay message over our frame bound say about it.
///
/// The transport skips such a message as it arrives (never buffering it) and keeps its first
/// kilobyte; this reads the verb, the subscription id and — for an EVENT, in the usual field
/// order (`id`, `pubkey`, `created_at` before `tags` and `content`) — the event's id and
/// `created_at`. Nothing here is verified: the values only place the message (a page slot, a
/// reconciliation to split) and name it in a notice. A head cut anywhere, or not JSON at all,
/// yields what was read before the cut.
struct OversizedMessage: Equatable {
    var verb: String?
    var subscriptionID: String?
    var eventID: String?
    var createdAt: Int64?
    /// The message's whole size, in bytes.
    let bytes: Int

    init(head: String, bytes: Int) {
        self.bytes = bytes
        var reader = HeadReader(Array(head.utf8))
        guard reader.take(UInt8(ascii: "[")), let verb = reader.string() else { return }
        self.verb = verb
        guard reader.take(UInt8(ascii: ",")), let subscriptionID = reader.string() else { return }
        self.subscriptionID = subscriptionID
        guard verb == "EVENT", reader.take(UInt8(ascii: ",")), reader.take(UInt8(ascii: "{")) else { return }
        // The event object's members, up to the first one that is not a string or an integer
        // (`tags`, usually): the head may end inside it anyway.
        while let key = reader.string(), reader.take(UInt8(ascii: ":")) {
            if key == "id", let id = reader.string() {
                eventID = id
            } else if key == "created_at", let seconds = reader.integer() {
                createdAt = seconds
            } else if reader.string() == nil && reader.integer() == nil {
                return
            }
            guard reader.take(UInt8(ascii: ",")) else { return }
        }
    }

    /// The message as a notice names it: its verb, subscription and event, as far as known.
    var summary: String {
        var parts = [verb ?? "a message that does not read as JSON"]
        if let subscriptionID { parts.append("on \(subscriptionID)") }
        if let eventID { parts.append("event \(eventID)") }
        if let createdAt { parts.append("created_at \(createdAt)") }
        return parts.joined(separator: " ")
    }
}

/// A forward-only reader of JSON tokens over a message head, skipping whitespace.
private struct HeadReader {
    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    /// Consumes `byte` (after whitespace) when it is next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == byte else { return false }
        i += 1
        return true
    }

    /// A whole string of at most 256 bytes, its escapes decoded (`\uXXXX` ends the read: ids,
    /// verbs and hex never need it). Nil, consuming nothing, when the next token is not one.
    mutating func string() -> String? {
        skipSpace()
        let mark = i
        guard take(UInt8(ascii: "\"")) else { return nil }
        var out: [UInt8] = []
        while i < bytes.count, out.count <= 256 {
            let b = bytes[i]
            i += 1
            if b == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
            if b == UInt8(ascii: "\\") {
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                default:
                    i = mark
                    return nil
                }
            } else {
                out.append(b)
            }
        }
        i = mark
        return nil
    }

    /// A non-negative integer of at most 18 digits that the head holds whole (followed by a
    /// delimiter). Nil, consuming nothing, otherwise.
    mutating func integer() -> Int64? {
        skipSpace()
        let mark = i
        var value: Int64 = 0
        var digits = 0
        while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9"), digits < 18 {
            value = value * 10 + Int64(bytes[i] - UInt8(ascii: "0"))
            digits += 1
            i += 1
        }
        skipSpace()
        guard digits > 0, i < bytes.count, bytes[i] == UInt8(ascii: ",") || bytes[i] == UInt8(ascii: "}") else {
            i = mark
            return nil
        }
        return value
    }
}

extension SyncEngine {
    /// The most ids of events sent over our frame bound each relay remembers
    /// (`RelayRuntime.oversizedIDs`): 64 KiB of ids.
    static let oversizedIDsRemembered = 1_024
}

extension RelayRuntime {
    /// Relay `r` sent a message over our frame bound, skipped by the transport. No account can
    /// hold such an event (relay.wire's bound), so it is named in a notice; what matters is that
    /// it takes its place where it was sent: an event in a page's slot (so a page the relay cut
    /// at its cap still reads as full, and paging goes on below it), a fetched id as answered
    /// (so it is not asked for again and again), a NEG-MSG as the relay's "too big" (the
    /// reconciliation is split into smaller queries, as for NEG-ERR, or paged). An event of a
    /// page or a fetch is also counted in its subscription's next `synced` cx.report
    /// (`SyncOutcome.skipped`), and its id, when it reads as one, is remembered for the relay, so
    /// no later reconciliation fetches it again (issue 45, path 10).
    mutating func oversized(_ cx: RelayContext, _ message: OversizedMessage) {
        connection?.keepalive.heard(cx.now.monotonicMilliseconds)
        cx.report(
            .notice(
                relayURL: url,
                "relay sent a \(message.bytes)-byte message, over our frame bound: skipped (\(message.summary))"))
        guard let verb = message.verb, let subscriptionID = message.subscriptionID else { return }
        switch verb {
        case "EVENT":
            requestHeard(cx, subscriptionID)
            // Only an id that reads as one (the head is the relay's word, unverified) is listed.
            let eventID = message.eventID.flatMap { id -> String? in NegentropyID(hex: id) == nil ? nil : id }
            if let eventID { oversizedIDs.insert(eventID) }
            if let owner = connection?.pageOwner[subscriptionID] {
                subscriptions[owner]?.sync.receivedOversized(eventID: message.eventID, createdAt: message.createdAt)
                skipped(cx, owner, .oversized, eventID: eventID)
            }
            if let owner = neg.fetchOwner[subscriptionID], let id = message.eventID {
                subscriptions[owner]?.negentropy?.fetchReceived(id)
                skipped(cx, owner, .oversized, eventID: eventID)
            }
        case "NEG-MSG":
            guard let (id, part) = neg.answered(subscriptionID) else { return }
            neg.closed(subscriptionID, frame: ClientRelayFrame.negClose(subscriptionID: subscriptionID).toJSON())
            heardNegentropy(cx, reason: "answered NEG-OPEN (over our frame bound)")
            neg.tooBig()
            guard var reconciliation = subscriptions[id]?.negentropy, reconciliation.split(part: part) else {
                fallBack(cx, id, reason: "a NEG-MSG over our frame bound")
                sendQueuedRequests(cx)
                return
            }
            subscriptions[id]!.negentropy = reconciliation
            openNegentropy(cx)
            sendQueuedRequests(cx)
        default:
            break
        }
    }

    /// Subscription `id` on relay `r` left an event out of the account, for its next `synced`
    /// cx.report.
    mutating func skipped(_ cx: RelayContext, _ id: String, _ reason: SkipReason, eventID: String?) {
        guard subscriptions[id] != nil else { return }
        SkippedEvents.record(reason, eventID: eventID, in: &subscriptions[id]!.skipped)
    }
}
