public import SoftchatContracts

/// The C ABI's view of the schema: which objects cross as opaque handles, which as JSON
/// values, and one entry point per constructor, method, property and function. Every FFI
/// renderer (C header, Swift exports, Kotlin/JNA, Node-API addon) walks the same list, so
/// the four layers cannot disagree about a name, an argument or a result.
///
/// Roles, derived from the schema alone:
/// - a **value object** is an object type some record field holds (`RelayFilter` in
///   `ClientRelayFrame.filters`): it crosses as its JSON form, and its methods take it as
///   their first argument;
/// - a **view** is an object type that is the type of another object's property and has no
///   constructors or static methods (`AccountIncoming` of `SoftchatAccount.incoming`): its
///   methods take the owner's handle;
/// - a **namespace** has no constructors and no instance members (`SignedNostrEvent`): only
///   its static methods exist;
/// - every other object is a **handle**: an opaque pointer with an explicit free function.
public struct FFIModel: Sendable {
    public enum Role: Sendable, Equatable {
        case handle
        case view(owner: String, property: String)
        case value
        case namespace
    }

    /// What one entry point's first argument is.
    public enum Receiver: Sendable, Equatable {
        case none
        /// The handle of this object type (for a view, its owner's).
        case handle(String)
        /// The JSON form of this value object.
        case value(String)
    }

    public enum Kind: Sendable, Equatable {
        case constructor, staticMethod, method, property, function, free
    }

    public struct EntryPoint: Sendable, Equatable {
        /// `softchat_relay_session_subscribe`.
        public var cName: String
        public var kind: Kind
        /// The declaring object type, nil for a free function.
        public var type: String?
        /// The IDL member name (`subscribe`), the function name, or `new` / `free`.
        public var member: String
        public var receiver: Receiver
        public var params: [Param]
        public var returns: TypeRef?
        public var throwsCodes: [String]
        /// `RelaySession.subscribe` or `classifyDeliveryAcknowledgement`: what errors name.
        public var symbol: String
        /// The schema says the call blocks (SQLite or a wait): the Node addon also exports
        /// `<cName>_async`, which runs it as async work and returns a Promise.
        public var blocks: Bool = false
    }

    public let set: ContractSet
    public let roles: [String: Role]
    public let entryPoints: [EntryPoint]

    public init(set: ContractSet) {
        self.set = set
        var roles: [String: Role] = [:]
        let objects = set.allTypes.filter { $0.kind == .object }
        let heldByRecords = Set(set.allTypes.filter { $0.kind == .record || $0.kind == .union }.flatMap { $0.fields.flatMap(\.type.namedTypes) })
        for t in objects {
            if heldByRecords.contains(t.name) {
                roles[t.name] = .value
            } else if t.constructors.isEmpty, !t.methods.contains(where: \.isStatic),
                let owner = objects.first(where: { o in o.properties.contains { $0.type == .named(t.name) } }),
                let property = owner.properties.first(where: { $0.type == .named(t.name) })
            {
                roles[t.name] = .view(owner: owner.name, property: property.name)
            } else if t.constructors.isEmpty, t.properties.isEmpty, !t.methods.contains(where: { !$0.isStatic }) {
                roles[t.name] = .namespace
            } else {
                roles[t.name] = .handle
            }
        }
        self.roles = roles

        var points: [EntryPoint] = []
        for t in objects {
            let prefix = Self.cPrefix(t.name)
            let role = roles[t.name]!
            let receiver: Receiver
            switch role {
            case .handle: receiver = .handle(t.name)
            case .view(let owner, _): receiver = .handle(owner)
            case .value: receiver = .value(t.name)
            case .namespace: receiver = .none
            }
            if role == .handle {
                for (i, c) in t.constructors.enumerated() {
                    let suffix = i == 0 && c.params.isEmpty ? "new" : "new_with_" + c.params.map { Naming.snake($0.name) }.joined(separator: "_and_")
                    points.append(
                        EntryPoint(
                            cName: "\(prefix)_\(suffix)", kind: .constructor, type: t.name, member: suffix, receiver: .none,
                            params: c.params, returns: .named(t.name), throwsCodes: c.throwsCodes, symbol: t.name))
                }
            }
            for p in t.properties where (roles[p.type.namedTypes.first ?? ""].map { if case .view = $0 { false } else { true } } ?? true) {
                points.append(
                    EntryPoint(
                        cName: "\(prefix)_\(Naming.snake(p.name))", kind: .property, type: t.name, member: p.name, receiver: receiver,
                        params: [], returns: p.type, throwsCodes: [], symbol: "\(t.name).\(p.name)"))
            }
            for m in t.methods {
                points.append(
                    EntryPoint(
                        cName: "\(prefix)_\(Naming.snake(m.name))", kind: m.isStatic ? .staticMethod : .method, type: t.name,
                        member: m.name, receiver: m.isStatic ? .none : receiver, params: m.params, returns: m.returns,
                        throwsCodes: m.throwsCodes, symbol: "\(t.name).\(m.name)", blocks: m.blocks))
            }
            if role == .handle {
                points.append(
                    EntryPoint(
                        cName: "\(prefix)_free", kind: .free, type: t.name, member: "free", receiver: .handle(t.name),
                        params: [], returns: nil, throwsCodes: [], symbol: "\(t.name).free"))
            }
        }
        for f in set.allFunctions {
            points.append(
                EntryPoint(
                    cName: "softchat_" + Naming.snake(f.name), kind: .function, type: nil, member: f.name, receiver: .none,
                    params: f.params, returns: f.returns, throwsCodes: f.throwsCodes, symbol: f.name))
        }
        entryPoints = points
    }

