import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

enum ContractCommand {
    static let help = """
        usage: softchat contract list [--json]
               softchat contract show ID [--json]

        Prints the operation contracts as this binary was built with them (from Schema/):
        bounds with their units and errors, stable errors with retry rules, the shared rules
        and the exact public symbols per language.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: [], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        let json = parsed.has("--json")
        switch parsed.positional.first {
        case "list":
            guard parsed.positional.count == 1 else { throw UsageError("contract list takes no arguments") }
            for c in SoftchatContractCatalog.all {
                if json {
                    Output.standard.line(
                        JSONValue.object(
                            JSONObject([
                                "id": .string(c.operation.rawValue), "title": .string(c.title), "summary": .string(c.summary),
                            ])
                        ).jsonText)
                } else {
                    Output.standard.line("\(c.operation.rawValue.padding(16))\(c.summary)")
                }
            }
            return .success
        case "show":
            guard parsed.positional.count == 2 else { throw UsageError("contract show takes one contract id") }
            let id = parsed.positional[1]
            guard let c = SoftchatContractCatalog.contract(id) else {
                let known = SoftchatContractCatalog.all.map(\.operation.rawValue).joined(separator: ", ")
                throw UsageError("unknown contract \"\(id)\" (known: \(known))")
            }
            if json {
                Output.standard.line(c.jsonValue.jsonText)
            } else {
                printHuman(c)
            }
            return .success
        default:
            throw UsageError("contract needs list or show")
        }
    }

    static func printHuman(_ c: OperationContractInfo) {
        let out = Output.standard
        out.line("\(c.operation.rawValue): \(c.title)")
        out.line("  \(c.summary)")
        out.line("output: \(c.output)")
        out.line("trust:  \(c.trust)")
        out.line("bounds:")
        for b in c.bounds {
            let range = b.minimum.map { "\($0)–\(b.value)" } ?? "≤ \(b.value)"
            out.line("  \(b.name.padding(28))\(range) \(b.unit) → \(b.error.rawValue)")
        }
        out.line("errors:")
        for e in c.errors { out.line("  \(e.rawValue.padding(30))\(e.retryRule.rawValue)") }
        out.line("rules:")
        for r in c.rules { out.line("  \(r.name): \(r.text)") }
        out.line("symbols:")
        for s in c.symbols { out.line("  \(s.language.padding(11))\(s.symbols.joined(separator: ", "))") }
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
