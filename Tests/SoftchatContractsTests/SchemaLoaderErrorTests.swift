import SoftchatContracts
import Testing

/// Each broken schema fails with a diagnostic naming the file, the line and the problem.
@Suite struct SchemaLoaderErrorTests {
    /// Loads the fixture schema with `edit` applied to one file; returns the diagnostics.
    func diagnostics(_ file: String, _ edit: (String) -> String) throws -> [SchemaDiagnostic] {
        var files = try Fixture.miniFiles()
        let before = files[file]!
        files[file] = edit(before)
        #expect(files[file] != before, "the edit changed nothing")
        do {
            _ = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
            Issue.record("the broken schema loaded")
            return []
        } catch {
            return error.diagnostics
        }
    }

    func expectDiagnostic(
        _ diags: [SchemaDiagnostic], file: String, line: Int, contains text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let match = diags.first { $0.file == "Schema/\(file)" && $0.message.contains(text) }
        #expect(match != nil, "no diagnostic containing \"\(text)\" in \(diags.map(\.description))", sourceLocation: sourceLocation)
        if let match { #expect(match.line == line, "\(match)", sourceLocation: sourceLocation) }
    }

    @Test func unknownErrorCodeInABoundIsReportedAtItsLine() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"error\": \"invalid_echo\"", with: "\"error\": \"invalid_ech0\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 8, contains: "unknown error code \"invalid_ech0\"")
        #expect(d.first!.description.hasPrefix("Schema/demo.echo.json:8:"))
        #expect(d.first!.description.contains(": error: "))
    }

    @Test func swiftSurfaceOnAnObjectIsReported() throws {
        let d = try diagnostics("demo.echo.json") {
            $0.replacingFirst(
                "{\"name\": \"Echoer\", \"kind\": \"object\",", with: "{\"name\": \"Echoer\", \"kind\": \"object\", \"swiftSurface\": true,")
        }
        expectDiagnostic(d, file: "demo.echo.json", line: 30, contains: "type \"Echoer\" is a object and cannot have \"swiftSurface\"")
    }

    @Test func duplicateErrorCodeIsReported() throws {
        let d = try diagnostics("errors.json") { $0.replacingFirst("\"code\": \"echo_busy\"", with: "\"code\": \"invalid_echo\"") }
        expectDiagnostic(d, file: "errors.json", line: 4, contains: "duplicate error code \"invalid_echo\"")
    }

    @Test func boundWithoutUnitIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"unit\": \"bytes\", ", with: "") }
        expectDiagnostic(d, file: "demo.echo.json", line: 8, contains: "bound \"maxEchoBytes\" has no unit")
    }

    @Test func boundWithoutErrorIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"error\": \"echo_busy\", ", with: "") }
        expectDiagnostic(d, file: "demo.echo.json", line: 9, contains: "bound \"maxQueued\" has no error code")
    }

    @Test func aSecretParameterThatIsNotAStringIsReported() throws {
        let d = try diagnostics("demo.echo.json") {
            $0.replacingFirst("{\"name\": \"max\", \"type\": \"int64\", ", with: "{\"name\": \"max\", \"type\": \"int64\", \"secret\": true, ")
        }
        expectDiagnostic(d, file: "demo.echo.json", line: 34, contains: "parameter \"max\" of \"echoText\" is secret but of type int64")
    }

    @Test func unknownUnitIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"unit\": \"bytes\"", with: "\"unit\": \"kilobytes\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 8, contains: "unit \"kilobytes\"")
    }

    @Test func symbolWithoutDeclarationIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"Echoer.echoText\"]", with: "\"Echoer.shout\"]") }
        expectDiagnostic(d, file: "demo.echo.json", line: 15, contains: "swift symbol \"Echoer.shout\" has no declaration")
    }

    @Test func rustSymbolMustBeTheSnakeCaseOfTheDeclaration() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"Echoer::echo_text\"", with: "\"Echoer::echoText\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 13, contains: "rust symbol \"Echoer::echoText\"")
    }

    @Test func unknownTypeReferenceIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"returns\": \"Echo\"", with: "\"returns\": \"Ech\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 34, contains: "unknown type \"Ech\"")
    }

    @Test func throwsOfUnknownCodeIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"throws\": [\"invalid_echo\"]}", with: "\"throws\": [\"nope\"]}") }
        expectDiagnostic(d, file: "demo.echo.json", line: 34, contains: "throws unknown error code \"nope\"")
    }

    @Test func unknownKeyIsReportedAtTheKey() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"title\": \"Echo\",", with: "\"title\": \"Echo\",\n  \"colour\": \"red\",") }
        expectDiagnostic(d, file: "demo.echo.json", line: 4, contains: "unknown key \"colour\"")
    }

    @Test func restatementOfAMissingBoundIsReported() throws {
        let d = try diagnostics("demo.mirror.json") { $0.replacingFirst("demo.echo.maxEchoBytes", with: "demo.echo.maxNothing") }
        expectDiagnostic(d, file: "demo.mirror.json", line: 8, contains: "restates \"demo.echo.maxNothing\"")
    }

    @Test func invalidJSONIsReportedWithLineAndReason() throws {
        let d = try diagnostics("demo.mirror.json") { $0.replacingFirst("\"title\": \"Mirror\",", with: "\"title\": \"Mirror\",,") }
        expectDiagnostic(d, file: "demo.mirror.json", line: 3, contains: "invalid JSON: unexpected character ','")
    }

    @Test func duplicateJSONKeyIsReported() throws {
        let d = try diagnostics("demo.mirror.json") {
            $0.replacingFirst("\"output\": \"Nothing.\",", with: "\"output\": \"Nothing.\",\n  \"output\": \"Again.\",")
        }
        expectDiagnostic(d, file: "demo.mirror.json", line: 6, contains: "duplicate object key \"output\"")
    }

    @Test func contractIdMustMatchItsFileName() throws {
        let d = try diagnostics("demo.mirror.json") { $0.replacingFirst("\"id\": \"demo.mirror\"", with: "\"id\": \"demo.mirrors\"") }
        expectDiagnostic(d, file: "demo.mirror.json", line: 2, contains: "does not match its file name")
    }

    @Test func missingContractFileIsReported() throws {
        var files = try Fixture.miniFiles()
        files.removeValue(forKey: "demo.mirror.json")
        #expect(throws: SchemaLoadError.self) { try SchemaLoader().load(from: InMemorySchemaSource(files: files)) }
        do {
            _ = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
        } catch {
            #expect(error.diagnostics.contains { $0.file == "Schema/demo.mirror.json" && $0.message == "file not found" })
        }
    }

    @Test func retryRuleMustBePermanentOrRetryable() throws {
        let d = try diagnostics("errors.json") { $0.replacingFirst("\"retry\": \"retryable\"", with: "\"retry\": \"sometimes\"") }
        expectDiagnostic(d, file: "errors.json", line: 4, contains: "must be permanent or retryable")
    }

    @Test func duplicateTypeDeclarationIsReported() throws {
        let d = try diagnostics("demo.mirror.json") {
            $0.replacingFirst(
                "\"api\": {\"types\": []",
                with:
                    "\"api\": {\"types\": [{\"name\": \"Echo\", \"kind\": \"record\", \"doc\": \"x\", \"fields\": [{\"name\": \"a\", \"type\": \"string\", \"doc\": \"a\"}]}]"
            )
        }
        expectDiagnostic(d, file: "demo.mirror.json", line: 13, contains: "type \"Echo\" is already declared in contract \"demo.echo\"")
    }

    // MARK: Callbacks and concurrent objects

    @Test func aCallbackPayloadMustBeOneRecordOrUnion() throws {
        let d = try diagnostics("demo.mirror.json") {
            $0.replacingFirst(
                "\"api\": {\"types\": []",
                with: "\"api\": {\"types\": [{\"name\": \"Sink\", \"kind\": \"callback\", \"doc\": \"x\", \"payload\": \"string\"}]")
        }
        expectDiagnostic(
            d, file: "demo.mirror.json", line: 13, contains: "callback \"Sink\" has payload \"string\"; a payload is one record or union")
    }

    @Test func aCallbackParameterNeedsAMethodThatReturnsAHandle() throws {
        let d = try diagnostics("demo.mirror.json") {
            $0.replacingFirst(
                "\"api\": {\"types\": []",
                with: "\"api\": {\"types\": [{\"name\": \"Sink\", \"kind\": \"callback\", \"doc\": \"x\", \"payload\": \"Echo\"}, "
                    + "{\"name\": \"Tap\", \"kind\": \"object\", \"doc\": \"x\", \"methods\": [{\"name\": \"listen\", \"doc\": \"x\", \"params\": [{\"name\": \"sink\", \"type\": \"Sink\"}], \"returns\": null, \"throws\": []}, "
                    + "{\"name\": \"echo\", \"doc\": \"x\", \"params\": [], \"returns\": \"Sink\", \"throws\": []}]}]")
        }
        expectDiagnostic(
            d, file: "demo.mirror.json", line: 13, contains: "parameter \"sink\" of \"listen\" is a callback, but \"listen\" returns no handle")
        expectDiagnostic(d, file: "demo.mirror.json", line: 13, contains: "\"echo\" returns callback \"Sink\"; a callback can only be a parameter")
    }

    @Test func onlyAnObjectCanBeConcurrentAndOnlyACallbackHasAPayload() throws {
        let d = try diagnostics("demo.mirror.json") {
            $0.replacingFirst(
                "\"api\": {\"types\": []",
                with: "\"api\": {\"types\": [{\"name\": \"Pair\", \"kind\": \"record\", \"doc\": \"x\", \"concurrent\": true, \"payload\": \"Echo\", "
                    + "\"fields\": [{\"name\": \"a\", \"type\": \"string\", \"doc\": \"a\"}]}]")
        }
        expectDiagnostic(d, file: "demo.mirror.json", line: 13, contains: "type \"Pair\" is a record and cannot have \"concurrent\"")
        expectDiagnostic(d, file: "demo.mirror.json", line: 13, contains: "type \"Pair\" is a record and cannot have \"payload\"")
    }

    // MARK: Unions and identifiers

    @Test func unionVariantWithAnUndeclaredFieldIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"fields\": [\"text\"]}", with: "\"fields\": [\"txt\"]}") }
        expectDiagnostic(d, file: "demo.echo.json", line: 48, contains: "variant \"quiet\" of \"EchoEvent\" carries undeclared field \"txt\"")
    }

    @Test func unionFieldMustNotBeOptionalItself() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"type\": \"int\"", with: "\"type\": \"int?\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 45, contains: "field \"delay\" of union \"EchoEvent\" must not be optional")
    }

    @Test func unionFieldCarriedByNoVariantIsReported() throws {
        let d = try diagnostics("demo.echo.json") {
            $0.replacingFirst("[\"text?\", \"echoId\", \"delay\"]", with: "[\"text?\", \"echoId\"]")
        }
        expectDiagnostic(d, file: "demo.echo.json", line: 45, contains: "field \"delay\" of union \"EchoEvent\" is carried by no variant")
    }

    @Test func unionMissingAVariantForATagCaseIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("{\"name\": \"quiet\", \"fields\": [\"text\"]},", with: "") }
        expectDiagnostic(
            d, file: "demo.echo.json", line: 47, contains: "union \"EchoEvent\" has no variant for case \"quiet\" of its tag enum \"EchoKind\"")
        expectDiagnostic(d, file: "demo.echo.json", line: 49, contains: "variant \"rateLimited\" of \"EchoEvent\" is out of order")
    }

    @Test func unionVariantThatIsNotATagCaseIsReported() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("{\"name\": \"rateLimited\", \"doc\"", with: "{\"name\": \"loud\", \"doc\"") }
        expectDiagnostic(
            d, file: "demo.echo.json", line: 49, contains: "variant \"loud\" of \"EchoEvent\" is not a case of its tag enum \"EchoKind\"")
    }

    @Test func unionTagMustNameAnEnum() throws {
        let d = try diagnostics("demo.echo.json") {
            $0.replacingFirst("\"type\": \"EchoKind\", \"doc\": \"How loud.\"}", with: "\"type\": \"Echo\", \"doc\": \"How loud.\"}")
        }
        expectDiagnostic(d, file: "demo.echo.json", line: 41, contains: "the tag of union \"EchoEvent\" must name an enum, not the record \"Echo\"")
    }

    @Test func unknownTypeKindListsEveryKind() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"kind\": \"union\"", with: "\"kind\": \"variant\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 40, contains: "kinds are record, enum, union, identifier, object")
    }

    @Test func identifierEncodingMustBeKnown() throws {
        let d = try diagnostics("demo.echo.json") { $0.replacingFirst("\"encoding\": \"hex\"", with: "\"encoding\": \"base64\"") }
        expectDiagnostic(d, file: "demo.echo.json", line: 39, contains: "identifier \"EchoId\" has encoding \"base64\"; encodings are hex")
    }

    @Test func unionVariantWithoutADocTakesItsTagCasesDoc() throws {
        let set = try Fixture.mini()
        let union = try #require(set.type(named: "EchoEvent"))
        #expect(union.variants.map(\.doc) == ["Softly.", "Slowed down."])
        #expect(union.fields(of: union.variants[1]).map(\.type.description) == ["string?", "EchoId", "int"])
    }

    @Test func errorOperationIsTheContractThatRaisesIt() throws {
        let set = try Fixture.mini()
        #expect(set.operation(raising: "invalid_echo") == "demo.echo")
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let r = range(of: target) else { return self }
        return replacingCharacters(in: r, with: replacement)
    }
}
