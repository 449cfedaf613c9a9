import SoftchatCommandLine
import SoftchatCore
import SoftchatJSON

enum KeygenCommand {
    static let help = """
        usage: softchat keygen [--out FILE] [--json]

        Creates a new identity from the operating system's CSPRNG and writes its secret key
        (64 hex characters) to FILE (default: softchat.key), created with mode 0600 and never
        overwritten. Prints the public key; the secret is never printed.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--out"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard parsed.positional.isEmpty else { throw UsageError("keygen takes no positional arguments") }
        let path = parsed.options["--out"] ?? "softchat.key"
        let identity = SoftchatIdentity.generate()
        do {
            try identity.writeSecretKeyFile(path: path)
        } catch {
            throw RuntimeFailure(code: "key_file", message: error.description)
        }
        if parsed.has("--json") {
            Output.standard.line(JSONValue.object(JSONObject(["publicKey": .string(identity.publicKeyHex), "keyFile": .string(path)])).jsonText)
        } else {
            Output.standard.line(identity.publicKeyHex)
        }
        return .success
    }
}

enum EventCommand {
    static let help = """
        usage: softchat event sign --key FILE
               softchat event verify [--json]

        sign    reads unsigned events, one JSON object per line ({"kind","created_at","tags",
                "content"}, "pubkey" optional and checked), and prints each signed event on one
                line. A line that cannot be signed prints an error line; exit 1 if any failed.
        verify  reads events, one per line, and checks id and signature. With --json each line
                gives {"id":…,"valid":true} or {"valid":false,"error":{"code":…,"message":…}};
                without it, "valid <id>" or "invalid: <code>: <message>". Exit 1 if any is invalid.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--key"], switches: ["--json", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        switch parsed.positional.first {
        case "sign":
            guard let keyPath = parsed.options["--key"] else { throw UsageError("event sign needs --key FILE") }
            let identity: SoftchatIdentity
            do {
                identity = try SoftchatIdentity.loadSecretKeyFile(path: keyPath)
            } catch let error as SoftchatError {
                throw error
            } catch {
                throw RuntimeFailure(code: "key_file", message: "\(error)")
            }
            return sign(with: identity)
        case "verify":
            return verify(json: parsed.has("--json"))
        default:
            throw UsageError("event needs sign or verify")
        }
    }

    static func sign(with identity: SoftchatIdentity) -> ExitStatus {
        let reader = LineReader()
        var failed = false
        let parser = JSONReader()
        while let line = reader.next() {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            do {
                let value: JSONValue
                do {
                    value = try parser.parse(line)
                } catch {
                    throw SoftchatError.invalidRelayFrame("unsigned event: not JSON: \(error)")
                }
                let event = try identity.sign(UnsignedEvent(json: value))
                Output.standard.line(event.jsonText)
            } catch let error as SoftchatError {
                failed = true
                Output.standard.line(error.jsonValue.jsonText)
            } catch {
                failed = true
                Output.standard.line(SoftchatError.invalidRelayFrame("\(error)").jsonValue.jsonText)
            }
        }
        return failed ? .inputRejected : .success
    }

    /// Streams stdin in batches of up to 256 lines (or 4 MiB), each batch parsed and verified on
    /// all cores and reported in input order: the library's bulk path behind buffered I/O.
    static func verify(json: Bool) -> ExitStatus {
        let reader = LineReader()
        var failed = false
        while let batch = reader.nextBatch(maxLines: 256, maxBytes: 4 << 20) {
            for result in VerifiedEvent.verify(utf8: batch) {
                switch result {
                case .success(let event):
                    if json {
                        Output.standard.line(JSONValue.object(JSONObject(["id": .string(event.id), "valid": true])).jsonText)
                    } else {
                        Output.standard.line("valid \(event.id)")
                    }
                case .failure(let error):
                    failed = true
                    if json {
                        Output.standard.line(
                            JSONValue.object(
                                JSONObject([
                                    "valid": false,
                                    "error": .object(JSONObject(["code": .string(error.code.rawValue), "message": .string(error.message)])),
                                ])
                            ).jsonText)
                    } else {
                        Output.standard.line("invalid: \(error.code.rawValue): \(error.message)")
                    }
                }
            }
        }
        return failed ? .inputRejected : .success
    }
}
