#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a secret key file could not be written or read. A key file holds 64 hex characters and a
/// newline and is readable by its owner only.
public enum KeyFileError: Error, Sendable, CustomStringConvertible {
    /// The file to write already exists (its path is the payload): a secret is never overwritten.
    case exists(String)
    /// The file at the path could not be created, or not written in full and synced; `errno` is the
    /// system's error number.
    case cannotWrite(String, errno: Int32)
    /// The file at the path could not be opened or read; `errno` is the system's error number.
    case cannotRead(String, errno: Int32)
    /// The identity was erased: there is no secret to write.
    case erased
    /// The key file (its path is the payload) can be read or written by other users: a secret
    /// must be the owner's alone (mode 0600 or stricter), as `ssh` requires of its keys.
    case readableByOthers(String, mode: UInt32)

    /// What failed and where: the path and, for a system failure, the system's error text.
    public var description: String {
        switch self {
        case .exists(let p): "key file \(p) already exists (refusing to overwrite a secret)"
        case .cannotWrite(let p, let e): "cannot write key file \(p): \(String(cString: strerror(e)))"
        case .cannotRead(let p, let e): "cannot read key file \(p): \(String(cString: strerror(e)))"
        case .erased: "the identity was erased: no secret to write"
        case .readableByOthers(let p, let mode):
            "key file \(p) has mode \(String(mode, radix: 8)): other users can reach the secret (chmod 600 \(p))"
        }
    }
}

extension SoftchatIdentity {
    /// Writes the secret to a new file created with mode 0600; never overwrites.
    ///
    /// - Parameter path: Where to create the file; nothing may exist there yet.
    /// - Throws: ``KeyFileError`` `exists` when the path is taken, `cannotWrite` when the file cannot be
    ///   created, written in full or synced (a file created before the failure is left behind),
    ///   `erased` after ``SoftchatIdentity/erase()``.
    public func writeSecretKeyFile(path: String) throws(KeyFileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd < 0 {
            if errno == EEXIST { throw .exists(path) }
            throw .cannotWrite(path, errno: errno)
        }
        defer { close(fd) }
        guard let hex = try? exportSecretHex() else {
            unlink(path)  // created above, still empty
            throw .erased
        }
        var text = Array(hex.utf8) + [0x0A]
        defer { text.withUnsafeMutableBytes { secureZero($0) } }
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(fd) == 0 else { throw .cannotWrite(path, errno: errno) }
    }

    /// Loads an identity from a key file written by
    /// ``SoftchatIdentity/writeSecretKeyFile(path:)`` (or any file holding 64 hex characters).
    ///
    /// - Parameter path: The key file; only its first 256 bytes are read.
    /// - Returns: The identity of the secret in the file.
    /// - Throws: ``KeyFileError`` `cannotRead` when the file cannot be opened or read,
    ///   `readableByOthers` when its mode lets other users read or write it, or
    ///   ``SoftchatError`` with code `invalid_relay_authentication` when it does not hold 64 hex
    ///   characters (whitespace around them allowed) of a valid secret key.
    public static func loadSecretKeyFile(path: String) throws -> SoftchatIdentity {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw KeyFileError.cannotRead(path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KeyFileError.cannotRead(path, errno: errno) }
        guard info.st_mode & 0o077 == 0 else { throw KeyFileError.readableByOthers(path, mode: UInt32(info.st_mode & 0o777)) }
        var buffer = [UInt8](repeating: 0, count: 256)
        defer { buffer.withUnsafeMutableBytes { secureZero($0) } }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { throw KeyFileError.cannotRead(path, errno: errno) }
        // Read in place: a String of the text would leave a copy of the secret the allocator
        // frees without wiping.
        return try buffer.withUnsafeBytes { bytes in
            try importSecretHex(utf8: UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        }
    }
}
