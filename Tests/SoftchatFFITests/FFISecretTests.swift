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
    /// /proc/self/mem (a region unmapped meanwhile reads as an error and is skipped).
    static func occurrences(ofMasked masked: [UInt8]) -> Int {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return -1 }
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
                guard n > 0 else { break }
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
