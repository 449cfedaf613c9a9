import Dispatch
import SoftchatCommandLine
import SoftchatCore
import SoftchatTestRelay
import SoftchatTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `softchat relay`: the embedded loopback relay as its own process, for benchmarks that must
/// not count a relay's threads as the client's, and for trying the CLI by hand.
enum RelayCommand {
    static let help = """
        usage: softchat relay [--port P] [--count N] [--cap N] [--preload FILE] [--echo] [--negentropy answer|notice|silent|blocked]
                              [--cert FILE --key FILE]

        Starts N embedded loopback relays (default 1; NIP-01, NIP-11, NIP-42, NIP-45, EVENTS
        batches) and prints one ws:// URL per line; with --echo, a last line gives a loopback
        WebSocket echo server's URL (every text message sent straight back). --cap N answers
        at most N events per REQ, as LocalRelay does with 500. --preload FILE stores the signed
        events in FILE (one JSON per line, verified first) in every relay before the URLs are
        printed. --negentropy says how NIP-77's NEG-OPEN is met: as a responder (the default), with
        a NOTICE, with silence, or with NEG-ERR blocked. --port P listens on 127.0.0.1:P (with
        --count N, on P to P+N-1; default: ports the system chooses). --cert and --key (PEM files)
        serve wss:// with that certificate instead of ws://. Runs until SIGINT, SIGTERM or
        SIGHUP, and, when standard input is a pipe, until that pipe closes (the parent that
        started it is gone). Test tool: nothing is persisted.
        """

    static func run(_ args: ArraySlice<String>) throws -> ExitStatus {
        let parsed = try Arguments(
            args, valued: ["--port", "--count", "--cap", "--preload", "--negentropy", "--cert", "--key"], switches: ["--echo", "--help", "-h"])
        if parsed.has("--help") || parsed.has("-h") {
            Output.standard.line(help)
            return .success
        }
        // The stop signals are blocked before any thread starts (threads inherit the mask), so
        // only sigwait below receives them.
        var stops = sigset_t()
        sigemptyset(&stops)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&stops, signal) }
        pthread_sigmask(SIG_BLOCK, &stops, nil)
        let count = Int(try parsed.int("--count") ?? 1)
        guard count >= 1 && count <= 1_000 else { throw UsageError("--count must be 1 to 1000") }
        let firstPort = Int(try parsed.int("--port") ?? 0)
        guard firstPort == 0 || (firstPort >= 1 && firstPort + count - 1 <= 65_535) else {
            throw UsageError("--port must be 1 to 65535, with room for --count ports")
        }
        var options = TestRelayOptions()
        if let cap = try parsed.int("--cap") { options.reqCap = Int(cap) }
        switch (parsed.options["--cert"], parsed.options["--key"]) {
        case (let cert?, let key?):
            options.certificateFile = cert
            options.keyFile = key
        case (nil, nil): break
        default: throw UsageError("--cert and --key go together")
        }
        switch parsed.options["--negentropy"] {
        case nil, "answer": options.negentropy = .answer
        case "notice": options.negentropy = .notice
        case "silent": options.negentropy = .silent
        case "blocked": options.negentropy = .blocked
        case let other?: throw UsageError("--negentropy must be answer, notice, silent or blocked, not \(other)")
        }
        var preload: [VerifiedEvent] = []
        if let file = parsed.options["--preload"] {
            let fd = open(file, O_RDONLY)
            guard fd >= 0 else { throw RuntimeFailure(code: "preload", message: "cannot open \(file)") }
            let reader = LineReader(fd: fd)
            var lines: [String] = []
            while let line = reader.next() {
                if !line.isEmpty { lines.append(String(decoding: line, as: UTF8.self)) }
            }
            close(fd)
            for (i, result) in VerifiedEvent.verify(texts: lines).enumerated() {
                guard case .success(let event) = result else { throw UsageError("--preload line \(i + 1) is not a valid signed event") }
                preload.append(event)
            }
        }
        var relays: [TestRelay] = []
        for i in 0..<count {
            let relay = try TestRelay(options: options, port: firstPort == 0 ? 0 : firstPort + i)
            relay.preload(preload)
            relays.append(relay)
            Output.standard.line(relay.url)
        }
        var echo: EchoServer?
        if parsed.has("--echo") {
            let server = try EchoServer()
            echo = server
            Output.standard.line(server.url)
        }
        Output.standard.flush()
        if isPipe(0) {
            // A parent holding our standard input: its end closing (it exited or is done) stops us.
            DispatchQueue(label: "softchat.relay.stdin").async {
                var byte: UInt8 = 0
                while read(0, &byte, 1) > 0 {}
                kill(getpid(), SIGTERM)
            }
        }
        var received: Int32 = 0
        sigwait(&stops, &received)
        echo?.stop()
        for relay in relays { relay.stop() }
        return .success
    }
}

/// Whether `fd` is a pipe (or FIFO): a parent's end it can close, unlike /dev/null or a terminal.
func isPipe(_ fd: Int32) -> Bool {
    var info = stat()
    return fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
}

/// A loopback WebSocket server that sends every text message straight back, one thread per
/// connection: the floor a relay round trip is measured against.
final class EchoServer: @unchecked Sendable {
    // @unchecked: `running` is only touched under `lock`.
    let listener: TCPListener
    private let lock = Lock()
    private var running = true
    var url: String { "ws://127.0.0.1:\(listener.port)" }

    init() throws(TransportError) {
        listener = try TCPListener()
        DispatchQueue(label: "softchat.echo").async { [self] in
            while lock.with({ running }) {
                guard let tcp = try? listener.accept(timeoutMilliseconds: 100) else { continue }
                DispatchQueue(label: "softchat.echo.connection").async {
                    guard case .websocket(let server)? = try? ServerHandshake.accept(tcp, timeoutMilliseconds: 10_000) else { return }
                    while case .text(let t)? = try? server.receive(timeoutMilliseconds: 3_600_000) {
                        guard (try? server.send(text: t)) != nil else { return }
                    }
                }
            }
        }
    }

    func stop() {
        lock.with { running = false }
    }
}
