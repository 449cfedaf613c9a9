import SoftchatCommandLine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One run of a command as a separate process: wall time, exit status and the child's own
/// peak resident memory.
///
/// The peak is the child's VmHWM, which it writes at exit (`PeakMemoryReport.recordIfRequested`). wait4's
/// ru_maxrss would not do: Linux carries the high-water mark across execve, so a child spawned
/// by a large benchmark process would report at least the parent's size.
public struct ChildRun: Sendable {
    public var seconds: Double
    public var status: Int32
    public var peakMiB: Double
}

public enum ChildProcess {
    /// The `softchat` command beside the running executable (Linux: the folder of
    /// /proc/self/exe), which the benchmarks run as a child: `softchat-dev` and `softchat` are
    /// built into one folder.
    public static var softchatExecutable: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let running = n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
        guard let slash = running.lastIndex(of: "/") else { return "softchat" }
        return String(running[...slash]) + "softchat"
    }

    /// Runs `executable arguments…` with stdin from `stdinPath` and stdout/stderr discarded.
    public static func run(_ executable: String, _ arguments: [String], stdinPath: String) -> ChildRun {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        let peakFile = "/tmp/softchat-peak-\(getpid())-\(UInt64(monotonicSeconds() * 1e9))"
        var environment: [UnsafeMutablePointer<CChar>?] = [strdup("\(PeakMemoryReport.variable)=\(peakFile)")]
        #if canImport(Darwin)
            var e = _NSGetEnviron()!.pointee!  // Darwin does not export `environ` to programs
        #else
            var e = environ
        #endif
        while let entry = e.pointee {
            if !String(cString: entry).hasPrefix(PeakMemoryReport.variable + "=") { environment.append(strdup(entry)) }
            e += 1
        }
        environment.append(nil)
        defer {
            for v in environment { free(v) }
            unlink(peakFile)
        }
        var pid: pid_t = 0
        let t0 = monotonicSeconds()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environment)
        precondition(spawned == 0, "posix_spawn \(executable) failed: \(spawned)")
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = monotonicSeconds() - t0
        let exited = status & 0x7F == 0
        #if canImport(Darwin)
            let fallback = Double(usage.ru_maxrss) / 1_048_576
        #else
            let fallback = Double(usage.ru_maxrss) / 1024
        #endif
        let peak = readPeakFile(peakFile) ?? fallback
        return ChildRun(seconds: seconds, status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), peakMiB: peak)
    }

    static func readPeakFile(_ path: String) -> Double? {
        guard let text = PeakMemoryReport.readSmallFile(path), let kib = Int(text.filter(\.isNumber)) else { return nil }
        return Double(kib) / 1024
    }
}
