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
