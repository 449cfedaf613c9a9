import SoftchatJSON

/// Where the loader reads schema files from: a directory on disk, or memory in tests.
public protocol SchemaSource {
    /// The bytes of `name` (a file name inside the schema directory), or nil if absent.
    func read(_ name: String) -> [UInt8]?
}

/// Reads `Schema/` files from memory; used by tests to feed broken schemas.
public struct InMemorySchemaSource: SchemaSource {
    public var files: [String: String]
    public init(files: [String: String]) { self.files = files }
    public func read(_ name: String) -> [UInt8]? { files[name].map { Array($0.utf8) } }
}

/// Loads and validates the schema: files → `ContractSet`, or every problem as a diagnostic.
public struct SchemaLoader {
    public static let manifestName = "softchat.json"

    /// Prefix diagnostics print before a file name (`Schema/`), relative to the package root.
    public var displayPrefix: String

    public init(displayPrefix: String = "Schema/") {
        self.displayPrefix = displayPrefix
    }

    public func load(from source: some SchemaSource) throws(SchemaLoadError) -> ContractSet {
        let sink = DiagnosticSink()
        let result = loadUnvalidated(from: source, sink: sink)
        if let set = result, sink.diagnostics.isEmpty {
            SchemaValidator(set: set.model, sink: sink, files: set.files).validate()
        }
        if !sink.diagnostics.isEmpty { throw SchemaLoadError(diagnostics: sink.diagnostics) }
        return result!.model.resolvingRestatements().resolvingVariantDocs()
    }

    /// The names of every file the manifest references (for build-system input tracking).
    public func fileNames(from source: some SchemaSource) -> [String] {
        let sink = DiagnosticSink()
        guard let manifest = parse(Self.manifestName, source: source, sink: sink) else { return [Self.manifestName] }
        let node = SchemaNode(value: manifest.1, path: "", file: manifest.0, sink: sink)
        var names = [Self.manifestName]
        if let e = node.string("errors", in: "the manifest") { names.append(e) }
        if let r = node.string("rules", in: "the manifest") { names.append(r) }
        names += node.strings("contracts", in: "the manifest") ?? []
        return names
    }

    struct Loaded {
        var model: ContractSet
        var files: [String: SchemaFile]  // contract id → file
    }

    private func parse(_ name: String, source: some SchemaSource, sink: DiagnosticSink) -> (SchemaFile, JSONValue)? {
        let display = displayPrefix + name
        guard let bytes = source.read(name) else {
            sink.error("file not found", file: display)
            return nil
        }
        do {
            let (value, locations) = try JSONReader().parseWithLocations(bytes)
            return (SchemaFile(displayPath: display, bytes: bytes, locations: locations), value)
        } catch {
            let (line, column) = error.lineAndColumn(in: bytes)
            sink.error("invalid JSON: \(error.reasonText)", file: display, line: line, column: column)
            return nil
        }
    }

    private func loadUnvalidated(from source: some SchemaSource, sink: DiagnosticSink) -> Loaded? {
        guard let (mfile, mvalue) = parse(Self.manifestName, source: source, sink: sink) else { return nil }
        let manifest = SchemaNode(value: mvalue, path: "", file: mfile, sink: sink)
        guard manifest.expectObject(keys: ["name", "schemaVersion", "errors", "rules", "contracts"], what: "the manifest")
        else { return nil }
        let name = manifest.string("name", in: "the manifest") ?? ""
        let version = manifest.integer("schemaVersion", in: "the manifest") ?? 0
        if version != 1, manifest.child("schemaVersion") != nil {
            manifest.child("schemaVersion")!.error("unsupported schemaVersion \(version) (this loader reads 1)")
        }
        let errorsName = manifest.string("errors", in: "the manifest")
        let rulesName = manifest.string("rules", in: "the manifest")
        let contractNames = manifest.strings("contracts", in: "the manifest") ?? []

        var errors: [ErrorSpec] = []
        if let errorsName, let (f, v) = parse(errorsName, source: source, sink: sink) {
            errors = loadErrors(SchemaNode(value: v, path: "", file: f, sink: sink))
        }
        var rules = Rules(ownership: "", retry: "", lifecycle: "", concurrency: "", cancellation: "")
        if let rulesName, let (f, v) = parse(rulesName, source: source, sink: sink) {
            let root = SchemaNode(value: v, path: "", file: f, sink: sink)
            if root.expectObject(keys: ["rules"], what: "the rules file"), let r = root.child("rules") {
                rules = loadRules(r, base: nil) ?? rules
            } else if root.child("rules") == nil {
                root.error("the rules file is missing required key \"rules\"")
            }
        }
        var contracts: [Contract] = []
        var files: [String: SchemaFile] = [:]
        for (i, contractName) in contractNames.enumerated() {
            guard let (f, v) = parse(contractName, source: source, sink: sink) else { continue }
            if let c = loadContract(SchemaNode(value: v, path: "", file: f, sink: sink), fileName: contractName, sharedRules: rules) {
                if files[c.id] != nil {
                    manifest.child("contracts")?.elements(what: "contracts")?[i].error("contract \"\(c.id)\" is listed twice")
                    continue
                }
                contracts.append(c)
                files[c.id] = f
            }
        }
        let set = ContractSet(name: name, schemaVersion: Int(version), errors: errors, rules: rules, contracts: contracts)
        return Loaded(model: set, files: files)
    }

