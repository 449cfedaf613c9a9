public import Foundation

/// The target languages' hand-written code that generated files carry verbatim (a JSON reader,
/// call helpers, frame codecs), kept as resource files under `Templates/<language>/` rather
/// than as string literals in the renderers, so each reads, diffs and lints as its own language.
public enum Templates {
    public enum Failure: Error, CustomStringConvertible {
        case missing(String)
        public var description: String {
            switch self {
            case .missing(let name): "softchat-codegen: the template \(name) is not in the codegen's resources"
            }
        }
    }

    /// The text of `Templates/<path>` (`rust/json.rs`).
    public static func text(_ path: String) throws(Failure) -> String {
        let parts = path.split(separator: "/")
        let name = String(parts.last ?? "")
        let subdirectory = (["Templates"] + parts.dropLast().map(String.init)).joined(separator: "/")
        let dot = name.lastIndex(of: ".") ?? name.endIndex
        let base = String(name[..<dot])
        let ext = dot < name.endIndex ? String(name[name.index(after: dot)...]) : nil
        guard let url = Bundle.module.url(forResource: base, withExtension: ext, subdirectory: subdirectory),
            let data = try? Data(contentsOf: url), let text = String(data: data, encoding: .utf8)
        else { throw .missing(path) }
        return text
    }

    /// The lines of `Templates/<path>`, without the file's final newline, as a renderer writes them
    /// one by one at its current indentation.
    public static func lines(_ path: String) throws(Failure) -> [String] {
        var text = try text(path)
        if text.hasSuffix("\n") { text.removeLast() }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}
