import SoftchatClient
import SoftchatCore
import SoftchatSync
import Testing

@testable import SoftchatFFI

/// What the C ABI's activity listener receives for each managed-transport event.
@Suite struct FFIActivityTests {
    /// The engine knows when a synced window has seconds paging could not reach past; the C ABI
    /// (and so Kotlin and TypeScript) dropped them and reported a plain "synced".
    @Test func aSyncedActivityCarriesTheIncompleteSeconds() throws {
        let outcome = SyncOutcome(cursor: 1_700_000_100, incompleteSeconds: [1_700_000_000, 1_699_999_990], requests: 7)
        let update = ManagedTransportHandle.translate(.synced(relayURL: "wss://r.example", subscriptionID: "notes", events: 42, outcome: outcome))
        guard case .activity(.synced(let url, let subscription, let events, let seconds)) = update else {
            Issue.record("expected a synced activity, got \(String(describing: update))")
            return
        }
        #expect(url == "wss://r.example" && subscription == "notes" && events == 42)
        #expect(seconds == [1_700_000_000, 1_699_999_990])
    }
}
