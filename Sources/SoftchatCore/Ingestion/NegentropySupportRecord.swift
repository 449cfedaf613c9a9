/// What an account remembers about a relay's NIP-77 support, so a relay that does not speak
/// negentropy is not asked on every connection.
public struct NegentropySupportRecord: Sendable, Hashable {
    public let relayURL: String
    /// False: the relay refused or ignored NEG-OPEN (NEG-ERR, a NOTICE, or silence).
    public let supported: Bool
    /// Unix seconds when it was last found out.
    public let checkedAt: Int64
    /// Why, in the relay's words or the engine's.
    public let reason: String

    public init(relayURL: String, supported: Bool, checkedAt: Int64, reason: String) {
        self.relayURL = relayURL
        self.supported = supported
        self.checkedAt = checkedAt
        self.reason = reason
    }
}
