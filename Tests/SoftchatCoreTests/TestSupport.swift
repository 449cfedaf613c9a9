import Foundation
import SoftchatCore
import SoftchatJSON
import Testing

/// Paths the core tests read: the repository root and the shared specification data beside it.
enum Paths {
    /// `<repo>` (this file is `<repo>/Tests/SoftchatCoreTests/TestSupport.swift`).
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// `<repo>/../shared/specs`.
    static let specs = repository.deletingLastPathComponent().appendingPathComponent("shared/specs")
    static let fixtures = specs.appendingPathComponent("nostr-fixtures/nostr-sdk-ios")

    static func fixtureText(_ name: String) throws -> String {
        try String(contentsOf: fixtures.appendingPathComponent("\(name).json"), encoding: .utf8)
    }
}

/// Runs `body`, which must throw a `SoftchatError` with `code` whose message contains every
/// string in `mentioning`; returns the error for further checks.
@discardableResult
func expectSoftchatError(_ code: SoftchatErrorCode, mentioning: [String] = [],
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> Void) -> SoftchatError? {
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
    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
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
    func removing(_ key: String) -> JSONValue {
        guard let object = objectValue else { return self }
        return .object(JSONObject(members: object.members.filter { $0.key != key }))
    }
}

extension String {
    /// The same hex string with the character at `index` changed to another hex digit.
    func flippingHexDigit(at index: Int = 0) -> String {
        var chars = Array(self)
        chars[index] = chars[index] == "0" ? "1" : "0"
        return String(chars)
    }
}

/// A fixed, valid draft for tests that need some event.
func sampleDraft(content: String = "hello", tags: [[String]] = [["t", "softchat"]], kind: Int = 1,
                 createdAt: Int64 = 1_700_000_000) -> UnsignedEvent {
    UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content)
}
