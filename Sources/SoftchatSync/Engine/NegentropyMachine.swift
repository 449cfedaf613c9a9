import SoftchatCore

/// NIP-77 on one relay, as the engine keeps it between connections and within one: the
/// account's record of the relay's support, the NEG subscriptions open on this connection and
/// the fetches by id they led to, the NEG frames waiting to be written, and what this
/// connection has shown (an answer heard, a query too big, silence).
///
/// A value type with its own transitions and deadline; each reconciliation's own state is the
/// subscription's `NegentropySync`. The engine (RelayRuntime+Negentropy) sends, receives and
/// reports. Tested alone in `NegentropyMachineTests`.
struct NegentropyMachine {
    /// What the account recorded about this relay's support.
    var record: NegentropySupportRecord?
    /// Counts connections, so an account answer for an earlier one is recognised.
    private(set) var connection = 0
    /// NEG subscription id → the policy subscription and the part of its reconciliation.
    private(set) var owners: [String: (subscription: String, part: Int)] = [:]
    /// NEG subscription id → when its last message was queued (monotonic ms), until answered.
    private(set) var sentAt: [String: Int64] = [:]
    /// The relay found a reconciliation too big on this connection: one runs at a time.
    private(set) var serial = false
    /// Nothing more is opened on this connection (not spoken here, or silent).
    private(set) var off = false
    /// A NIP-77 answer came on this connection: the relay speaks it.
    private(set) var heard = false
    /// Connections in a row whose first NEG-OPEN went unanswered (its deadline passed, or the
    /// connection was lost first). Never recorded: silence is weak evidence.
    private(set) var silentConnections = 0
    /// Session subscription id of a fetch by ids → the policy subscription.
    var fetchOwner: [String: String] = [:]
    /// Fetches the relay closed before their EOSE, and how often (each is asked again whole).
    var fetchRetries: [String: Int] = [:]
    /// NEG frames waiting for the authentication window to pass, in order.
    private(set) var outbox: [String] = []
    /// Write tokens of NEG frames in flight (not the session's frames: nothing to confirm).
    private(set) var writes: Set<Int> = []

    /// The most NEG subscriptions open at once on a connection (rust-nostr's LocalRelay allows
    /// 10, and bounds the items they hold together).
    static let maxOpen = 4
    /// Silent connections in a row after which this process stops asking a relay.
    static let silentConnectionsBeforePaging = 2

    /// The reason recorded when a first NEG-OPEN goes unanswered: weak evidence, remembered for
    /// `silenceRecheckSeconds` only.
    static let silenceReason = "no answer to NEG-OPEN"

    /// Whether NIP-77 is worth asking on a new connection at `now` (Unix seconds): not after a
    /// refusal recorded less than `recheckSeconds` ago, nor after silence recorded less than
    /// `silenceRecheckSeconds` ago, nor after silent connections in this process.
    func worthAsking(now: Int64, recheckSeconds: Int64, silenceRecheckSeconds: Int64) -> Bool {
        if silentConnections >= Self.silentConnectionsBeforePaging { return false }
        if let record, !record.supported {
            let wait = record.reason.hasPrefix(Self.silenceReason) ? silenceRecheckSeconds : recheckSeconds
            if now - record.checkedAt < wait { return false }
        }
        return true
    }

    /// How many more NEG subscriptions may open now.
    var room: Int { off ? 0 : max(0, (serial ? 1 : Self.maxOpen) - owners.count) }

    /// NEG subscriptions open, which the REQ budget counts.
    var openCount: Int { owners.count }

    /// When the oldest unanswered NEG message reaches `deadline` milliseconds.
    func answerDeadline(_ deadline: Int64) -> Int64? { sentAt.values.min().map { $0 + deadline } }

    /// The NEG subscriptions unanswered for `deadline` milliseconds at `now`, in id order.
    func late(now: Int64, deadline: Int64) -> [String] {
        sentAt.filter { now - $0.value >= deadline }.keys.sorted()
    }

    // MARK: Connections

    /// A connection opened.
    mutating func connected() { connection += 1 }