    /// `RelaySession` → `softchat_relay_session`; `SoftchatIdentity` → `softchat_identity`.
    public static func cPrefix(_ typeName: String) -> String {
        var snake = Naming.snake(typeName)
        if snake.hasPrefix("softchat_") { snake.removeFirst("softchat_".count) }
        return "softchat_" + snake
    }

    public func role(_ name: String) -> Role? { roles[name] }

    public func isHandle(_ ref: TypeRef) -> Bool {
        if case .named(let n) = ref, roles[n] == .handle { return true }
        return false
    }

    /// The handle type a parameter passes, optional (`SoftchatIdentity?`, NULL for none) or not.
    public func handleName(_ ref: TypeRef) -> String? {
        if case .named(let n) = ref.nonOptional, roles[n] == .handle { return n }
        return nil
    }

    /// The callback type a parameter passes (optional or not): in C a function pointer and
    /// its context pointer.
    public func callback(_ ref: TypeRef) -> TypeDecl? {
        if case .named(let n) = ref.nonOptional, let t = set.type(named: n), t.kind == .callback { return t }
        return nil
    }

    /// Whether calls on this handle type run without the handle's lock (`"concurrent": true`).
    public func isConcurrent(_ typeName: String) -> Bool { set.type(named: typeName)?.concurrent ?? false }

    /// Whether an entry point exists in the WebAssembly build too: neither its declaring type
    /// (for a view, its owner) nor a handle or callback it takes or returns is `nativeOnly`,
    /// and it takes no callback (the wasm module has no thread to call back from).
    public func isPortable(_ e: EntryPoint) -> Bool {
        func native(_ name: String) -> Bool {
            if set.type(named: name)?.nativeOnly == true { return true }
            if case .view(let owner, _) = roles[name] { return native(owner) }
            return false
        }
        if let t = e.type, native(t) { return false }
        if case .handle(let t) = e.receiver, native(t) { return false }
        for ref in e.params.map(\.type) + (e.returns.map { [$0] } ?? []) {
            if callback(ref) != nil { return false }
            if let n = handleName(ref), native(n) { return false }
        }
        return true
    }

    /// Parameters that cross as raw UTF-8 text rather than JSON: `string` and `json`.
    public static func isRaw(_ ref: TypeRef) -> Bool { ref == .string || ref == .json }

    /// Like `isRaw`, and also an identifier (`EventId`), which is text with a fixed encoding.
    public func isRawText(_ ref: TypeRef) -> Bool {
        if Self.isRaw(ref) { return true }
        if case .named(let n) = ref, set.type(named: n)?.kind == .identifier { return true }
        return false
    }

