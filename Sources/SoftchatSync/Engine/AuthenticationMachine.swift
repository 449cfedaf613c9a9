/// NIP-42 on one connection, as the engine paces it: a short window after connecting in which
/// a relay that speaks NIP-42 may challenge before anything is written (so nothing is refused
/// `auth-required:` for going first), and the wait for the answer to our AUTH — which some
/// relays never send on success (nostr-relay), so a second of silence counts as accepted.
///
/// A value type on the engine's monotonic clock; the session signs and sends the AUTH and
/// reads the OK. Tested alone in `NegentropyMachineTests.swift`.
struct AuthenticationMachine {
    /// Nothing is written before this (monotonic ms): the challenge window.
    private(set) var windowEnds: Int64 = 0
    /// When our AUTH was written, until it is answered or the wait ends.
    private(set) var sentAt: Int64?
    /// The relay accepted our AUTH on this connection (its OK, or a second of silence): what it
    /// closed `auth-required:` before may be asked again.
    private(set) var isAccepted = false

    /// How long an AUTH waits for its OK before silence counts as acceptance.
    static let answerWaitMilliseconds: Int64 = 1_000

    /// A connection opened at `now`: a relay that speaks NIP-42, with an identity to answer it,
    /// gets `grace` milliseconds to challenge first.
    mutating func connected(now: Int64, challengeExpected: Bool, grace: Int64) {
        sentAt = nil
        isAccepted = false
        windowEnds = challengeExpected ? now + grace : 0
    }

    /// Whether frames may be written at `now`.
    func mayWrite(now: Int64) -> Bool { now >= windowEnds }

    /// Our AUTH was handed to the session at `now`: the window closes, the answer is awaited.
    mutating func answered(now: Int64) {
        windowEnds = 0
        sentAt = now
    }

    /// The relay said yes or no to our AUTH.
    mutating func decided() { sentAt = nil }

    /// The relay said yes to our AUTH.
    mutating func accepted() {
        sentAt = nil
        isAccepted = true
    }

    /// At `now`: true once when our AUTH has waited its full second unanswered (then taken as
    /// accepted).
    mutating func silentlyAccepted(now: Int64) -> Bool {
        guard let sent = sentAt, now - sent >= Self.answerWaitMilliseconds else { return false }
        sentAt = nil
        isAccepted = true
        return true
    }

    /// The connection ended.
    mutating func connectionLost() {
        sentAt = nil
        isAccepted = false
    }

    /// The challenge window's end, while it is ahead of `now`.
    func graceDeadline(now: Int64) -> Int64? { windowEnds > now ? windowEnds : nil }

    /// When an unanswered AUTH is taken as accepted.
    var answerDeadline: Int64? { sentAt.map { $0 + Self.answerWaitMilliseconds } }
}
