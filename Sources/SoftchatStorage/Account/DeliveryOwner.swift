public import SoftchatCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A live process's hold on its delivery leases, visible to every other process of the account.
///
/// A lease alone says "held until `expires_at`": when its owner dies (a crash, a SIGKILL, a phone
/// killing the app), the work it held waited for the lease to run out (a minute), and a
/// restarted app left messages unsent meanwhile. An owner instead holds an exclusive `flock` on a
/// file of its own beside the account (`<account>.owners/<id>`, 0600, in a 0700 folder) for as
/// long as it lives. The kernel drops that lock when the process dies, however it dies, so a claim
/// in any process (`AccountDelivery.claim(leaseID:relayURL:now:max:owner:)`) that finds work under
/// an unexpired lease asks whether its owner still holds the lock; when not, the owner's leases
/// are expired at once and their work claimed. The managed transport registers one owner per run.
///
/// `flock` locks belong to an open file, not to a process, so a second owner in the same process
/// is told apart too. An in-memory account has no file beside it: its owners are never found dead
/// (their leases expire with time, as before).
public final class DeliveryOwner: Sendable {
    /// The owner's id: letters, digits, `-`, `_` and `.`, at most 64 bytes; recorded on each
    /// lease it claims.
    public let id: String
    private let lockPath: String?
    private let descriptor: Mutex<Int32>

    init(id: String, lockPath: String?, descriptor: Int32) {
        self.id = id
        self.lockPath = lockPath
        self.descriptor = Mutex(descriptor)
    }

    deinit { close() }

    /// Gives the hold up (also done when the owner is released): its leases then expire with
    /// time, or at once when another process's claim finds the lock file gone. Idempotent.
    public func close() {
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            if let lockPath { unlink(lockPath) }
            _ = flock(fd, LOCK_UN)
            _ = Glibc.close(fd)
            fd = -1
        }
    }

    /// The folder of the account's owner lock files, or nil for an account that is not a file.
    static func folder(forAccount path: String) -> String? {
        AccountStore.isFile(path) ? path + ".owners" : nil
    }

    static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
            && id != "." && id != ".."
    }

    /// Registers a live owner of `id` for the account at `accountPath`.
    static func register(id: String, accountPath: String) throws(SoftchatError) -> DeliveryOwner {
        guard isValidID(id) else {
            throw .invalidDeliveryState(
                "delivery owner id must be 1 to 64 letters, digits, '-', '_' or '.'", operation: .relayPublish)
        }
        guard let folder = folder(forAccount: accountPath) else { return DeliveryOwner(id: id, lockPath: nil, descriptor: -1) }
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw SoftchatError(.accountStorageFailed, "delivery owner: cannot create \(folder) (errno \(errno))", operation: .relayPublish)
        }
        let path = folder + "/" + id
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw SoftchatError(.accountStorageFailed, "delivery owner: cannot open \(path) (errno \(errno))", operation: .relayPublish)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            _ = Glibc.close(fd)
            throw .invalidDeliveryState("delivery owner \(id) is already registered by a live process", operation: .relayPublish)
        }
        return DeliveryOwner(id: id, lockPath: path, descriptor: fd)
    }

    /// Whether the owner `id` of the account at `accountPath` is alive: its lock file exists and
    /// someone holds its lock. A dead owner's file is removed. Unknown for an account that is not a
    /// file (treated as alive).
    static func isAlive(id: String, accountPath: String) -> Bool {
        guard let folder = folder(forAccount: accountPath) else { return true }
        guard isValidID(id) else { return false }
        let path = folder + "/" + id
        let fd = Glibc.open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return errno != ENOENT }
        defer { _ = Glibc.close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 {
            // Nobody holds it: the owner is gone. Remove its file while holding the lock.
            unlink(path)
            _ = flock(fd, LOCK_UN)
            return false
        }
        // Held (EWOULDBLOCK): alive. Any other failure tells nothing: taken as alive, so a live
        // owner's work is never taken on a doubt (its leases still end with time).
        return true
    }
}
