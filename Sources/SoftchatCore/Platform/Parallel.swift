import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Work spread over the machine's cores (Dispatch). A platform seam: the WebAssembly build,
/// which has one thread, replaces this file with `Wasm/Platform/Parallel.swift`.
enum Parallel {
    /// `body(0..<count)` in input order, on all cores when there are enough items to share.
    static func map<T>(count n: Int, _ body: (Int) -> T) -> [T] {
        guard n >= 8, processors > 1 else { return (0..<n).map(body) }
        return [T](unsafeUninitializedCapacity: n) { buffer, initialized in
            nonisolated(unsafe) let out = buffer.baseAddress!
            withoutActuallyEscaping(body) { body in
                nonisolated(unsafe) let body = body
                let chunks = min(processors * 4, n)
                DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                    var i = chunk * n / chunks
                    let end = (chunk + 1) * n / chunks
                    while i < end {
                        (out + i).initialize(to: body(i))
                        i += 1
                    }
                }
            }
            initialized = n
        }
    }

    /// The cores online.
    static let processors = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
