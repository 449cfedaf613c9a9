import SoftchatCore
import SoftchatJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs one invocation of a command-line tool (`softchat`, `softchat-dev`) and exits with its
/// status, mapping what it throws the same way for both: a `UsageError` is exit 2, a
/// `SoftchatError` exit 1 (its JSON with `--json`), a `RuntimeFailure` or anything else exit 3.
/// Usage messages (this tool's own help, the user's own arguments) print as they are; every
/// other message goes to standard error with control characters escaped (`terminalSafe`): it
/// may carry relay or file text.
/// - Parameters:
///   - tool: The tool's name, which opens every message.
///   - wantsJSON: Whether errors are printed as JSON on standard output.
///   - body: The command; returns its exit status.
public func runCommandLine(_ tool: String, wantsJSON: Bool, _ body: () throws -> ExitStatus) -> Never {
    let status: ExitStatus
    do {
        status = try body()
    } catch let error as UsageError {
        Output.error.line("\(tool): \(error.message)")
        status = .usage
    } catch let error as SoftchatError {
        if wantsJSON {
            Output.standard.line(error.jsonValue.jsonText)
        } else {
            Output.error.line("\(tool): \(error.code.rawValue): \(terminalSafe(error.message))")
        }
        status = .inputRejected
    } catch let error as RuntimeFailure {
        let line = JSONValue.object(JSONObject(["error": .object(JSONObject(["code": .string(error.code), "message": .string(error.message)]))]))
            .jsonText
        if wantsJSON { Output.standard.line(line) } else { Output.error.line("\(tool): \(error.code): \(terminalSafe(error.message))") }
        status = .runtimeFailure
    } catch {
        Output.error.line("\(tool): \(terminalSafe("\(error)"))")
        status = .runtimeFailure
    }
    Output.standard.flush()
    Output.error.flush()
    PeakMemoryReport.recordIfRequested()
    exit(status.rawValue)
}
