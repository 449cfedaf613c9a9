/// A JSON value as Softchat's strict reader produced it.
///
/// Numbers keep their exact meaning: a literal that is a plain integer fitting `Int64`
/// becomes `.integer`; anything else (fractions, exponents, `-0`, out-of-range integers)
/// stays as its literal text in `.number`, so a caller that needs an integer can reject it
/// precisely instead of receiving a rounded `Double`.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var int64Value: Int64? {
        if case .integer(let n) = self { return n }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member `key` of an object, or nil for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// A short name of the value's JSON type, for error messages ("expected string, got array").
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// A JSON object with its members in document order. Keys are unique: the reader rejects
/// duplicates, and `init(_:)` traps on them because building one is a programming error.
public struct JSONObject: Sendable, Hashable, Sequence {
    public struct Member: Sendable, Hashable {
        public let key: String
        public let value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var members: [Member]

    public init() { members = [] }

    /// Builds an object from ordered pairs; keys must be unique.
    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        members = []
        for (k, v) in pairs { append(k, v) }
    }

    public init(members: [Member]) {
        self.members = []
        for m in members { append(m.key, m.value) }
    }

    init(uncheckedMembers: [Member]) { members = uncheckedMembers }

    /// Appends a member; a duplicate key is a programming error.
    public mutating func append(_ key: String, _ value: JSONValue) {
        precondition(self[key] == nil, "duplicate JSON key \(key)")
        members.append(Member(key: key, value: value))
    }

    /// The member named exactly `key` (code points compared, as JSON names are).
    public subscript(key: String) -> JSONValue? {
        for m in members where m.key.utf8.elementsEqual(key.utf8) { return m.value }
        return nil
    }

    public var keys: [String] { members.map { $0.key } }
    public var count: Int { members.count }

    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
}