    private func loadErrors(_ root: SchemaNode) -> [ErrorSpec] {
        guard root.expectObject(keys: ["errors"], what: "the error catalog"),
            let items = root.array("errors", in: "the error catalog")
        else { return [] }
        var out: [ErrorSpec] = []
        var seen: Set<String> = []
        for item in items {
            guard item.expectObject(keys: ["code", "meaning", "retry", "handling"], what: "an error") else { continue }
            let code = item.string("code", in: "an error") ?? ""
            let meaning = item.string("meaning", in: "error \"\(code)\"") ?? ""
            let handling = item.string("handling", in: "error \"\(code)\"") ?? ""
            var retry = RetryRule.permanent
            if let r = item.string("retry", in: "error \"\(code)\"") {
                if let rule = RetryRule(rawValue: r) {
                    retry = rule
                } else {
                    item.child("retry")!.error("retry rule \"\(r)\" of error \"\(code)\" must be permanent or retryable")
                }
            }
            if !code.isEmpty && !isSnakeCase(code) {
                item.child("code")!.error("error code \"\(code)\" must be lower snake case")
            }
            if !seen.insert(code).inserted {
                item.child("code")!.error("duplicate error code \"\(code)\"")
                continue
            }
            out.append(ErrorSpec(code: code, meaning: meaning, retry: retry, handling: handling))
        }
        return out
    }

    private func loadRules(_ node: SchemaNode, base: Rules?) -> Rules? {
        guard node.expectObject(keys: Set(Rules.keys), what: "rules") else { return nil }
        func text(_ key: String, _ fallback: String?) -> String {
            if let fallback, node.child(key) == nil { return fallback }
            return node.string(key, in: "rules") ?? ""
        }
        return Rules(
            ownership: text("ownership", base?.ownership), retry: text("retry", base?.retry),
            lifecycle: text("lifecycle", base?.lifecycle), concurrency: text("concurrency", base?.concurrency),
            cancellation: text("cancellation", base?.cancellation))
    }

    static let contractKeys: Set<String> = [
        "id", "title", "summary", "output", "trust", "bounds", "errors", "rules", "symbols", "notes",
        "sequence", "steps", "api", "recipes",
    ]

