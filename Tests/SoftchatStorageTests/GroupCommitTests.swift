import Foundation
import SoftchatCore
import Synchronization
import Testing

@testable import SoftchatStorage

@Suite struct GroupCommitTests {
    /// Eight senders that find the writer busy are committed together, in one transaction: each
    /// returns its own ids once that commit is durable, and the one whose write fails (an
    /// operation id already enqueued with another event) fails alone.
    @Test func concurrentSendersShareOneCommitAndAFailingOneFailsAlone() throws {
        let t = try TestAccount()
        let relay = "wss://relay.example"
        _ = try t.account.outgoing.enqueueSigned(operationID: "taken", events: [signed(content: "first")], relayURLs: [relay], now: t0)
        let before = t.account.store.commits.load(ordering: .relaxed)
        let results = Mutex<[Int: Result<[String], SoftchatError>]>([:])
        // Hold the writer (a write group of nothing) until all eight wait for it.
        try t.account.store.group("hold") {
            for i in 0..<8 {
                let operation = i == 3 ? "taken" : "op\(i)"
                let event = signed(content: "sender \(i)", createdAt: t0 + Int64(i))
                let account = t.account
                Thread.detachNewThread {
                    let result = Result { () throws(SoftchatError) -> [String] in
                        try account.outgoing.enqueueSigned(operationID: operation, events: [event], relayURLs: [relay], now: t0)
                    }
                    results.withLock { $0[i] = result }
                }
            }
            let deadline = Date().addingTimeInterval(10)
            while t.account.store.waitingWrites < 8 && Date() < deadline { usleep(1_000) }
        }
        let deadline = Date().addingTimeInterval(10)
        while results.withLock({ $0.count }) < 8 && Date() < deadline { usleep(1_000) }
        let outcome = results.withLock { $0 }
        #expect(outcome.count == 8)
        for (i, result) in outcome {
            switch result {
            case .success(let ids): #expect(i != 3 && ids.count == 1, "sender \(i)")
            case .failure(let error): #expect(i == 3 && error.code == .invalidDeliveryState, "sender \(i): \(error)")
            }
        }
        // The hold group, then one commit for all eight.
        #expect(t.account.store.commits.load(ordering: .relaxed) - before == 2)
        // Durable: a fresh open finds the seven new intents beside the first.
        t.account.close()
        let reopened = try SoftchatAccount.open(path: t.path)
        defer { reopened.close() }
        #expect(try reopened.check(now: t0).intentsByState[.pending] == 8)
    }
}
