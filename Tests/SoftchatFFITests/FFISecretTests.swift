import Foundation
import SoftchatCore
import SoftchatFFI
import Testing

/// A secret key crossing the C ABI as hex text is read where the host put it: the library makes
/// no string of it, so once the host wipes its buffer no copy of the text is left in the
/// process (a freed Swift string keeps its characters until the allocator reuses the memory).
@Suite struct FFISecretTests {
    static let mask: UInt8 = 0xA5

    /// How many times `masked` (the pattern with every byte XOR `mask`, so the pattern itself is
    /// never in memory) occurs in the process's private writable memory, read through
    /// /proc/self/mem. `maps` is the map the scan walks, /proc/self/maps read now unless given.
    /// The map is stale as soon as it is read: other tests map and unmap memory meanwhile, and a
    /// page unmapped since reads as an error. Only that page is skipped: the scan goes on at the
    /// next page of the same line (a line can be several mappings the kernel merged, and giving
    /// up on the rest of it once missed the host's own buffer in a full parallel run).
    static func occurrences(ofMasked masked: [UInt8], maps given: String? = nil) -> Int {
        guard let maps = given ?? processMaps() else { return -1 }
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let fd = open("/proc/self/mem", O_RDONLY)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        // The scan's own buffer holds copies of what it read, the key's text included: it is a
        // mapping of its own, skipped by the scan, zeroed and unmapped after (a heap buffer
        // freed with a copy in it was found by the next scan once glibc's mmap threshold had
        // grown, and made the test fail in a full parallel run).
        let chunk = 1 << 20
        guard let mapped = mmap(nil, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), mapped != MAP_FAILED else { return -1 }
        let buffer = UnsafeMutableRawBufferPointer(start: mapped, count: chunk)
        defer {
            memset(mapped, 0, chunk)
            munmap(mapped, chunk)
        }
        let own = UInt(bitPattern: mapped)..<(UInt(bitPattern: mapped) + UInt(chunk))
        let first = Int32(masked[0] ^ mask)
        var found = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("rw"), fields.count == 5 || fields[5].hasPrefix("[heap]") || fields[5].hasPrefix("[stack")
            else {
                continue
            }
            let range = fields[0].split(separator: "-").compactMap { UInt(String($0), radix: 16) }
            guard range.count == 2 else { continue }
            var offset = range[0]
            while offset < range[1] {
                if own.contains(offset) {
                    offset = own.upperBound
                    continue
                }
                var want = min(UInt(chunk), range[1] - offset)
                if offset < own.lowerBound && offset + want > own.lowerBound { want = own.lowerBound - offset }
                let n = pread(fd, buffer.baseAddress, Int(want), off_t(Int64(bitPattern: UInt64(offset))))
                guard n > 0 else {
                    offset = (offset / page + 1) * page
                    continue
                }
                var at = 0
                while at + masked.count <= n, let hit = memchr(buffer.baseAddress! + at, first, n - at - masked.count + 1) {
                    let i = hit - buffer.baseAddress!
                    if (0..<masked.count).allSatisfy({ buffer[i + $0] ^ mask == masked[$0] }) { found += 1 }
                    at = i + 1
                }
                // Overlap the next read so a copy across the boundary is seen.
                offset += n > masked.count ? UInt(n - masked.count + 1) : UInt(n)
            }
        }
        return found
    }

    /// /proc/self/maps read to its end. Foundation's `String(contentsOfFile:)` stops after one
    /// read of a file whose size reads as zero, the first 4 KiB of the map, which left the scan
    /// blind to every mapping past it (a thread's malloc arena among them).
    static func processMaps() -> String? {
        let fd = open("/proc/self/maps", O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = block.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n >= 0 else { return nil }
            if n == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += block[..<n]
        }
    }

    @Test func theMapIsReadToItsEnd() throws {
        let maps = try #require(Self.processMaps())
        // The stack is the map's last line but for [vvar], [vdso] and [vsyscall], past the first
        // 4 KiB in any process that loads Foundation.
        #expect(maps.utf8.count > 4096)
        #expect(maps.contains("[stack]"))
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard let region = mmap(nil, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), region != MAP_FAILED else {
            Issue.record("mmap failed")
            return
        }
        defer { munmap(region, page) }
        let start = UInt(bitPattern: region)
        let covered = try #require(Self.processMaps()).split(separator: "\n").contains { line in
            let range = line.prefix { $0 != " " }.split(separator: "-").compactMap { UInt(String($0), radix: 16) }
            return range.count == 2 && range[0] <= start && start < range[1]
        }
        #expect(covered, "a fresh mapping is missing from the map")
    }

    @Test func theScanReadsOnPastAPageUnmappedAfterTheMapWasRead() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard let region = mmap(nil, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), region != MAP_FAILED
        else {
            Issue.record("mmap failed")
            return
        }
        let third = region + 2 * page
        defer {
            memset(third, 0, page)
            munmap(region, 3 * page)  // the whole range: a page already gone is no error
        }
        // A random pattern, written unmasked only into the third page.
        var rng = SystemRandomNumberGenerator()
        let masked = (0..<64).map { _ in UInt8.random(in: 0x20...0x7E, using: &rng) ^ Self.mask }
        for (i, byte) in masked.enumerated() { third.storeBytes(of: byte ^ Self.mask, toByteOffset: i, as: UInt8.self) }
        // The map the scan walks is one line, this region's (as /proc/self/maps writes it): a
        // scan of the whole process would hold copies of other tests' memory in its buffer
        // while the key's test runs beside it, and find the key there.
        let start = UInt(bitPattern: region)
        let maps = "\(String(start, radix: 16))-\(String(start + UInt(3 * page), radix: 16)) rw-p 00000000 00:00 0\n"
        // The middle page goes after the map was read, as another test's memory would.
        munmap(region + page, page)
        #expect(Self.occurrences(ofMasked: masked, maps: maps) == 1, "the scan gave up on the rest of a line at its hole")
    }

    /// Loading a key file made a Swift `String` of its text, which the allocator freed without
    /// wiping: a copy of the secret stayed in the process.
    @Test func aKeyFileLoadedLeavesNoCopyOfItsTextBehind() throws {
        let digits = Array("0123456789abcdef".utf8)
        let text = UnsafeMutablePointer<UInt8>.allocate(capacity: 65)
        var masked = [UInt8](repeating: 0, count: 64)
        var rng = SystemRandomNumberGenerator()
        for i in 0..<32 {
            let byte = UInt8.random(in: 1...0x7F, using: &rng)
            for (j, d) in [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]].enumerated() {
                text[2 * i + j] = d
                masked[2 * i + j] = d ^ Self.mask
            }
        }
        text[64] = 0x0A
        let path = NSTemporaryDirectory() + "softchat-keyfile-\(UInt64.random(in: 0...UInt64.max, using: &rng)).key"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        #expect(write(fd, text, 65) == 65)
        close(fd)
        defer { unlink(path) }
        text.update(repeating: 0, count: 65)
        text.deallocate()
        #expect(Self.occurrences(ofMasked: masked) == 0, "the file's text is not in memory before loading")
        let identity = try SoftchatIdentity.loadSecretKeyFile(path: path)
        #expect(identity.publicKeyHex.count == 64)
        #expect(Self.occurrences(ofMasked: masked) == 0, "loading the key file left a copy of its text in memory")
    }

    @Test func aSecretKeyImportedThroughTheCABILeavesNoCopyOfItsTextBehind() throws {
        // The key's hex text, written digit by digit into a buffer of ours (never a String),
        // and its masked form to search with.
        let digits = Array("0123456789abcdef".utf8)
        let text = UnsafeMutablePointer<CChar>.allocate(capacity: 65)
        var masked = [UInt8](repeating: 0, count: 64)
        var rng = SystemRandomNumberGenerator()
        for i in 0..<32 {
            let byte = UInt8.random(in: 1...0x7F, using: &rng)  // below the curve order, never zero
            for (j, d) in [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]].enumerated() {
                text[2 * i + j] = CChar(bitPattern: d)
                masked[2 * i + j] = d ^ Self.mask
            }
        }
        text[64] = 0
        #expect(Self.occurrences(ofMasked: masked) == 1, "the scan finds the host's own buffer")

        var error: UnsafeMutableRawPointer?
        let handle = softchat_identity_import_secret_hex(text, &error)
        #expect(error == nil && handle != nil)
        // The host wipes its buffer; nothing else may hold the text now.
        text.update(repeating: 0, count: 65)
        text.deallocate()
        #expect(Self.occurrences(ofMasked: masked) == 0, "a copy of the key's text is left in memory")
        softchat_identity_free(handle)
    }

    @Test(arguments: [
        "", String(repeating: "0", count: 63), String(repeating: "g", count: 64), String(repeating: "0", count: 64),
        String(repeating: "f", count: 64), " \t" + String(repeating: "1", count: 63) + "\n",
    ])
    func aSecretThatIsNotAKeyIsRefusedWithItsCode(text: String) throws {
        var error: UnsafeMutableRawPointer?
        let handle = softchat_identity_import_secret_hex(text, &error)
        #expect(handle == nil)
        let fields = try #require(error).assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self)
        #expect(String(cString: fields[0]!) == "invalid_relay_authentication")
        softchat_error_free(error)
        #expect(softchat_identity_import_secret_hex(nil, &error) == nil && error != nil)
        softchat_error_free(error)
    }
}
