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
        let expected: RelayURL
        do throws(SoftchatError) {
            expected = try RelayURL(relayURL)
        } catch {
            throw .invalidRelayAuthentication(error.message)
        }
        guard let given = try? RelayURL(relayTags[0][1]), given == expected else {
            throw .invalidRelayAuthentication("relay tag \(RelayURL.displayed(relayTags[0][1])) does not name \(expected)")
        }
        guard event.createdAt.isWithin(window, of: now) else {
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
