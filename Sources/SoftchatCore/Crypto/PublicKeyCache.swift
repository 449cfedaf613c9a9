import CSecp256k1
import Synchronization

/// Parsed x-only public keys by their 32 bytes. A chat has few authors, and parsing a key
/// (a square root on the curve) is a measurable share of verification, so recent keys are
/// kept. Bounded: when full, the cache is cleared rather than grown.
final class PublicKeyCache: Sendable {
    static let shared = PublicKeyCache(capacity: 4096)

    private struct Key: Hashable {
        let a: UInt64, b: UInt64, c: UInt64, d: UInt64
    }

    private let capacity: Int
    private let entries: Mutex<[Key: secp256k1_xonly_pubkey]>

    init(capacity: Int) {
        self.capacity = capacity
        entries = Mutex([:])
    }

    /// The parsed key for 32 bytes, or nil when they are not a valid x-only key.
    func publicKey(_ bytes: UnsafeRawBufferPointer) -> secp256k1_xonly_pubkey? {
        precondition(bytes.count == 32)
        let key = Key(
            a: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
            b: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
            c: bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
            d: bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        if let hit = entries.withLock({ $0[key] }) { return hit }
        guard let parsed = Schnorr.parsePublicKey(bytes) else { return nil }
        entries.withLock { map in
            if map.count >= capacity { map.removeAll(keepingCapacity: true) }
            map[key] = parsed
        }
        return parsed
    }
}
