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
}
