/// Cross-file checks the per-file loader cannot make: every error code referenced exists,
/// every type named is declared once, every listed symbol resolves to a declaration, every
/// restated bound exists. Also resolves restatements so renderers see final values.
struct SchemaValidator {
    let set: ContractSet
    let sink: DiagnosticSink
    let files: [String: SchemaFile]

    func error(_ message: String, contract: Contract, path: String, atKey: Bool = false) {
        guard let file = files[contract.id] else { return }
        sink.error(message, file: file, path: path, atKey: atKey)
    }

    func validate() {
        let codes = Set(set.errors.map(\.code))
        var typeOwners: [String: String] = [:]
        var functionOwners: [String: String] = [:]
        var contractIDs: Set<String> = []

        for contract in set.contracts {
            if !contractIDs.insert(contract.id).inserted {
                error("duplicate contract id \"\(contract.id)\"", contract: contract, path: "id")
            }
            var seenErrors: Set<String> = []
            for (i, code) in contract.errors.enumerated() {
                if !codes.contains(code) {
                    error("contract \"\(contract.id)\" lists unknown error code \"\(code)\"", contract: contract, path: "errors[\(i)]")
                }
                if !seenErrors.insert(code).inserted {
                    error("contract \"\(contract.id)\" lists error code \"\(code)\" twice", contract: contract, path: "errors[\(i)]")
                }
            }
            var boundNames: Set<String> = []
            for (i, bound) in contract.bounds.enumerated() {
                if !isLowerCamelCase(bound.name) {
                    error("bound name \"\(bound.name)\" must be lower camel case", contract: contract, path: "bounds[\(i)].name")
                }
                if !boundNames.insert(bound.name).inserted {
                    error("duplicate bound \"\(bound.name)\" in contract \"\(contract.id)\"", contract: contract, path: "bounds[\(i)].name")
                }
                if let target = bound.restates {
                    if resolveBound(target) == nil {
                        error(
                            "bound \"\(bound.name)\" restates \"\(target)\", which is not a bound of another contract",
                            contract: contract, path: "bounds[\(i)].restates")
                    }
                } else if !codes.contains(bound.error) {
                    error(
                        "bound \"\(bound.name)\" names unknown error code \"\(bound.error)\"", contract: contract,
                        path: "bounds[\(i)].error")
                }
            }
            for (ti, type) in contract.api.types.enumerated() {
                let path = "api.types[\(ti)]"
                if let owner = typeOwners[type.name] {
                    error("type \"\(type.name)\" is already declared in contract \"\(owner)\"", contract: contract, path: "\(path).name")
                } else {
                    typeOwners[type.name] = contract.id
                }
                validateType(type, contract: contract, path: path, codes: codes)
            }
            for (fi, function) in contract.api.functions.enumerated() {
                if let owner = functionOwners[function.name] {
                    error(
                        "function \"\(function.name)\" is already declared in contract \"\(owner)\"", contract: contract,
                        path: "api.functions[\(fi)].name")
                } else {
                    functionOwners[function.name] = contract.id
                }
                validateFunction(function, contract: contract, path: "api.functions[\(fi)]", codes: codes)
            }
        }
        // Type references and symbols are checked once every declaration is known.
        for contract in set.contracts {
            for (ti, type) in contract.api.types.enumerated() {
                checkReferences(of: type, contract: contract, path: "api.types[\(ti)]")
            }
            for (fi, function) in contract.api.functions.enumerated() {
                checkReferences(function, contract: contract, path: "api.functions[\(fi)]")
            }
            for language in Language.allCases {
                guard let symbols = contract.symbols[language] else {
                    error("contract \"\(contract.id)\" lists no \(language.rawValue) symbols", contract: contract, path: "symbols")
                    continue
                }
                for (si, symbol) in symbols.enumerated() where resolveSymbol(symbol, language: language) == nil {
                    error(
                        "\(language.rawValue) symbol \"\(symbol)\" has no declaration in any contract's api",
                        contract: contract, path: "symbols.\(language.rawValue)[\(si)]")
                }
            }
            var recipeLanguages: Set<Language> = []
            for (ri, recipe) in contract.recipes.enumerated() where !recipeLanguages.insert(recipe.language).inserted {
                error(
                    "contract \"\(contract.id)\" has two \(recipe.language.rawValue) recipes", contract: contract,
                    path: "recipes[\(ri)].language")
            }
        }
    }

