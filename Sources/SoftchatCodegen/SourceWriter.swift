public import Foundation
public import SoftchatContracts

/// Accumulates generated text line by line with indentation; every renderer uses it so the
/// output is deterministic and consistently formatted.
struct SourceWriter {
    private(set) var text = ""
    private var level = 0
    let indentUnit: String

    init(indent: String = "    ") { indentUnit = indent }

    mutating func line(_ s: String = "") {
        if s.isEmpty {
            text += "\n"
        } else {
            text += String(repeating: indentUnit, count: level) + s + "\n"
        }
    }

    mutating func block(_ opener: String, closer: String = "}", _ body: (inout SourceWriter) -> Void) {
        line(opener)
        level += 1
        body(&self)
        level -= 1
        line(closer)
    }

    /// Writes a KDoc/TSDoc block: `/** text */` when it fits one line, else a starred block.
    mutating func doc(_ text: String) {
        guard !text.isEmpty else { return }
        let pad = String(repeating: indentUnit, count: level)
        if pad.count + text.count + 7 <= 110 && !text.contains("\n") {
            line("/** \(text.replacingOccurrences(of: "*/", with: "* /")) */")
            return
        }
        line("/**")
        comment(text.replacingOccurrences(of: "*/", with: "* /"), prefix: " * ")
        line(" */")
    }

    /// Writes `text` as comment lines with `prefix`, wrapped at about 100 columns.
    /// A comment's text wrapped at 96 columns, its first line after `first` and the rest after
    /// `rest` (a DocC parameter: `///   - name: …` continued under the name).
    mutating func comment(_ text: String, first: String, rest: String) {
        var prefix = first
        var current = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !current.isEmpty && current.count + word.count + 1 > 96 {
                line(prefix + current)
                prefix = rest
                current = ""
            }
            current += current.isEmpty ? String(word) : " " + word
        }
        line(prefix + current)
    }

    mutating func comment(_ text: String, prefix: String) {
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var current = ""
            for word in paragraph.split(separator: " ") {
                if !current.isEmpty && current.count + word.count + 1 > 96 {
                    line(prefix + current)
                    current = ""
                }
                current += current.isEmpty ? String(word) : " " + word
            }
            line(current.isEmpty ? String(prefix.dropLast()) : prefix + current)
        }
    }
}

/// A generated file: its path relative to the output root and its contents.
public struct GeneratedFile: Sendable, Equatable {
    public var path: String
    public var contents: String
    public init(path: String, contents: String) {
        self.path = path
        self.contents = contents
    }

    /// Writes `data` (by default the contents) to `path` under `root`, creating folders, unless
    /// the file already holds exactly those bytes, so an unchanged output keeps its timestamp.
    /// - Returns: Whether the file was written.
    public func write(_ data: Data? = nil, under root: String) throws -> Bool {
        let url = URL(fileURLWithPath: root).appendingPathComponent(path)
        let data = data ?? Data(contents.utf8)
        if let existing = try? Data(contentsOf: url), existing == data { return false }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: .atomic)
        return true
    }
}

/// Escapes text for a Swift, Kotlin or TypeScript double-quoted string literal.
func quoted(_ s: String, dollar: Bool = false) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        case "\r": out += "\\r"
        case "$" where dollar: out += "\\$"
        default:
            if scalar.value < 0x20 {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// FNV-1a 64 of the text, hex: a stable fingerprint of the schema for mismatch detection
/// between a library and the facades generated beside it (not a security checksum).
public func contractChecksum(_ set: ContractSet) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in canonicalDescription(set).utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
}

/// Everything behaviour depends on, in a fixed order: bounds, errors, API declarations.
func canonicalDescription(_ set: ContractSet) -> String {
    var s = "v\(set.schemaVersion)\n"
    for e in set.errors { s += "error \(e.code) \(e.retry.rawValue)\n" }
    for c in set.contracts {
        s += "contract \(c.id)\n"
        for b in c.bounds { s += "bound \(b.name) \(b.value) \(b.min.map(String.init) ?? "-") \(b.unit.rawValue) \(b.error)\n" }
        for t in c.api.types {
            s += "type \(t.name) \(t.kind.rawValue)\n"
            for f in t.fields { s += " field \(f.name) \(f.type)\n" }
            if let tag = t.tag { s += " tag \(tag.name) \(tag.type)\n" }
            for v in t.variants {
                s += " variant \(v.name)(\(v.fields.map { $0.name + ($0.optional ? "?" : "") }.joined(separator: ", ")))\n"
            }
            if let encoding = t.encoding { s += " encoding \(encoding) \(t.bytes.map(String.init) ?? "-")\n" }
            for k in t.cases { s += " case \(k.name) \(k.value)\n" }
            for p in t.properties { s += " property \(p.name) \(p.type)\n" }
            for m in t.constructors + t.methods { s += " " + signature(m) + "\n" }
        }
        for f in c.api.functions { s += signature(f) + "\n" }
    }
    return s
}

func signature(_ f: FunctionDecl) -> String {
    let params = f.params.map { "\($0.name): \($0.type)\($0.secret ? " secret" : "")" }.joined(separator: ", ")
    return "\(f.isStatic ? "static " : "")\(f.name)(\(params)) -> \(f.returns?.description ?? "void") throws \(f.throwsCodes.joined(separator: ","))"
}

extension TypeDecl {
    /// `persistEvent(subscriptionId: string, event: VerifiedEvent)`: a union variant as the
    /// reference docs list it.
    public func variantSignature(_ v: UnionVariant) -> String {
        let fields = fields(of: v)
        return v.name + (fields.isEmpty ? "" : "(" + fields.map { "\($0.name): \($0.type)" }.joined(separator: ", ") + ")")
    }
}
