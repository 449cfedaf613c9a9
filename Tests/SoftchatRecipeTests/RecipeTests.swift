import SoftchatCore
import Testing

/// The product page's Swift recipes (from Schema/, generated into SchemaRecipes.swift) run
/// against a real RelaySession with recording stand-ins for the socket and the database.
@Suite struct RecipeTests {
    @Test func everyContractHasARecipeThatCompilesHere() {
        #expect(RecipeStandIns.recipes.map(\.0) == ["relay.wire", "relay.session", "relay.publish", "relay.ingestion", "relay.recovery"])
    }

    @Test func wireRecipeSendsTheChatSubscriptionAndSignsAuthentication() async throws {
        let s = try RecipeStandIns()
        try s.connectSession()
        try await s.recipeRelayWire()
        #expect(s.socket.sent.count == 1)
        #expect(s.socket.sent[0] == ##"["REQ","chat",{"kinds":[14],"#p":[""## + s.recipient.hex + ##""],"limit":100}]"##)
        #expect(s.session.snapshot().outboundFrames == 0)
    }

    @Test func sessionRecipeConnectsDrainsAndExecutesReceivedActions() async throws {
        let s = try RecipeStandIns()
        try await s.recipeRelaySession()
        #expect(s.executed.map(\.kind) == [.openTransport, .notice])
        #expect(s.executed.last?.prefix == "restricted")
    }

    @Test func publishRecipePersistsIntentThenPutsTheEventInFlight() async throws {
        let s = try RecipeStandIns()
        try s.connectSession()
        try await s.recipeRelayPublish()
        #expect(s.database.intents == [s.event.id])
        #expect(s.socket.sent == [#"["EVENT","# + s.event.jsonText + "]"])
        // In flight now: the relay's OK decides.
        let actions = try s.session.receive(#"["OK",""# + s.event.id + #"",true,""]"#)
        #expect(actions.first?.decision?.state == .accepted)
    }

    @Test func ingestionRecipeCommitsValidatesAndConfirms() async throws {
        let s = try RecipeStandIns()
        try s.connectSession()
        try s.session.subscribe(id: "chat", filtersJSON: [#"{"kinds":[14]}"#])
        var handedOut: [VerifiedEvent] = []
        for i in 0..<3 {
            let e = try s.identity.sign(UnsignedEvent(createdAt: 1_764_000_000 + Int64(i), kind: 14, content: "m\(i)"))
            let actions = try s.session.receive(#"["EVENT","chat","# + e.jsonText + "]")
            handedOut += actions.compactMap(\.event)
        }
        s.batch = IngestionBatch(events: handedOut)
        s.result = IngestionResult(accepted: handedOut.map(\.id))
        #expect(s.session.snapshot().awaitingPersistence == 3)
        try await s.recipeRelayIngestion()
        #expect(s.database.ingested == handedOut.map(\.id))
        #expect(s.session.snapshot().awaitingPersistence == 0)
    }

    @Test func ingestionRecipeRefusesAResultThatIsNotTotal() async throws {
        let s = try RecipeStandIns()
        s.batch = IngestionBatch(events: [s.event])
        s.result = IngestionResult()
        await #expect(throws: SoftchatError.self) { try await s.recipeRelayIngestion() }
    }

    @Test func recoveryRecipeLogsARedactedSnapshotAndSchedulesReconnect() async throws {
        let s = try RecipeStandIns()
        try s.connectSession()
        try await s.recipeRelayRecovery()
        #expect(s.recovered.map(\.kind) == [.scheduleReconnect])
        #expect(s.logger.lines.count == 1)
        #expect(s.logger.lines[0].contains("backingOff"))
        #expect(!s.logger.lines[0].contains(s.challenge))
    }
}
