import Foundation
import SoftchatCodegen
import SoftchatContracts
import Testing

/// Paths of the fixture schema and goldens beside this file.
enum Fixture {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let miniSchema = directory.appendingPathComponent("Fixtures/MiniSchema").path
    static let goldens = directory.appendingPathComponent("Golden")
    static let repositorySchema = directory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Schema").path

    static func mini() throws -> ContractSet {
        try SchemaLoader().load(from: DirectorySchemaSource(directory: miniSchema))
    }

    /// The fixture schema's files, for tests that break one of them.
    static func miniFiles() throws -> [String: String] {
        var files: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: miniSchema) where name.hasSuffix(".json") {
            files[name] = try String(contentsOfFile: miniSchema + "/" + name, encoding: .utf8)
        }
        return files
    }
}

/// Compares rendered files with the goldens in Golden/; `SOFTCHAT_RECORD_GOLDENS=1 swift test`
/// rewrites them instead (then review the diff).
func expectMatchesGolden(_ files: [GeneratedFile], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let record = ProcessInfo.processInfo.environment["SOFTCHAT_RECORD_GOLDENS"] == "1"
    for file in files {
        let golden = Fixture.goldens.appendingPathComponent(file.path.replacingOccurrences(of: "/", with: "__"))
        if record {
            try file.contents.write(to: golden, atomically: true, encoding: .utf8)
            continue
        }
        let expected = try? String(contentsOf: golden, encoding: .utf8)
        #expect(
            expected != nil, "missing golden \(golden.lastPathComponent); record with SOFTCHAT_RECORD_GOLDENS=1",
            sourceLocation: sourceLocation)
        if let expected, expected != file.contents {
            let a = expected.split(separator: "\n", omittingEmptySubsequences: false)
            let b = file.contents.split(separator: "\n", omittingEmptySubsequences: false)
            let line = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
            Issue.record("\(file.path) differs from its golden at line \(line + 1)", sourceLocation: sourceLocation)
        }
    }
}

@Suite struct RendererGoldenTests {
    @Test func swiftSurfaceMatchesGolden() throws {
        try expectMatchesGolden([SwiftRenderer(set: Fixture.mini()).render()])
    }

    @Test func kotlinFacadeMatchesGolden() throws {
        try expectMatchesGolden(try KotlinRenderer(set: Fixture.mini()).render())
    }

    @Test func typeScriptFacadeMatchesGolden() throws {
        try expectMatchesGolden(try TypeScriptRenderer(set: Fixture.mini()).render())
    }

    @Test func rustCratesMatchGolden() throws {
        try expectMatchesGolden(try RustRenderer(set: Fixture.mini()).render())
    }

    @Test func markdownDocsMatchGolden() throws {
        try expectMatchesGolden(MarkdownRenderer(set: Fixture.mini()).render())
    }

    @Test func renderingIsDeterministic() throws {
        let a = try BindingsRenderer(set: try Fixture.mini()).render()
        let b = try BindingsRenderer(set: try Fixture.mini()).render()
        #expect(a == b)
        #expect(SwiftRenderer(set: try Fixture.mini()).render() == SwiftRenderer(set: try Fixture.mini()).render())
    }

    @Test func restatedBoundTakesTheOriginalsValueUnitAndError() throws {
        let set = try Fixture.mini()
        let mirror = try #require(set.contract("demo.mirror")?.bounds.first)
        #expect(mirror.value == 1024)
        #expect(mirror.unit == .bytes)
        #expect(mirror.error == "invalid_echo")
        #expect(mirror.restates == "demo.echo.maxEchoBytes")
        #expect(set.contract("demo.mirror")?.rules.retry == "Never retry mirrors.")
        #expect(set.contract("demo.mirror")?.rules.ownership == "The core owns echoes.")
    }

    @Test func editingABoundChangesEveryRenderedTarget() throws {
        var files = try Fixture.miniFiles()
        let original = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
        files["demo.echo.json"] = files["demo.echo.json"]!.replacingOccurrences(of: "\"value\": 1024", with: "\"value\": 3")
        let edited = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
        let before = [SwiftRenderer(set: original).render()] + (try BindingsRenderer(set: original).render())
        let after = [SwiftRenderer(set: edited).render()] + (try BindingsRenderer(set: edited).render())
        let changed = Set(zip(before, after).filter { $0.0 != $0.1 }.map(\.0.path))
        // Every target carrying bounds changes; the restating contract's page changes too.
        for path in [
            "SoftchatContractSurface.swift", "generated/kotlin/org/softchat/SoftchatContracts.kt",
            "generated/typescript/contracts.ts", "docs/reference/demo.echo.md", "docs/reference/demo.mirror.md",
            "docs/reference/index.md",
        ] {
            #expect(changed.contains(path), "\(path) did not change")
        }
        #expect(after[0].contents.contains("value: 3,"))
        #expect(contractChecksum(original) != contractChecksum(edited))
    }

    @Test func namingSpellsEachLanguagesConventions() {
        #expect(Naming.swift("deliveryEventIds") == "deliveryEventIDs")
        #expect(Naming.swift("filtersJson") == "filtersJSON")
        #expect(Naming.swift("relayUrl") == "relayURL")
        #expect(Naming.swift("id") == "id")
        #expect(Naming.snake("createNip42Authentication") == "create_nip42_authentication")
        #expect(Naming.camelFromSnake("parse_client_relay_frame") == "parseClientRelayFrame")
        #expect(Naming.screamingSnake("persistEvent") == "PERSIST_EVENT")
        #expect(Naming.upperCamel(contractID: "relay.wire") == "RelayWire")
    }
}

@Suite struct RepositorySchemaTests {
    @Test func repositorySchemaLoadsWithoutDiagnostics() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        #expect(set.contracts.map(\.id) == ["relay.wire", "relay.session", "relay.publish", "relay.ingestion", "relay.recovery"])
        #expect(set.errors.count == 14)
    }

    @Test func pageBoundsHaveThePagesValues() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        func value(_ contract: String, _ name: String) -> Int64? { set.contract(contract)?.bounds.first { $0.name == name }?.value }
        #expect(value("relay.wire", "maxFrameBytes") == 524_288)
        #expect(value("relay.wire", "maxFilters") == 64)
        #expect(value("relay.wire", "maxBatchEvents") == 256)
        #expect(value("relay.session", "maxSubscriptions") == 128)
        #expect(value("relay.session", "maxOutboundFrames") == 1024)
        #expect(value("relay.publish", "maxPublishBatchEvents") == 256)
        #expect(value("relay.publish", "maxPendingPublishes") == 1024)
        #expect(value("relay.ingestion", "maxAwaitingPersistence") == 1024)
        #expect(value("relay.recovery", "maxSubscriptions") == 128)
        #expect(value("relay.recovery", "maxAwaitingPersistence") == 1024)
    }

    @Test func everyPageSymbolResolvesToADeclaration() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        let resolver = SymbolResolver(set: set)
        var count = 0
        for contract in set.contracts {
            for language in Language.allCases {
                for symbol in contract.symbols[language] ?? [] {
                    #expect(resolver.resolve(symbol, language: language) != nil, "\(symbol) (\(language))")
                    count += 1
                }
            }
        }
        #expect(count > 40)
    }
}
