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
/// The folder is trusted only as this user's own: a real directory (not a symlink), owned by
/// the effective user, with no permission for group or others; every lock file is opened and
/// removed relative to the folder's descriptor (`openat`, `unlinkat`), so no path swapped in
/// between the check and the use is followed. A folder another user can write could have live
/// lock files deleted, making another process of the account take a live owner's work and
/// deliver it twice: such a folder fails `register`, and `isAlive` takes every owner in it as
/// alive (its leases then end with time).
///
/// `flock` locks belong to an open file, not to a process, so a second owner in the same process
/// is told apart too. An in-memory account has no file beside it: its owners are never found dead
/// (their leases expire with time, as before).
public final class DeliveryOwner: Sendable {
    /// The owner's id: letters, digits, `-`, `_` and `.`, at most 64 bytes; recorded on each
    /// lease it claims.
    public let id: String
    /// The lock file's descriptor and its folder's (-1 for an account that is not a file).
    private let descriptors: Mutex<(file: Int32, folder: Int32)>

    init(id: String, descriptor: Int32, folder: Int32) {
        self.id = id
        self.descriptors = Mutex((descriptor, folder))
    }

    deinit { close() }

    /// Gives the hold up (also done when the owner is released): its leases then expire with
    /// time, or at once when another process's claim finds the lock file gone. Idempotent.
    public func close() {
        descriptors.withLock { d in
            guard d.file >= 0 else { return }
            unlinkat(d.folder, id, 0)
            _ = flock(d.file, LOCK_UN)
            _ = Glibc.close(d.file)
            _ = Glibc.close(d.folder)
            d = (-1, -1)
        }
    }

    /// Why a folder cannot be trusted with lock files, or nil when it can.
    enum FolderRefusal: Error {
        case cannotOpen(Int32)
        case notPrivate(String)
    }

    /// Opens the owners folder (creating it 0700 when absent) and checks it is this user's own:
    /// a directory reached without following a symlink, owned by the effective user, no
    /// permission for group or others. Returns its descriptor.
    static func openFolder(_ folder: String, create: Bool) -> Result<Int32, FolderRefusal> {
        if create && mkdir(folder, 0o700) != 0 && errno != EEXIST { return .failure(.cannotOpen(errno)) }
        let fd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return .failure(.cannotOpen(errno)) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let e = errno
            _ = Glibc.close(fd)
            return .failure(.cannotOpen(e))
        }
        var why: String?
        if info.st_mode & S_IFMT != S_IFDIR {
            why = "it is not a directory"
        } else if info.st_uid != geteuid() {
            why = "it belongs to user \(info.st_uid), not to this user (\(geteuid()))"
        } else if info.st_mode & 0o077 != 0 {
            why = "its mode \(String(info.st_mode & 0o777, radix: 8)) lets others in (0700 expected)"
        }
        if let why {
            _ = Glibc.close(fd)
            return .failure(.notPrivate(why))
        }
        return .success(fd)
    }

    /// The folder of the account's owner lock files, or nil for an account that is not a file:
    /// beside the file's canonical path (symlinks resolved, as SQLite resolves them to find the
    /// journal), so every spelling of the path finds the same owners. Before, a symlink to the
    /// account found no lock, took a live owner's unexpired lease and made its renewals stale.
    /// A second hard link, which no path can tell apart, is refused when the account opens
    /// (`AccountStore.requireOneName`).
    static func folder(forAccount path: String) -> String? {
        guard AccountStore.isFile(path) else { return nil }
        guard let resolved = realpath(path, nil) else { return path + ".owners" }
        defer { free(resolved) }
        return String(cString: resolved) + ".owners"
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
        guard let folder = folder(forAccount: accountPath) else { return DeliveryOwner(id: id, descriptor: -1, folder: -1) }
        let dir: Int32
        switch openFolder(folder, create: true) {
        case .success(let fd): dir = fd
        case .failure(.cannotOpen(let e)):
            throw SoftchatError(.accountStorageFailed, "delivery owner: cannot open the folder \(folder) (errno \(e))", operation: .relayPublish)
        case .failure(.notPrivate(let why)):
            throw SoftchatError(.accountStorageFailed, "delivery owner: \(folder) is not trusted: \(why)", operation: .relayPublish)
        }
        let fd = openat(dir, id, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let e = errno
            _ = Glibc.close(dir)
            throw SoftchatError(.accountStorageFailed, "delivery owner: cannot open \(folder)/\(id) (errno \(e))", operation: .relayPublish)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            _ = Glibc.close(fd)
            _ = Glibc.close(dir)
            throw .invalidDeliveryState("delivery owner \(id) is already registered by a live process", operation: .relayPublish)
        }
        return DeliveryOwner(id: id, descriptor: fd, folder: dir)
    }

    /// Whether the owner `id` of the account at `accountPath` is alive: its lock file exists and
    /// someone holds its lock. A dead owner's file is removed. Unknown for an account that is not a
    /// file, and for a folder that is not this user's own (both treated as alive).
    static func isAlive(id: String, accountPath: String) -> Bool {
        guard let folder = folder(forAccount: accountPath) else { return true }
        guard isValidID(id) else { return false }
        let dir: Int32
        switch openFolder(folder, create: false) {
        case .success(let fd): dir = fd
        // No folder: no owner's lock file, as before the folder was checked.
        case .failure(.cannotOpen(let e)) where e == ENOENT: return false
        // Someone else's, or unreadable: nothing in it proves a death.
        case .failure: return true
        }
        defer { _ = Glibc.close(dir) }
        let fd = openat(dir, id, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return errno != ENOENT }
        defer { _ = Glibc.close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 {
            // Nobody holds it: the owner is gone. Remove its file while holding the lock.
            unlinkat(dir, id, 0)
            _ = flock(fd, LOCK_UN)
            return false
        }
        // Held (EWOULDBLOCK): alive. Any other failure tells nothing: taken as alive, so a live
        // owner's work is never taken on a doubt (its leases still end with time).
        return true
    }
}
