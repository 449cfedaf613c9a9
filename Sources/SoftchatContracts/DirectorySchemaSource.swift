#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads schema files from a directory on disk.
public struct DirectorySchemaSource: SchemaSource {
    public var directory: String
    public init(directory: String) { self.directory = directory }

    public func read(_ name: String) -> [UInt8]? {
        readFile(directory.hasSuffix("/") ? directory + name : directory + "/" + name)
    }
}

/// The whole file at `path`, or nil when it cannot be opened.
public func readFile(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, f) }
        if n > 0 { out.append(contentsOf: chunk[0..<n]) }
        if n < chunk.count { break }
    }
    return ferror(f) == 0 ? out : nil
}