    func validateType(_ type: TypeDecl, contract: Contract, path: String, codes: Set<String>) {
        if type.name.first?.isUppercase != true || !type.name.allSatisfy({ $0.isLetter || $0.isNumber }) {
            error("type name \"\(type.name)\" must be upper camel case", contract: contract, path: "\(path).name")
        }
        func unique(_ names: [String], _ what: String, _ key: String) {
            var seen: Set<String> = []
            for (i, n) in names.enumerated() {
                if !isLowerCamelCase(n) {
                    error(
                        "\(what) name \"\(n)\" in \"\(type.name)\" must be lower camel case", contract: contract,
                        path: "\(path).\(key)[\(i)].name")
                }
                if !seen.insert(n).inserted {
                    error("duplicate \(what) \"\(n)\" in \"\(type.name)\"", contract: contract, path: "\(path).\(key)[\(i)].name")
                }
            }
        }
        switch type.kind {
        case .record:
            if type.fields.isEmpty { error("record \"\(type.name)\" has no fields", contract: contract, path: path) }
            unique(type.fields.map(\.name), "field", "fields")
        case .enum:
            if type.cases.isEmpty { error("enum \"\(type.name)\" has no cases", contract: contract, path: path) }
            unique(type.cases.map(\.name), "case", "cases")
            var values: Set<String> = []
            for (i, c) in type.cases.enumerated() where !values.insert(c.value).inserted || c.value.isEmpty {
                error(
                    "enum \"\(type.name)\" has an empty or duplicate value \"\(c.value)\"", contract: contract,
                    path: "\(path).cases[\(i)].value")
            }
        case .union:
            validateUnion(type, contract: contract, path: path, unique: unique)
        case .identifier:
            if let encoding = type.encoding, !TypeDecl.identifierEncodings.contains(encoding) {
                error(
                    "identifier \"\(type.name)\" has encoding \"\(encoding)\"; encodings are \(TypeDecl.identifierEncodings.joined(separator: ", "))",
                    contract: contract, path: "\(path).encoding")
            }
            if let bytes = type.bytes, bytes < 1 {
                error("identifier \"\(type.name)\" must have at least 1 byte, not \(bytes)", contract: contract, path: "\(path).bytes")
            }
        case .callback:
            if type.payload == nil { error("callback \"\(type.name)\" has no payload", contract: contract, path: path) }
        case .object:
            unique(type.methods.map(\.name) + type.properties.map(\.name), "member", "methods")
            for (i, m) in type.methods.enumerated() {
                validateFunction(m, contract: contract, path: "\(path).methods[\(i)]", codes: codes)
            }
            for (i, c) in type.constructors.enumerated() {
                validateFunction(c, contract: contract, path: "\(path).constructors[\(i)]", codes: codes)
            }
        }
    }

    /// A union's own consistency: unique fields that are never optional themselves (each
    /// variant says whether it carries one optionally), variants that name declared fields
    /// once each, and no field that no variant carries. The tag enum is checked with the
    /// references, once every type is known.
    func validateUnion(
        _ type: TypeDecl, contract: Contract, path: String, unique: (_ names: [String], _ what: String, _ key: String) -> Void
    ) {
        if let tag = type.tag {
            if !isLowerCamelCase(tag.name) {
                error("tag name \"\(tag.name)\" in \"\(type.name)\" must be lower camel case", contract: contract, path: "\(path).tag.name")
            }
            if type.fields.contains(where: { $0.name == tag.name }) {
                error("union \"\(type.name)\" declares a field named like its tag \"\(tag.name)\"", contract: contract, path: "\(path).tag.name")
            }
        }
        unique(type.fields.map(\.name), "field", "fields")
        for (i, f) in type.fields.enumerated() {
            if case .optional = f.type {
                error(
                    "field \"\(f.name)\" of union \"\(type.name)\" must not be optional; a variant carries it optionally as \"\(f.name)?\"",
                    contract: contract, path: "\(path).fields[\(i)].type")
            }
        }
        if type.variants.isEmpty { error("union \"\(type.name)\" has no variants", contract: contract, path: path) }
        var variantNames: Set<String> = []
        var carried: Set<String> = []
        for (vi, v) in type.variants.enumerated() {
            let vpath = "\(path).variants[\(vi)]"
            if !variantNames.insert(v.name).inserted {
                error("duplicate variant \"\(v.name)\" in \"\(type.name)\"", contract: contract, path: "\(vpath).name")
            }
            if Naming.capitalized(v.name) == Naming.capitalized(type.tag?.name ?? "") {
                error("variant \"\(v.name)\" of \"\(type.name)\" is named like its tag", contract: contract, path: "\(vpath).name")
            }
            var seen: Set<String> = []
            for (fi, ref) in v.fields.enumerated() {
                if !type.fields.contains(where: { $0.name == ref.name }) {
                    error(
                        "variant \"\(v.name)\" of \"\(type.name)\" carries undeclared field \"\(ref.name)\" (declare it in the union's \"fields\")",
                        contract: contract, path: "\(vpath).fields[\(fi)]")
                }
                if !seen.insert(ref.name).inserted {
                    error(
                        "variant \"\(v.name)\" of \"\(type.name)\" carries field \"\(ref.name)\" twice", contract: contract,
                        path: "\(vpath).fields[\(fi)]")
                }
                carried.insert(ref.name)
            }
        }
        for (i, f) in type.fields.enumerated() where !carried.contains(f.name) {
            error("field \"\(f.name)\" of union \"\(type.name)\" is carried by no variant", contract: contract, path: "\(path).fields[\(i)].name")
        }
    }

