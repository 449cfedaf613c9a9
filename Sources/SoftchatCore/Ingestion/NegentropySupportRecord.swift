/// What an account remembers about a relay's NIP-77 support, so a relay that does not speak
/// negentropy is not asked on every connection.
public struct NegentropySupportRecord: Sendable, Hashable {
    /// The relay the record is about.
    public let relayURL: String
    /// False: the relay refused or ignored NEG-OPEN (NEG-ERR, a NOTICE, or silence).
    public let supported: Bool
    /// Unix seconds when it was last found out.
    public let checkedAt: Int64
    /// Why, in the relay's words or the engine's.
    public let reason: String

    /// A record from its fields.
    ///
    /// - Parameters:
    ///   - relayURL: The relay the record is about.
    ///   - supported: Whether the relay speaks NIP-77; false when it refused or ignored NEG-OPEN.
    ///   - checkedAt: When that was found out, in Unix seconds.
    ///   - reason: Why, in the relay's words or the engine's.
    public init(relayURL: String, supported: Bool, checkedAt: Int64, reason: String) {
        self.relayURL = relayURL
        self.supported = supported
        self.checkedAt = checkedAt
        self.reason = reason
    }
}
