import Foundation
import SoftchatCodegen
import SoftchatContracts
import Testing

/// The C ABI stage: header, Swift exports and Node-API addon for the fixture schema, against
/// goldens (`SOFTCHAT_RECORD_GOLDENS=1` re-records), plus the entry-point naming rules.
@Suite struct FFIRendererTests {
    @Test func cHeaderMatchesGolden() throws {
        try expectMatchesGolden([CABIRenderer(set: Fixture.mini()).renderHeader()])
    }

    @Test func swiftExportsMatchGolden() throws {
        try expectMatchesGolden(CABIRenderer(set: Fixture.mini()).renderSwiftExports())
    }

    @Test func nodeAddonMatchesGolden() throws {
        try expectMatchesGolden([try NodeAddonRenderer(set: Fixture.mini()).render()])
    }

    /// The Kotlin cleaner may free a handle once its owner is unreachable, and a JVM may find an
    /// object unreachable while a native call on its handle still runs: every call on a handle
    /// keeps its receiver (and every handle argument) reachable until it returns.
    @Test func everyKotlinNativeCallKeepsItsHandlesReachable() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        let api = try #require(try KotlinRenderer(set: set).render().first { $0.path.hasSuffix("SoftchatApi.kt") })
        let calls = api.contents.split(separator: "\n").filter { $0.contains("SoftchatNative.call(") }
        #expect(!calls.isEmpty)
        for line in calls where line.contains("(handle") || line.contains("(owner.handle") {
            #expect(line.contains("\", this") || line.contains("\", this,"), "\(line)")
        }
        for line in calls where line.contains(".handle, ") || line.contains("?.handle") {
            // A handle argument `x.handle` is kept too.
            let names = line.matches(of: /([a-zA-Z]+)\??\.handle/).map { String($0.output.1) }.filter { $0 != "owner" }
            for name in names { #expect(line.contains(", \(name)"), "\(name) not kept: \(line)") }
        }
        let native = try #require(try KotlinRenderer(set: set).render().first { $0.path.hasSuffix("SoftchatNative.kt") })
        #expect(native.contents.contains("java.lang.ref.Reference.reachabilityFence(owner)"))
    }

    @Test func ffiRenderingIsDeterministic() throws {
        let set = try Fixture.mini()
        #expect(CABIRenderer(set: set).renderSwiftExports() == CABIRenderer(set: set).renderSwiftExports())
        #expect(try NodeAddonRenderer(set: set).render() == NodeAddonRenderer(set: set).render())
    }

    /// The repository schema's C names are its `rust` symbols with a `softchat_` prefix.
    @Test func entryPointsFollowTheRustSymbols() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        let model = FFIModel(set: set)
        let names = Set(model.entryPoints.map(\.cName))
        for c in set.contracts {
            for symbol in c.symbols[.rust] ?? [] {
                let parts = symbol.components(separatedBy: "::")
                if parts.count == 2 {
                    guard set.type(named: parts[0])?.kind == .object else { continue }
                    #expect(names.contains(FFIModel.cPrefix(parts[0]) + "_" + parts[1]), "no C entry point for \(symbol)")
                } else if set.type(named: symbol) == nil {
                    #expect(names.contains("softchat_" + symbol), "no C entry point for \(symbol)")
                }
            }
        }
        for expected in [
            "softchat_relay_session_new", "softchat_relay_session_subscribe", "softchat_relay_session_receive",
            "softchat_relay_session_free", "softchat_parse_client_relay_frame", "softchat_classify_delivery_acknowledgement",
            "softchat_validate_ingestion_result", "softchat_identity_create_nip42_authentication", "softchat_identity_free",
            "softchat_account_open", "softchat_account_incoming_ingest", "softchat_account_outgoing_enqueue_signed",
            "softchat_account_delivery_claim", "softchat_account_free",
        ] {
            #expect(names.contains(expected), "missing \(expected)")
        }
        #expect(model.role("RelayFilter") == .value)
        #expect(model.role("AccountIncoming") == .view(owner: "SoftchatAccount", property: "incoming"))
        #expect(model.role("SignedNostrEvent") == .namespace)
        #expect(model.role("SoftchatIdentity") == .handle)
    }
}
