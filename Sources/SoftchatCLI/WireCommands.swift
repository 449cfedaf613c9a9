import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

enum FrameCommand {
    static let help = """
        usage: softchat frame check --from client|relay [--json]

        Validates frames, one per line on stdin, with relay.wire's exact rules (512 KiB, 64
        filters, 1–256 batch events, every event's id and signature). Per line: {"ok":true,
        "verb":"REQ"} or {"ok":false,"error":{"code":…,"message":…}} with --json, else "ok REQ"
        or "rejected: <code>: <message>". Exit 1 if any frame was rejected.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--from"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard parsed.positional == ["check"] else { throw UsageError("frame needs check") }
        let fromClient: Bool
        switch parsed.options["--from"] {
        case "client": fromClient = true
        case "relay": fromClient = false
        default: throw UsageError("frame check needs --from client or --from relay")
        }
        let json = parsed.has("--json")
        let reader = LineReader()
        var rejected = false
        while let line = reader.next() {
            if line.isEmpty { continue }
            // Refused as the wire refuses it (String(decoding:) would silently repair it).
            guard let text = String(validating: line, as: UTF8.self) else {
                report(json: json, verb: nil, error: .invalidRelayFrame("frame is not valid UTF-8"))
                rejected = true
                continue
            }
            do throws(SoftchatError) {
                let verb = fromClient ? try parseClientRelayFrame(text).verb : try parseRelayResponseFrame(text).verb
                report(json: json, verb: verb, error: nil)
            } catch {
                rejected = true
                report(json: json, verb: nil, error: error)
            }
        }
        return rejected ? .inputRejected : .success
    }

    static func report(json: Bool, verb: String?, error: SoftchatError?) {
        if let error {
            Output.standard.line(
                json
                    ? JSONValue.object(
                        JSONObject([
                            "ok": false, "error": .object(JSONObject(["code": .string(error.code.rawValue), "message": .string(error.message)])),
                        ])
                    ).jsonText
                    : "rejected: \(error.code.rawValue): \(error.message)")
        } else if let verb {
            Output.standard.line(json ? JSONValue.object(JSONObject(["ok": true, "verb": .string(verb)])).jsonText : "ok \(verb)")
        }
    }
}

enum FilterCommand {
    static let help = """
        usage: softchat filter match FILTER_JSON

        FILTER_JSON is one filter object or an array of them (filters OR together). Reads
        events, one per line on stdin, verifies each, and prints the ids of the matching ones in
        input order. An event that fails verification is reported on stderr and never matches;
        exit 1 if any did.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: [], switches: ["--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard parsed.positional.count == 2, parsed.positional[0] == "match" else {
            throw UsageError("filter match takes one FILTER_JSON argument")
        }
        let filters: [RelayFilter]
        let value: JSONValue
        do {
            value = try JSONReader().parse(parsed.positional[1])
        } catch {
            throw SoftchatError.invalidRelayFilter("FILTER_JSON is not valid JSON: \(error)")
        }
        if case .array(let list) = value {
            try RelayWireContract.maxFilters.check(list.count, "FILTER_JSON")
            filters = try list.enumerated().map { i, v throws(SoftchatError) in try RelayFilter(json: v, index: i) }
        } else {
            filters = [try RelayFilter(json: value)]
        }
        let reader = LineReader()
        var invalid = false
        var lineNumber = 0
        while let line = reader.next() {
            lineNumber += 1
            if line.isEmpty { continue }
            do throws(SoftchatError) {
                let event = try VerifiedEvent(text: String(decoding: line, as: UTF8.self))
                if RelayFilter.anyMatches(filters, event) { Output.standard.line(event.id) }
            } catch {
                invalid = true
                Output.error.line("softchat: line \(lineNumber): \(error.code.rawValue): \(error.message)")
            }
        }
        return invalid ? .inputRejected : .success
    }
}
