import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON
import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat account …`: the durable account from the command line, one JSON line per result.
enum AccountCommand {
    static let help = """
        usage: softchat account SUBCOMMAND --db FILE [options]

          ingest  [--batch N] [--now T]        events (one JSON per line) on stdin, committed in
                                               batches of N (default 256); one receipt line per batch
          enqueue --relay URL [--relay URL…] --operation ID [--now T]
                                               signed events on stdin → durable publish intents
          claim   --relay URL --lease ID [--max N] [--now T]   claim pending work (payload lines)
          written --relay URL --lease ID INTENT…               mark intents socket-written
          apply   --relay URL --lease ID       relay OK frames on stdin → delivery results
          release --relay URL --lease ID       give the claim's unfinished work back
          query   --filter JSON [--filter JSON…] [--limit N] [--now T]
                                               stored events matching the filters, newest first,
                                               one JSON per line
          conversations --kind K [--tag p|h] [--limit N] [--now T]
                                               the conversation list, newest activity first
          read    --kind K --tag p|h --value V --until T   mark a conversation read up to T
          status  [--relay URL]                intents per state, events, quarantine
          check   [--now T]                    integrity check plus invariants; exit 0 only if all hold

        Times are Unix seconds (default: now). Errors print {"error":{"code":…,"message":…}}.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args,
            valued: [
                "--db", "--batch", "--now", "--relay", "--operation", "--lease", "--max", "--filter", "--limit", "--kind", "--tag", "--value",
                "--until",
            ],
            switches: ["--json", "--help", "-h"], repeatable: ["--relay", "--filter"])
        if parsed.has("--help") || parsed.has("-h") || parsed.positional.isEmpty {
            Output.standard.line(help)
            return parsed.positional.isEmpty && !(parsed.has("--help") || parsed.has("-h")) ? .usage : .success
        }
        guard let path = parsed.options["--db"] else { throw UsageError("account needs --db FILE") }
        let now = try parsed.int("--now") ?? Int64(time(nil))
        let account = try SoftchatAccount.open(path: path)
        defer { account.close() }
        switch parsed.positional[0] {
        case "ingest": return try ingest(account, batch: Int(try parsed.int("--batch") ?? 256), now: now)
        case "enqueue":
            guard let operation = parsed.options["--operation"] else { throw UsageError("enqueue needs --operation ID") }
            let relays = parsed.repeated["--relay"] ?? []
            guard !relays.isEmpty else { throw UsageError("enqueue needs at least one --relay URL") }
            var events: [VerifiedEvent] = []
            let reader = LineReader()
            while let line = reader.next() {
                if line.isEmpty { continue }
                events.append(try VerifiedEvent(text: String(decoding: line, as: UTF8.self)))
            }
            let ids = try account.outgoing.enqueueSigned(operationID: operation, events: events, relayURLs: relays, now: now)
            Output.standard.line(
                JSONValue.object(JSONObject(["operationId": .string(operation), "intentIds": .array(ids.map(JSONValue.string))])).jsonText)
            return .success
        case "claim":
            let (relay, lease) = try claimArguments(parsed)
            guard let result = try account.delivery.claim(leaseID: lease, relayURL: relay, now: now, max: Int(try parsed.int("--max") ?? 256)) else {
                Output.standard.line(#"{"claim":null}"#)
                return .success
            }
            Output.standard.line(
                JSONValue.object(
                    JSONObject([
                        "claim": .object(
                            JSONObject([
                                "leaseId": .string(result.claim.leaseID), "relayUrl": .string(result.claim.relayURL),
                                "expiresAt": .integer(result.claim.expiresAt),
                            ])), "payloads": .integer(Int64(result.payloads.count)),
                    ])
                ).jsonText)
            for p in result.payloads {
                Output.standard.line(
                    JSONValue.object(JSONObject(["intentId": .string(p.intentID), "eventId": .string(p.eventID), "eventJson": .string(p.eventJSON)]))
                        .jsonText)
            }
            return .success
        case "written":
            let (relay, lease) = try claimArguments(parsed)
            let intents = Array(parsed.positional.dropFirst())
            try account.delivery.markSocketWritten(DeliveryClaim(leaseID: lease, relayURL: relay), intentIDs: intents)
            Output.standard.line(JSONValue.object(JSONObject(["written": .integer(Int64(intents.count))])).jsonText)
            return .success
        case "apply":
            let (relay, lease) = try claimArguments(parsed)
            let claim = DeliveryClaim(leaseID: lease, relayURL: relay)
            var intentByEvent: [String: String] = [:]
            for held in try account.delivery.heldIntents(claim) { intentByEvent[held.eventID] = held.intentID }
            var results: [DeliveryResult] = []
            let reader = LineReader()
            while let line = reader.next() {
                if line.isEmpty { continue }
                let decision = try classifyDeliveryAcknowledgement(try parseRelayResponseFrame(String(decoding: line, as: UTF8.self)))
                guard let intent = intentByEvent[decision.eventID] else {
                    throw SoftchatError.invalidDeliveryState(
                        "OK for event \(decision.eventID), which claim \(lease) does not hold",
                        operation: .relayPublish)
                }
                results.append(DeliveryResult(intentID: intent, decision: decision))
            }
            try account.delivery.applyResults(claim, results: results)
            for r in results {
                Output.standard.line(JSONValue.object(JSONObject(["intentId": .string(r.intentID), "decision": r.decision.jsonValue])).jsonText)
            }
            return .success
        case "release":
            let (relay, lease) = try claimArguments(parsed)
            try account.delivery.release(DeliveryClaim(leaseID: lease, relayURL: relay))
            Output.standard.line(#"{"released":true}"#)
            return .success
        case "query":
            let filters = try (parsed.repeated["--filter"] ?? []).map { try RelayFilter.fromJSON($0) }
            guard !filters.isEmpty else { throw UsageError("query needs --filter JSON") }
            for event in try account.events(matching: filters, limit: try parsed.int("--limit").map { Int($0) }, now: now) {
                Output.standard.line(event.jsonText)
            }
            return .success
        case "conversations":
            guard let kind = try parsed.int("--kind") else { throw UsageError("conversations needs --kind K") }
            let list = try account.conversations(
                kind: Int(kind), tag: parsed.options["--tag"] ?? "p", limit: Int(try parsed.int("--limit") ?? 50), now: now)
            for c in list {
                var line = JSONObject([
                    "tag": .string(c.tag), "value": .string(c.value), "messages": .integer(Int64(c.messages)), "unread": .integer(Int64(c.unread)),
                ])
                if let readUntil = c.readUntil { line.append("readUntil", .integer(readUntil)) }
                if let latest = c.latest { line.append("latest", .string(latest.id)) }
                Output.standard.line(JSONValue.object(line).jsonText)
            }
            return .success
        case "read":
            guard let kind = try parsed.int("--kind"), let tag = parsed.options["--tag"], let value = parsed.options["--value"],
                let until = try parsed.int("--until")
            else { throw UsageError("read needs --kind K --tag p|h --value V --until T") }
            try account.markRead(kind: Int(kind), tag: tag, value: value, until: until, now: now)
            Output.standard.line(#"{"read":true}"#)
            return .success
        case "status":
            let counts = try account.delivery.stateCounts(relayURL: parsed.options["--relay"])
            let report = try account.check(now: now)
            var states = JSONObject()
            for s in DeliveryState.allCases { states.append(s.rawValue, .integer(Int64(counts[s] ?? 0))) }
            Output.standard.line(
                JSONValue.object(
                    JSONObject([
                        "events": .integer(Int64(report.events)), "quarantined": .integer(Int64(report.quarantined)),
                        "receipts": .integer(Int64(report.receipts)), "intents": .object(states), "liveLeases": .integer(Int64(report.liveLeases)),
                    ])
                ).jsonText)
            return .success
        case "check":
            let report = try account.check(now: now)
            Output.standard.line(
                JSONValue.object(
                    JSONObject([
                        "ok": .bool(report.ok), "problems": .array(report.problems.map(JSONValue.string)),
                        "events": .integer(Int64(report.events)), "schemaVersion": .integer(Int64(try account.schemaVersion())),
                    ])
                ).jsonText)
            return report.ok ? .success : .inputRejected
        default:
            throw UsageError("unknown account subcommand \"\(parsed.positional[0])\"")
        }
    }

    static func claimArguments(_ parsed: Arguments) throws -> (String, String) {
        guard let relay = parsed.options["--relay"] else { throw UsageError("needs --relay URL") }
        guard let lease = parsed.options["--lease"] else { throw UsageError("needs --lease ID") }
        return (relay, lease)
    }

    static func ingest(_ account: SoftchatAccount, batch: Int, now: Int64) throws -> ExitStatus {
        guard batch >= 1 && batch <= RelayIngestionContract.maxAwaitingPersistence.value else {
            throw UsageError("--batch must be 1 to \(RelayIngestionContract.maxAwaitingPersistence.value)")
        }
        let reader = LineReader()
        var lines: [String] = []
        var quarantined = false
        func flush() throws {
            guard !lines.isEmpty else { return }
            let outcome = try account.incoming.ingest(lines: lines, receivedAt: now)
            let r = outcome.receipt
            if !r.quarantinedEventIDs.isEmpty { quarantined = true }
            Output.standard.line(
                JSONValue.object(
                    JSONObject([
                        "inserted": .array(r.insertedEventIDs.map(JSONValue.string)),
                        "duplicates": .array(r.duplicateEventIDs.map(JSONValue.string)),
                        "quarantined": .array(
                            outcome.quarantined.map { .object(JSONObject(["eventId": .string($0.eventID), "reason": .string($0.reason)])) }),
                    ])
                ).jsonText)
            Output.standard.flush()
            lines.removeAll(keepingCapacity: true)
        }
        while let line = reader.next() {
            if line.isEmpty { continue }
            lines.append(String(decoding: line, as: UTF8.self))
            if lines.count == batch { try flush() }
        }
        try flush()
        return quarantined ? .inputRejected : .success
    }
}
