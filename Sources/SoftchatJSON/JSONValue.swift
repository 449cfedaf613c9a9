/// A JSON value as Softchat's strict reader produced it.
///
/// Numbers keep their exact meaning: a literal that is a plain integer fitting `Int64`
/// becomes `.integer`; anything else (fractions, exponents, `-0`, out-of-range integers)
/// stays as its literal text in `.number`, so a caller that needs an integer can reject it
/// precisely instead of receiving a rounded `Double`.
public enum JSONValue: Sendable, Hashable {
    /// The literal `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written as a plain integer (no fraction, no exponent, not `-0`) within `Int64`'s
    /// range.
    case integer(Int64)
    /// Any other number, as its literal text exactly as written: fractions, exponents, `-0`, and
    /// integers outside `Int64`'s range.
    case number(String)
    /// A string, its escapes decoded.
    case string(String)
    /// An array, its elements in document order.
    case array([JSONValue])
    /// An object, its members in document order.
    case object(JSONObject)

    /// The string, or nil when the value is not a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer of an `.integer` value; nil for anything else, a `.number` literal included
    /// (it is never converted).
    public var int64Value: Int64? {
        if case .integer(let n) = self { return n }
        return nil
    }

    /// The Boolean, or nil when the value is not `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements, or nil when the value is not an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The object, or nil when the value is not an object.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// True when the value is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The value of the member named `key`, when this value is an object.
    ///
    /// - Parameter key: The member's name, compared code point by code point.
    /// - Returns: The member's value; nil for a missing key or a value that is not an object.
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
/// duplicates, and `init(_:)`, `init(members:)` and `append(_:_:)` trap on them because
/// building one is a programming error.
public struct JSONObject: Sendable, Hashable, Sequence {
    /// One member of an object: its key and its value.
    public struct Member: Sendable, Hashable {
        /// The member's name, escapes decoded.
        public let key: String
        /// The member's value.
        public let value: JSONValue
        /// Creates a member.
        ///
        /// - Parameters:
        ///   - key: The member's name.
        ///   - value: The member's value.
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The members, in document order (or in the order they were appended).
    public private(set) var members: [Member]

    /// Creates an empty object.
    public init() { members = [] }

    /// Builds an object from ordered pairs; keys must be unique.
    ///
    /// - Parameter pairs: The members, in order. A repeated key is a programming error and traps.
    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        members = []
        for (k, v) in pairs { append(k, v) }
    }

    /// Builds an object from members in order; keys must be unique.
    ///
    /// - Parameter members: The members, in order. A repeated key is a programming error and
    ///   traps.
    public init(members: [Member]) {
        self.members = []
        for m in members { append(m.key, m.value) }
    }

    init(uncheckedMembers: [Member]) { members = uncheckedMembers }

    /// Appends a member; a duplicate key is a programming error.
    ///
    /// - Parameters:
    ///   - key: The member's name; one already in the object traps.
    ///   - value: The member's value.
    public mutating func append(_ key: String, _ value: JSONValue) {
        precondition(self[key] == nil, "duplicate JSON key \(key)")
        members.append(Member(key: key, value: value))
    }

    /// The member named exactly `key` (code points compared, as JSON names are).
    ///
    /// - Parameter key: The member's name.
    /// - Returns: The member's value, or nil when the object has no such member.
    public subscript(key: String) -> JSONValue? {
        for m in members where m.key.utf8.elementsEqual(key.utf8) { return m.value }
        return nil
    }

    /// The members' names, in order.
    public var keys: [String] { members.map { $0.key } }
    /// The number of members.
    public var count: Int { members.count }

    /// Returns an iterator over the members, in order.
    ///
    /// - Returns: An iterator that yields each ``JSONObject/Member`` once, in order.
    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByNilLiteral
{
    /// Creates a `.string` value from a string literal.
    ///
    /// - Parameter value: The literal's text.
    public init(stringLiteral value: String) { self = .string(value) }
    /// Creates an `.integer` value from an integer literal.
    ///
    /// - Parameter value: The literal's value.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// Creates a `.bool` value from `true` or `false`.
    ///
    /// - Parameter value: The literal's value.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// Creates an `.array` value from an array literal.
    ///
    /// - Parameter elements: The array's elements, in order.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Creates `.null` from a `nil` literal.
    ///
    /// - Parameter nilLiteral: The empty tuple the compiler passes for `nil`.
    public init(nilLiteral: ()) { self = .null }
}
