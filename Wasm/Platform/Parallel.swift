/// The WebAssembly build has one thread: work runs in input order on it. The native seam is
/// `Sources/SoftchatCore/Platform/Parallel.swift` (Dispatch).
enum Parallel {
    static func map<T>(count n: Int, _ body: (Int) -> T) -> [T] { (0..<n).map(body) }
    static let processors = 1
}
