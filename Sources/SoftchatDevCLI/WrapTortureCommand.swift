import SoftchatBenchmarks
import SoftchatCommandLine
import SoftchatCore
import SoftchatStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat-dev wrap-torture`: the child scripts/harness/dm-crash-harness kills. It opens the
/// account, unlocks it for the benchmark's bob (catching up any stored wrap without an
/// outcome, which must be none), then ingests the wraps of a file in order, in batches, and
/// acknowledges each committed batch with how many wraps it inserted and how many the account
/// decrypted for it: a wrap stored in an earlier run comes back a duplicate and must cost no
/// decryption.
enum WrapTortureCommand {
    static let help = """
        usage: softchat-dev wrap-torture --db FILE --wraps FILE [--batch N]

        Prints `unlock caught=C decrypted=D` once, then `ack inserted=I duplicates=U decrypted=D`
        per committed batch (default 16 wraps). The wraps must be addressed to the benchmark's bob
        (`softchat-dev bench dm --write-wraps FILE`).
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(args, valued: ["--db", "--wraps", "--batch"], switches: ["--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        guard let db = parsed.options["--db"], let file = parsed.options["--wraps"] else { throw UsageError("wrap-torture needs --db and --wraps") }
        let batch = Int(try parsed.int("--batch") ?? 16)
        guard batch >= 1 && batch <= 256 else { throw UsageError("--batch must be 1 to 256") }
        let fd = open(file, O_RDONLY)
        guard fd >= 0 else { throw RuntimeFailure(code: "io", message: "cannot open \(file)") }
        defer { close(fd) }
        let reader = LineReader(fd: fd)
        var wraps: [VerifiedEvent] = []
        while let line = reader.next() {
            if !line.isEmpty { wraps.append(try VerifiedEvent(text: String(decoding: line, as: UTF8.self))) }
        }
        let account = try SoftchatAccount.open(path: db)
        defer { account.close() }
        let caught = try account.messages.unlock(PrivateMessageBenchmarks.bob, now: Int64(time(nil)))
        Output.standard.line("unlock caught=\(caught) decrypted=\(account.messages.decryptions)")
        Output.standard.flush()
        var offset = 0
        while offset < wraps.count {
            let slice = Array(wraps[offset..<min(offset + batch, wraps.count)])
            let before = account.messages.decryptions
            let outcome = try account.incoming.ingest(slice, receivedAt: Int64(time(nil)))
            Output.standard.line(
                "ack inserted=\(outcome.receipt.insertedEventIDs.count) duplicates=\(outcome.receipt.duplicateEventIDs.count) decrypted=\(account.messages.decryptions - before)"
            )
            Output.standard.flush()
            offset += slice.count
        }
        return .success
    }
}
