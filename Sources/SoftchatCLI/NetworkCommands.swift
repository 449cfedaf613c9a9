import SoftchatClient
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
import SoftchatStorage
import SoftchatSync
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shared by `publish` and `sync`: connection options from the command line.
enum NetworkOptions {
    static func policy(_ parsed: Arguments) throws -> ManagedTransportPolicy {
        var policy = ManagedTransportPolicy()
        if let ca = parsed.options["--ca-file"] { policy.connection.tls = TLSOptions(caFile: ca) }
        // noise:// relays: the client's Noise static key (default: <db>.noise-key, created on
        // first use by the managed transport). Never the Nostr key file.
        if let noiseKey = parsed.options["--noise-key"] {
            if let key = parsed.options["--key"], realPath(key) == realPath(noiseKey) {
                throw UsageError("--noise-key must not be the Nostr --key file: the Noise static key is a separate X25519 secret")
            }
            policy.connection.noiseStaticKeyFile = noiseKey
        }
        // A relay without a pinned key: only on the user's word, never the URL's.
        if parsed.has("--unauthenticated-noise") { policy.connection.allowsUnauthenticatedNoise = true }
        // NIP-42 over ws:// to a remote host: only on the user's word.
        if parsed.has("--auth-over-cleartext") { policy.authenticatesOverCleartext = true }
        if parsed.has("--no-events-batch") { policy.eventsBatch = .never }
        if parsed.has("--no-negentropy") { policy.negentropy = false }
        return policy
    }

    /// `--relay URL[,URL…]`: one or more relays, each delivered to and synced from.
    ///
    /// - Parameters:
    ///   - parsed: The command's arguments.
    ///   - repeatable: `dm`'s form: `--relay` may be given more than once (parse it with
    ///     `repeatable: ["--relay"]`) and a relay named twice counts once. Otherwise one
    ///     `--relay` names each relay once, and a repeat is a usage error.
    /// - Returns: The relays in the order given, or nil when there is no `--relay`.
    static func relays(_ parsed: Arguments, repeatable: Bool = false) throws -> [String]? {
        let values = repeatable ? parsed.repeated["--relay"] ?? [] : parsed.options["--relay"].map { [$0] } ?? []
        guard !values.isEmpty else { return nil }
        var urls: [String] = []
        for text in values {
            let listed = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0.drop { $0 == " " }) }
            guard !listed.contains(where: \.isEmpty) else { throw UsageError("--relay needs one or more URLs, separated by commas") }
            for url in listed {
                if urls.contains(url) {
                    guard repeatable else { throw UsageError("--relay names a relay twice") }
                    continue
                }
                _ = try RelayURL(url)  // invalid_relay_url before anything opens or dials
                urls.append(url)
            }
        }
        return urls
    }

    /// The canonical path of an existing file (the path itself otherwise).
    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func loadIdentity(_ path: String?) throws -> SoftchatIdentity? {
        guard let path else { return nil }
        do {
            return try SoftchatIdentity.loadSecretKeyFile(path: path)
        } catch let error as SoftchatError {
            throw error
        } catch {
            throw RuntimeFailure(code: "key_file", message: "\(error)")
        }
    }

    /// A progress line on standard error, rewritten in place, and only when that is a
    /// terminal: standard output carries the result alone, so scripts read it unmixed.
    static func progress(_ text: String) {
        guard isTerminal(2) else { return }
        Output.error.line("\u{1B}[1A\u{1B}[2K" + terminalSafe(text))
        Output.error.flush()
    }
}

