public import SoftchatJSON

extension ContractBound {
    /// The bound as JSON: what `softchat contract show --json` prints per bound.
    public var jsonValue: JSONValue {
        var o = JSONObject()
        o.append("name", .string(name))
        o.append("value", .integer(Int64(value)))
        if let minimum { o.append("minimum", .integer(Int64(minimum))) }
        o.append("unit", .string(unit))
        o.append("error", .string(error.rawValue))
        if let restates { o.append("restates", .string(restates)) }
        o.append("doc", .string(doc))
        return .object(o)
    }
}

extension SoftchatErrorCode {
    /// The code as JSON with its retry rule and advice: `{"code", "retry", "meaning", "handling"}`, one
    /// entry of a contract's `errors` in `softchat contract show --json`.
    public var jsonValue: JSONValue {
        .object(
            JSONObject([
                "code": .string(rawValue), "retry": .string(retryRule.rawValue),
                "meaning": .string(meaning), "handling": .string(handling),
            ]))
    }
}

extension OperationContractInfo {
    /// The contract as this binary knows it: bounds, errors with retry rules, rules, symbols.
    public var jsonValue: JSONValue {
        var o = JSONObject()
        o.append("id", .string(operation.rawValue))
        o.append("title", .string(title))
        o.append("summary", .string(summary))
        o.append("output", .string(output))
        o.append("trust", .string(trust))
        o.append("bounds", .array(bounds.map { $0.jsonValue }))
        o.append("errors", .array(errors.map { $0.jsonValue }))
        var r = JSONObject()
        for rule in rules { r.append(rule.name, .string(rule.text)) }
        o.append("rules", .object(r))
        var s = JSONObject()
        for entry in symbols { s.append(entry.language, .array(entry.symbols.map(JSONValue.string))) }
        o.append("symbols", .object(s))
        return .object(o)
    }
}

extension SoftchatError {
    /// `{"error":{"code":…,"message":…}}`, the CLI's and facades' error line.
    public var jsonValue: JSONValue {
        .object(JSONObject(["error": .object(JSONObject(["code": .string(code.rawValue), "message": .string(message)]))]))
    }
}
