/// Spells language-neutral schema names (lower camel case, acronyms as words: `relayUrl`)
/// the way each target language expects.
public enum Naming {
    /// Words Swift API guidelines write in capitals when they are not the first word.
    static let swiftAcronyms: [String: String] = ["Json": "JSON", "Url": "URL", "Urls": "URLs", "Id": "ID", "Ids": "IDs", "Hll": "HLL"]

    /// Splits `createNip42Authentication` into `create`, `Nip42`, `Authentication`.
    public static func words(_ name: String) -> [String] {
        var words: [String] = []
        var current = ""
        for ch in name {
            if ch.isUppercase && !current.isEmpty {
                words.append(current)
                current = ""
            }
            current.append(ch)
        }
        if !current.isEmpty { words.append(current) }
        return words
    }

    /// `deliveryEventIds` → `deliveryEventIDs`, `filtersJson` → `filtersJSON`.
    public static func swift(_ name: String) -> String {
        let w = words(name)
        guard let first = w.first else { return name }
        return first + w.dropFirst().map { swiftAcronyms[$0] ?? $0 }.joined()
    }

    /// `confirmSent` → `confirm_sent`, `createNip42Authentication` → `create_nip42_authentication`.
    public static func snake(_ name: String) -> String {
        words(name).map { $0.lowercased() }.joined(separator: "_")
    }

    /// `confirm_sent` → `confirmSent`.
    public static func camelFromSnake(_ name: String) -> String {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard let first = parts.first else { return name }
        return String(first) + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    /// `persistEvent` → `PERSIST_EVENT`; `rate-limited` → `RATE_LIMITED`.
    public static func screamingSnake(_ name: String) -> String {
        snake(name).uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// `relay.wire` → `RelayWire`.
    public static func upperCamel(contractID id: String) -> String {
        id.split(separator: ".").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    /// `relay.wire` → `relayWire`.
    public static func lowerCamel(contractID id: String) -> String {
        let u = upperCamel(contractID: id)
        return u.prefix(1).lowercased() + u.dropFirst()
    }

    /// `maxFilters` → `MaxFilters`.
    public static func capitalized(_ name: String) -> String {
        name.prefix(1).uppercased() + name.dropFirst()
    }
}

extension String {
    package func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: target) {
            out += rest[..<r.lowerBound]
            out += replacement
            rest = rest[r.upperBound...]
        }
        out += rest
        return out
    }

    package func components(separatedBy separator: String) -> [String] {
        var parts: [String] = []
        var rest = Substring(self)
        while let r = rest.range(of: separator) {
            parts.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        parts.append(String(rest))
        return parts
    }
}

extension Substring {
    package func range(of target: String) -> Range<Substring.Index>? {
        guard !target.isEmpty, count >= target.count else { return nil }
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(target) { return i..<index(i, offsetBy: target.count) }
            i = index(after: i)
        }
        return nil
    }
}