    /// A union's tag is an enum whose cases are the variants, one each, in the same order, so
    /// the tag values, the kind accessor and the variants cannot drift apart.
    func checkTag(of type: TypeDecl, contract: Contract, path: String) {
        guard let tag = type.tag, case .named(let enumName) = tag.type else {
            if let tag = type.tag {
                error("the tag of union \"\(type.name)\" must name an enum, not \"\(tag.type)\"", contract: contract, path: "\(path).tag.type")
            }
            return
        }
        guard let tagEnum = set.type(named: enumName) else { return }  // reported as an unknown type
        guard tagEnum.kind == .enum else {
            error(
                "the tag of union \"\(type.name)\" must name an enum, not the \(tagEnum.kind.rawValue) \"\(enumName)\"",
                contract: contract, path: "\(path).tag.type")
            return
        }
        let caseNames = tagEnum.cases.map(\.name)
        for (vi, v) in type.variants.enumerated() {
            if !caseNames.contains(v.name) {
                error(
                    "variant \"\(v.name)\" of \"\(type.name)\" is not a case of its tag enum \"\(enumName)\"", contract: contract,
                    path: "\(path).variants[\(vi)].name")
            } else if vi < caseNames.count, caseNames[vi] != v.name {
                error(
                    "variant \"\(v.name)\" of \"\(type.name)\" is out of order: variants follow the cases of \"\(enumName)\" (expected \"\(caseNames[vi])\" here)",
                    contract: contract, path: "\(path).variants[\(vi)].name")
            }
        }
        for c in tagEnum.cases where !type.variants.contains(where: { $0.name == c.name }) {
            error(
                "union \"\(type.name)\" has no variant for case \"\(c.name)\" of its tag enum \"\(enumName)\"", contract: contract,
                path: "\(path).variants")
        }
    }

    func validateFunction(_ f: FunctionDecl, contract: Contract, path: String, codes: Set<String>) {
        if f.name != "init" && !isLowerCamelCase(f.name) {
            error("function name \"\(f.name)\" must be lower camel case", contract: contract, path: "\(path).name")
        }
        for (i, code) in f.throwsCodes.enumerated() where !codes.contains(code) {
            error("\"\(f.name)\" throws unknown error code \"\(code)\"", contract: contract, path: "\(path).throws[\(i)]")
        }
        var seen: Set<String> = []
        for (i, p) in f.params.enumerated() where !seen.insert(p.name).inserted || !isLowerCamelCase(p.name) {
            error(
                "parameter \"\(p.name)\" of \"\(f.name)\" is duplicated or not lower camel case", contract: contract,
                path: "\(path).params[\(i)].name")
        }
    }

    func checkType(_ ref: TypeRef, contract: Contract, path: String) {
        for name in ref.namedTypes where set.type(named: name) == nil {
            error("unknown type \"\(name)\"", contract: contract, path: path)
        }
    }

    func checkReferences(of type: TypeDecl, contract: Contract, path: String) {
        for (i, f) in type.fields.enumerated() {
            checkType(f.type, contract: contract, path: "\(path).fields[\(i)].type")
            if isCallback(f.type) {
                error(
                    "field \"\(f.name)\" of \"\(type.name)\" is a callback; a callback can only be a parameter", contract: contract,
                    path: "\(path).fields[\(i)].type")
            }
        }
        if type.kind == .callback, let payload = type.payload {
            checkType(payload, contract: contract, path: "\(path).payload")
            let kind = payload.namedTypes.first.flatMap { set.type(named: $0) }?.kind
            if payload.namedTypes.count != 1 || payload.nonOptional != payload || !(kind == .record || kind == .union) {
                error(
                    "callback \"\(type.name)\" has payload \"\(payload)\"; a payload is one record or union", contract: contract,
                    path: "\(path).payload")
            }
        }
        if type.kind == .union, let tag = type.tag {
            checkType(tag.type, contract: contract, path: "\(path).tag.type")
            checkTag(of: type, contract: contract, path: path)
        }
        for (i, p) in type.properties.enumerated() {
            checkType(p.type, contract: contract, path: "\(path).properties[\(i)].type")
        }
        for (i, m) in type.methods.enumerated() { checkReferences(m, contract: contract, path: "\(path).methods[\(i)]") }
        for (i, c) in type.constructors.enumerated() {
            checkReferences(c, contract: contract, path: "\(path).constructors[\(i)]")
        }
    }

