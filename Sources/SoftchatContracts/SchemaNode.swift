import SoftchatJSON

/// One schema file: its display path (as diagnostics print it), bytes and value locations.
final class SchemaFile {
    let displayPath: String
    let bytes: [UInt8]
    let locations: [String: Int]

    init(displayPath: String, bytes: [UInt8], locations: [String: Int]) {
        self.displayPath = displayPath
        self.bytes = bytes
        self.locations = locations
    }

    func position(of path: String, key: Bool = false) -> (line: Int, column: Int) {
        let offset = (key ? locations[path + "#key"] : nil) ?? locations[path] ?? 0
        return JSONError.lineAndColumn(ofOffset: offset, in: bytes)
    }
}

/// Collects diagnostics while the loader walks the files.
final class DiagnosticSink {
    private(set) var diagnostics: [SchemaDiagnostic] = []

    func error(_ message: String, file: SchemaFile, path: String, atKey: Bool = false) {
        let (line, column) = file.position(of: path, key: atKey)
        diagnostics.append(SchemaDiagnostic(file: file.displayPath, line: line, column: column, message: message))
    }

    func error(_ message: String, file: String, line: Int = 1, column: Int = 1) {
        diagnostics.append(SchemaDiagnostic(file: file, line: line, column: column, message: message))
    }
}

/// A JSON value at a path in a schema file, with typed accessors that report what is wrong
/// (missing key, wrong type, unknown key) at the right line instead of failing silently.
struct SchemaNode {
    let value: JSONValue
    let path: String
    let file: SchemaFile
    let sink: DiagnosticSink

    func error(_ message: String, atKey: Bool = false) {
        sink.error(message, file: file, path: path, atKey: atKey)
    }

    func childPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func child(_ key: String) -> SchemaNode? {
        guard let v = value[key] else { return nil }
        return SchemaNode(value: v, path: childPath(key), file: file, sink: sink)
    }

    /// Reports every key of this object that is not in `allowed`; returns false if not an object.
    @discardableResult
    func expectObject(keys allowed: Set<String>, what: String) -> Bool {
        guard let object = value.objectValue else {
            error("\(what) must be an object, not \(value.typeName)")
            return false
        }
        for key in object.keys where !allowed.contains(key) {
            sink.error(
                "unknown key \"\(key)\" in \(what) (allowed: \(allowed.sorted().joined(separator: ", ")))",
                file: file, path: childPath(key), atKey: true)
        }
        return true
    }

    func string(_ key: String, in what: String, required: Bool = true) -> String? {
        guard let node = child(key) else {
            if required { error("\(what) is missing required key \"\(key)\"") }
            return nil
        }
        guard let s = node.value.stringValue else {
            node.error("\"\(key)\" in \(what) must be a string, not \(node.value.typeName)")
            return nil
        }
        if required && s.isEmpty { node.error("\"\(key)\" in \(what) must not be empty") }
        return s
    }

    func integer(_ key: String, in what: String, required: Bool = true) -> Int64? {
        guard let node = child(key) else {
            if required { error("\(what) is missing required key \"\(key)\"") }
            return nil
        }
        guard let n = node.value.int64Value else {
            node.error("\"\(key)\" in \(what) must be an integer, not \(node.value.jsonText)")
            return nil
        }
        return n
    }

    func bool(_ key: String, in what: String) -> Bool? {
        guard let node = child(key) else { return nil }
        guard let b = node.value.boolValue else {
            node.error("\"\(key)\" in \(what) must be true or false, not \(node.value.typeName)")
            return nil
        }
        return b
    }

    func array(_ key: String, in what: String, required: Bool = true) -> [SchemaNode]? {
        guard let node = child(key) else {
            if required { error("\(what) is missing required key \"\(key)\"") }
            return nil
        }
        return node.elements(what: "\"\(key)\" in \(what)")
    }

    func elements(what: String) -> [SchemaNode]? {
        guard let elements = value.arrayValue else {
            error("\(what) must be an array, not \(value.typeName)")
            return nil
        }
        return elements.enumerated().map { i, v in
            SchemaNode(value: v, path: "\(path)[\(i)]", file: file, sink: sink)
        }
    }

    func strings(_ key: String, in what: String, required: Bool = true) -> [String]? {
        guard let nodes = array(key, in: what, required: required) else { return nil }
        var out: [String] = []
        for n in nodes {
            guard let s = n.value.stringValue else {
                n.error("elements of \"\(key)\" in \(what) must be strings, not \(n.value.typeName)")
                continue
            }
            out.append(s)
        }
        return out
    }
}
