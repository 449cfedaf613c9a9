public import SoftchatJSON

/// Every contract, error and rule of the schema, validated and resolved.
///
/// This is the "model" stage between loading (files → this) and rendering (this → Swift,
/// Kotlin, TypeScript, Markdown). Everything here is plain data in schema order, so renderers
/// are deterministic functions of it.
public struct ContractSet: Sendable, Equatable {
    public var name: String
    public var schemaVersion: Int
    public var errors: [ErrorSpec]
    public var rules: Rules
    public var contracts: [Contract]

    public func error(_ code: String) -> ErrorSpec? { errors.first { $0.code == code } }
    public func contract(_ id: String) -> Contract? { contracts.first { $0.id == id } }

    /// Every declared type across contracts, with the id of the contract that declares it.
    public var allTypes: [TypeDecl] { contracts.flatMap(\.api.types) }
    public var allFunctions: [FunctionDecl] { contracts.flatMap(\.api.functions) }
    public func type(named name: String) -> TypeDecl? { allTypes.first { $0.name == name } }

    /// The ids of the contracts that raise an error, in schema order: those that list it among
    /// their stable errors and those whose API declares it in `throws` (`account_storage_failed`
    /// is thrown by relay.ingestion and relay.publish calls but listed by neither).
    public func contracts(raising code: String) -> [String] {
        contracts.filter { c in
            let functions = c.api.functions + c.api.types.flatMap { $0.constructors + $0.methods }
            return c.errors.contains(code) || functions.contains { $0.throwsCodes.contains(code) }
        }.map(\.id)
    }

    /// The contract a `SoftchatError` with this code reports as its operation by default: the
    /// first that lists the code, else the first whose API throws it, else the first whose
    /// bound raises it; nil for a code nothing raises.
    public func operation(raising code: String) -> String? {
        if let c = contracts.first(where: { $0.errors.contains(code) }) { return c.id }
        if let id = contracts(raising: code).first { return id }
        return contracts.first { $0.bounds.contains { $0.error == code && $0.restates == nil } }?.id
    }
}

public enum RetryRule: String, Sendable, Equatable, CaseIterable {
    /// The same input fails the same way again: fix the input or the call order.
    case permanent
    /// The condition is transient: retry after doing what the handling advice says.
    case retryable
}

public struct ErrorSpec: Sendable, Equatable {
    public var code: String
    public var meaning: String
    public var retry: RetryRule
    public var handling: String
}

public struct Rules: Sendable, Equatable {
    public static let keys = ["ownership", "retry", "lifecycle", "concurrency", "cancellation"]
    public var ownership: String
    public var retry: String
    public var lifecycle: String
    public var concurrency: String
    public var cancellation: String

    public var all: [(name: String, text: String)] {
        [
            ("Ownership", ownership), ("Retry", retry), ("Lifecycle", lifecycle),
            ("Concurrency", concurrency), ("Cancellation", cancellation),
        ]
    }
}

public enum Language: String, Sendable, Equatable, CaseIterable {
    case rust, android, swift, typescript

    public var displayName: String {
        switch self {
        case .rust: "Rust"
        case .android: "Android"
        case .swift: "Swift"
        case .typescript: "TypeScript"
        }
    }

    /// What the language's row means in this repository, shown beside its symbols and recipes,
    /// or nil when it needs no word. The product page's Rust core is Softchat's Swift core: the
    /// Rust row is a binding over its C ABI.
    public var bindingNote: String? {
        switch self {
        case .rust:
            "Rust: `generated/rust/softchat`, a safe crate over the Swift core's C ABI (`softchat-sys`), generated from this "
                + "schema. Where this page says Rust owns something, the Swift core behind the C ABI owns it."
        case .android, .swift, .typescript: nil
        }
    }

    /// The code-fence language of its recipes.
    public var fence: String {
        switch self {
        case .rust: "rust"
        case .android: "kotlin"
        case .swift: "swift"
        case .typescript: "typescript"
        }
    }
}

public struct Contract: Sendable, Equatable {
    public var id: String
    public var file: String
    public var title: String
    public var summary: String
    public var output: String
    public var trust: String
    public var bounds: [Bound]
    public var errors: [String]
    /// The shared rules with this contract's overrides applied.
    public var rules: Rules
    public var symbols: [Language: [String]]
    public var notes: [String]
    public var sequence: [String]
    public var steps: [String]
    public var api: APIDeclarations
    public var recipes: [Recipe]
}

public enum BoundUnit: String, Sendable, Equatable, CaseIterable {
    case bytes, filters, events, subscriptions, frames, publishes, seconds, items
}

