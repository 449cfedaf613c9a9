import SoftchatCore
public import SoftchatJSON

/// A relay's NIP-11 information document, with the `limitation` fields Softchat respects.
public struct RelayInformation: Sendable, Hashable {
    /// The whole document, for fields without an accessor of their own.
    public let document: JSONValue
    /// The relay's `name`, when the document gives one as a string.
    public var name: String? { document["name"]?.stringValue }
    /// The integers of `supported_nips` (other entries are skipped); empty when it is absent.
    public var supportedNIPs: [Int64] { document["supported_nips"]?.arrayValue?.compactMap(\.int64Value) ?? [] }
    /// `limitation.max_message_length`: the longest message the relay accepts, in bytes. Like
    /// every `limitation` number, nil unless it is 1 to 2^31 − 1.
    public var maxMessageLength: Int? { limitation("max_message_length") }
    /// `limitation.max_subscriptions`: the most subscriptions one connection may hold open.
    public var maxSubscriptions: Int? { limitation("max_subscriptions") }
    /// `limitation.max_filters`: the most filters one subscription may carry.
    public var maxFilters: Int? { limitation("max_filters") }
    /// `limitation.max_limit`: the largest `limit` a filter may ask for.
    public var maxLimit: Int? { limitation("max_limit") }
    /// `limitation.auth_required`: whether the relay wants NIP-42 authentication before it
    /// serves anything else; false when the field is absent.
    public var authRequired: Bool { document["limitation"]?["auth_required"]?.boolValue ?? false }
    /// Softchat's own extension: the relay accepts the EVENTS batch frame.
    public var acceptsEventsBatch: Bool { document["softchat"]?["events_batch"]?.boolValue ?? false }

    /// A `limitation` number within `RelayStatedNumber.statedRange`; nil when absent, not an
    /// integer, or out of that range (a relay's `-9223372036854775808` states nothing).
    private func limitation(_ key: String) -> Int? {
        RelayStatedNumber.limit(document["limitation"]?[key]?.int64Value)
    }

    /// Wraps a parsed NIP-11 document.
    /// - Parameter document: The document's JSON value, normally an object.
    public init(document: JSONValue) { self.document = document }

    /// Fetches the document: HTTP GET of the relay URL (http/https for ws/wss) with
    /// `Accept: application/nostr+json`, over the same TCP/TLS stack as the WebSocket (for
    /// noise:// inside the Noise channel). Blocks the calling thread.
    /// - Parameters:
    ///   - endpoint: The relay whose document to fetch.
    ///   - options: TLS, Noise and timeout settings; `connectTimeoutMilliseconds` bounds the
    ///     whole exchange (connect, TLS or Noise, request and answer), however the relay
    ///     trickles its bytes.
    /// - Returns: The relay's document.
    /// - Throws: ``TransportError``: the failures of opening a connection (`.resolve`,
    ///   `.connect`, `.timeout`, `.tls`, `.certificate`, `.handshake`); `.http` for an answer
    ///   that is malformed or over a limit (see `HTTPMessageReader`: the head, a bad
    ///   `Content-Length`, a chunked body), cut short, with a status other than 200, a document
    ///   over 256 KiB or one that is not JSON; `.timeout` when the exchange outlasts
    ///   `connectTimeoutMilliseconds`.
    public static func fetch(_ endpoint: RelayEndpoint, options: ConnectionOptions = ConnectionOptions()) throws(TransportError) -> RelayInformation {
        let deadline = Deadline(afterMilliseconds: options.connectTimeoutMilliseconds)
        let stream = try WebSocketClient.openStream(endpoint, options: options, deadline: deadline)
        defer { stream.close() }
        try stream.write(request(endpoint))
        var reader = answerReader()
        guard case .message(let head, let body) = try WebSocketClient.read(stream, with: &reader, deadline: deadline)
        else { throw TransportError(.http, "the NIP-11 answer: no message") }  // a body framing yields messages only
        try checkStatus(head)
        return try decode(body)
    }

    // MARK: The HTTP exchange, shared with the event-driven driver

    /// The largest document read.
    static let maxDocumentBytes = 256 * 1024

    /// The GET request with `Accept: application/nostr+json`.
    static func request(_ endpoint: RelayEndpoint) -> [UInt8] {
        let request =
            "GET \(endpoint.resource) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\nAccept: application/nostr+json\r\n"
            + "User-Agent: softchat\r\nConnection: close\r\n\r\n"
        return Array(request.utf8)
    }

    /// Only 200 carries a document.
    package static func checkStatus(_ head: HTTPHead) throws(TransportError) {
        guard head.status == 200 else {
            throw TransportError(.http, "NIP-11 request answered \"\(head.firstLine)\"")
        }
    }

    /// The reader of the answer: a head and a body of at most ``maxDocumentBytes``, framed by
    /// Content-Length, chunked coding or the end of the stream.
    package static func answerReader() -> HTTPMessageReader {
        HTTPMessageReader(framing: .body(maxBytes: maxDocumentBytes), kind: .http, what: "the NIP-11 answer")
    }

    /// The document in `body` (JSON).
    package static func decode(_ body: [UInt8]) throws(TransportError) -> RelayInformation {
        do {
            return RelayInformation(document: try JSONReader().parse(body))
        } catch {
            throw TransportError(.http, "NIP-11 document is not valid JSON: \(error)")
        }
    }
}
