import COpenSSL

/// SHA-1 and base64 for the WebSocket handshake's key/accept check (RFC 6455 §4.2.2).
enum HandshakeCrypto {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &length, EVP_sha1(), nil)
        return base64(digest)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 4 * ((bytes.count + 2) / 3) + 1)
        let n = EVP_EncodeBlock(&out, bytes, Int32(bytes.count))
        return String(decoding: out.prefix(Int(n)), as: UTF8.self)
    }

    static func randomKey() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&bytes, 16)
        return base64(bytes)
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s.removeFirst() }
        while let l = s.last, chars.contains(l) { s.removeLast() }
        return String(s)
    }

    var lowercasedTokens: [String] {
        split(separator: ",").map { $0.trimmingCharacters(in: " \t").lowercased() }
    }
}