public struct Bound: Sendable, Equatable {
    /// Lower camel case, unique in its contract (`maxFilters`).
    public var name: String
    /// The id of the contract that states the bound (for a restatement, the restating one).
    public var contract: String
    public var value: Int64
    public var min: Int64?
    public var unit: BoundUnit
    public var error: String
    public var doc: String
    /// `relay.session.maxSubscriptions` when this bound restates another contract's bound.
    public var restates: String?
}

public struct APIDeclarations: Sendable, Equatable {
    public var types: [TypeDecl]
    public var functions: [FunctionDecl]
    public static let empty = APIDeclarations(types: [], functions: [])
}

public indirect enum TypeRef: Sendable, Equatable, CustomStringConvertible {
    /// `int` is a count or index that fits every platform's native integer (Swift `Int`,
    /// Kotlin `Int`); `int64` is a wire value such as a timestamp (Swift `Int64`, Kotlin `Long`).
    case string, bool, int, int64, json
    case list(TypeRef)
    case optional(TypeRef)
    case named(String)

    /// Parses `string`, `[T]`, `T?`, `[[string]]?`, `Name`.
    public static func parse(_ text: String) -> TypeRef? {
        let t = text.trimmingSpaces
        if t.isEmpty { return nil }
        if t.hasSuffix("?") {
            guard let inner = parse(String(t.dropLast())) else { return nil }
            if case .optional = inner { return nil }
            return .optional(inner)
        }
        if t.hasPrefix("[") {
            guard t.hasSuffix("]"), let inner = parse(String(t.dropFirst().dropLast())) else { return nil }
            return .list(inner)
        }
        switch t {
        case "string": return .string
        case "bool": return .bool
        case "int": return .int
        case "int64": return .int64
        case "json": return .json
        default:
            guard t.first!.isUppercase, t.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
            return .named(t)
        }
    }

    public var description: String {
        switch self {
        case .string: "string"
        case .bool: "bool"
        case .int: "int"
        case .int64: "int64"
        case .json: "json"
        case .list(let t): "[\(t)]"
        case .optional(let t): "\(t)?"
        case .named(let n): n
        }
    }

    /// The type without its outermost `?` (`string?` → `string`).
    public var nonOptional: TypeRef {
        if case .optional(let t) = self { return t }
        return self
    }

    /// Names of the declared types this reference mentions.
    public var namedTypes: [String] {
        switch self {
        case .string, .bool, .int, .int64, .json: []
        case .list(let t), .optional(let t): t.namedTypes
        case .named(let n): [n]
        }
    }
}

