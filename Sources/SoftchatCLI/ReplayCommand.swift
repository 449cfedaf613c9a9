import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

/// `softchat replay SCRIPT|-`: runs a JSON-lines script of host calls against a RelaySession
/// and prints one JSON line per call, so a recorded relay conversation replays exactly.
enum ReplayCommand {
    static let help = """
        usage: softchat replay SCRIPT|-

        Each line of SCRIPT (or stdin for -) is one host call; each prints one JSON line:
          {"call":"configure","supportsEventsBatch":false,"jitterSeed":7,"relayUrl":"wss://…",
           "maxMessageBytes":…,"acknowledgementTimeoutSeconds":…}   (first line only; any config field)
          {"call":"connect"}  {"call":"transportConnected","now":1764000000}
          {"call":"subscribe","id":"chat","filters":[{"kinds":[14]}]}  {"call":"unsubscribe","id":"chat"}
          {"call":"count","id":"c","filters":[{…}]}  {"call":"cancelCount","id":"c"}
          {"call":"publish","events":[{…}]}  {"call":"drainOutbound","max":256}
          {"call":"confirmSent","eventIds":[…],"now":…}  {"call":"receive","text":"[\\"EVENT\\",…]","now":…}
          {"call":"confirmIngested","eventId":"…"}  {"call":"authenticate","event":{…},"now":…}
          {"call":"handleTimeout","now":…}  {"call":"pollTimeout"}  {"call":"transportLost","now":…}
          {"call":"cancel"}  {"call":"close"}  {"call":"snapshot"}
        ("now" is optional where shown, except for handleTimeout.)
        Output: {"call":…,"actions":[…]}; drainOutbound {"call":…,"frames":[{"frame":…,
        "deliveryEventIds":[…]}]}; snapshot {"call":…,"snapshot":{…}}; a failed call
        {"call":…,"error":{"code":…,"message":…}} and the script goes on. Exit 0 when every line
        was a well-formed call (failed calls included), 1 when a line was not, 2 for usage.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: [], switches: ["--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard parsed.positional.count == 1 else { throw UsageError("replay takes one SCRIPT path or -") }
        let reader: LineReader
        if parsed.positional[0] == "-" {
            reader = LineReader()
        } else {
            guard let fd = openForReading(parsed.positional[0]) else {
                throw RuntimeFailure(code: "script_unreadable", message: "cannot open \(parsed.positional[0])")
            }
            reader = LineReader(fd: fd)
        }
        var session = RelaySession()
        var malformed = false
        var first = true
        while let line = reader.next() {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            let out = step(line, session: &session, first: first)
            first = false
            if out.malformed { malformed = true }
            Output.standard.line(out.json.jsonText)
        }
        return malformed ? .inputRejected : .success
    }

    struct ScriptError: Error { let message: String }

    static func step(_ line: [UInt8], session: inout RelaySession, first: Bool) -> (json: JSONValue, malformed: Bool) {
        var result = JSONObject()
        let value: JSONValue
        do {
            value = try JSONReader().parse(line)
        } catch {
            return (scriptError(nil, "line is not JSON: \(error)"), true)
        }
        guard case .object(let o) = value, case .string(let call)? = o["call"] else {
            return (scriptError(nil, "each line must be an object with a \"call\" string"), true)
        }
        result.append("call", .string(call))
        do {
            switch call {
            case "configure":
                guard first else { throw ScriptError(message: "configure must be the first line") }
                var config = RelaySessionConfig()
                if let b = o["supportsEventsBatch"]?.boolValue { config.supportsEventsBatch = b }
                if let n = o["jitterSeed"]?.int64Value { config.jitterSeed = n }
                if let n = o["reconnectBaseDelaySeconds"]?.int64Value { config.reconnectBaseDelaySeconds = n }
                if let n = o["reconnectMaxDelaySeconds"]?.int64Value { config.reconnectMaxDelaySeconds = n }
                if let n = o["reconnectResetAfterSeconds"]?.int64Value { config.reconnectResetAfterSeconds = n }
                if let n = o["sinceOverlapSeconds"]?.int64Value { config.sinceOverlapSeconds = n }
                if let b = o["correlateUnnamedAcknowledgements"]?.boolValue { config.correlateUnnamedAcknowledgements = b }
                if let u = o["relayUrl"]?.stringValue { config.relayURL = u }
                if let n = o["maxMessageBytes"]?.int64Value { config.maxMessageBytes = n }
                if let n = o["acknowledgementTimeoutSeconds"]?.int64Value { config.acknowledgementTimeoutSeconds = n }
                if let n = o["authenticationWaitSeconds"]?.int64Value { config.authenticationWaitSeconds = n }
                if let n = o["authenticationWindowSeconds"]?.int64Value { config.authenticationWindowSeconds = n }
                if let b = o["answersAuthentication"]?.boolValue { config.answersAuthentication = b }
                session = try RelaySession(config: config)
                result.append("actions", .array([]))
            case "connect": result.append("actions", actions(try session.connect()))
            case "transportConnected": result.append("actions", actions(try session.transportConnected(now: o["now"]?.int64Value)))
            case "transportLost": result.append("actions", actions(try session.transportLost(now: o["now"]?.int64Value)))
            case "cancel": result.append("actions", actions(try session.cancel()))
            case "close":
                try session.close()
                result.append("actions", .array([]))
            case "subscribe":
                try session.subscribe(id: try string(o, "id"), filtersJSON: try filters(o))
                result.append("actions", .array([]))
            case "unsubscribe":
                try session.unsubscribe(id: try string(o, "id"))
                result.append("actions", .array([]))
            case "count":
                try session.count(id: try string(o, "id"), filtersJSON: try filters(o))
                result.append("actions", .array([]))
            case "cancelCount":
                try session.cancelCount(id: try string(o, "id"))
                result.append("actions", .array([]))
            case "publish":
                guard case .array(let list)? = o["events"] else { throw ScriptError(message: "publish needs \"events\": [event, …]") }
                var events: [VerifiedEvent] = []
                for e in list { events.append(try VerifiedEvent(json: e)) }
                try session.publish(events)
                result.append("actions", .array([]))
            case "drainOutbound":
                let max = o["max"]?.int64Value.map(Int.init) ?? RelaySessionContract.defaultDrainMax.value
                result.append("frames", .array(try session.drainOutbound(max: max).map(\.jsonValue)))
            case "confirmSent":
                guard case .array(let ids)? = o["eventIds"] else { throw ScriptError(message: "confirmSent needs \"eventIds\": […]") }
                try session.confirmSent(ids.compactMap(\.stringValue), now: o["now"]?.int64Value)
                result.append("actions", .array([]))
            case "receive": result.append("actions", actions(try session.receive(try string(o, "text"), now: o["now"]?.int64Value)))
            case "confirmIngested":
                try session.confirmIngested(try string(o, "eventId"))
                result.append("actions", .array([]))
            case "authenticate":
                guard let e = o["event"] else { throw ScriptError(message: "authenticate needs \"event\"") }
                result.append("actions", actions(try session.authenticate(try VerifiedEvent(json: e), now: o["now"]?.int64Value)))
            case "handleTimeout":
                guard let now = o["now"]?.int64Value else { throw ScriptError(message: "handleTimeout needs \"now\"") }
                result.append("actions", actions(try session.handleTimeout(now: now)))
            case "pollTimeout":
                result.append("timeout", session.pollTimeout().map(JSONValue.integer) ?? .null)
            case "snapshot": result.append("snapshot", session.snapshot().jsonValue)
            default:
                return (scriptError(call, "unknown call \"\(call)\""), true)
            }
        } catch let error as SoftchatError {
            result.append("error", .object(JSONObject(["code": .string(error.code.rawValue), "message": .string(error.message)])))
        } catch let error as ScriptError {
            return (scriptError(call, error.message), true)
        } catch {
            return (scriptError(call, "\(error)"), true)
        }
        return (.object(result), false)
    }

    static func actions(_ list: [RelaySessionAction]) -> JSONValue { .array(list.map(\.jsonValue)) }

    static func string(_ o: JSONObject, _ key: String) throws -> String {
        guard case .string(let s)? = o[key] else { throw ScriptError(message: "\"\(key)\" must be a string") }
        return s
    }

    /// Filters are given as JSON values in the script and handed to the session as JSON text,
    /// exactly as a host passes `filtersJSON`.
    static func filters(_ o: JSONObject) throws -> [String] {
        guard case .array(let list)? = o["filters"] else { throw ScriptError(message: "\"filters\" must be an array") }
        return list.map(\.jsonText)
    }

    static func scriptError(_ call: String?, _ message: String) -> JSONValue {
        var o = JSONObject()
        if let call { o.append("call", .string(call)) }
        o.append("error", .object(JSONObject(["code": "invalid_replay_script", "message": .string(message)])))
        return .object(o)
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

func openForReading(_ path: String) -> Int32? {
    let fd = open(path, O_RDONLY)
    return fd >= 0 ? fd : nil
}
