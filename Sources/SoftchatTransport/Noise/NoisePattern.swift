/// A token of a handshake pattern (noise.md §7.1, §9.2).
public enum NoiseToken: String, Sendable, Hashable {
    /// The sender's ephemeral public key, sent in clear.
    case e
    /// The sender's static public key, encrypted once a cipher key exists.
    case s
    /// A Diffie-Hellman of the initiator's ephemeral key with the responder's ephemeral key, mixed into the keys.
    case ee
    /// A Diffie-Hellman of the initiator's ephemeral key with the responder's static key, mixed into the keys.
    case es
    /// A Diffie-Hellman of the initiator's static key with the responder's ephemeral key, mixed into the keys.
    case se
    /// A Diffie-Hellman of the initiator's static key with the responder's static key, mixed into the keys.
    case ss
    /// The next pre-shared key, mixed into the keys (§9).
    case psk
}

/// A handshake pattern: pre-messages and message patterns, the first message from the
/// initiator, directions alternating. Built from the tables of noise.md §7.4, §7.5 and §18.1,
/// with the `pskN` modifiers of §9.4 applied on top.
public struct NoiseHandshakePattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern's name with its modifiers, e.g. `XX`, `IKpsk2`, `XXpsk0+psk3`.
    public let name: String
    /// Public keys the initiator's pre-message lists (`e` and/or `s`): keys of the initiator
    /// the responder knows in advance.
    public let initiatorPreMessage: [NoiseToken]
    /// Public keys the responder's pre-message lists (`e` and/or `s`): keys of the responder
    /// the initiator knows in advance.
    public let responderPreMessage: [NoiseToken]
    /// Message patterns; even indices go initiator → responder.
    public let messages: [[NoiseToken]]

    /// One-way patterns (N, K, X): a single handshake message, then transport messages only
    /// from the initiator.
    public var isOneWay: Bool { messages.count == 1 && Self.oneWay.contains(baseName) }
    /// Whether any message holds a `psk` token (the name carries a `pskN` modifier).
    public var usesPSK: Bool { messages.contains { $0.contains(.psk) } }
    /// How many `psk` tokens the messages hold: the PSKs a handshake with this pattern needs.
    public var pskCount: Int { messages.reduce(0) { $0 + $1.filter { $0 == .psk }.count } }
    /// The name without its modifiers, e.g. `XX` for `XXpsk0+psk3`.
    public let baseName: String

    /// Whether the initiator transmits a static key (X*, I*, and the one-way X).
    public var initiatorSendsStatic: Bool {
        messages.enumerated().contains { i, tokens in i % 2 == 0 && tokens.contains(.s) }
    }

    /// Whether the responder has a static key (known in advance or transmitted).
    public var responderHasStatic: Bool {
        responderPreMessage.contains(.s) || messages.enumerated().contains { i, tokens in i % 2 == 1 && tokens.contains(.s) }
    }

    /// The pattern's name with its modifiers.
    public var description: String { name }

    /// The pattern named `name` (a base pattern from the spec's tables followed by optional
    /// `pskN` modifiers joined with `+`).
    /// - Parameter name: A pattern name such as `XX`, `IKpsk2` or `XXpsk0+psk3`.
    /// - Throws: ``NoiseError`` with kind `.unsupportedProtocol` for an unknown base pattern,
    ///   a malformed modifier, or a `pskN` naming a message the pattern does not have.
    public init(_ name: String) throws(NoiseError) {
        var base = name
        var modifiers: [Int] = []
        if let start = Self.pskStart(name) {
            base = String(name[..<start])
            for part in name[start...].split(separator: "+", omittingEmptySubsequences: false) {
                guard part.hasPrefix("psk"), let n = Int(part.dropFirst(3)), n >= 0, String(n) == part.dropFirst(3) else {
                    throw NoiseError(.unsupportedProtocol, "unsupported pattern modifier \"\(part)\" in \(name)")
                }
                modifiers.append(n)
            }
        }
        guard let table = Self.table[base] else {
            throw NoiseError(.unsupportedProtocol, "unknown handshake pattern \"\(base)\"")
        }
        var (pre, messages) = Self.parse(table)
        // §9.4: psk0 puts a psk token at the start of the first message, pskN (N ≥ 1) at the
        // end of the Nth.
        for n in modifiers {
            if n == 0 {
                messages[0].insert(.psk, at: 0)
            } else {
                guard n <= messages.count else {
                    throw NoiseError(.unsupportedProtocol, "modifier psk\(n) names message \(n), but \(base) has \(messages.count)")
                }
                messages[n - 1].append(.psk)
            }
        }
        self.name = name
        baseName = base
        initiatorPreMessage = pre.0
        responderPreMessage = pre.1
        self.messages = messages
    }

    static let oneWay: Set<String> = ["N", "K", "X"]

    /// Where the first `psk` modifier starts in a pattern name.
    private static func pskStart(_ name: String) -> String.Index? {
        var i = name.startIndex
        while i < name.endIndex {
            if name[i...].hasPrefix("psk") { return i }
            i = name.index(after: i)
        }
        return nil
    }

    private static func parse(_ text: String) -> (([NoiseToken], [NoiseToken]), [[NoiseToken]]) {
        var lines = text.split(separator: "\n").map { $0.noiseTrimmed }
        var preInitiator: [NoiseToken] = []
        var preResponder: [NoiseToken] = []
        if let dots = lines.firstIndex(of: "...") {
            for line in lines[..<dots] {
                let tokens = tokens(line)
                if line.hasPrefix("->") { preInitiator = tokens } else { preResponder = tokens }
            }
            lines.removeFirst(dots + 1)
        }
        return ((preInitiator, preResponder), lines.map(tokens))
    }

    private static func tokens(_ line: String) -> [NoiseToken] {
        line.dropFirst(2).split(separator: ",").map { NoiseToken(rawValue: String($0).noiseTrimmed)! }
    }

    /// The patterns of noise.md §7.4 (one-way), §7.5 (fundamental) and §18.1 (deferred), as
    /// written there.
    static let table: [String: String] = [
        // §7.4 one-way
        "N": "<- s\n...\n-> e, es",
        "K": "-> s\n<- s\n...\n-> e, es, ss",
        "X": "<- s\n...\n-> e, es, s, ss",
        // §7.5 fundamental
        "NN": "-> e\n<- e, ee",
        "NK": "<- s\n...\n-> e, es\n<- e, ee",
        "NX": "-> e\n<- e, ee, s, es",
        "KN": "-> s\n...\n-> e\n<- e, ee, se",
        "KK": "-> s\n<- s\n...\n-> e, es, ss\n<- e, ee, se",
        "KX": "-> s\n...\n-> e\n<- e, ee, se, s, es",
        "XN": "-> e\n<- e, ee\n-> s, se",
        "XK": "<- s\n...\n-> e, es\n<- e, ee\n-> s, se",
        "XX": "-> e\n<- e, ee, s, es\n-> s, se",
        "IN": "-> e, s\n<- e, ee, se",
        "IK": "<- s\n...\n-> e, es, s, ss\n<- e, ee, se",
        "IX": "-> e, s\n<- e, ee, se, s, es",
        // §18.1 deferred
        "NK1": "<- s\n...\n-> e\n<- e, ee, es",
        "NX1": "-> e\n<- e, ee, s\n-> es",
        "X1N": "-> e\n<- e, ee\n-> s\n<- se",
        "X1K": "<- s\n...\n-> e, es\n<- e, ee\n-> s\n<- se",
        "XK1": "<- s\n...\n-> e\n<- e, ee, es\n-> s, se",
        "X1K1": "<- s\n...\n-> e\n<- e, ee, es\n-> s\n<- se",
        "X1X": "-> e\n<- e, ee, s, es\n-> s\n<- se",
        "XX1": "-> e\n<- e, ee, s\n-> es, s, se",
        "X1X1": "-> e\n<- e, ee, s\n-> es, s\n<- se",
        "K1N": "-> s\n...\n-> e\n<- e, ee\n-> se",
        "K1K": "-> s\n<- s\n...\n-> e, es\n<- e, ee\n-> se",
        "KK1": "-> s\n<- s\n...\n-> e\n<- e, ee, se, es",
        "K1K1": "-> s\n<- s\n...\n-> e\n<- e, ee, es\n-> se",
        "K1X": "-> s\n...\n-> e\n<- e, ee, s, es\n-> se",
        "KX1": "-> s\n...\n-> e\n<- e, ee, se, s\n-> es",
        "K1X1": "-> s\n...\n-> e\n<- e, ee, s\n-> se, es",
        "I1N": "-> e, s\n<- e, ee\n-> se",
        "I1K": "<- s\n...\n-> e, es, s\n<- e, ee\n-> se",
        "IK1": "<- s\n...\n-> e, s\n<- e, ee, se, es",
        "I1K1": "<- s\n...\n-> e, s\n<- e, ee, es\n-> se",
        "I1X": "-> e, s\n<- e, ee, s, es\n-> se",
        "IX1": "-> e, s\n<- e, ee, se, s\n-> es",
        "I1X1": "-> e, s\n<- e, ee, s\n-> se, es",
    ]

    /// `XX`, the default of noise:// URLs: each side transmits its static key during the
    /// handshake, so neither needs the other's in advance.
    public static let XX = try! NoiseHandshakePattern("XX")
    /// `IK`: the initiator knows the responder's static key in advance and sends its own,
    /// encrypted, in the first message.
    public static let IK = try! NoiseHandshakePattern("IK")
    /// `NK`: the initiator knows the responder's static key in advance and has none of its own.
    public static let NK = try! NoiseHandshakePattern("NK")
    /// `NN`: ephemeral keys only; neither side is authenticated.
    public static let NN = try! NoiseHandshakePattern("NN")

    /// Every base pattern name this implementation knows.
    public static var knownBaseNames: [String] { table.keys.sorted() }
}

