public import SoftchatCore
public import SoftchatSync
public import SoftchatTransport

extension ManagedRelayStatus {
    /// One relay's snapshot (the schema's `ManagedRelayStatus`) from the engine's state and
    /// statistics for it.
    init(relayURL: String, state: RelayConnectionState, statistics: RelayStatistics) {
        self.init(
            relayURL: relayURL, phase: state.phase, delayMilliseconds: state.delayMilliseconds, accepted: statistics.accepted,
            rejected: statistics.rejected, retried: statistics.retried, reconnects: statistics.reconnects,
            eventsReceived: statistics.eventsReceived, duplicatesSkipped: statistics.duplicatesSkipped,
            meanLatencyMilliseconds: statistics.meanLatencyMilliseconds)
    }
}

/// How a managed transport connects, publishes and syncs; the defaults suit most hosts.
public struct ManagedTransportPolicy: Sendable {
    /// How connections open: TLS, timeout, message size, Noise static key file and rekeying.
    /// For noise:// relays of an account stored in a file, a nil key file becomes
    /// `<account database>.noise-key`.
    public var connection = ConnectionOptions()
    /// Whether multi-event publishes go out as one EVENTS frame (`auto`: when the relay's
    /// NIP-11 document says it accepts them).
    public var eventsBatch = EventsBatching.auto
    /// Seconds without an OK before events in flight become retryable (`timeout`); default
    /// `relay.publish.acknowledgementTimeoutSeconds`.
    public var acknowledgementTimeoutSeconds = Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value)
    /// Intents claimed (and published) at once, 1–256.
    public var claimBatch = 256
    /// After a relay answers "retryable" (rate-limited, auth-required, error…), wait this long
    /// before claiming again, doubling per consecutive retryable answer up to 60 s.
    public var retryDelaySeconds: Int64 = 1
    /// The base of every relay's session settings (reconnect backoff among them); the relay
    /// URL, NIP-42 answering, the acknowledgement timeout and NIP-11's limits are set over it.
    public var session = RelaySessionConfig()
    /// Page size and `until` convention for syncs; a relay's NIP-11 `max_limit` lowers the page.
    public var paging = RelayPaging()
    /// Per relay URL, a paging the host knows for that relay (for example
    /// `RelayPaging(pageSize: 300, until: .exclusive)`), in place of `paging`; what is not said
    /// is learned as for any relay.
    public var relayPaging: [String: RelayPaging] = [:]
    /// Per subscription id, the late-arrival horizon in seconds (default: two days + 10 min for
    /// filters that can match NIP-59 gift wraps, 300 s otherwise).
    public var horizons: [String: Int64] = [:]
    /// Sync by NIP-77 negentropy where a relay speaks it (`SyncEngineConfiguration.negentropy`).
    public var negentropy = true
    /// Fetch the NIP-11 document before the first connection and respect its limitation fields.
    public var fetchRelayInformation = true
    /// Ping a connection silent this long, and drop it when nothing arrives within
    /// `readDeadlineMilliseconds` after (a half-open socket: a phone that changed networks).
    public var keepaliveIntervalMilliseconds: Int64 = 30_000
    /// How long a pinged connection may stay silent before it is dropped as lost.
    public var readDeadlineMilliseconds: Int64 = 10_000
    /// Claim and publish the account's intents (false: receive only).
    public var publishes = true
    /// Receives progress events on the transport's I/O thread; keep it quick.
    public var observer: (@Sendable (ManagedTransportEvent) -> Void)?
    /// The most events `ManagedTransport.events` keeps for a reader that falls behind (the
    /// newest are kept); 0 keeps none, for a host that reads `observer` only and never iterates
    /// `events` (what no one reads is not buffered). Each event's relay text is at most
    /// `maxReportTextBytes`, so the default holds at most about 16 MiB.
    public var eventBufferLimit = 16_384
    /// Whether NIP-42 challenges are answered over `ws://` or unauthenticated `noise://` to a
    /// host other than this machine (`SyncEngineConfiguration.authenticatesOverCleartext`);
    /// false by default.
    public var authenticatesOverCleartext = false

    /// The default policy: publish and sync, NIP-11 and negentropy on.
    public init() {}

    /// The policy an app's `ManagedTransportContext` (the schema's, which every binding
    /// writes) describes: each field it sets over the default, each checked against its bound.
    /// An option added to the schema's context is read here and nowhere else.
    ///
    /// - Parameter context: What the app decided; nil fields keep the defaults.
    /// - Throws: `invalid_relay_session` for a value out of its bounds (an acknowledgement
    ///   timeout under 1 s, a keepalive under 1,000 ms). CA text is read when a `wss://`
    ///   connection opens: text holding no certificate fails that connection (`connectionFailed`).
    public init(_ context: ManagedTransportContext) throws(SoftchatError) {
        if let s = context.acknowledgementTimeoutSeconds {
            guard s >= 1 else { throw .invalidRelaySession("startManagedTransport: acknowledgementTimeoutSeconds must be at least 1, not \(s)") }
            acknowledgementTimeoutSeconds = s
        }
        if let ms = context.keepaliveIntervalMilliseconds {
            guard ms >= 1_000 else {
                throw .invalidRelaySession("startManagedTransport: keepaliveIntervalMilliseconds must be at least 1,000, not \(ms)")
            }
            keepaliveIntervalMilliseconds = ms
        }
        if let p = context.publishes { publishes = p }
        if let a = context.authenticatesOverCleartext { authenticatesOverCleartext = a }
        if let a = context.allowsUnauthenticatedNoise { connection.allowsUnauthenticatedNoise = a }
        if let a = context.allowsPrivateAddresses { connection.allowsPrivateAddresses = a }
        if context.caFile != nil || context.caPem != nil { connection.tls = TLSOptions(caFile: context.caFile, caPEM: context.caPem) }
    }
}

extension RelayLimits {
    /// What the engine takes from a relay's NIP-11 document, as the managed transport reads it:
    /// the `limitation` numbers (each only from 1 to 2^31 − 1), NIP-42 and NIP-77 from
    /// `supported_nips` (listing 77 says so; not listing it proves nothing, the engine asks),
    /// `software` for known quirks, `name` for display (both cut to `maxReportTextBytes`).
    ///
    /// - Parameter information: The relay's document.
    public init(information info: RelayInformation) {
        self.init(
            maxMessageLength: info.maxMessageLength, maxLimit: info.maxLimit, acceptsEventsBatch: info.acceptsEventsBatch,
            supportsAuthentication: info.supportedNIPs.contains(42), authenticationRequired: info.authRequired,
            software: info.document["software"]?.stringValue,
            supportsNegentropy: info.supportedNIPs.contains(77) ? true : nil,
            maxSubscriptions: info.maxSubscriptions, maxFilters: info.maxFilters, name: info.name)
    }
}
