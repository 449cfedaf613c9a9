#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Monotonic seconds.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The value at `percent` (0–100) of `sorted` (ascending, not empty): the median at 50, the
/// p99 at 99.
public func percentile(_ sorted: [Double], _ percent: Int) -> Double {
    sorted[min(sorted.count - 1, sorted.count * percent / 100)]
}

/// Peak resident memory of this process so far, in MiB.
public func peakMemoryMiB() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    #if canImport(Darwin)
        return Double(usage.ru_maxrss) / 1_048_576
    #else
        return Double(usage.ru_maxrss) / 1024
    #endif
}

/// One benchmark figure: a rate beside the baseline measured in the same process.
public struct BenchResult: Sendable {
    public var name: String
    public var items: Int
    public var seconds: Double
    public var baselineName: String?
    public var baselinePerSecond: Double?
    public var peakMiB: Double

    public var perSecond: Double { Double(items) / seconds }
    public var ratio: Double? { baselinePerSecond.map { perSecond / $0 } }
}

/// Runs `body` `repetitions` times and keeps the fastest run (the least disturbed by noise).
public func bestOf(_ repetitions: Int, _ body: () -> Void) -> Double {
    var best = Double.infinity
    for _ in 0..<max(1, repetitions) {
        let t0 = monotonicSeconds()
        body()
        best = min(best, monotonicSeconds() - t0)
    }
    return best
}

/// Times a figure and its baseline alternately, `repetitions` times each, keeping the fastest
/// run of each: a disturbance of the machine then hits both sides alike instead of one.
public func bestOfInterleaved(_ repetitions: Int, _ figure: () -> Void, baseline: () -> Void) -> (figure: Double, baseline: Double) {
    var best = (figure: Double.infinity, baseline: Double.infinity)
    for _ in 0..<max(1, repetitions) {
        var t0 = monotonicSeconds()
        baseline()
        best.baseline = min(best.baseline, monotonicSeconds() - t0)
        t0 = monotonicSeconds()
        figure()
        best.figure = min(best.figure, monotonicSeconds() - t0)
    }
    return best
}

/// Keeps a value alive so the optimizer cannot drop the work that produced it.
@inline(never)
public func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}