    /// The error code an entry point reports for an argument it cannot decode or a null
    /// handle: its first declared error, else the catalog's first.
    public func argumentErrorCode(_ e: EntryPoint) -> String {
        e.throwsCodes.first ?? set.errors.first?.code ?? "invalid_argument"
    }

    // MARK: how values cross (the translate step every FFI renderer reads)

    /// How one value crosses the C ABI. Every renderer of a layer over the ABI (the header, the
    /// Swift exports, the Node-API addon, JNA, the Rust crates) branches on this, so none of them
    /// re-derives from type names or C spellings whether a value is a pointer or text.
    public enum Crossing: Sendable, Equatable {
        /// An opaque handle pointer (NULL for none when `optional`).
        case handle(String, optional: Bool)
        /// A C function pointer and its context pointer (NULL for none when `optional`).
        case callback(TypeDecl, optional: Bool)
        /// UTF-8 text as is: `string`, `json` and identifiers. An optional one (`string?`) is
        /// not text: it crosses as JSON, a string or null.
        case text(TypeRef)
        /// The value's JSON text (NULL is JSON null).
        case json(TypeRef)
    }

    public func crossing(_ ref: TypeRef) -> Crossing {
        let optional: Bool
        if case .optional = ref { optional = true } else { optional = false }
        if let n = handleName(ref) { return .handle(n, optional: optional) }
        if let cb = callback(ref) { return .callback(cb, optional: optional) }
        if isRawText(ref) { return .text(ref) }
        return .json(ref)
    }

    /// One C argument of an entry point: its C name and type and what it carries.
    public struct Argument: Sendable, Equatable {
        public enum Role: Sendable, Equatable {
            /// The handle the call is made on (for a view, its owner's).
            case receiverHandle(String)
            /// The JSON form of the value object the call is made on.
            case receiverValue(String)
            case parameter(Param, Crossing)
            /// The context pointer that goes with a callback parameter.
            case callbackContext(Param)
            /// `softchat_error **error`.
            case error
        }
        public var name: String
        public var cType: String
        public var role: Role
    }

    /// The C arguments of an entry point, in order.
    public func arguments(_ e: EntryPoint) -> [Argument] {
        var out: [Argument] = []
        switch e.receiver {
        case .none: break
        case .handle(let t): out.append(Argument(name: Self.receiverName(t), cType: "\(Self.cPrefix(t)) *", role: .receiverHandle(t)))
        case .value(let t): out.append(Argument(name: Self.receiverName(t) + "_json", cType: "const char *", role: .receiverValue(t)))
        }
        for p in e.params {
            let crossing = crossing(p.type)
            let cType: String
            switch crossing {
            case .handle(let n, _): cType = "\(Self.cPrefix(n)) *"
            case .callback(let cb, _): cType = Self.cPrefix(cb.name)
            case .text, .json: cType = "const char *"
            }
            out.append(Argument(name: Self.cParam(p.name), cType: cType, role: .parameter(p, crossing)))
            if case .callback = crossing {
                out.append(Argument(name: Self.cParam(p.name) + "_context", cType: "void *", role: .callbackContext(p)))
            }
        }
        if e.kind != .free { out.append(Argument(name: "error", cType: "softchat_error **", role: .error)) }
        return out
    }

    /// What an entry point returns across the ABI.
    public enum ResultShape: Sendable, Equatable {
        case none
        /// A new handle (NULL on failure).
        case handle(String)
        /// JSON text the caller frees (NULL on failure).
        case json(TypeRef)
    }

    public func result(_ e: EntryPoint) -> ResultShape {
        guard let r = e.returns else { return .none }
        if isHandle(r), case .named(let n) = r { return .handle(n) }
        return .json(r)
    }

    /// The C name of a parameter (`filtersJson` → `filters_json`).
    public static func cParam(_ name: String) -> String {
        let s = Naming.snake(name)
        return ["default", "int", "char", "const", "struct", "register", "auto", "static"].contains(s) ? s + "_" : s
    }

    /// The C name of a receiver argument (`session`, `identity`, `account`, `filter`).
    public static func receiverName(_ typeName: String) -> String {
        let p = cPrefix(typeName)
        return String(p.split(separator: "_").last ?? "self")
    }
}
