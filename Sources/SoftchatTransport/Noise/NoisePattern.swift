/// A token of a handshake pattern (noise.md §7.1, §9.2).
public enum NoiseToken: String, Sendable, Hashable {
    case e, s, ee, es, se, ss, psk
}

/// A handshake pattern: pre-messages and message patterns, the first message from the
/// initiator, directions alternating. Built from the tables of noise.md §7.4, §7.5 and §18.1,
/// with the `pskN` modifiers of §9.4 applied on top.
public struct NoiseHandshakePattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern's name with its modifiers, e.g. `XX`, `IKpsk2`, `XXpsk0+psk3`.
    public let name: String
    /// Public keys the initiator's and the responder's pre-messages list (`e` and/or `s`).
    public let initiatorPreMessage: [NoiseToken]
    public let responderPreMessage: [NoiseToken]
    /// Message patterns; even indices go initiator → responder.
    public let messages: [[NoiseToken]]

    /// One-way patterns (N, K, X): a single handshake message, then transport messages only
    /// from the initiator.
    public var isOneWay: Bool { messages.count == 1 && Self.oneWay.contains(baseName) }
    public var usesPSK: Bool { messages.contains { $0.contains(.psk) } }
    public var pskCount: Int { messages.reduce(0) { $0 + $1.filter { $0 == .psk }.count } }
    public let baseName: String

    /// Whether the initiator transmits a static key (X*, I*, and the one-way X).
    public var initiatorSendsStatic: Bool {
        messages.enumerated().contains { i, tokens in i % 2 == 0 && tokens.contains(.s) }
    }

    /// Whether the responder has a static key (known in advance or transmitted).
    public var responderHasStatic: Bool {
        responderPreMessage.contains(.s) || messages.enumerated().contains { i, tokens in i % 2 == 1 && tokens.contains(.s) }
    }

    public var description: String { name }

    /// The pattern named `name` (a base pattern from the spec's tables followed by optional
    /// `pskN` modifiers joined with `+`).
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

    /// The patterns relay connections use most.
    public static let XX = try! NoiseHandshakePattern("XX")
    public static let IK = try! NoiseHandshakePattern("IK")
    public static let NK = try! NoiseHandshakePattern("NK")
    public static let NN = try! NoiseHandshakePattern("NN")

    /// Every base pattern name this implementation knows.
    public static var knownBaseNames: [String] { table.keys.sorted() }
}

/// A full protocol name, `Noise_<pattern>_25519_ChaChaPoly_SHA256` (§8); only this set of
/// crypto functions is implemented.
public struct NoiseProtocol: Sendable, Hashable, CustomStringConvertible {
    public let pattern: NoiseHandshakePattern
    public var name: String { "Noise_\(pattern.name)_25519_ChaChaPoly_SHA256" }
    public var description: String { name }

    public init(pattern: NoiseHandshakePattern) { self.pattern = pattern }

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

private extension StringProtocol {
    var noiseTrimmed: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