    func checkReferences(_ f: FunctionDecl, contract: Contract, path: String) {
        for (i, p) in f.params.enumerated() { checkType(p.type, contract: contract, path: "\(path).params[\(i)].type") }
        if let r = f.returns {
            checkType(r, contract: contract, path: "\(path).returns")
            if isCallback(r) {
                error("\"\(f.name)\" returns callback \"\(r)\"; a callback can only be a parameter", contract: contract, path: "\(path).returns")
            }
        }
        // A callback lives as long as the handle its method returns, so only such a method may take one.
        let returnsObject = f.returns.map { r in r.namedTypes.first.flatMap { set.type(named: $0) }?.kind == .object && r.nonOptional == r } ?? false
        for (i, p) in f.params.enumerated() where isCallback(p.type) && !returnsObject {
            error(
                "parameter \"\(p.name)\" of \"\(f.name)\" is a callback, but \"\(f.name)\" returns no handle to tie its lifetime to",
                contract: contract, path: "\(path).params[\(i)].type")
        }
    }

    func isCallback(_ ref: TypeRef) -> Bool {
        ref.namedTypes.contains { set.type(named: $0)?.kind == .callback }
    }

    func resolveBound(_ qualified: String) -> Bound? {
        guard let dot = qualified.lastIndex(of: ".") else { return nil }
        let contractID = String(qualified[..<dot])
        let name = String(qualified[qualified.index(after: dot)...])
        guard let bound = set.contract(contractID)?.bounds.first(where: { $0.name == name }), bound.restates == nil
        else { return nil }
        return bound
    }

    func resolveSymbol(_ symbol: String, language: Language) -> String? {
        SymbolResolver(set: set).resolve(symbol, language: language)
    }
}

/// Maps a page symbol in one language's spelling to its language-neutral declaration.
public struct SymbolResolver: Sendable {
    public let set: ContractSet
    public init(set: ContractSet) { self.set = set }

    /// The neutral name (`RelaySession.confirmSent`, `classifyDeliveryAcknowledgement`) that
    /// `symbol` names in `language`, or nil when nothing is declared under it.
    public func resolve(_ symbol: String, language: Language) -> String? {
        let separator = language == .rust ? "::" : "."
        let parts = symbol.components(separatedBy: separator)
        // Rust spells functions and methods in snake case; a camelCase one is not a Rust name.
        if language == .rust, let last = parts.last, parts.count == 2 || last.first?.isLowercase == true,
            last.contains(where: \.isUppercase)
        {
            return nil
        }
        switch parts.count {
        case 1:
            if set.type(named: symbol) != nil { return symbol }
            let name = language == .rust ? Naming.camelFromSnake(symbol) : symbol
            if set.allFunctions.contains(where: { $0.name == name }) { return name }
            return nil
        case 2:
            guard let type = set.type(named: parts[0]) else { return nil }
            let member = language == .rust ? Naming.camelFromSnake(parts[1]) : parts[1]
            guard type.member(named: member) != nil else { return nil }
            return "\(parts[0]).\(member)"
        default:
            return nil
        }
    }
}

extension ContractSet {
    /// The set with every union variant that has no doc of its own carrying its tag case's.
    func resolvingVariantDocs() -> ContractSet {
        var copy = self
        for ci in copy.contracts.indices {
            for ti in copy.contracts[ci].api.types.indices where copy.contracts[ci].api.types[ti].kind == .union {
                let type = copy.contracts[ci].api.types[ti]
                guard case .named(let enumName)? = type.tag?.type, let tagEnum = self.type(named: enumName) else { continue }
                for vi in type.variants.indices where type.variants[vi].doc.isEmpty {
                    copy.contracts[ci].api.types[ti].variants[vi].doc =
                        tagEnum.cases.first { $0.name == type.variants[vi].name }?.doc ?? ""
                }
            }
        }
        return copy
    }

    /// The set with every restated bound carrying its original's value, unit and error.
    func resolvingRestatements() -> ContractSet {
        var copy = self
        for ci in copy.contracts.indices {
            for bi in copy.contracts[ci].bounds.indices {
                guard let target = copy.contracts[ci].bounds[bi].restates,
                    let dot = target.lastIndex(of: "."),
                    let original = contract(String(target[..<dot]))?.bounds.first(where: {
                        $0.name == String(target[target.index(after: dot)...])
                    })
                else { continue }
                copy.contracts[ci].bounds[bi].value = original.value
                copy.contracts[ci].bounds[bi].min = original.min
                copy.contracts[ci].bounds[bi].unit = original.unit
                copy.contracts[ci].bounds[bi].error = original.error
                if copy.contracts[ci].bounds[bi].doc.isEmpty { copy.contracts[ci].bounds[bi].doc = original.doc }
            }
        }
        return copy
    }
}