enum PublishCommand {
    static let help = """
        usage: softchat publish --relay URL[,URL…] --key FILE --db FILE [--message TEXT] [--json]
                                [--ca-file PEM] [--noise-key FILE] [--unauthenticated-noise] [--auth-over-cleartext]
                                [--no-events-batch] [--timeout SECONDS]

        Publishes through the durable account: the signed events given one per line on stdin
        (or one public kind-1 note signed from --message: not a kind-14 chat message, which NIP-17
        forbids publishing in the clear) are committed as publish intents,
        then the managed transport delivers them, to every relay given (one intent per relay,
        each tracked on its own). Exits 0 once every intent of THIS run is
        terminal and prints their count per state (1 if any was rejected, 3 on timeout, default
        60 s); intents the account held from earlier runs are neither waited for nor counted.
        Progress goes to standard error, and only when it is a terminal.
        URL is ws://, wss:// or noise://host:port?pattern=IK&key=<relay static key, 64 hex>
        (pattern XX when absent; with XX a key pins the relay's key). For noise://, --noise-key
        is this client's X25519 static key file (default <db>.noise-key, created mode 0600);
        each relay is shown a key derived for it from that one. A noise:// URL without a pinned
        key (unauthenticated=yes) is dialled only with --unauthenticated-noise. NIP-42 challenges
        over ws:// (or unauthenticated noise://) to a host other than this machine are answered
        only with --auth-over-cleartext.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args, valued: ["--relay", "--key", "--db", "--message", "--ca-file", "--noise-key", "--timeout"],
            switches: ["--json", "--no-events-batch", "--unauthenticated-noise", "--auth-over-cleartext", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard let relays = try NetworkOptions.relays(parsed), let db = parsed.options["--db"], let keyPath = parsed.options["--key"] else {
            throw UsageError("publish needs --relay URL, --key FILE and --db FILE")
        }
        let identity = try NetworkOptions.loadIdentity(keyPath)!
        let now = Int64(time(nil))
        var events: [VerifiedEvent] = []
        if let message = parsed.options["--message"] {
            // A public kind-1 note: NIP-17 forbids publishing a kind-14 chat message in the clear.
            events.append(try identity.sign(UnsignedEvent(createdAt: now, kind: 1, tags: [], content: message)))
        } else {
            let reader = LineReader()
            while let line = reader.next() {
                if line.isEmpty { continue }
                events.append(try VerifiedEvent(text: String(decoding: line, as: UTF8.self)))
            }
        }
        guard !events.isEmpty else { throw UsageError("nothing to publish: give events on stdin or --message TEXT") }
        let account = try SoftchatAccount.open(path: db)
        defer { account.close() }
        // Batches of at most 256 events, one durable operation each.
        var intents: [String] = []
        var offset = 0
        while offset < events.count {
            let batch = Array(events[offset..<min(offset + RelayPublishContract.maxPublishBatchEvents.value, events.count)])
            let operation = "publish-\(batch[0].id.prefix(16))-\(batch.count)"
            intents += try account.outgoing.enqueueSigned(operationID: operation, events: batch, relayURLs: relays, now: now)
            offset += batch.count
        }
        let json = parsed.has("--json")
        let transport = try account.startManagedTransport(relays: relays, identity: identity, policy: try NetworkOptions.policy(parsed))
        defer { transport.stop() }
        let timeout = Double(try parsed.int("--timeout") ?? 60)
        var lastLine = ""
        let done = try DemoCommand.waitUntil(seconds: timeout) {
            let counts = try account.delivery.stateCounts(intentIDs: intents)
            let terminal = (counts[.accepted] ?? 0) + (counts[.rejected] ?? 0)
            let line =
                "publish \(terminal)/\(intents.count) terminal — accepted \(counts[.accepted] ?? 0), rejected \(counts[.rejected] ?? 0), state \(transport.state)"
            if line != lastLine {
                lastLine = line
                NetworkOptions.progress(line)
            }
            return terminal >= intents.count
        }
        let counts = try account.delivery.stateCounts(intentIDs: intents)
        var summary = JSONObject()
        summary.append("done", .bool(done))
        for s in DeliveryState.allCases { summary.append(s.rawValue, .integer(Int64(counts[s] ?? 0))) }
        Output.standard.line(
            json
                ? JSONValue.object(summary).jsonText
                : DeliveryState.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", "))
        if !done { return .runtimeFailure }
        return (counts[.rejected] ?? 0) > 0 ? .inputRejected : .success
    }
}

enum SyncCommand {
    static let help = """
        usage: softchat sync --relay URL[,URL…] --db FILE --filter JSON [--key FILE] [--follow] [--json]
                             [--ca-file PEM] [--noise-key FILE] [--unauthenticated-noise] [--auth-over-cleartext]
                             [--timeout SECONDS]
                             [--no-negentropy] [--each]

