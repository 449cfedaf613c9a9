import SoftchatJSON

/// Shared reading steps of both frame parsers: the size bound before parsing, strict JSON,
/// the verb, arity and element types, and subscription ids. Every failure is a
/// `SoftchatError` whose message says what and where (`REQ element 1: …`).
struct FrameReader {
    let verb: String
    let elements: [JSONValue]

    /// Checks the size bound, parses strictly, and reads the verb.
    init(text: String, direction: String) throws(SoftchatError) {
        let size = text.utf8.count
        try RelayWireContract.maxFrameBytes.check(size, "\(direction) frame")
        let value: JSONValue
        do {
            value = try JSONReader().parse(text)
        } catch {
            throw .invalidRelayFrame("\(direction) frame is not valid JSON: \(error)")
        }
        guard case .array(let elements) = value else {
            throw .invalidRelayFrame("\(direction) frame must be a JSON array, not \(value.typeName)")
        }
        guard let first = elements.first else { throw .invalidRelayFrame("\(direction) frame is an empty array") }
        guard case .string(let verb) = first else {
            throw .invalidRelayFrame("\(direction) frame element 0 must be the verb string, not \(first.typeName)")
        }
        self.verb = verb
        self.elements = elements
    }

    func arity(_ count: Int, _ shape: String) throws(SoftchatError) {
        guard elements.count == count else {
            throw .invalidRelayFrame("\(verb) frame must be \(shape) (\(count) elements), got \(elements.count)")
        }
    }

    func string(_ index: Int, _ what: String) throws(SoftchatError) -> String {
        guard case .string(let s) = elements[index] else {
            throw .invalidRelayFrame("\(verb) element \(index) (\(what)) must be a string, not \(elements[index].typeName)")
        }
        return s
    }

    func subscriptionID(_ index: Int) throws(SoftchatError) -> String {
        let id = try string(index, "subscription id")
        try Self.checkSubscriptionID(id, verb: verb)
        return id
    }

    static func checkSubscriptionID(_ id: String, verb: String) throws(SoftchatError) {
        let bound = RelayWireContract.maxSubscriptionIdLength
        guard bound.allows(id.count) else {
            throw SoftchatError(bound.error,
                "\(verb) subscription id has \(id.count) characters; it must have \(bound.minimum ?? 1) to \(bound.value)",
                operation: bound.operation)
        }
    }

    /// The filters from `index` to the end: at least one, at most the contract's bound.
    func filters(from index: Int) throws(SoftchatError) -> [RelayFilter] {
        let count = elements.count - index
        guard count >= 1 else { throw .invalidRelayFilter("\(verb) needs at least one filter, got none") }
        try RelayWireContract.maxFilters.check(count, "\(verb)")
        var filters: [RelayFilter] = []
        filters.reserveCapacity(count)
        for i in index..<elements.count {
            filters.append(try RelayFilter(json: elements[i], index: i - index))
        }
        return filters
    }

    /// Parses and verifies the event at `index`; a failure becomes `code` with its reason.
    func event(_ index: Int, code: SoftchatErrorCode, what: String) throws(SoftchatError) -> VerifiedEvent {
        let unverified: UnverifiedEvent
        do throws(EventIssue) {
            unverified = try UnverifiedEvent.parse(elements[index])
        } catch {
            throw SoftchatError(code, "\(what): \(error.message)", operation: .relayWire)
        }
        do throws(EventIssue) {
            return try EventVerifier.verify(unverified)
        } catch {
            throw SoftchatError(code, "\(what) \(unverified.id): \(error.message)", operation: .relayWire)
        }
    }
}
