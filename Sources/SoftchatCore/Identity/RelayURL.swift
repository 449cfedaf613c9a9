/// A relay URL, checked and normalized: the one parser every entry point uses (the session
/// configuration, the account, the sync engine, the managed transport, NIP-42).
///
/// Relay URLs often come from other people's events (NIP-65 relay lists), so the text is an
/// attacker's until it parses: at most `maxRelayUrlBytes` bytes of printable ASCII; a scheme of
/// `ws`, `wss` or `noise` (Softchat's Noise transport, whose query names the pattern and pinned
/// key); a host that is a DNS name (letters, digits, `.`, `-`, `_`), an IPv4 address or a
/// bracketed IPv6 address; a port of 1–65535; a path and query of RFC 3986 characters (`%` only
/// before two hex digits), with no fragment. Nothing else reaches a request line, a `Host`
/// header, a log or a NIP-42 tag, so no URL can add a header or a second request.
///
/// Normalized as NIP-42 compares URLs: scheme and host lowercased, the default port dropped, an
/// empty path written as `/`.
public struct RelayURL: Sendable, Hashable, CustomStringConvertible {
    /// `ws`, `wss` or `noise`, lowercased.
    public let scheme: String
    /// The host, lowercased; an IPv6 address keeps its brackets.
    public let host: String
    /// The port given, else the scheme's default: 80 for `ws`, 443 for `wss`, 0 for `noise`.
    public let port: Int
    /// The path with any query, as written: `/` when empty, otherwise without a trailing `/`.
    public let path: String

