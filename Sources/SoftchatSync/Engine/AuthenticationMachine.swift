/// NIP-42 on one connection, as the engine paces it: a short window after connecting in which
/// a relay that speaks NIP-42 may challenge before anything is written (so nothing is refused
/// `auth-required:` for going first), and the wait for the answer to our AUTH — which some
/// relays never send on success (nostr-relay), so a second of silence counts as accepted.
///
/// It also counts the tries a relay that refuses our AUTH has refused us (issue 45, path 13: an
/// event it answered `auth-required:` was asked again every ~15 s, for ever, spending no retry
/// budget): while our AUTH stands refused on the connection, each claim whose events the relay
/// answers `auth-required:` is one try, counted across connections until an AUTH is accepted,
/// and from the `refusedTriesLimit`-th on such events get a terminal decision.
///
/// A value type on the engine's monotonic clock; the session signs and sends the AUTH and
/// reads the OK. Tested alone in `NegentropyMachineTests.swift` (the window and the wait) and
/// `RelayMachinesTests` (refused tries).
struct AuthenticationMachine {
    /// Nothing is written before this (monotonic ms): the challenge window.
    private(set) var windowEnds: Int64 = 0
    /// When our AUTH was written, until it is answered or the wait ends.
    private(set) var sentAt: Int64?
    /// The relay accepted our AUTH on this connection (its OK, or a second of silence): what it
    /// closed `auth-required:` before may be asked again.
    private(set) var isAccepted = false
    /// The relay refused our AUTH on this connection, and no AUTH was answered since: what it
    /// answers `auth-required:` here can only be refused again.
    private(set) var isRefused = false
    /// The relay's words when it last refused our AUTH.
    private(set) var refusal = ""
    /// Tries in a row the relay refused us for authentication, across connections (claims whose
    /// events it answered `auth-required:` while our AUTH stood refused); an accepted AUTH
    /// starts the count again.
    private(set) var refusedTries = 0
    /// The claim (lease id) of the last try: a claim's events are one try together.
    private var triedClaim: String?
    /// The terminal decisions of this run of refused tries have begun (reported once).
    private var rejecting = false

    /// How long an AUTH waits for its OK before silence counts as acceptance.
    static let answerWaitMilliseconds: Int64 = 1_000
    /// Refused tries in a row after which an event the relay answers `auth-required:` while it
    /// refuses our AUTH is rejected rather than asked again.
    static let refusedTriesLimit = 3

    /// What an event the relay answered `auth-required:` comes to (`publishDenied`).
    enum Denial: Equatable {
        /// Asked again later: our AUTH does not stand refused here, or too few tries yet.
        case retry
        /// Rejected for good; `first` for the first of this run of refused tries (reported once).
        case reject(first: Bool)
    }

    /// A connection opened at `now`: a relay that speaks NIP-42, with an identity to answer it,
    /// gets `grace` milliseconds to challenge first.
    mutating func connected(now: Int64, challengeExpected: Bool, grace: Int64) {
        sentAt = nil
        isAccepted = false
        isRefused = false
        windowEnds = challengeExpected ? now + grace : 0
    }

    /// Whether frames may be written at `now`.
    func mayWrite(now: Int64) -> Bool { now >= windowEnds }

    /// Our AUTH was handed to the session at `now`: the window closes, the answer is awaited.
    mutating func answered(now: Int64) {
        windowEnds = 0
        sentAt = now
        isRefused = false
    }

    /// The relay said yes or no to our AUTH.
    mutating func decided() { sentAt = nil }

    /// The relay said no to our AUTH, in these words.
    mutating func refused(_ text: String) {
        sentAt = nil
        isRefused = true
        refusal = text
    }

    /// The relay said yes to our AUTH: refused tries start again.
    mutating func accepted() {
        sentAt = nil
        isAccepted = true
        isRefused = false
        refusedTries = 0
        triedClaim = nil
        rejecting = false
    }

    /// The relay answered `auth-required:` for an event of the claim `claim` (or left it waiting
    /// for the AUTH it refused). While our AUTH stands refused on this connection each claim is
    /// one try, and from the `refusedTriesLimit`-th try in a row the event is rejected; else it
    /// is "later", as before.
    mutating func publishDenied(claim: String?) -> Denial {
        guard isRefused else { return .retry }
        if let claim, claim != triedClaim {
            triedClaim = claim
            refusedTries += 1
        }
        guard refusedTries >= Self.refusedTriesLimit else { return .retry }
        defer { rejecting = true }
        return .reject(first: !rejecting)
    }

    /// At `now`: true once when our AUTH has waited its full second unanswered (then taken as
    /// accepted).
    mutating func silentlyAccepted(now: Int64) -> Bool {
        guard sentAt.map({ now - $0 >= Self.answerWaitMilliseconds }) == true else { return false }
        accepted()
        return true
    }

    /// The connection ended.
    mutating func connectionLost() {
        sentAt = nil
        isAccepted = false
        isRefused = false
    }

    /// The challenge window's end, while it is ahead of `now`.
    func graceDeadline(now: Int64) -> Int64? { windowEnds > now ? windowEnds : nil }

    /// When an unanswered AUTH is taken as accepted.
    var answerDeadline: Int64? { sentAt.map { $0 + Self.answerWaitMilliseconds } }
}
