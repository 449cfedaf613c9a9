import Foundation
import SoftchatContracts
import SoftchatCore
import Testing

/// Every bound and error in Schema/ is reachable from the generated Swift surface, with the
/// same values, and the bound checks raise the schema's error for the schema's operation.
@Suite struct ContractSurfaceTests {
    let schema: ContractSet

    init() throws {
        schema = try SchemaLoader().load(from: DirectorySchemaSource(directory: Paths.repository.appendingPathComponent("Schema").path))
    }

    @Test func everyContractIsInTheCatalogInSchemaOrder() throws {
        #expect(!schema.contracts.isEmpty)
        #expect(SoftchatContractCatalog.all.map(\.operation.rawValue) == schema.contracts.map(\.id))
        #expect(SoftchatOperation.allCases.map(\.rawValue) == schema.contracts.map(\.id))
        for contract in schema.contracts {
            let info = try #require(SoftchatContractCatalog.contract(contract.id), "\(contract.id) missing from the catalog")
            #expect(info.operation.rawValue == contract.id)
            #expect(info.title == contract.title && info.summary == contract.summary)
            #expect(info.output == contract.output && info.trust == contract.trust)
        }
        #expect(SoftchatContractCatalog.contract("relay.nope") == nil)
        #expect(SoftchatContractCatalog.schemaVersion == schema.schemaVersion)
    }

    @Test func everyBoundHasTheSchemasNameValueMinimumUnitAndError() throws {
        var checked = 0
        for contract in schema.contracts {
            let info = try #require(SoftchatContractCatalog.contract(contract.id))
            #expect(info.bounds.map(\.name) == contract.bounds.map(\.name), "\(contract.id): bound names or order")
            for bound in contract.bounds {
                let swift = try #require(info.bounds.first { $0.name == bound.name }, "\(contract.id).\(bound.name) missing")
                #expect(swift.value == Int(bound.value), "\(contract.id).\(bound.name) value")
                #expect(swift.minimum == bound.min.map { Int($0) }, "\(contract.id).\(bound.name) minimum")
                #expect(swift.unit == bound.unit.rawValue, "\(contract.id).\(bound.name) unit")
                #expect(swift.error.rawValue == bound.error, "\(contract.id).\(bound.name) error")
                #expect(swift.restates == bound.restates, "\(contract.id).\(bound.name) restates")
                #expect(swift.operation == info.operation)
                #expect(swift.doc == bound.doc)
                checked += 1
            }
        }
        #expect(checked == schema.contracts.reduce(0) { $0 + $1.bounds.count })
        #expect(checked >= 17)
    }

    @Test func everyBoundCheckRaisesTheBoundsErrorForItsOperation() throws {
        for contract in schema.contracts {
            let info = try #require(SoftchatContractCatalog.contract(contract.id))
            for bound in info.bounds {
                let where_ = "\(contract.id).\(bound.name)"
                #expect(throws: Never.self, "\(where_) at its value") { try bound.check(bound.value, "input") }
                #expect(bound.allows(bound.value) && !bound.allows(bound.value + 1), "\(where_)")
                let over = #expect(throws: SoftchatError.self, "\(where_) over its value") { try bound.check(bound.value + 1, "the input") }
                #expect(over?.code == bound.error, "\(where_)")
                #expect(over?.operation == info.operation, "\(where_)")
                #expect(over?.message == "the input has \(bound.value + 1) \(bound.unit), over the limit of \(bound.value)")
                if let minimum = bound.minimum {
                    #expect(throws: Never.self, "\(where_) at its minimum") { try bound.check(minimum, "input") }
                    let under = #expect(throws: SoftchatError.self, "\(where_) under its minimum") { try bound.check(minimum - 1, "input") }
                    #expect(under?.code == bound.error && under?.operation == info.operation, "\(where_)")
                    #expect(under?.message.contains("under the minimum of \(minimum)") == true)
                    #expect(!bound.allows(minimum - 1) && bound.allows(minimum))
                } else {
                    #expect(throws: Never.self, "\(where_) has no minimum") { try bound.check(0, "input") }
                }
            }
        }
    }

