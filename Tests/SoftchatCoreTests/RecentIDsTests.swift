import Testing

@testable import SoftchatCore

/// `RecentIDs` keeps the session's recently timed-out, settled and closed ids: an id is known
/// until `capacity` later insertions push it out, or until it is removed.
@Suite struct RecentIDsTests {
    /// An id removed and inserted again used to keep its old slot as well as the new one; when the
    /// window reached the old slot it forgot the id while its new insertion was still within the
    /// window. For the session's `timedOut` set that means an event that timed out, was published
    /// again and timed out again lost its record early, and the relay's late `OK` for it became a
    /// notice instead of a delivery decision.
    @Test func anIDInsertedAgainAfterRemovalIsKeptForAWholeWindowFromItsLastInsertion() {
        var ids = RecentIDs(capacity: 3)
        ids.insert("a")
        ids.remove("a")
        ids.insert("a")  // the last three insertions are a, b, c: a must still be known
        ids.insert("b")
        ids.insert("c")
        #expect(ids.contains("a"))
        #expect(ids.contains("b"))
        #expect(ids.contains("c"))
        ids.insert("d")  // now a is the oldest of four: forgotten
        #expect(!ids.contains("a"))
        #expect(ids.contains("d"))
    }

    @Test func theOldestIsForgottenFirstAndARemovedIDIsForgottenAtOnce() {
        var ids = RecentIDs(capacity: 2)
        ids.insert("a")
        ids.insert("b")
        ids.insert("c")
        #expect(!ids.contains("a"))
        #expect(ids.contains("b") && ids.contains("c"))
        ids.remove("b")
        #expect(!ids.contains("b"))
        ids.insert("b")
        ids.insert("d")  // window: b, d (c is the oldest of three)
        #expect(!ids.contains("c"))
        #expect(ids.contains("b") && ids.contains("d"))
    }
}
