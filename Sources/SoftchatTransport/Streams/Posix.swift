#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Names that the methods of stream types shadow (close, connect, accept), and constants whose
// types differ between Glibc and Darwin.

@inline(__always) func posixClose(_ fd: Int32) {
    #if canImport(Glibc)
        _ = Glibc.close(fd)
    #else
        _ = Darwin.close(fd)
    #endif
}

@inline(__always) func posixConnect(_ fd: Int32, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> Int32 {
    #if canImport(Glibc)
        Glibc.connect(fd, addr, len)
    #else
        Darwin.connect(fd, addr, len)
    #endif
}

@inline(__always) func posixAccept(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
        Glibc.accept(fd, nil, nil)
    #else
        Darwin.accept(fd, nil, nil)
    #endif
}

var streamSocketType: Int32 {
    #if canImport(Glibc)
        Int32(SOCK_STREAM.rawValue)
    #else
        SOCK_STREAM
    #endif
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// Runs `body` (an OpenSSL call on a socket BIO, which writes with plain write(2)) with
/// SIGPIPE blocked on this thread, and discards the SIGPIPE a write to a peer that is gone
/// raised: the call then just fails with EPIPE, as `send(MSG_NOSIGNAL)` would, instead of the
/// signal ending the process. (Darwin sockets carry SO_NOSIGPIPE instead.) The signal is
/// thread-directed, so blocking it here affects no other thread.
@inline(__always) func withoutSIGPIPE<R>(_ body: () -> R) -> R {
    #if canImport(Glibc)
        var pipeOnly = sigset_t()
        sigemptyset(&pipeOnly)
        sigaddset(&pipeOnly, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeOnly, &previous)
        var pending = sigset_t()
        sigpending(&pending)
        let alreadyPending = sigismember(&pending, SIGPIPE) == 1
        defer {
            if !alreadyPending {
                sigpending(&pending)
                if sigismember(&pending, SIGPIPE) == 1 {
                    var now = timespec()
                    _ = sigtimedwait(&pipeOnly, nil, &now)
                }
            }
            if sigismember(&previous, SIGPIPE) != 1 { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        }
    #endif
    return body()
}
