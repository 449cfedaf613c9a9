// Two exports of the WebAssembly build only, for scripts/bench/bench-wasm: the core's parse+verify
// throughput without the facade's marshalling, the same loop `softchat-dev bench events` times
// natively (`VerifiedEvent(text:)` over the lines, one core). The corpus is loaded once, split into
// Swift strings outside the timed part, so both sides time the same work.
import SoftchatCore

/// The lines `softchat_wasm_bench_load` kept; the module runs on one thread (a Worker or Node's
/// main thread), so nothing else reads or writes it.
nonisolated(unsafe) private var benchLines: [String] = []

/// Keeps the newline-separated event texts of `corpus` (NUL-terminated UTF-8) for
/// `softchat_wasm_bench_parse_verify`; returns how many lines it kept.
@_cdecl("softchat_wasm_bench_load")
public func softchat_wasm_bench_load(_ corpus: UnsafePointer<CChar>?) -> Int32 {
    benchLines = []
    guard let corpus else { return 0 }
    for line in String(cString: corpus).split(separator: "\n", omittingEmptySubsequences: true) {
        benchLines.append(String(line))
    }
    return Int32(benchLines.count)
}

/// Parses and verifies every kept line (`VerifiedEvent(text:)`: id and BIP-340 signature); returns
/// how many verified.
@_cdecl("softchat_wasm_bench_parse_verify")
public func softchat_wasm_bench_parse_verify() -> Int32 {
    var verified: Int32 = 0
    for line in benchLines {
        if (try? VerifiedEvent(text: line)) != nil { verified += 1 }
    }
    return verified
}
