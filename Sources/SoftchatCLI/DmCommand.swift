import SoftchatClient
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat dm send|list`: NIP-17 private messages through the durable account.
enum DmCommand {
    static let help = """
        usage: softchat dm send --to HEX [--to HEX…] --message TEXT --key FILE --db FILE [--relay URL…] [--json]
                                [--timeout SECONDS] [--ca-file PEM] [--auth-over-cleartext]
               softchat dm list --key FILE --db FILE [--relay URL…] [--with HEX] [--json] [--timeout SECONDS]

        send: a NIP-17 private message (kind-14 rumor, sealed and gift-wrapped, never published in
        the clear) to every --to key. --relay (repeatable, or comma-separated) is where the
        recipients' inbox relay lists (kind 10050) are fetched from, and where the sender's own
        list is published when the account has none. Each wrap is committed as durable publish
        intents to its recipient's inbox relays (the self-copy to the sender's own) in one
        transaction, then delivered; a recipient without a known list refuses the whole send
        (recipient_has_no_inbox_relays) and nothing is queued. Prints the delivery counts
        (--json: the message id and each delivery); exits 0 once every intent is accepted.

        list: syncs the key's gift wraps ({"kinds":[1059],"#p":[key]}, two days of backdating
        covered) from each --relay first, unwrapping each once inside the transaction that
        stores it, then prints the messages oldest first: one line each, or with --json one
        object each with id, from, to, created_at and content. --with HEX shows one room: the
        key and HEX.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args, valued: ["--to", "--message", "--key", "--db", "--relay", "--with", "--timeout", "--ca-file"],
            switches: ["--json", "--auth-over-cleartext", "--help", "-h"], repeatable: ["--to", "--relay"])
        if parsed.has("--help") || parsed.has("-h") || parsed.positional.isEmpty {
            Output.standard.line(help)
            return parsed.positional.isEmpty && !(parsed.has("--help") || parsed.has("-h")) ? .usage : .success
        }
        guard let db = parsed.options["--db"], let keyPath = parsed.options["--key"] else { throw UsageError("dm needs --key FILE and --db FILE") }
        let identity = try NetworkOptions.loadIdentity(keyPath)!
        let relays = try NetworkOptions.relays(parsed, repeatable: true) ?? []
        var policy = ManagedTransportPolicy()
        if let ca = parsed.options["--ca-file"] { policy.connection.tls = TLSOptions(caFile: ca) }
        if parsed.has("--auth-over-cleartext") { policy.authenticatesOverCleartext = true }
        let timeout = Double(try parsed.int("--timeout") ?? 60)
        let account = try SoftchatAccount.open(path: db)
        defer { account.close() }
        try account.messages.unlock(identity, now: Int64(time(nil)))
        switch parsed.positional[0] {
        case "send": return try send(parsed, account: account, identity: identity, relays: relays, policy: policy, timeout: timeout)
        case "list": return try list(parsed, account: account, identity: identity, relays: relays, policy: policy, timeout: timeout)
        case let other: throw UsageError("unknown dm command \"\(other)\"\n\n\(help)")
        }
    }

    static func send(
        _ parsed: Arguments, account: SoftchatAccount, identity: SoftchatIdentity, relays: [String], policy: ManagedTransportPolicy, timeout: Double
    ) throws -> ExitStatus {
        let recipients = parsed.repeated["--to"] ?? []
        guard !recipients.isEmpty, let text = parsed.options["--message"] else { throw UsageError("dm send needs --to HEX and --message TEXT") }
        let me = identity.publicKeyHex
        var intents: [String] = []
        if !relays.isEmpty {
            // The inbox lists of everyone in the room, from the given relays, before sending.
            try account.messages.watchInboxLists(publicKeys: recipients)
            // The sender's own list comes with the inbox subscription: both must be synced before
            // a missing list is published (a list the relays hold must never be overwritten).
            try syncOnce(
                account, identity: identity, relays: relays, policy: policy, timeout: timeout,
                subscriptions: [AccountMessages.inboxListsSubscriptionID, AccountMessages.inboxSubscriptionID])
            intents += try publishOwnInboxListIfMissing(account, identity: identity, relays: relays)
        }
        let sent = try account.messages.send(to: recipients, text: text, signer: identity, now: Int64(time(nil)))
        intents += sent.deliveries.flatMap(\.intentIDs)
        var targets = relays
        for d in sent.deliveries { for url in d.relayURLs where !targets.contains(url) { targets.append(url) } }
        let transport = try account.startManagedTransport(relays: targets, identity: identity, policy: policy)
        defer { transport.stop() }
        let done = try DemoCommand.waitUntil(seconds: timeout) {
            let counts = try account.delivery.stateCounts(intentIDs: intents)
            return (counts[.accepted] ?? 0) + (counts[.rejected] ?? 0) >= intents.count
        }
        let counts = try account.delivery.stateCounts(intentIDs: intents)
        if parsed.has("--json") {
            let deliveries = sent.deliveries.map { d in
                JSONValue.object(
                    JSONObject([
                        "to": .string(d.recipient), "wrap": .string(d.wrapID), "relays": .array(d.relayURLs.map(JSONValue.string)),
                    ]))
            }
            var out = JSONObject()
            out.append("id", .string(sent.message.id))
            out.append("done", .bool(done))
            out.append("deliveries", .array(deliveries))
            for s in DeliveryState.allCases { out.append(s.rawValue, .integer(Int64(counts[s] ?? 0))) }
            Output.standard.line(JSONValue.object(out).jsonText)
        } else {
            Output.standard.line(
                "sent \(sent.message.id) to \(sent.deliveries.count - 1) recipient(s) and a self-copy: "
                    + DeliveryState.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", "))
        }
        if !done { return .runtimeFailure }
        return (counts[.accepted] ?? 0) == intents.count ? .success : .inputRejected
    }

    static func list(
        _ parsed: Arguments, account: SoftchatAccount, identity: SoftchatIdentity, relays: [String], policy: ManagedTransportPolicy, timeout: Double
    ) throws -> ExitStatus {
        let me = identity.publicKeyHex
        var synced = true
        if !relays.isEmpty {
            // The key's wraps and its own inbox list (the subscription unlock keeps); a list is
            // published to the given relays when none is known, so others can send here.
            synced = try syncOnce(
                account, identity: identity, relays: relays, policy: policy, timeout: timeout, subscriptions: [AccountMessages.inboxSubscriptionID])
            let intents = try publishOwnInboxListIfMissing(account, identity: identity, relays: relays)
            if !intents.isEmpty {
                let transport = try account.startManagedTransport(relays: relays, identity: identity, policy: policy)
                defer { transport.stop() }
                try DemoCommand.waitUntil(seconds: timeout) {
                    let counts = try account.delivery.stateCounts(intentIDs: intents)
                    return (counts[.accepted] ?? 0) + (counts[.rejected] ?? 0) >= intents.count
                }
            }
        }
        let now = Int64(time(nil))
        var messages: [PrivateMessage] = []
        let rooms: [[String]]
        if let with = parsed.options["--with"] {
            rooms = [[with]]
        } else {
            rooms = try account.messages.rooms(ownerKey: me, now: now, limit: AccountMessages.maxPage).map(\.members)
        }
        for room in rooms {
            var before: PrivateMessageCursor? = nil
            while true {
                let page = try account.messages.messages(ownerKey: me, members: room, now: now, limit: AccountMessages.maxPage, before: before)
                messages += page
                guard page.count == AccountMessages.maxPage else { break }
                before = page.last?.cursor
            }
        }
        messages.sort { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        for m in messages {
            if parsed.has("--json") {
                Output.standard.line(
                    JSONValue.object(
                        JSONObject([
                            "id": .string(m.id), "from": .string(m.sender), "to": .array(m.recipients.map(JSONValue.string)),
                            "created_at": .integer(m.createdAt), "content": .string(m.content),
                        ])
                    ).jsonText)
            } else {
                Output.standard.line(
                    "\(m.createdAt) \(m.sender.prefix(12))… → \(m.recipients.map { $0.prefix(12) + "…" }.joined(separator: ", ")): \(terminalSafe(m.content))"
                )
            }
        }
        if !synced {
            // The stored messages are listed all the same; the exit status and this line say the
            // list may miss what the relays hold.
            Output.error.line("softchat: dm list: not every --relay synced within \(Int(timeout)) s; listed what the account holds")
        }
        return synced ? .success : .runtimeFailure
    }

    /// Enqueues the key's kind-10050 list naming `relays`, to `relays`, when the account knows
    /// none; returns the intents (none when a list is known).
    static func publishOwnInboxListIfMissing(_ account: SoftchatAccount, identity: SoftchatIdentity, relays: [String]) throws -> [String] {
        guard try account.messages.inboxRelays(publicKey: identity.publicKeyHex).isEmpty else { return [] }
        let now = Int64(time(nil))
        let list = try identity.sign(UnsignedEvent(createdAt: now, kind: 10050, tags: relays.map { ["relay", $0] }, content: ""))
        return try account.outgoing.enqueueSigned(operationID: "inbox-list-\(list.id.prefix(16))", events: [list], relayURLs: relays, now: now)
    }

    /// Syncs the account's policy from `relays` until each relay has synced each of
    /// `subscriptions` (or the timeout).
    @discardableResult
    static func syncOnce(
        _ account: SoftchatAccount, identity: SoftchatIdentity, relays: [String], policy: ManagedTransportPolicy, timeout: Double,
        subscriptions: Set<String>
    ) throws -> Bool {
        let done = SyncedRelays()
        var policy = policy
        policy.publishes = false
        policy.observer = { event in
            if case .synced(let url, let sub, _, let outcome) = event, subscriptions.contains(sub) { done.insert(url, sub, method: outcome.method) }
        }
        let transport = try account.startManagedTransport(relays: relays, identity: identity, policy: policy)
        defer { transport.stop() }
        return try DemoCommand.waitUntil(seconds: timeout) { done.count >= relays.count * subscriptions.count }
    }
}
