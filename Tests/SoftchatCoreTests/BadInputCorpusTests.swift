import Foundation
import SoftchatCore
import SoftchatJSON
import Testing

/// The bad-input corpus (Tests/SoftchatCoreTests/BadInputs, made by scripts/fuzz/make-bad-inputs.py):
/// one file per case, named DIRECTION--EXPECTED_CODE--case.txt. Each must be refused by its
/// parser with exactly that code, and a session that receives it must stay unchanged.
@Suite struct BadInputCorpusTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("BadInputs")

    struct Case: CustomStringConvertible {
        let name: String
        let fromClient: Bool
        let code: String
        let bytes: [UInt8]
        var description: String { name }
    }

    static let cases: [Case] = {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.sorted().compactMap { file in
            let parts = file.replacingOccurrences(of: ".txt", with: "").components(separatedBy: "--")
            guard parts.count == 3, let data = FileManager.default.contents(atPath: directory.appendingPathComponent(file).path) else { return nil }
            return Case(name: parts[2], fromClient: parts[0] == "client", code: parts[1], bytes: [UInt8](data))
        }
    }()

    @Test func theCorpusHasEveryKindOfCase() {
        #expect(Self.cases.count >= 30)
        let codes = Set(Self.cases.map(\.code))
        #expect(codes == ["invalid_relay_frame", "invalid_relay_filter", "invalid_relay_batch", "invalid_relay_authentication"])
        #expect(Self.cases.contains { $0.name == "oversize-frame" && $0.bytes.count == 524_289 })
    }

    @Test(arguments: BadInputCorpusTests.cases)
    func eachBadInputIsRefusedWithItsCode(_ c: Case) {
        // Invalid UTF-8 never becomes a String on the wire path: the WebSocket layer refuses it
        // (close 1007); here the JSON reader must refuse the bytes themselves.
        guard let text = String(validating: c.bytes, as: UTF8.self) else {
            #expect(throws: JSONError.self) { try JSONReader().parse(c.bytes) }
            #expect(c.code == "invalid_relay_frame")
            return
        }
        do {
            if c.fromClient { _ = try parseClientRelayFrame(text) } else { _ = try parseRelayResponseFrame(text) }
            Issue.record("\(c.name) was accepted")
        } catch {
            #expect(error.code.rawValue == c.code, "\(c.name): \(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test(arguments: BadInputCorpusTests.cases.filter { !$0.fromClient })
    func aSessionReceivingABadRelayInputIsUnchanged(_ c: Case) throws {
        guard let text = String(validating: c.bytes, as: UTF8.self) else { return }
        let session = RelaySession()
        _ = try session.connect()
        try session.transportConnected(now: 1)
        try session.subscribe(id: "s", filtersJSON: [#"{"kinds":[1]}"#])
        let before = session.snapshot()
        if c.name == "event-forged" {
            // A forged event from a relay is refused as an action, never persisted.
            #expect(try session.receive(text).map(\.kind) == [.eventRejected])
        } else {
            #expect(throws: SoftchatError.self) { try session.receive(text) }
        }
        #expect(session.snapshot() == before)
        #expect(try session.drainOutbound().map(\.frame) == [#"["REQ","s",{"kinds":[1]}]"#])
    }

    // MARK: Session-level bad inputs

    func connected() throws -> RelaySession {
        let session = RelaySession()
        _ = try session.connect()
        try session.transportConnected(now: 1)
        try session.subscribe(id: "chat", filtersJSON: [#"{"kinds":[14]}"#])
        return session
    }

    @Test func eventsForUnknownSubscriptionsAreRejectedNeverPersisted() throws {
        let session = try connected()
        let identity = SoftchatIdentity.generate()
        let e = try identity.sign(UnsignedEvent(createdAt: 1, kind: 14, content: "x"))
        let actions = try session.receive(#"["EVENT","nobody",\#(e.jsonText)]"#)
        #expect(actions.map(\.kind) == [.eventRejected])
        #expect(session.snapshot().awaitingPersistence == 0)
    }

    @Test func okForUnknownIDsIsANoticeAppliedToNothing() throws {
        let session = try connected()
        for i in 0..<1000 {
            let id = String(repeating: String(i % 10), count: 64)
            let actions = try session.receive(#"["OK","\#(id)",true,""]"#)
            #expect(actions.map(\.kind) == [.notice])
        }
        #expect(session.snapshot().pendingPublishes == 0)
    }

    @Test func anAuthChallengeFloodAsksOncePerChallengeAndKeepsNothingButTheLatest() throws {
        let session = try connected()
        var requested = 0
        for _ in 0..<2000 {
            requested += try session.receive(#"["AUTH","same-challenge"]"#).filter { $0.kind == .authenticationRequested }.count
        }
        // The host is asked once per challenge; repeats are ignored, answered or not.
        #expect(requested == 1)
        let identity = SoftchatIdentity.generate()
        try session.authenticate(try identity.createNip42Authentication(challenge: "same-challenge", relayURL: "wss://r.example", createdAt: 1))
        for _ in 0..<2000 {
            #expect(try session.receive(#"["AUTH","same-challenge"]"#).isEmpty)
        }
        #expect(session.snapshot().outboundFrames <= 2)
    }

    @Test func aReconnectStormKeepsAttemptsPerMinuteBounded() throws {
        let session = RelaySession()
        var clock: Int64 = 0  // milliseconds of scheduled time
        var attemptTimes: [Int64] = []
        for _ in 0..<500 {
            _ = try session.connect()
            let actions = try session.transportLost(now: clock / 1000)
            let delay = try #require(actions.last?.delayMilliseconds)
            #expect(delay <= 300_000)
            clock += delay
            attemptTimes.append(clock)
        }
        // After the first few doublings, a failing relay sees at most a handful of attempts a minute.
        let late = attemptTimes.dropFirst(20)
        var maxPerMinute = 0
        for t in late { maxPerMinute = max(maxPerMinute, late.filter { $0 >= t && $0 < t + 60_000 }.count) }
        #expect(maxPerMinute <= 1)
        #expect(session.snapshot().reconnectAttempt == 500)
    }
}
