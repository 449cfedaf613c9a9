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

    `bench cli`, `bench memory`, `bench managed` and `bench negentropy` run the `softchat` built
    beside this binary as a child process.
    """

let arguments = CommandLine.arguments
let rest = arguments.dropFirst(2)
let wantsJSON = arguments.contains("--json")
var status: ExitStatus
do {
    switch arguments.dropFirst().first {
    case nil, "--help", "-h", "help":
        Output.standard.line(topHelp)
        status = .success
    case "bench": status = try BenchCommand.run(rest)
    case "faults": status = try FaultsCommand.run(rest)
    case "torture": status = try AccountTortureCommand.run(rest)
    case let other?:
        throw UsageError("unknown command \"\(other)\"\n\n\(topHelp)")
    }
} catch let error as UsageError {
    Output.error.line("softchat-dev: \(error.message)")
    status = .usage
} catch let error as SoftchatError {
    if wantsJSON {
        Output.standard.line(error.jsonValue.jsonText)
    } else {
        Output.error.line("softchat-dev: \(error.code.rawValue): \(error.message)")
    }
    status = .inputRejected
} catch {
    Output.error.line("softchat-dev: \(error)")
    status = .runtimeFailure
}
Output.standard.flush()
Output.error.flush()
exit(status.rawValue)
