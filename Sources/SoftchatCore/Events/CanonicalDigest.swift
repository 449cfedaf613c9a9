package import SoftchatJSON

extension CanonicalSerialization {
    /// The SHA-256 of `bytes(…)` without building them: the serialization streams through a
    /// 4 KiB buffer into the digest, so hashing a 50 KB message allocates nothing that grows
    /// with it and touches each content byte once (runs that need no escaping are copied whole).
    package static func digest(
        pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String,
        escaping: JSONWriter.StringEscaping = .json
    ) -> [UInt8] {
        digest(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: EventContent(content), escaping: escaping)
    }

    /// The same for content as it was read: content kept escaped in the canonical escaping is
    /// hashed exactly as it arrived, without being decoded (see `EventContent`).
    package static func digest(
        pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: EventContent,
        escaping: JSONWriter.StringEscaping = .json
    ) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: DigestStream.capacity) { buffer in
            var stream = DigestStream(buffer: buffer.baseAddress!, escaping: escaping)
            write(into: &stream, pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content)
            return stream.finish()
        }
    }
}

/// A SHA-256 computation fed through a fixed buffer: a `JSONOutput` that hashes instead of storing.
private struct DigestStream: JSONOutput, ~Copyable {
    static let capacity = 4096

    private var hasher = SHA256.Hasher()
    private let buffer: UnsafeMutablePointer<UInt8>
    private var count = 0
    let escaping: JSONWriter.StringEscaping

    init(buffer: UnsafeMutablePointer<UInt8>, escaping: JSONWriter.StringEscaping) {
        self.buffer = buffer
        self.escaping = escaping
    }

    mutating func flush() {
        if count > 0 { hasher.update(buffer, count: count) }
        count = 0
    }

    @inline(__always)
    mutating func write(_ b: UInt8) {
        if count == Self.capacity { flush() }
        buffer[count] = b
        count &+= 1
    }

    mutating func write(_ source: UnsafeBufferPointer<UInt8>) {
        guard let base = source.baseAddress, source.count > 0 else { return }
        if source.count >= Self.capacity {
            // Large runs go to the digest directly rather than through the buffer.
            flush()
            hasher.update(base, count: source.count)
            return
        }
        if count + source.count > Self.capacity { flush() }
        (buffer + count).update(from: base, count: source.count)
        count += source.count
    }

    consuming func finish() -> [UInt8] {
        flush()
        return hasher.finish()
    }
}
