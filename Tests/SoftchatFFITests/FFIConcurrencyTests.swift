import Foundation
import SoftchatCore
import SoftchatFFI
import SoftchatJSON
import SoftchatTestRelay
import Synchronization
import Testing

/// The C ABI's managed transport under load, called exactly as a Kotlin or Node host calls it:
/// eight threads enqueue, sign, query and check through one account handle while the transport
/// runs, and its callbacks call back into the transport and the account. Run under
/// ThreadSanitizer by `.ci/run` (`scripts/check/tsan-ffi`).
@Suite struct FFIConcurrencyTests {
    /// What the callbacks saw; shared with the C callbacks through their context pointer.
    final class Observer: Sendable {
        struct Seen {
            var states = 0
            var accepted = 0
            var rejected = 0
            var stateEnds = 0
            var activityEnds = 0
            var afterStop = 0
            var reentrantCalls = 0
            var badJSON = 0
        }
        let seen = Mutex(Seen())
        let stopped = Atomic(false)
        let transport = Atomic<UInt>(0)
        let account: UInt

        init(account: UnsafeMutableRawPointer) { self.account = UInt(bitPattern: account) }
    }

    static func text(_ p: UnsafeMutablePointer<CChar>?) -> String? {
        guard let p else { return nil }
        defer { softchat_string_free(p) }
        return String(cString: p)
    }

    /// Calls an export; a reported error fails the test with its code and message.
    static func ok<R>(_ what: String, _ body: (UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> R) -> R {
        var error: UnsafeMutableRawPointer?
        let r = body(&error)
        if let error {
            let e = error.assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self)
            Issue.record("\(what): \(String(cString: e[0]!)) \(String(cString: e[1]!))")
            softchat_error_free(error)
        }
        return r
    }

    static let onState: FFICallbackFunction = { context, json in
        let o = Unmanaged<Observer>.fromOpaque(context!).takeUnretainedValue()
        let stopped = o.stopped.load(ordering: .acquiring)
        o.seen.withLock { s in
            if stopped && json != nil { s.afterStop += 1 }
            if json == nil { s.stateEnds += 1 } else { s.states += 1 }
        }
    }

    static let onActivity: FFICallbackFunction = { context, json in
        let o = Unmanaged<Observer>.fromOpaque(context!).takeUnretainedValue()
        let stopped = o.stopped.load(ordering: .acquiring)
        guard let json else {
            o.seen.withLock { $0.activityEnds += 1 }
            return
        }
        let value = try? JSONReader().parse(String(cString: json))
        let kind = value?.objectValue?["kind"]?.stringValue
        let state = value?.objectValue?["decision"]?.objectValue?["state"]?.stringValue
        // Re-entry: the transport and the account are callable from a callback.
        var reentrant = 0
        if let transport = UnsafeMutableRawPointer(bitPattern: o.transport.load(ordering: .acquiring)) {
            if text(softchat_managed_transport_relays(transport, nil)) != nil { reentrant += 1 }
        }
        if text(softchat_account_check(UnsafeMutableRawPointer(bitPattern: o.account), "\(Int(time(nil)))", nil)) != nil { reentrant += 1 }
        o.seen.withLock { s in
            if stopped { s.afterStop += 1 }
            if value == nil { s.badJSON += 1 }
            if kind == "delivery" && state == "accepted" { s.accepted += 1 }
            if kind == "delivery" && state == "rejected" { s.rejected += 1 }
            s.reentrantCalls += reentrant
        }
    }

    @Test func eightThreadsShareOneAccountWhileTheManagedTransportRunsAndCallsBack() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("softchat-ffi-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let account = try #require(Self.ok("open") { softchat_account_open("\(directory)/account.db", $0) })
        let identity = try #require(Self.ok("identity") { softchat_identity_generate($0) })
        let observer = Observer(account: account)
        let context = Unmanaged.passRetained(observer).toOpaque()
        defer { Unmanaged<Observer>.fromOpaque(context).release() }
        let contextJSON = "{\"relayUrls\":[\"\(relay.url)\"],\"acknowledgementTimeoutSeconds\":10}"
        let transport = try #require(
            Self.ok("start") {
                softchat_account_start_managed_transport(account, contextJSON, identity, Self.onState, context, Self.onActivity, context, $0)
            })
        observer.transport.store(UInt(bitPattern: transport), ordering: .releasing)

