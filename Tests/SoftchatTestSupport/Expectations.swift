public import SoftchatCore
public import SoftchatJSON
public import Testing

// Helpers every Swift test target shares (Core, Storage): a library of its own, so that there
// is one copy of each.

/// Runs `body`, which must throw a `SoftchatError` with `code` whose message contains every
/// string in `mentioning`; returns the error for further checks.
@discardableResult
public func expectSoftchatError(
    _ code: SoftchatErrorCode, mentioning: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> SoftchatError? {
    do {
        try body()
        Issue.record("expected \(code.rawValue), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as SoftchatError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        for text in mentioning {
            #expect(error.message.contains(text), "message \"\(error.message)\" lacks \"\(text)\"", sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("expected SoftchatError \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

extension JSONValue {
    /// A copy of an object with member `key` replaced (or appended when absent).
    public func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard let object = objectValue else { return self }
        var members = object.members
        if let i = members.firstIndex(where: { $0.key == key }) {
            members[i] = .init(key: key, value: value)
        } else {
            members.append(.init(key: key, value: value))
        }
        return .object(JSONObject(members: members))
    }

    /// A copy of an object without member `key`.
    public func removing(_ key: String) -> JSONValue {
        guard let object = objectValue else { return self }
        return .object(JSONObject(members: object.members.filter { $0.key != key }))
    }
}