    private func loadContract(_ root: SchemaNode, fileName: String, sharedRules: Rules) -> Contract? {
        guard root.expectObject(keys: Self.contractKeys, what: "a contract") else { return nil }
        let id = root.string("id", in: "the contract") ?? ""
        let what = "contract \"\(id)\""
        if !id.isEmpty && fileName != "\(id).json" {
            root.child("id")!.error("contract id \"\(id)\" does not match its file name \"\(fileName)\"")
        }
        var contract = Contract(
            id: id, file: fileName,
            title: root.string("title", in: what) ?? "",
            summary: root.string("summary", in: what) ?? "",
            output: root.string("output", in: what) ?? "",
            trust: root.string("trust", in: what) ?? "",
            bounds: [], errors: root.strings("errors", in: what) ?? [],
            rules: sharedRules, symbols: [:],
            notes: root.strings("notes", in: what, required: false) ?? [],
            sequence: root.strings("sequence", in: what, required: false) ?? [],
            steps: root.strings("steps", in: what, required: false) ?? [],
            api: .empty, recipes: [])
        if let r = root.child("rules"), let rules = loadRules(r, base: sharedRules) { contract.rules = rules }
        for b in root.array("bounds", in: what) ?? [] {
            if let bound = loadBound(b, contract: id) { contract.bounds.append(bound) }
        }
        if let symbols = root.child("symbols"),
            symbols.expectObject(keys: Set(Language.allCases.map(\.rawValue)), what: "symbols")
        {
            for language in Language.allCases {
                guard let list = symbols.strings(language.rawValue, in: "symbols of \(what)") else { continue }
                contract.symbols[language] = list
            }
        } else if root.child("symbols") == nil {
            root.error("\(what) is missing required key \"symbols\"")
        }
        if let api = root.child("api") { contract.api = loadAPI(api, contract: id) }
        for r in root.array("recipes", in: what, required: false) ?? [] {
            guard r.expectObject(keys: ["language", "code", "note"], what: "a recipe") else { continue }
            guard let lang = r.string("language", in: "a recipe") else { continue }
            guard let language = Language(rawValue: lang) else {
                r.child("language")!.error("unknown recipe language \"\(lang)\" (rust, android, swift, typescript)")
                continue
            }
            contract.recipes.append(
                Recipe(
                    language: language, code: r.strings("code", in: "a recipe") ?? [],
                    note: r.string("note", in: "a recipe", required: false)))
        }
        return contract
    }

