#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one hook the benchmarks need in `softchat`: `softchat-dev bench cli` and `bench memory`
/// run `softchat` as a child and read its own peak resident memory from a file that the child
/// writes as it exits. wait4's ru_maxrss would not do: Linux carries the high-water mark across
/// execve, so a child spawned by a large benchmark process would report at least the parent's size.
public enum PeakMemoryReport {
    /// The environment variable naming the file to write.
    public static let variable = "SOFTCHAT_BENCH_PEAK_FILE"

    /// When the environment names a file (`variable`), writes this process's peak resident
    /// memory in KiB (VmHWM) there; otherwise does nothing.
    public static func recordIfRequested() {
        guard let target = getenv(variable), let status = readSmallFile("/proc/self/status") else { return }
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return }
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        var kib = String(line.dropFirst(6).filter(\.isNumber))
        kib.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// The first 8 KiB of a small file, or nil when it cannot be read.
    public static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let n = read(fd, &bytes, bytes.count)
        return n > 0 ? String(decoding: bytes[0..<n], as: UTF8.self) : nil
    }
}