public struct TypeDecl: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// A plain value with named fields.
        case record
        /// A closed set of string values.
        case `enum`
        /// A value that is exactly one of several variants, each with its own fields, told
        /// apart by a tag (an enum of the schema): a Swift enum with associated values, a
        /// Kotlin sealed class, a TypeScript union discriminated on the tag.
        case union
        /// A string with a fixed encoding that names something (an event id, a public key):
        /// plain `String`/`string` in Swift and TypeScript, a small class with the encoded
        /// text as a property in Kotlin, so ids are not confused with other text.
        case identifier
        /// A type with constructors, properties and methods.
        case object
        /// A function the library calls with one value (`payload`, a record or union), as a
        /// parameter of a method that returns a handle: a C function pointer plus a context
        /// pointer in the C ABI, a `fun interface` in Kotlin, an `AsyncIterable` method of the
        /// returned object in TypeScript. It lives as long as that handle.
        case callback
    }
    public var name: String
    public var contract: String
    public var kind: Kind
    public var doc: String
    /// A record's fields; for a union, every field any variant carries (each name once, with
    /// its non-optional type and its doc), in accessor order.
    public var fields: [Field]
    public var cases: [EnumCase]
    public var constructors: [FunctionDecl]
    public var properties: [Field]
    public var methods: [FunctionDecl]
    /// A union's tag: its JSON key and accessor name (`kind`) and its enum type.
    public var tag: Field?
    /// A union's variants, in the order of the tag enum's cases.
    public var variants: [UnionVariant]
    /// An identifier's encoding (`hex`), which is also the name of its Kotlin property.
    public var encoding: String?
    /// An identifier's size in bytes before encoding (32 for an event id).
    public var bytes: Int64?
    /// A callback's argument type.
    public var payload: TypeRef?
    /// An object whose methods may run on several threads at once (no handle lock in the C
    /// ABI), so a callback may call into it while another thread waits in `stop()`.
    public var concurrent: Bool = false
    /// An object that needs the file system or sockets (`"nativeOnly": true`: the account, the
    /// managed transport): its entry points exist in the native library only, not in the
    /// WebAssembly build, whose backend reports them as unavailable.
    public var nativeOnly: Bool = false
    /// A proof type (`"sealed": true`, a record: the verified event). The native library
    /// hands each value out with a `proof`, its per-process seal, which every binding carries as
    /// an opaque extra field; a value that comes back with its seal intact is recognised without
    /// checking it again, and any other (hand-made, altered, from another process) is checked in
    /// full, so no binding can forge one.
    public var sealed: Bool = false
    /// A record or enum the Swift surface renders too (`"swiftSurface": true`: the managed
    /// transport's context, phases and report kinds), so the engine reads the very type every
    /// binding writes and no module keeps a copy to translate from. Unions are rendered unless
    /// they say `"swiftSurface": false` (those over the account's types, which the core cannot
    /// name: the C ABI declares them).
    public var swiftSurface: Bool = false

    /// The field every sealed record carries after its declared ones, in every binding.
    public static let proofField = Field(
        name: "proof", type: .optional(.string),
        doc:
            "This process's seal over the id and signature (opaque), set on every event the library returns: handed back, the event is not verified again. An event made by hand, altered, or from another process is verified in full."
    )

    public init(
        name: String, contract: String, kind: Kind, doc: String, fields: [Field] = [], cases: [EnumCase] = [],
        constructors: [FunctionDecl] = [], properties: [Field] = [], methods: [FunctionDecl] = [], tag: Field? = nil,
        variants: [UnionVariant] = [], encoding: String? = nil, bytes: Int64? = nil
    ) {
        self.name = name
        self.contract = contract
        self.kind = kind
        self.doc = doc
        self.fields = fields
        self.cases = cases
        self.constructors = constructors
        self.properties = properties
        self.methods = methods
        self.tag = tag
        self.variants = variants
        self.encoding = encoding
        self.bytes = bytes
    }

    /// The encodings an identifier may declare (each is also its Kotlin property's name).
    public static let identifierEncodings = ["hex"]

    public func member(named name: String) -> String? {
        if methods.contains(where: { $0.name == name }) { return name }
        if properties.contains(where: { $0.name == name }) { return name }
        if fields.contains(where: { $0.name == name }) { return name }
        if tag?.name == name { return name }
        return nil
    }

    /// The fields `variant` carries, in its order, with their types made optional where the
    /// variant marks them so (`"prefix?"`).
    public func fields(of variant: UnionVariant) -> [Field] {
        variant.fields.compactMap { ref in
            guard var f = fields.first(where: { $0.name == ref.name }) else { return nil }
            if ref.optional { f.type = .optional(f.type) }
            return f
        }
    }
}

/// One variant of a union: a case of the union's tag enum and the fields it carries.
public struct UnionVariant: Sendable, Equatable {
    /// The tag enum's case name (`persistEvent`); its value is the JSON tag.
    public var name: String
    /// What the variant asks or says; defaults to the tag case's doc.
    public var doc: String
    public var fields: [VariantField]
}

/// A union field a variant carries: the name of one of the union's fields, optional in this
/// variant when written with a trailing `?`.
public struct VariantField: Sendable, Equatable {
    public var name: String
    public var optional: Bool
}

public struct Field: Sendable, Equatable {
    public var name: String
    public var type: TypeRef
    public var doc: String
}

public struct EnumCase: Sendable, Equatable {
    public var name: String
    /// The string used in JSON and in the facades (`rate-limited`).
    public var value: String
    public var doc: String
}

public struct Param: Sendable, Equatable {
    public var name: String
    public var type: TypeRef
    /// False drops the Swift argument label (`confirmSent(_:)`).
    public var label: Bool
    public var defaultValue: JSONValue?
    /// A secret (a key's text): the C ABI reads it in place and never copies it into a string,
    /// so nothing the library cannot wipe ever holds it. Only `string` parameters.
    public var secret: Bool = false
}

public struct FunctionDecl: Sendable, Equatable {
    public var name: String
    public var doc: String
    public var params: [Param]
    public var returns: TypeRef?
    public var throwsCodes: [String]
    public var isAsync: Bool
    public var isStatic: Bool
    /// The call blocks its thread: it touches SQLite or waits (`"blocks": true`). Bindings with an
    /// event loop give it a form that runs off the loop (TypeScript: `<name>Async`, a Promise run
    /// as Node-API async work; Kotlin: `<name>Async`, a CompletableFuture on an executor), and
    /// every binding's documentation says it blocks.
    public var blocks: Bool = false
}

public struct Recipe: Sendable, Equatable {
    public var language: Language
    public var code: [String]
    public var note: String?
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