/// A full protocol name, `Noise_<pattern>_25519_ChaChaPoly_SHA256` (§8); only this set of
/// crypto functions is implemented.
public struct NoiseProtocol: Sendable, Hashable, CustomStringConvertible {
    /// The handshake pattern.
    public let pattern: NoiseHandshakePattern
    /// The full protocol name, `Noise_<pattern>_25519_ChaChaPoly_SHA256`, which the handshake
    /// hashes first.
    public var name: String { "Noise_\(pattern.name)_25519_ChaChaPoly_SHA256" }
    /// The full protocol name.
    public var description: String { name }

    /// The protocol that runs `pattern` with X25519, ChaCha20-Poly1305 and SHA-256.
    /// - Parameter pattern: The handshake pattern.
    public init(pattern: NoiseHandshakePattern) { self.pattern = pattern }

    /// Parses a full protocol name.
    /// - Parameter name: A name such as `Noise_XX_25519_ChaChaPoly_SHA256`.
    /// - Throws: ``NoiseError`` with kind `.unsupportedProtocol` when `name` is not a
    ///   five-part Noise protocol name, names crypto functions other than 25519, ChaChaPoly
    ///   and SHA256, or names a pattern ``NoiseHandshakePattern`` does not know.
    public init(_ name: String) throws(NoiseError) {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "Noise" else {
            throw NoiseError(.unsupportedProtocol, "\"\(name)\" is not a Noise protocol name")
        }
        guard parts[2] == "25519", parts[3] == "ChaChaPoly", parts[4] == "SHA256" else {
            throw NoiseError(.unsupportedProtocol, "\(name): only 25519, ChaChaPoly and SHA256 are implemented")
        }
        pattern = try NoiseHandshakePattern(String(parts[1]))
    }
}

extension StringProtocol {
    fileprivate var noiseTrimmed: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
