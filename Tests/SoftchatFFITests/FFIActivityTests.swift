import SoftchatClient
import SoftchatCore
import SoftchatSync
import Testing

@testable import SoftchatFFI

/// What the C ABI's activity listener receives for each managed-transport event.
@Suite struct FFIActivityTests {
    /// The engine knows when a synced window has seconds paging could not reach past; the C ABI
    /// (and so Kotlin and TypeScript) dropped them and reported a plain "synced". Issue 45, path
    /// 10: the same for what the window skipped (events over our frame bound, ids NIP-77 found
    /// that the relay did not send), which no report carried at all: the JSON every language
    /// decodes now has them.
    @Test func aSyncedActivityCarriesTheIncompleteSecondsAndWhatWasSkipped() throws {
        var outcome = SyncOutcome(cursor: 1_700_000_100, incompleteSeconds: [1_700_000_000, 1_699_999_990], requests: 7)
        let big = String(repeating: "ab", count: 32)
        let gone = String(repeating: "cd", count: 32)
        outcome.skipped = [
            SkippedEvents(reason: .oversized, count: 3, eventIDs: [big]), SkippedEvents(reason: .notServed, count: 1, eventIDs: [gone]),
        ]
        let update = ManagedTransportEvent.synced(relayURL: "wss://r.example", subscriptionID: "notes", events: 42, outcome: outcome).activity
        guard let activity = update,
            case .synced(let url, let subscription, let events, let seconds, let skipped, let refused) = activity
        else {
            Issue.record("expected a synced activity, got \(String(describing: update))")
            return
        }
        #expect(url == "wss://r.example" && subscription == "notes" && events == 42)
        #expect(seconds == [1_700_000_000, 1_699_999_990])
        #expect(skipped == outcome.skipped)
        #expect(refused == nil)
        let json = activity.ffiJSON.jsonText
        #expect(
            json.contains(
                #""skipped":[{"reason":"oversized","count":3,"eventIds":[""# + big + #""]},{"reason":"notServed","count":1,"eventIds":[""# + gone
                    + #""]}]"#), "\(json)")
        // A live REQ the relay refused reaches every language too (issue 45, path 2).
        outcome.liveFeedRefused = "restricted: members only"
        let refusedUpdate = ManagedTransportEvent.synced(relayURL: "wss://r.example", subscriptionID: "notes", events: 1, outcome: outcome).activity
        guard let refusedActivity = refusedUpdate else {
            Issue.record("expected a synced activity")
            return
        }
        #expect(refusedActivity.ffiJSON.jsonText.contains(#""liveFeedRefused":"restricted: members only""#), "\(refusedActivity.ffiJSON.jsonText)")
    }
}