        Syncs events matching FILTER (one filter object or an array) from each relay into the
        account until every relay's whole window is synced: by NIP-77 negentropy where the relay
        speaks it (every age; what is missing is fetched by id), else by REQ pages past the
        relay's cap (a cut sync resumes where it was; the cursor moves only at the end). With
        --no-negentropy it always pages. --json adds each relay's method. With
        --follow it keeps receiving until interrupted. --key answers NIP-42 when asked.
        Prints the number of events held for the filter. URL may be noise:// (see publish);
        --noise-key defaults to <db>.noise-key. With --each, every filter of the array is a
        subscription of its own (sync-0, sync-1, …), as an app with many conversations has, and
        the sync ends when every one is synced on every relay.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args, valued: ["--relay", "--key", "--db", "--filter", "--ca-file", "--noise-key", "--timeout"],
            switches: ["--json", "--follow", "--help", "-h", "--no-negentropy", "--each", "--unauthenticated-noise", "--auth-over-cleartext"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard let relays = try NetworkOptions.relays(parsed), let db = parsed.options["--db"], let filterText = parsed.options["--filter"] else {
            throw UsageError("sync needs --relay URL, --db FILE and --filter JSON")
        }
        let value: JSONValue
        do {
            value = try JSONReader().parse(filterText)
        } catch {
            throw SoftchatError.invalidRelayFilter("--filter is not valid JSON: \(error)")
        }
        let filtersJSON = (value.arrayValue ?? [value]).map(\.jsonText)
        let filters = try filtersJSON.map { try RelayFilter.fromJSON($0) }
        let identity = try NetworkOptions.loadIdentity(parsed.options["--key"])
        let account = try SoftchatAccount.open(path: db)
        defer { account.close() }
        let each = parsed.has("--each")
        let subscriptions = each ? filtersJSON.indices.map { "sync-\($0)" } : ["sync"]
        for (i, id) in subscriptions.enumerated() {
            try account.setSubscription(
                id: id, filtersJSON: each ? [filtersJSON[i]] : filtersJSON, relayURL: relays.count == 1 ? relays[0] : nil)
        }
        let wanted = Set(subscriptions)
        let synced = SyncedRelays()
        var policy = try NetworkOptions.policy(parsed)
        let json = parsed.has("--json")
        policy.observer = { event in
            switch event {
            case .synced(let url, let sub, _, let outcome) where wanted.contains(sub): synced.insert(url, sub, method: outcome.method)
            case .ingested(let url, let r):
                NetworkOptions.progress("sync \(url): +\(r.accepted.count) inserted, \(r.alreadyPresent.count) duplicates")
            default: break
            }
        }
        let transport = try account.startManagedTransport(relays: relays, identity: identity, policy: policy)
        defer { transport.stop() }
        if parsed.has("--follow") {
            while true { sleep(3600) }
        }
        let done = try DemoCommand.waitUntil(seconds: Double(try parsed.int("--timeout") ?? 60)) {
            synced.count >= relays.count * subscriptions.count
        }
        let held = try account.events(matching: filters, now: Int64(time(nil))).count
        let methods = JSONObject(
            members: synced.methods.sorted { $0.key < $1.key }.map { JSONObject.Member(key: $0.key, value: .string($0.value.rawValue)) })
        Output.standard.line(
            json
                ? JSONValue.object(JSONObject(["synced": .bool(done), "events": .integer(Int64(held)), "methods": .object(methods)])).jsonText
                : "synced \(done ? "to the end of stored events" : "NOT to the end (timeout)"): \(held) events held for the filter")
        return done ? .success : .runtimeFailure
    }
}

/// The (relay, subscription) pairs whose sync ended, from the transport's thread.
final class SyncedRelays: @unchecked Sendable {
    // @unchecked: `pairs` and `urls` are only touched under `lock`.
    private let lock = Lock()
    private var pairs: Set<String> = []
    private var urls: [String: SyncMethod] = [:]
    func insert(_ url: String, _ subscription: String, method: SyncMethod) {
        lock.with {
            pairs.insert(url + " " + subscription)
            urls[url] = method
        }
    }
    var count: Int { lock.with { pairs.count } }
    var methods: [String: SyncMethod] { lock.with { urls } }
}