    /// The connection ended: every NEG subscription and fetch on it is gone. Lost while the
    /// first NEG-OPEN waited counts as a silent connection. Returns the fetches to unsubscribe.
    mutating func connectionLost() -> [String] {
        if !heard && !off && !sentAt.isEmpty { silentConnections += 1 }
        let fetches = fetchOwner.keys.sorted()
        fetchOwner.removeAll()
        fetchRetries.removeAll()
        owners.removeAll()
        sentAt.removeAll()
        outbox.removeAll()
        writes.removeAll()
        heard = false
        serial = false
        off = false
        return fetches
    }

    // MARK: Messages

    /// A NEG-OPEN for part `part` of `subscription`'s reconciliation was queued at `now`.
    mutating func opened(_ negID: String, subscription: String, part: Int, frame: String, now: Int64) {
        owners[negID] = (subscription, part)
        sentAt[negID] = now
        outbox.append(frame)
    }

    /// A NEG-MSG was queued at `now`.
    mutating func messaged(_ negID: String, frame: String, now: Int64) {
        sentAt[negID] = now
        outbox.append(frame)
    }

    /// A NEG-CLOSE was queued: the part is settled or given up.
    mutating func closed(_ negID: String, frame: String) {
        owners[negID] = nil
        sentAt[negID] = nil
        outbox.append(frame)
    }

    /// The relay answered `negID`: its owner, nil for a NEG subscription not open here.
    mutating func answered(_ negID: String) -> (subscription: String, part: Int)? {
        guard let owner = owners[negID] else { return nil }
        sentAt[negID] = nil
        return owner
    }

    /// Bytes of a message arrived at `now` without completing it: it may be the answer of any
    /// NEG message waiting, so each wait counts from now (a NEG-MSG longer than the deadline on
    /// a slow link gave the reconciliation up, or recorded the relay as not speaking NIP-77).
    mutating func bytesArrived(now: Int64) {
        for negID in sentAt.keys { sentAt[negID] = max(sentAt[negID]!, now) }
    }

    /// The wait for an answer to `negID` is dropped (a late one no NEG subscription owns any
    /// more: nothing else would end it).
    mutating func forgetWait(_ negID: String) { sentAt[negID] = nil }

    /// The relay ended `negID` itself (NEG-ERR): its owner, nil when not open here.
    mutating func ended(_ negID: String) -> (subscription: String, part: Int)? {
        sentAt[negID] = nil
        return owners.removeValue(forKey: negID)
    }

    /// A first NIP-77 answer on this connection. True when it is the first: the relay speaks it.
    mutating func heardAnswer() -> Bool {
        defer {
            heard = true
            silentConnections = 0
        }
        return !heard
    }

    /// The relay found a query too big: one reconciliation at a time from now on this connection.
    mutating func tooBig() { serial = true }

    /// The relay does not speak NIP-77 (refused), or stayed silent (then counted): nothing more
    /// opens on this connection.
    mutating func stopAsking(silent: Bool) {
        if silent { silentConnections += 1 }
        off = true
    }

    /// Gives up every NEG subscription of `subscription` (each gets its NEG-CLOSE) and its
    /// fetches; returns the fetches to unsubscribe.
    mutating func abandon(_ subscription: String) -> [String] {
        for (negID, owner) in owners.sorted(by: { $0.key < $1.key }) where owner.subscription == subscription {
            closed(negID, frame: ClientRelayFrame.negClose(subscriptionID: negID).toJSON())
        }
        let fetches = fetchOwner.filter { $0.value == subscription }.keys.sorted()
        for id in fetches { fetchOwner[id] = nil }
        return fetches
    }

    // MARK: Writes

    /// The NEG frames to write now, in order, each with its write token (numbered from
    /// `nextToken`, which is advanced).
    mutating func takeOutbox(nextToken: inout Int) -> [(token: Int, text: String)] {
        defer { outbox.removeAll() }
        return outbox.map { text in
            nextToken += 1
            writes.insert(nextToken)
            return (nextToken, text)
        }
    }

    /// A write completed: true when it was a NEG frame (nothing for the session to confirm).
    mutating func wrote(_ token: Int) -> Bool { writes.remove(token) != nil }
}