    /// Parses, checks and normalizes a relay URL.
    ///
    /// - Parameter text: A `ws://`, `wss://` or `noise://` URL; the scheme and host may be in any case.
    /// - Throws: ``SoftchatError`` with code `invalid_relay_url` naming the problem (the text shown
    ///   escaped): over `maxRelayUrlBytes` bytes, a byte that is not printable ASCII (a control
    ///   character, CR, LF, space or non-ASCII), no scheme or one other than `ws`, `wss` or
    ///   `noise`, an empty host, user info (`@`), a host character outside its grammar, an unclosed
    ///   IPv6 bracket, a port outside 1–65535, or a path character RFC 3986 does not allow.
    public init(_ text: String) throws(SoftchatError) {
        let limit = RelaySessionContract.maxRelayUrlBytes.value
        guard text.utf8.count <= limit else {
            throw .invalidRelayUrl("relay URL of \(text.utf8.count) bytes is over \(limit) bytes")
        }
        if let offset = text.utf8.firstIndex(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            let at = text.utf8.distance(from: text.utf8.startIndex, to: offset)
            throw .invalidRelayUrl(
                "relay URL \(Self.displayed(text)) holds a control character, space or non-ASCII byte at byte \(at)")
        }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has no scheme")
        }
        let scheme = text[..<colon].lowercased()
        let defaultPort: Int
        switch scheme {
        case "ws": defaultPort = 80
        case "wss": defaultPort = 443
        // Noise URLs (noise://host:port?pattern=…&key=…) name their port; none is implied.
        case "noise": defaultPort = 0
        default: throw .invalidRelayUrl("relay URL scheme \(Self.displayed(scheme)) is not ws, wss or noise")
        }
        var rest = text[text.index(colon, offsetBy: 3)...]
        var path = "/"
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            path = String(rest[slash...])
            if path.hasPrefix("?") { path = "/" + path }
            rest = rest[..<slash]
        }
        if let bad = Self.firstInvalidPathByte(path) {
            throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has \(bad) in its path")
        }
        var host = String(rest)
        var port = defaultPort
        guard !host.contains("@") else { throw .invalidRelayUrl("relay URL \(Self.displayed(text)) holds user info (@)") }
        // Bracketed IPv6 hosts keep their colons; a port follows the closing bracket.
        let portColon: String.Index?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has an unclosed IPv6 host")
            }
            portColon = host[close...].firstIndex(of: ":")
            let after = host.index(after: close)
            guard after == host.endIndex || portColon == after else {
                throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has text after its IPv6 host")
            }
        } else {
            portColon = host.lastIndex(of: ":")
        }
        if let colon = portColon {
            let digits = host[host.index(after: colon)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCIIDigit }), let p = Int(digits), p > 0, p < 65536 else {
                throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has an invalid port")
            }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has no host") }
        guard Self.isValidHost(host) else {
            throw .invalidRelayUrl("relay URL \(Self.displayed(text)) has a host that is not a DNS name, IPv4 or bracketed IPv6 address")
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    /// True for `wss`, the one scheme carried over TLS (`noise` encrypts with its own handshake).
    public var isSecure: Bool { scheme == "wss" }

    /// True when nothing authenticates the relay's end of the connection: `ws`, and `noise` with
    /// `unauthenticated=yes` (no pinned key). Anyone on the path can read such a connection or
    /// answer in the relay's name.
    public var isCleartext: Bool {
        switch scheme {
        case "ws": true
        case "noise": Self.holds(path, "unauthenticated=yes")
        default: false
        }
    }

    /// Whether `part` occurs in `text`, byte for byte (the portable core has no substring search).
    static func holds(_ text: String, _ part: String) -> Bool {
        let (a, b) = (Array(text.utf8), Array(part.utf8))
        guard !b.isEmpty, b.count <= a.count else { return b.isEmpty }
        for i in 0...(a.count - b.count) where a[i..<(i + b.count)].elementsEqual(b) { return true }
        return false
    }

    /// True when the host names this machine as written: `localhost`, an IPv4 address in
    /// 127.0.0.0/8 in dotted decimal, or `[::1]`. (Other spellings that resolve to it, such as
    /// `0x7f.1`, are not recognised here, so they count as remote: the careful side.)
    public var isLoopback: Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy({ $0.isASCIIDigit }) && (Int(part) ?? 256) <= 255
        }
    }

    /// The normalized URL, leaving out the scheme's default port and an empty path, so equal URLs
    /// print alike.
    public var description: String {
        let defaultPort = scheme == "wss" ? 443 : scheme == "ws" ? 80 : 0
        return "\(scheme)://\(host)\(port == defaultPort ? "" : ":\(port)")\(path == "/" ? "" : path)"
    }

    /// `text` quoted for a message or a log: printable ASCII as it is, every other scalar as
    /// `\u{…}`, and cut after 200 characters, so hostile text cannot move a cursor, add a line or
    /// flood a log.
    public static func displayed(_ text: some StringProtocol) -> String {
        var out = "\""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == 200 {
                out += "…"
                break
            }
            count += 1
            if scalar.value >= 0x20 && scalar.value < 0x7F && scalar != "\"" && scalar != "\\" {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return out + "\""
    }

    /// A DNS name (labels of letters, digits, `-` and `_`, separated by single dots), an IPv4
    /// address, or a bracketed IPv6 address (hex digits, colons, and dots for an embedded IPv4).
    static func isValidHost(_ host: String) -> Bool {
        let bytes = Array(host.utf8)
        if bytes.first == 0x5B {  // [
            guard bytes.count > 2, bytes.last == 0x5D else { return false }
            return bytes.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == 0x3A || $0 == 0x2E }
                && bytes.contains(0x3A)
        }
        guard bytes.count <= 253 else { return false }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.utf8.allSatisfy { $0.isASCIILetterOrDigit || $0 == 0x2D || $0 == 0x5F }
        }
    }

    /// The first byte of `path` (path and query) that RFC 3986 does not allow there, described;
    /// nil when every byte is allowed. `#` is refused: a relay URL has no fragment.
    static func firstInvalidPathByte(_ path: String) -> String? {
        let bytes = Array(path.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x25 {  // %
                guard i + 2 < bytes.count, bytes[i + 1].isHexDigit, bytes[i + 2].isHexDigit else { return "a % without two hex digits" }
                i += 3
                continue
            }
            // unreserved, sub-delims, ":", "@", "/", "?"
            let allowed = b.isASCIILetterOrDigit || "-._~!$&'()*+,;=:@/?".utf8.contains(b)
            guard allowed else { return "the character \(displayed(String(decoding: [b], as: UTF8.self)))" }
            i += 1
        }
        return nil
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
    fileprivate var isASCIILetterOrDigit: Bool { (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
