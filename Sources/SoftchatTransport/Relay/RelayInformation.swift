public import SoftchatJSON

/// A relay's NIP-11 information document, with the `limitation` fields Softchat respects.
public struct RelayInformation: Sendable, Hashable {
    public let document: JSONValue
    public var name: String? { document["name"]?.stringValue }
    public var supportedNIPs: [Int64] { document["supported_nips"]?.arrayValue?.compactMap(\.int64Value) ?? [] }
    public var maxMessageLength: Int? { limitation("max_message_length") }
    public var maxSubscriptions: Int? { limitation("max_subscriptions") }
    public var maxFilters: Int? { limitation("max_filters") }
    public var maxLimit: Int? { limitation("max_limit") }
    public var authRequired: Bool { document["limitation"]?["auth_required"]?.boolValue ?? false }
    /// Softchat's own extension: the relay accepts the EVENTS batch frame.
    public var acceptsEventsBatch: Bool { document["softchat"]?["events_batch"]?.boolValue ?? false }

    private func limitation(_ key: String) -> Int? {
        document["limitation"]?[key]?.int64Value.map { Int(clamping: $0) }
    }

    public init(document: JSONValue) { self.document = document }

    /// Fetches the document: HTTP GET of the relay URL (http/https for ws/wss) with
    /// `Accept: application/nostr+json`, over the same TCP/TLS stack as the WebSocket.
    public static func fetch(_ endpoint: RelayEndpoint, options: ConnectionOptions = ConnectionOptions()) throws(TransportError) -> RelayInformation {
        let stream = try WebSocketClient.openStream(endpoint, options: options)
        defer { stream.close() }
        let request = "GET \(endpoint.resource) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\nAccept: application/nostr+json\r\n"
            + "User-Agent: softchat\r\nConnection: close\r\n\r\n"
        try stream.write(Array(request.utf8))
        let (head, leftover) = try WebSocketClient.readHead(stream, timeoutMilliseconds: options.connectTimeoutMilliseconds)
        let status = head.firstLine.split(separator: " ")
        guard status.count >= 2, status[1] == "200" else {
            throw TransportError(.http, "NIP-11 request answered \"\(head.firstLine)\"")
        }
        var body = leftover
        let limit = 256 * 1024
        let expected = head.header("content-length").flatMap { Int($0) }
        var chunk = [UInt8](repeating: 0, count: 16384)
        while expected.map({ body.count < $0 }) ?? true {
            guard body.count <= limit else { throw TransportError(.http, "NIP-11 document over 256 KiB") }
            let n: Int
            do {
                n = try readChunk(stream, &chunk, timeoutMilliseconds: options.connectTimeoutMilliseconds)
            } catch {
                if expected == nil && error.kind == .closed { break }
                throw error
            }
            if n == 0 { break }
            body += chunk[0..<n]
        }
        do {
            return RelayInformation(document: try JSONReader().parse(body))
        } catch {
            throw TransportError(.http, "NIP-11 document is not valid JSON: \(error)")
        }
    }
}
