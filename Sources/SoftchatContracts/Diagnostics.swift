/// A problem in a schema file, located like a compiler diagnostic so editors and build logs
/// can jump to it: `Schema/relay.wire.json:12:5: error: unknown error code "…"`.
public struct SchemaDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public enum Severity: String, Sendable { case error, warning }

    public var file: String
    public var line: Int
    public var column: Int
    public var severity: Severity
    public var message: String

    public init(file: String, line: Int, column: Int, severity: Severity = .error, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.severity = severity
        self.message = message
    }

    public var description: String {
        "\(file):\(line):\(column): \(severity.rawValue): \(message)"
    }
}

/// The schema could not be loaded: every diagnostic found, in file order.
public struct SchemaLoadError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [SchemaDiagnostic]
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}
