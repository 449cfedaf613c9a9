// softchat-dev: the developer tools, kept out of the user's `softchat` so that it links no
// benchmark corpora, fault proxy or torture driver. Same conventions as `softchat`: every
// subcommand answers --help; --json prints one JSON object per line; exit 0 success, 1 input
// rejected, 2 usage, 3 runtime failure.
import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#endif

let topHelp = """
    softchat-dev — Softchat's developer tools (the user's command line is `softchat`).

    usage: softchat-dev <command> [options]   (every command answers --help)

    commands:
      bench …                 figures beside baselines measured in the same run (`bench --help`)
      faults                  seeded end-to-end runs through fault proxies; PASS/FAIL per run
      torture                 the crash harness's child: random account work, acknowledged step by step
      wrap-torture            the private-message crash harness's child: wraps ingested and unwrapped, acknowledged per batch
      old-account             an account in an older schema's layout, for the migration harness

    `bench cli`, `bench memory`, `bench managed` and `bench negentropy` run the `softchat` built
    beside this binary as a child process.
    """

let arguments = CommandLine.arguments
let rest = arguments.dropFirst(2)
let wantsJSON = arguments.contains("--json")
runCommandLine("softchat-dev", wantsJSON: wantsJSON) {
    switch arguments.dropFirst().first {
    case nil, "--help", "-h", "help":
        Output.standard.line(topHelp)
        return .success
    case "bench": return try BenchCommand.run(rest)
    case "faults": return try FaultsCommand.run(rest)
    case "torture": return try AccountTortureCommand.run(rest)
    case "wrap-torture": return try WrapTortureCommand.run(rest)
    case "old-account": return try OldAccountCommand.run(rest)
    case let other?:
        throw UsageError("unknown command \"\(other)\"\n\n\(topHelp)")
    }
}