    @Test func restatedBoundsAgreeWithTheirOriginals() throws {
        var restated = 0
        for info in SoftchatContractCatalog.all {
            for bound in info.bounds {
                guard let restates = bound.restates else { continue }
                let dot = try #require(restates.lastIndex(of: "."))
                let origin = try #require(SoftchatContractCatalog.contract(String(restates[..<dot])), "\(restates)")
                let original = try #require(origin.bounds.first { $0.name == restates[restates.index(after: dot)...] })
                #expect(original.value == bound.value && original.minimum == bound.minimum, "\(restates)")
                #expect(original.unit == bound.unit && original.error == bound.error, "\(restates)")
                #expect(original.restates == nil && original.operation != bound.operation)
                restated += 1
            }
        }
        #expect(restated > 0)
    }

    @Test func everySchemaErrorHasACodeWithTheSameRawValueAndRetryRule() throws {
        for spec in schema.errors {
            let code = SoftchatErrorCode(rawValue: spec.code)
            #expect(code.isKnown, "no SoftchatErrorCode for \(spec.code)")
            #expect(SoftchatErrorCode.allCases.contains(code), "\(spec.code) missing from allCases")
            #expect(code.retryRule.rawValue == spec.retry.rawValue, "\(spec.code) retry")
            #expect(code.meaning == spec.meaning, "\(spec.code) meaning")
            #expect(code.handling == spec.handling, "\(spec.code) handling")
            #expect(SoftchatError(code, "m", operation: .relayWire).retryRule == code.retryRule)
        }
    }

    /// The code type is extensible: a code this build does not know is representable, matches
    /// no known static member, and is treated as permanent.
    @Test func unknownErrorCodesAreRepresentableAndPermanent() {
        let future = SoftchatErrorCode(rawValue: "relay_from_the_future")
        #expect(!future.isKnown)
        #expect(future.retryRule == .permanent)
        #expect(future != .invalidRelayFrame)
        #expect(SoftchatErrorCode(rawValue: "invalid_relay_frame") == .invalidRelayFrame)
        let handled: String
        switch SoftchatErrorCode.invalidRelaySession {
        case .invalidRelayFrame: handled = "frame"
        case .invalidRelaySession: handled = "session"
        default: handled = "other"
        }
        #expect(handled == "session")
    }

    @Test func catalogHasNoErrorCodesBeyondTheSchema() {
        #expect(SoftchatErrorCode.allCases.map(\.rawValue) == schema.errors.map(\.code))
        #expect(SoftchatRetryRule.allCases.map(\.rawValue) == RetryRule.allCases.map(\.rawValue))
    }

    @Test func everyContractsErrorListMatches() throws {
        for contract in schema.contracts {
            let info = try #require(SoftchatContractCatalog.contract(contract.id))
            #expect(info.errors.map(\.rawValue) == contract.errors, "\(contract.id)")
        }
    }

    @Test func errorFactoriesDefaultToTheirContractsOperation() {
        #expect(SoftchatError.invalidRelayFrame("m") == SoftchatError(.invalidRelayFrame, "m", operation: .relayWire))
        #expect(SoftchatError.invalidRelayAuthentication("m").operation == .relayWire)
        #expect(SoftchatError.invalidRelaySession("m").operation == .relaySession)
        #expect(SoftchatError.invalidDeliveryState("m").operation == .relayPublish)
        #expect(SoftchatError.invalidPersistenceResult("m").operation == .relayIngestion)
        #expect(SoftchatError.relaySessionQueueFull("m").retryRule == .retryable)
        #expect(SoftchatError.invalidRelayFrame("bad").description == "invalid_relay_frame: bad")
    }

    @Test func checksumIs16HexCharactersAndMatchesTheGeneratedFacades() throws {
        let checksum = SoftchatContractCatalog.checksum
        #expect(checksum.count == 16)
        #expect(checksum.allSatisfy { "0123456789abcdef".contains($0) })
        // The facades generated from the same schema carry the same checksum.
        let kotlin = try String(
            contentsOf: Paths.repository.appendingPathComponent("generated/kotlin/org/softchat/SoftchatContracts.kt"),
            encoding: .utf8)
        #expect(kotlin.prefix(200).contains("(checksum \(checksum))"))
    }
}
