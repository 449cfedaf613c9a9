// softchat: the thin command line over SoftchatCore. Every subcommand answers --help;
// --json prints one JSON object per line; errors print {"error":{"code":…,"message":…}}.
// Exit: 0 success, 1 input rejected, 2 usage, 3 runtime failure.
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#endif

let topHelp = """
    softchat — relay validation, a sans-IO relay session and durable persistence for Nostr chat.

    usage: softchat <command> [options]   (every command answers --help)
           softchat --version

    Options take their value as the next argument or after "=" (--db me.db, --db=me.db).

    commands:
      demo                    the main job: two accounts chat through the embedded loopback relay
      contract list|show ID   the operation contracts this binary was built with
      keygen                  create an identity; the secret goes to a 0600 file
      event sign|verify       sign unsigned events / verify events, one JSON object per line
      frame check             validate client or relay frames, one per line
      filter match FILTER     print the ids of events (one per line) that match a filter
      replay SCRIPT|-         run a JSON-lines script of RelaySession calls, one JSON line per call
      account …               the durable SQLite account: ingest, enqueue, claim, apply, check
      publish                 publish signed events through the durable account to a relay
      sync                    sync events matching a filter from relays into the account
      dm send|list            NIP-17 private messages: gift-wrapped to inbox relays, unwrapped once
      relay                   run embedded loopback relays in this process (the demo's relay, trying by hand)

    The developer tools (benchmarks, fault runs, the crash harness's child) are `softchat-dev`.
    """

/// The package's version (the schema's major version, as the TypeScript package.json gives it)
/// and the contracts this binary was built from.
let versionLine = "softchat \(SoftchatContractCatalog.schemaVersion).0.0 (contracts \(SoftchatContractCatalog.checksum))"

// No core dumps: a dump would hold whatever secret key or decrypted text was in memory.
var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
_ = setrlimit(Int32(RLIMIT_CORE.rawValue), &noCore)

let arguments = CommandLine.arguments
let rest = arguments.dropFirst(2)
let wantsJSON = arguments.contains("--json")
runCommandLine("softchat", wantsJSON: wantsJSON) {
    switch arguments.dropFirst().first {
    case nil, "--help", "-h", "help":
        Output.standard.line(topHelp)
        return .success
    case "--version", "version":
        Output.standard.line(versionLine)
        return .success
    case "demo": return try DemoCommand.run(rest)
    case "contract": return try ContractCommand.run(rest)
    case "keygen": return try KeygenCommand.run(rest)
    case "event": return try EventCommand.run(rest)
    case "frame": return try FrameCommand.run(rest)
    case "filter": return try FilterCommand.run(rest)
    case "replay": return try ReplayCommand.run(rest)
    case "account": return try AccountCommand.run(rest)
    case "publish": return try PublishCommand.run(rest)
    case "sync": return try SyncCommand.run(rest)
    case "dm": return try DmCommand.run(rest)
    case "relay": return try RelayCommand.run(rest)
    case let other?:
        throw UsageError("unknown command \"\(other)\"\n\n\(topHelp)")
    }
}
