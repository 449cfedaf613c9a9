/// A relay URL in the form NIP-42 compares: scheme and host lowercased, the default port
/// dropped, and an empty path written as `/`. Schemes: `ws`, `wss`, and `noise` (Softchat's
/// Noise transport, whose query names the pattern and pinned key).
public struct RelayURL: Sendable, Hashable, CustomStringConvertible {
    /// `ws`, `wss` or `noise`, lowercased.
    public let scheme: String
    /// The host, lowercased; an IPv6 address keeps its brackets.
    public let host: String
    /// The port given, else the scheme's default: 80 for `ws`, 443 for `wss`, 0 for `noise`.
    public let port: Int
    /// The path with any query, as written: `/` when empty, otherwise without a trailing `/`.
    public let path: String

    /// Parses and normalizes a relay URL.
    ///
    /// - Parameter text: A `ws://`, `wss://` or `noise://` URL; the scheme and host may be in any case.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` when the scheme is missing
    ///   or not `ws`, `wss` or `noise`, the host is empty, holds user info (`@`) or has an unclosed
    ///   IPv6 bracket, or the port is not 1–65535.
    public init(_ text: String) throws(SoftchatError) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw .invalidRelayAuthentication("relay URL \"\(text)\" has no scheme")
        }
        let scheme = text[..<colon].lowercased()
        let defaultPort: Int
        switch scheme {
        case "ws": defaultPort = 80
        case "wss": defaultPort = 443
        // Noise URLs (noise://host:port?pattern=…&key=…) name their port; none is implied.
        case "noise": defaultPort = 0
        default: throw .invalidRelayAuthentication("relay URL scheme \"\(scheme)\" is not ws, wss or noise")
        }
        var rest = text[text.index(colon, offsetBy: 3)...]
        var path = "/"
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) {
            path = String(rest[slash...])
            if path.hasPrefix("?") { path = "/" + path }
            rest = rest[..<slash]
        }
        var host = String(rest)
        var port = defaultPort
        // Bracketed IPv6 hosts keep their colons; a port follows the closing bracket.
        let portColon: String.Index?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw .invalidRelayAuthentication("relay URL \"\(text)\" has an unclosed IPv6 host")
            }
            portColon = host[close...].firstIndex(of: ":")
        } else {
            portColon = host.lastIndex(of: ":")
        }
        if let colon = portColon {
            guard let p = Int(host[host.index(after: colon)...]), p > 0, p < 65536 else {
                throw .invalidRelayAuthentication("relay URL \"\(text)\" has an invalid port")
            }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty, !host.contains("@") else {
            throw .invalidRelayAuthentication("relay URL \"\(text)\" has no host")
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    /// True for `wss`, the one scheme carried over TLS (`noise` encrypts with its own handshake).
    public var isSecure: Bool { scheme == "wss" }

    /// The normalized URL, leaving out the scheme's default port and an empty path, so equal URLs
    /// print alike.
    public var description: String {
        let defaultPort = scheme == "wss" ? 443 : scheme == "ws" ? 80 : 0
        return "\(scheme)://\(host)\(port == defaultPort ? "" : ":\(port)")\(path == "/" ? "" : path)"
    }
}

/// NIP-42 relay authentication: the event kind and the checks a relay applies.
public enum Nip42 {
    /// The kind of a NIP-42 authentication event: 22242.
    public static let authenticationKind = 22242
    /// Default accepted distance between the event's created_at and the verifier's clock.
    public static let defaultWindowSeconds: Int64 = 600

    /// Checks a client's authentication event as a relay would: kind 22242, exactly one
    /// `relay` tag naming this relay (URLs compared normalized), exactly one `challenge` tag
    /// equal to the issued challenge, and created_at within `window` seconds of `now`.
    ///
    /// - Parameters:
    ///   - event: The client's verified authentication event.
    ///   - challenge: The challenge this relay issued on the connection.
    ///   - relayURL: This relay's URL, compared normalized with the event's `relay` tag.
    ///   - now: The verifier's clock, in Unix seconds.
    ///   - window: The largest accepted distance between the event's `created_at` and `now`, in
    ///     seconds (``Nip42/defaultWindowSeconds`` by default).
    /// - Throws: ``SoftchatError`` with code `invalid_relay_authentication` naming the first check
    ///   that fails, or when `relayURL` itself is not a valid relay URL.
    public static func verify(
        _ event: VerifiedEvent, challenge: String, relayURL: String, now: Int64,
        window: Int64 = defaultWindowSeconds
    ) throws(SoftchatError) {
        guard event.kind == authenticationKind else {
            throw .invalidRelayAuthentication("kind is \(event.kind), not \(authenticationKind)")
        }
        let relayTags = event.tags.filter { $0.first == "relay" }
        let challengeTags = event.tags.filter { $0.first == "challenge" }
        guard relayTags.count == 1, relayTags[0].count >= 2 else {
            throw .invalidRelayAuthentication("relay tag: expected exactly one with a value, found \(relayTags.count)")
        }
        guard challengeTags.count == 1, challengeTags[0].count >= 2 else {
            throw .invalidRelayAuthentication("challenge tag: expected exactly one with a value, found \(challengeTags.count)")
        }
        guard challengeTags[0][1] == challenge else {
            throw .invalidRelayAuthentication("challenge tag does not match the issued challenge")
        }
        let expected = try RelayURL(relayURL)
        guard let given = try? RelayURL(relayTags[0][1]), given == expected else {
            throw .invalidRelayAuthentication("relay tag \"\(relayTags[0][1])\" does not name \(expected)")
        }
        guard abs(event.createdAt - now) <= window else {
            throw .invalidRelayAuthentication("created_at \(event.createdAt) is more than \(window) s from now (\(now))")
        }
    }

    /// The wire-level shape check for a client AUTH event: kind 22242 with exactly one
    /// non-empty `relay` and one non-empty `challenge` tag.
    static func checkShape(_ event: VerifiedEvent) throws(EventIssue) {
        guard event.kind == authenticationKind else { throw EventIssue("kind is \(event.kind), not \(authenticationKind)") }
        for name in ["relay", "challenge"] {
            let tags = event.tags.filter { $0.first == name }
            guard tags.count == 1 else { throw EventIssue("expected exactly one \(name) tag, found \(tags.count)") }
            guard tags[0].count >= 2, !tags[0][1].isEmpty else { throw EventIssue("the \(name) tag has no value") }
        }
    }
}
