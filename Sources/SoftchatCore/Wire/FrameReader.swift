import SoftchatJSON

/// Shared reading steps of both frame parsers: the size bound before parsing, strict JSON,
/// the verb, arity and element types, and subscription ids. Every failure is a
/// `SoftchatError` whose message says what and where (`REQ element 1: …`).
struct FrameReader {
    let verb: String
    let elements: [JSONValue]
    /// Events read by the fast path, by element index (see `readEventFrame`); their places in
    /// `elements` hold an empty object.
    private let preparsed: [UnverifiedEvent?]

    /// Checks the size bound, parses strictly, and reads the verb.
    init(text: String, direction: String) throws(SoftchatError) {
        let size = text.utf8.count
        try RelayWireContract.maxFrameBytes.check(size, "\(direction) frame")
        if let fast = Self.readEventFrame(text, fromClient: direction == "client") {
            self = fast
            return
        }
        preparsed = []
        let value: JSONValue
        do {
            value = try JSONReader().parse(text)
        } catch {
            // A duplicate key sits inside a filter, a batch event or an AUTH event: report it
            // with that part's code, as if it had been parsed on its own.
            if case .duplicateKey = error.reason, direction == "client" {
                switch Self.verbHint(text) {
                case "REQ", "COUNT": throw .invalidRelayFilter("filter: \(error)")
                case "EVENTS": throw .invalidRelayBatch("EVENTS event: \(error)")
                case "AUTH": throw .invalidRelayAuthentication("AUTH event: \(error)")
                default: break
                }
            }
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

    private init(verb: String, elements: [JSONValue], preparsed: [UnverifiedEvent?]) {
        self.verb = verb
        self.elements = elements
        self.preparsed = preparsed
    }

    /// The fast path for the frames that carry events (`EVENT`, `EVENTS`, a client's `AUTH`):
    /// the verb, then strings and event objects, read in one pass with `EventReader`. Anything
    /// else gives nil and the frame takes the full reader, so every diagnostic comes from there.
    private static func readEventFrame(_ text: String, fromClient: Bool) -> FrameReader? {
        var text = text
        let source = text
        return text.withUTF8 { bytes -> FrameReader? in
            var c = JSONCursor(source: source, bytes: bytes)
            guard c.consume(UInt8(ascii: "[")), let verbToken = c.string() else { return nil }
            let verb: String
            if c.token(verbToken, is: "EVENT") {
                verb = "EVENT"
            } else if c.token(verbToken, is: "EVENTS") {
                verb = "EVENTS"
            } else if fromClient && c.token(verbToken, is: "AUTH") {
                verb = "AUTH"
            } else {
                return nil
            }
            var elements: [JSONValue] = [.string(verb)]
            var preparsed: [UnverifiedEvent?] = [nil]
            while c.consume(UInt8(ascii: ",")) {
                if c.peek(UInt8(ascii: "\"")) {
                    guard let token = c.string() else { return nil }
                    elements.append(.string(c.decode(token)))
                    preparsed.append(nil)
                } else {
                    guard let event = EventReader.read(&c) else { return nil }
                    elements.append(.object(JSONObject()))
                    preparsed.append(event)
                }
            }
            guard c.consume(UInt8(ascii: "]")) else { return nil }
            c.skipWhitespace()
            guard c.atEnd else { return nil }
            return FrameReader(verb: verb, elements: elements, preparsed: preparsed)
        }
    }

    /// The event at `index`, read strictly (the fast path's, or from its JSON).
    func unverifiedEvent(_ index: Int) throws(EventIssue) -> UnverifiedEvent {
        if index < preparsed.count, let event = preparsed[index] { return event }
        return try UnverifiedEvent.parse(elements[index])
    }

    /// The verb of a frame that did not parse, read from its first bytes (`["REQ",` → REQ).
    static func verbHint(_ text: String) -> String? {
        var bytes = Substring(text).utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        guard bytes.first == UInt8(ascii: "[") else { return nil }
        bytes = bytes.dropFirst().drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        guard bytes.first == UInt8(ascii: "\"") else { return nil }
        let verb = bytes.dropFirst().prefix { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
        guard bytes.dropFirst(verb.count + 1).first == UInt8(ascii: "\"") else { return nil }
        return String(decoding: verb, as: UTF8.self)
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
            throw SoftchatError(
                bound.error,
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

    /// A NIP-77 message at `index`: non-empty lowercase hex of whole bytes. What the bytes say is
    /// the reconciler's to check (`invalid_negentropy_message`).
    func negentropyMessage(_ index: Int) throws(SoftchatError) -> [UInt8] {
        let hex = try string(index, "negentropy message")
        guard !hex.isEmpty, let bytes = Hex.decodeLowercase(hex) else {
            throw .invalidRelayFrame("\(verb) element \(index) (negentropy message) must be non-empty lowercase hex of whole bytes")
        }
        return bytes
    }

    /// Parses and verifies the event at `index`; a failure becomes `code` with its reason.
    func event(_ index: Int, code: SoftchatErrorCode, what: String) throws(SoftchatError) -> VerifiedEvent {
        let unverified: UnverifiedEvent
        do throws(EventIssue) {
            unverified = try unverifiedEvent(index)
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