        let perThread = 25
        // Handles cross to the threads as addresses, as they do in a host.
        let (accountAddress, identityAddress, transportAddress) = (UInt(bitPattern: account), UInt(bitPattern: identity), UInt(bitPattern: transport))
        let relayURL = relay.url
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            let account = UnsafeMutableRawPointer(bitPattern: accountAddress)!
            let identity = UnsafeMutableRawPointer(bitPattern: identityAddress)!
            let transport = UnsafeMutableRawPointer(bitPattern: transportAddress)!
            for i in 0..<perThread {
                let draft =
                    "{\"pubkey\":null,\"createdAt\":\(1_700_000_000 + i),\"kind\":1,\"tags\":[[\"t\",\"ffi\"]],\"content\":\"thread \(thread) event \(i)\"}"
                guard let event = Self.text(Self.ok("sign") { softchat_identity_sign(identity, draft, $0) }) else { return }
                _ = Self.text(
                    Self.ok("enqueue") {
                        softchat_account_outgoing_enqueue_signed(
                            account, "op-\(thread)-\(i)", "[\(event)]", "[\"\(relayURL)\"]", "\(Int(time(nil)))", $0)
                    })
                _ = Self.text(
                    Self.ok("query") { softchat_account_query_events(account, "[\"{\\\"kinds\\\":[1]}\"]", "10", "\(Int(time(nil)))", nil, $0) })
                if i % 5 == 0 {
                    _ = Self.text(Self.ok("relays") { softchat_managed_transport_relays(transport, $0) })
                    _ = Self.text(Self.ok("intents") { softchat_account_delivery_intents(account, "op-\(thread)-0", $0) })
                }
            }
        }
        let deadline = Date().addingTimeInterval(60)
        while observer.seen.withLock({ $0.accepted }) < 8 * perThread && Date() < deadline { usleep(20_000) }

        Self.ok("stop") { softchat_managed_transport_stop(transport, $0) }
        observer.stopped.store(true, ordering: .releasing)
        Self.ok("stop again") { softchat_managed_transport_stop(transport, $0) }
        usleep(200_000)
        let seen = observer.seen.withLock { $0 }
        #expect(seen.accepted == 8 * perThread)
        #expect(seen.rejected == 0)
        #expect(seen.stateEnds == 1 && seen.activityEnds == 1, "each callback ends exactly once: \(seen)")
        #expect(seen.afterStop == 0, "no update after stop returned: \(seen)")
        #expect(seen.badJSON == 0)
        #expect(seen.reentrantCalls >= 8 * perThread, "callbacks called back into the transport and the account: \(seen)")
        #expect(seen.states >= 3, "connecting, ready, stopped at least: \(seen)")

        // The account agrees: every intent accepted, no lease held.
        for thread in 0..<8 {
            for i in 0..<perThread {
                let intents = try #require(Self.text(Self.ok("intents") { softchat_account_delivery_intents(account, "op-\(thread)-\(i)", $0) }))
                #expect(intents.contains("\"state\":\"accepted\""), "op-\(thread)-\(i): \(intents)")
            }
        }
        let report = try #require(Self.text(Self.ok("check") { softchat_account_check(account, "\(Int(time(nil)))", $0) }))
        #expect(report.contains("\"ok\":true") && report.contains("\"liveLeases\":0"), "\(report)")
        softchat_managed_transport_free(transport)
        softchat_identity_free(identity)
        Self.ok("close") { softchat_account_close(account, $0) }
        softchat_account_free(account)
    }

    @Test func aBadContextIsRefusedWithItsCodeAndNoCallbackRuns() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("softchat-ffi-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let account = try #require(Self.ok("open") { softchat_account_open("\(directory)/account.db", $0) })
        let observer = Observer(account: account)
        let context = Unmanaged.passRetained(observer).toOpaque()
        defer { Unmanaged<Observer>.fromOpaque(context).release() }
        for (bad, code) in [
            ("{\"relayUrls\":[\"http://relay.example\"]}", "invalid_relay_url"),
            ("{\"relayUrls\":[\"ws://relay.example/\\r\\nX-Injected: 1\"]}", "invalid_relay_url"),
        ]
            + [
                "{\"relayUrls\":[]}", "{\"relayUrls\":[\"ws://a.example\",\"ws://a.example\"]}",
                "{\"relayUrls\":[\"ws://a.example\"],\"acknowledgementTimeoutSeconds\":0}", "{\"relays\":1}", "not json",
            ].map({ ($0, "invalid_relay_session") })
        {
            var error: UnsafeMutableRawPointer?
            let t = softchat_account_start_managed_transport(account, bad, nil, Self.onState, context, Self.onActivity, context, &error)
            #expect(t == nil, "\(bad)")
            let e = try #require(error?.assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self), "\(bad) reports an error")
            #expect(String(cString: e[0]!) == code, "\(bad): \(String(cString: e[0]!)) \(String(cString: e[1]!))")
            softchat_error_free(error)
        }
        usleep(100_000)
        let seen = observer.seen.withLock { $0 }
        #expect(seen.states == 0 && seen.stateEnds == 0 && seen.activityEnds == 0, "\(seen)")
        Self.ok("close") { softchat_account_close(account, $0) }
        softchat_account_free(account)
    }
}
