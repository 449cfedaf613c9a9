import SoftchatCore

@testable import SoftchatSync

/// Every rule of a real relay the quirks simulator (`WireRelay` in an `EngineWorld`) plays, named
/// by the answer it changes. The model test counts each one as it happens and fails a run in which
/// one was never reached, so a rule that stops being exercised is noticed.
///
/// Sources: nostr-relay 1.14 (exclusive `until`, 32 subscriptions refused by a bare NOTICE, rate
/// limits answered `OK false "rate-limited:"` or NOTICE "rate-limited", no NIP-11 limits),
/// rust-nostr's LocalRelay (a 500-event cap, NEG-ERR "rate-limited: too many negentropy items"),
/// strfry (NEG-ERR "blocked: this query is too big", "closed:"), NIP-01, NIP-11 and NIP-77.
enum Quirk: String, CaseIterable, Hashable, Sendable {
    /// A page cut at a cap under 500 that NIP-11 does not state (absent, or says 500).
    case unstatedCapBelowPage
    /// A page asked `until` a second that holds events, answered with them (NIP-01) or without.
    case untilInclusive, untilExclusive
    /// A REQ past the relay's subscription limit, refused by a NOTICE alone or by a CLOSED.
    case subscriptionsRefusedByNotice, subscriptionsRefusedByClosed
    /// A REQ refused for its rate: nostr-relay's bare NOTICE, or `CLOSED "rate-limited:"`.
    case requestRateLimitedByNotice, requestRateLimitedByClosed
    /// A REQ closed (`error:`, `rate-limited:`) before any answer, or after part of it.
    case closedBeforeAnswer, closedMidAnswer
    /// EVENT answered `OK false "rate-limited:"`, `OK false "error:"`, `OK false "invalid:"`,
    /// not at all (stored silently), or late.
    case eventRateLimited, okRetryable, okRejected, okSilent, okLate
    /// A client frame longer than the relay reads, refused (stated in NIP-11 or not).
    case messageTooLong
    /// NIP-11: no document, a document that comes slowly, one whose limits are wrong, a true one.
    case informationAbsent, informationSlow, informationWrong, informationTrue
    /// NEG-OPEN met by a NOTICE, by silence, or by NEG-ERR in each form.
    case negentropyNotice, negentropySilent
    case negentropyErrorBlocked, negentropyErrorRateLimited, negentropyErrorClosed, negentropyErrorOther
    /// An event stored late with a `created_at` older than the subscription's horizon.
    case storedLateBeyondHorizon
    /// A relay message over the client's frame bound, skipped by the transport: an event (600
    /// KB, no account can hold it) or a NEG-MSG answering too big a query.
    case eventOverOurBound, negentropyMessageOverOurBound
    /// An event dated by a relay clock that differs from the client's.
    case clockSkew
    /// The relay stops answering (a half-open connection) until the client gives up on it.
    case silence
    /// The connection cut at any frame; an account commit that fails.
    case cut, failedCommit
    /// A lease renewal the account fails (a disk, a busy database), and a second claimer
    /// process that takes work whose lease ran out while this one was frozen past it (its
    /// renewal is then stale) and never answers for it.
    case renewalFailed, secondClaimer
    /// NIP-42: reads closed `auth-required:` and writes answered `OK false "auth-required:"`
    /// until an AUTH is accepted (the challenge ahead of the first), our AUTH accepted or refused
    /// (`restricted:`).
    case readsClosedAuthRequired, writesAnsweredAuthRequired, authenticationAccepted, authenticationRefused
    /// A live REQ closed for good (`restricted:`, `blocked:`, no prefix), on every connection.
    case liveFeedClosedForGood
    /// A subscription limit refused in strfry's words (NOTICE "ERROR: too many concurrent
    /// REQs") or nostr-rs-relay's (NOTICE "Subscription error: Maximum concurrent subscription
    /// count reached").
    case subscriptionLimitInStrfrysWords, subscriptionLimitInRsRelaysWords
    /// The relay's cap, or its reading of `until`, changed mid-run (a new configuration, another
    /// backend behind the URL).
    case capChanged, untilConventionChanged
    /// A REQ's answer cut short by a time or byte budget (an EOSE before the cap), events counted
    /// toward the cap and then filtered out of the answer (after `LIMIT`).
    case answerCutByBudget, filteredAfterLimit
    /// Events deleted at the relay (NIP-09, an operator) or expired there (NIP-40).
    case deletedAtRelay, expiredAtRelay
    /// A stored event sent after its answer's EOSE, an event twice in one answer, an event
    /// outside the REQ's `since`/`until`.
    case eventAfterEOSE, duplicateInAnswer, eventOutsideRange
    /// nostr-rs-relay: a REQ whose id is already open is ignored (no answer at all).
    case repeatedREQIgnored
    /// An OK whose event id is not one (no client can match it).
    case okWithoutID
    /// An EVENT refused for its `created_at` (strfry's "invalid: created_at too early/late").
    case createdAtRefused
    /// NEG sessions holding subscription slots (a REQ or NEG-OPEN refused while fewer REQs are
    /// open than the limit).
    case negentropyHoldsSubscriptionSlots
    /// A group of account writes whose transaction rolled back (SQLite's automatic rollback on
    /// FULL, IOERR, NOMEM): every member is answered failed.
    case groupRolledBack
    /// A large message on a slow link: its bytes take longer than the REQ and NIP-77 deadlines
    /// to arrive (the host reports them, `bytesArrived`, about once a second), then it is whole.
    case messageArrivedSlowly

    /// The NEG-ERR quirk for a message, by its prefix.
    static func negentropyError(_ text: String) -> Quirk {
        if text.hasPrefix("blocked:") { return .negentropyErrorBlocked }
        if text.hasPrefix("rate-limited:") { return .negentropyErrorRateLimited }
        if text.hasPrefix("closed:") { return .negentropyErrorClosed }
        return .negentropyErrorOther
    }

    /// NEG-ERR messages as relays send them.
    static let negentropyErrors = [
        "blocked: this query is too big", "rate-limited: too many negentropy items", "closed: idle",
        "error: internal", "auth-required: sign in first",
    ]
}

/// Counts of quirks reached, summed over relays and runs.
struct QuirkCoverage {
    var counts: [Quirk: Int] = [:]

    mutating func add(_ seen: [Quirk: Int]) {
        for (quirk, n) in seen { counts[quirk, default: 0] += n }
    }

    /// The quirks never reached.
    var missing: [Quirk] { Quirk.allCases.filter { (counts[$0] ?? 0) == 0 } }

    var summary: String { Quirk.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", ") }
}