    private func loadBound(_ b: SchemaNode, contract: String) -> Bound? {
        guard b.expectObject(keys: ["name", "value", "min", "unit", "error", "doc", "restates"], what: "a bound")
        else { return nil }
        let name = b.string("name", in: "a bound") ?? ""
        let what = "bound \"\(name)\""
        if let restates = b.string("restates", in: what, required: false) {
            for key in ["value", "min", "unit", "error"] where b.child(key) != nil {
                b.child(key)!.error("\(what) restates \(restates) and must not set \"\(key)\"", atKey: true)
            }
            return Bound(
                name: name, contract: contract, value: 0, min: nil, unit: .items, error: "",
                doc: b.string("doc", in: what, required: false) ?? "", restates: restates)
        }
        let value = b.integer("value", in: what)
        let min = b.integer("min", in: what, required: false)
        var unit: BoundUnit? = nil
        if let u = b.child("unit") {
            if let s = u.value.stringValue, let parsed = BoundUnit(rawValue: s) {
                unit = parsed
            } else {
                u.error("\(what) has unit \(u.value.jsonText); units are \(BoundUnit.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        } else {
            b.error("\(what) has no unit")
        }
        guard let errorCode = b.child("error") != nil ? b.string("error", in: what) : nil else {
            if b.child("error") == nil { b.error("\(what) has no error code") }
            return nil
        }
        let doc = b.string("doc", in: what) ?? ""
        guard let value, let unit else { return nil }
        if value < 0 { b.child("value")!.error("\(what) must not be negative") }
        if let min, min > value { b.child("min")!.error("\(what) has min \(min) above its value \(value)") }
        return Bound(name: name, contract: contract, value: value, min: min, unit: unit, error: errorCode, doc: doc, restates: nil)
    }

    private func loadAPI(_ node: SchemaNode, contract: String) -> APIDeclarations {
        guard node.expectObject(keys: ["types", "functions"], what: "api") else { return .empty }
        var api = APIDeclarations.empty
        for t in node.array("types", in: "api", required: false) ?? [] {
            if let decl = loadType(t, contract: contract) { api.types.append(decl) }
        }
        for f in node.array("functions", in: "api", required: false) ?? [] {
            if let decl = loadFunction(f, what: "a function", requireName: true) { api.functions.append(decl) }
        }
        return api
    }

    private func loadType(_ t: SchemaNode, contract: String) -> TypeDecl? {
        let keys: Set<String> = [
            "name", "kind", "doc", "fields", "cases", "constructors", "properties", "methods", "tag", "variants",
            "encoding", "bytes", "payload", "concurrent", "nativeOnly", "sealed", "swiftSurface",
        ]
        guard t.expectObject(keys: keys, what: "a type") else { return nil }
        let name = t.string("name", in: "a type") ?? ""
        let what = "type \"\(name)\""
        guard let kindText = t.string("kind", in: what) else { return nil }
        guard let kind = TypeDecl.Kind(rawValue: kindText) else {
            let kinds = TypeDecl.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            t.child("kind")!.error("\(what) has kind \"\(kindText)\"; kinds are \(kinds)")
            return nil
        }
        var decl = TypeDecl(name: name, contract: contract, kind: kind, doc: t.string("doc", in: what) ?? "")
        let allowedByKind: [TypeDecl.Kind: Set<String>] = [
            .record: ["fields"], .enum: ["cases"], .object: ["constructors", "properties", "methods"],
            .union: ["tag", "fields", "variants"], .identifier: ["encoding", "bytes"], .callback: ["payload"],
        ]
        if kind == .object, t.child("concurrent") != nil {
            decl.concurrent = t.bool("concurrent", in: what) ?? false
        } else if let concurrent = t.child("concurrent") {
            concurrent.error("\(what) is a \(kind.rawValue) and cannot have \"concurrent\"", atKey: true)
        }
        if kind == .object, t.child("nativeOnly") != nil {
            decl.nativeOnly = t.bool("nativeOnly", in: what) ?? false
        } else if let nativeOnly = t.child("nativeOnly") {
            nativeOnly.error("\(what) is a \(kind.rawValue) and cannot have \"nativeOnly\"", atKey: true)
        }
        if kind == .record, t.child("sealed") != nil {
            decl.sealed = t.bool("sealed", in: what) ?? false
        } else if let sealed = t.child("sealed") {
            sealed.error("\(what) is a \(kind.rawValue) and cannot have \"sealed\"", atKey: true)
        }
        if kind == .union {
            // A union is in the Swift surface unless it says otherwise: one whose fields are the
            // account's types (which the core cannot name) is declared by the C ABI instead.
            decl.swiftSurface = t.child("swiftSurface") == nil ? true : t.bool("swiftSurface", in: what) ?? true
        } else if kind == .record || kind == .enum, t.child("swiftSurface") != nil {
            decl.swiftSurface = t.bool("swiftSurface", in: what) ?? false
        } else if let surface = t.child("swiftSurface") {
            surface.error("\(what) is a \(kind.rawValue) and cannot have \"swiftSurface\"", atKey: true)
        }
        for key in ["fields", "cases", "constructors", "properties", "methods", "tag", "variants", "encoding", "bytes", "payload"]
        where t.child(key) != nil && !allowedByKind[kind]!.contains(key) {
            t.child(key)!.error("\(what) is a \(kind.rawValue) and cannot have \"\(key)\"", atKey: true)
        }
        switch kind {
        case .record:
            decl.fields = (t.array("fields", in: what) ?? []).compactMap { loadField($0, owner: what) }
            if decl.sealed {
                if decl.fields.contains(where: { $0.name == TypeDecl.proofField.name }) {
                    t.child("fields")!.error("\(what) is sealed and so cannot declare a field named \"proof\"")
                }
                decl.fields.append(TypeDecl.proofField)
            }
        case .enum:
            for c in t.array("cases", in: what) ?? [] {
                guard c.expectObject(keys: ["name", "value", "doc"], what: "an enum case") else { continue }
                let caseName = c.string("name", in: "a case of \(what)") ?? ""
                decl.cases.append(
                    EnumCase(
                        name: caseName, value: c.string("value", in: "case \"\(caseName)\"") ?? "",
                        doc: c.string("doc", in: "case \"\(caseName)\"") ?? ""))
            }
        case .union:
            if let tag = t.child("tag") {
                decl.tag = loadField(tag, owner: "the tag of \(what)")
            } else {
                t.error("\(what) is missing required key \"tag\"")
            }
            decl.fields = (t.array("fields", in: what, required: false) ?? []).compactMap { loadField($0, owner: what) }
            for v in t.array("variants", in: what) ?? [] {
                guard v.expectObject(keys: ["name", "doc", "fields"], what: "a variant of \(what)") else { continue }
                let variantName = v.string("name", in: "a variant of \(what)") ?? ""
                let variantWhat = "variant \"\(variantName)\" of \(what)"
                let refs = (v.strings("fields", in: variantWhat, required: false) ?? []).map { text in
                    text.hasSuffix("?")
                        ? VariantField(name: String(text.dropLast()), optional: true)
                        : VariantField(name: text, optional: false)
                }
                decl.variants.append(
                    UnionVariant(name: variantName, doc: v.string("doc", in: variantWhat, required: false) ?? "", fields: refs))
            }
        case .identifier:
            decl.encoding = t.string("encoding", in: what)
            decl.bytes = t.integer("bytes", in: what, required: false)
        case .callback:
            decl.payload = typeRef(t, key: "payload", what: what)
        case .object:
            decl.constructors = (t.array("constructors", in: what, required: false) ?? []).compactMap {
                loadFunction($0, what: "a constructor of \(what)", requireName: false)
            }
            decl.properties = (t.array("properties", in: what, required: false) ?? []).compactMap {
                loadField($0, owner: what)
            }
            decl.methods = (t.array("methods", in: what, required: false) ?? []).compactMap {
                loadFunction($0, what: "a method of \(what)", requireName: true)
            }
        }
        return decl
    }

    private func loadField(_ f: SchemaNode, owner: String) -> Field? {
        guard f.expectObject(keys: ["name", "type", "doc"], what: "a field of \(owner)") else { return nil }
        let name = f.string("name", in: "a field of \(owner)") ?? ""
        guard let type = typeRef(f, key: "type", what: "field \"\(name)\" of \(owner)") else { return nil }
        return Field(name: name, type: type, doc: f.string("doc", in: "field \"\(name)\" of \(owner)") ?? "")
    }

    private func typeRef(_ node: SchemaNode, key: String, what: String) -> TypeRef? {
        guard let text = node.string(key, in: what) else { return nil }
        guard let ref = TypeRef.parse(text) else {
            node.child(key)!.error("\(what) has malformed type \"\(text)\" (string, bool, int, int64, json, [T], T?, or a type name)")
            return nil
        }
        return ref
    }

    private func loadFunction(_ f: SchemaNode, what: String, requireName: Bool) -> FunctionDecl? {
        let keys: Set<String> = ["name", "doc", "params", "returns", "throws", "async", "static", "blocks"]
        guard f.expectObject(keys: keys, what: what) else { return nil }
        let name = requireName ? (f.string("name", in: what) ?? "") : "init"
        let label = requireName ? "\"\(name)\"" : what
        var decl = FunctionDecl(
            name: name, doc: f.string("doc", in: label, required: requireName) ?? "", params: [], returns: nil,
            throwsCodes: f.strings("throws", in: label) ?? [],
            isAsync: f.bool("async", in: label) ?? false, isStatic: f.bool("static", in: label) ?? false)
        decl.blocks = f.bool("blocks", in: label) ?? false
        for p in f.array("params", in: label) ?? [] {
            guard p.expectObject(keys: ["name", "type", "label", "default", "doc", "secret"], what: "a parameter of \(label)") else {
                continue
            }
            let pname = p.string("name", in: "a parameter of \(label)") ?? ""
            guard let type = typeRef(p, key: "type", what: "parameter \"\(pname)\" of \(label)") else { continue }
            let secret = p.bool("secret", in: "parameter \"\(pname)\"") ?? false
            if secret, type != .string {
                p.child("secret")!.error("parameter \"\(pname)\" of \(label) is secret but of type \(type); only a string can be", atKey: true)
            }
            decl.params.append(
                Param(
                    name: pname, type: type, label: p.bool("label", in: "parameter \"\(pname)\"") ?? true,
                    defaultValue: p.child("default")?.value, secret: secret))
        }
        if let r = f.child("returns"), !r.value.isNull {
            decl.returns = typeRef(f, key: "returns", what: label)
        }
        return decl
    }
}

func isSnakeCase(_ s: String) -> Bool {
    guard let first = s.first, first.isLowercase, first.isASCII else { return false }
    return s.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "_" }
}

func isLowerCamelCase(_ s: String) -> Bool {
    guard let first = s.first, first.isLowercase, first.isASCII else { return false }
    return s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
}
