#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading and writing a secret key file: 64 hex characters and a newline, owner-only.
public enum KeyFileError: Error, Sendable, CustomStringConvertible {
    case exists(String)
    case cannotWrite(String, errno: Int32)
    case cannotRead(String, errno: Int32)

    public var description: String {
        switch self {
        case .exists(let p): "key file \(p) already exists (refusing to overwrite a secret)"
        case .cannotWrite(let p, let e): "cannot write key file \(p): \(String(cString: strerror(e)))"
        case .cannotRead(let p, let e): "cannot read key file \(p): \(String(cString: strerror(e)))"
        }
    }
}

extension SoftchatIdentity {
    /// Writes the secret to a new file created with mode 0600; never overwrites.
    public func writeSecretKeyFile(path: String) throws(KeyFileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd < 0 {
            if errno == EEXIST { throw .exists(path) }
            throw .cannotWrite(path, errno: errno)
        }
        defer { close(fd) }
        var text = Array((exportSecretHex() + "\n").utf8)
        defer { text.withUnsafeMutableBytes { secureZero($0) } }
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(fd) == 0 else { throw .cannotWrite(path, errno: errno) }
    }

    /// Loads an identity from a key file written by `writeSecretKeyFile` (or any file holding
    /// 64 hex characters).
    public static func loadSecretKeyFile(path: String) throws -> SoftchatIdentity {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw KeyFileError.cannotRead(path, errno: errno) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        defer { buffer.withUnsafeMutableBytes { secureZero($0) } }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { throw KeyFileError.cannotRead(path, errno: errno) }
        return try importSecretHex(String(decoding: buffer[0..<n], as: UTF8.self))
    }
}
