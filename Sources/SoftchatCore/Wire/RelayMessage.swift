/// The text of an `OK`, `CLOSED` or `NOTICE`, split into NIP-01's machine-readable prefix and
/// the human message. A leading `ERROR: ` (strfry writes `ERROR: auth-required: …`) is
/// stripped before the prefix is read. Callers branch on `prefix`; `message` is diagnostic.
public struct RelayMessage: Sendable, Hashable, CustomStringConvertible {
    /// The text exactly as the relay sent it.
    public let text: String
    /// `duplicate`, `auth-required`, `rate-limited`, … or nil when the text has none.
    public let prefix: String?
    /// The human part after the prefix (the whole text when there is no prefix).
    public let message: String

    /// Splits relay text into its prefix and message.
    ///
    /// - Parameter text: The text of an `OK`, `CLOSED`, `NOTICE` or `NEG-ERR`, as the relay sent it.
    public init(_ text: String) {
        self.text = text
        var rest = Substring(text)
        if rest.hasPrefix("ERROR: ") { rest = rest.dropFirst("ERROR: ".count) }
        // A prefix is a lowercase word (letters, digits, '-') followed by ':'.
        if let colon = rest.firstIndex(of: ":"), colon > rest.startIndex,
            rest[..<colon].allSatisfy({ ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" })
        {
            prefix = String(rest[..<colon])
            var body = rest[rest.index(after: colon)...]
            while body.first == " " { body = body.dropFirst() }
            message = String(body)
        } else {
            prefix = nil
            message = String(rest)
        }
    }

    /// The text exactly as the relay sent it.
    public var description: String { text }

    /// The longest prefix kept by ``bounded``: every prefix NIP-01 names is far shorter.
    public static let maxPrefixBytes = 64

    private init(text: String, prefix: String?, message: String) {
        self.text = text
        self.prefix = prefix
        self.message = message
    }

    /// The message as reports carry it: a prefix longer than ``maxPrefixBytes`` dropped (it
    /// names nothing Softchat knows), `message` through `RelayText.forReport` (control and bidi
    /// characters replaced), and `text` the two joined, at most `maxReportTextBytes` in all.
    /// A relay's text is whole up to here; the session bounds it before any action carries it.
    public var bounded: RelayMessage {
        let keptPrefix = prefix.flatMap { $0.utf8.count <= Self.maxPrefixBytes ? $0 : nil }
        let body = RelayText.forReport(message, maxBytes: RelayText.maxReportBytes - (keptPrefix.map { $0.utf8.count + 2 } ?? 0))
        if keptPrefix == prefix && body == message && text.utf8.count <= RelayText.maxReportBytes { return self }
        return RelayMessage(text: keptPrefix.map { $0 + ": " + body } ?? body, prefix: keptPrefix, message: body)
    }
}
