import SoftchatCore
import Synchronization

/// The free names the product page's Swift recipes use — `session`, `socket`, `database`,
/// `identity`, `execute`, … — as recording stand-ins. The generated `SchemaRecipes.swift`
/// adds one method per recipe to this type, so each recipe compiles verbatim and runs against
/// a real `RelaySession`.
final class RecipeStandIns: @unchecked Sendable {
    /// A WebSocket stand-in that records what was written.
    final class Socket: @unchecked Sendable {
        enum Message {
            case string(String)
            case data([UInt8])
        }
        private(set) var sent: [String] = []
        func send(_ message: Message) async throws {
            if case .string(let text) = message { sent.append(text) }
        }
    }

    /// A database stand-in: `write` runs the body as one "transaction" and records it.
    final class Database: @unchecked Sendable {
        final class Transaction {
            var ingested: [String] = []
            var intents: [String] = []
            func ingest(_ event: VerifiedEvent) throws { ingested.append(event.id) }
            func persistPublishIntent(_ event: VerifiedEvent) throws { intents.append(event.id) }
        }
        private(set) var committed: [Transaction] = []
        func write(_ body: (Transaction) throws -> Void) throws {
            let tx = Transaction()
            try body(tx)
            committed.append(tx)
        }
        var ingested: [String] { committed.flatMap(\.ingested) }
        var intents: [String] { committed.flatMap(\.intents) }
    }

    final class Logger: @unchecked Sendable {
        private(set) var lines: [String] = []
        func debug(_ line: String) { lines.append(line) }
    }

    struct PublicKey { let hex: String }

    var session = RelaySession()
    let socket = Socket()
    let database = Database()
    let logger = Logger()
    let identity: SoftchatIdentity
    let recipient: PublicKey
    var challenge = "challenge-0001"
    var createdAt: Int64 = 1_764_000_000
    var frame = #"["NOTICE","restricted: recipes run"]"#
    var event: VerifiedEvent
    var batch = IngestionBatch(events: [])
    var result = IngestionResult()
    private(set) var executed: [RelaySessionAction] = []
    private(set) var recovered: [RelaySessionAction] = []

    init() throws {
        identity = SoftchatIdentity.generate()
        recipient = PublicKey(hex: SoftchatIdentity.generate().publicKeyHex)
        event = try identity.sign(UnsignedEvent(createdAt: 1_764_000_000, kind: 14, tags: [["p", recipient.hex]], content: "hi"))
    }

    func execute(_ actions: [RelaySessionAction]) { executed += actions }
    func execute(_ action: RelaySessionAction) { executed.append(action) }
    func executeRecovery(_ action: RelaySessionAction) { recovered.append(action) }

    /// Brings `session` to a connected state, as a host would before most recipes.
    func connectSession() throws {
        _ = try session.connect()
        try session.transportConnected(now: createdAt)
    }
}
