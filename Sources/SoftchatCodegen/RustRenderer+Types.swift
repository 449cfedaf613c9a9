import SoftchatContracts

/// types.rs: the schema's identifiers, enums, records and unions as Rust values, each with its
/// JSON codec for the C ABI (the schema's names as keys).
extension RustRenderer {
    func renderTypes() -> String {
        var w = SourceWriter()
        header(&w)
        w.line()
        w.line("//! The schema's value types: identifiers, enums, records and unions.")
        w.line()
        w.line("use crate::json::Json;")
        w.line("use crate::runtime::{field, FromJson, ToJson};")
        w.line("use std::fmt;")
        for t in set.allTypes {
            switch t.kind {
            case .identifier:
                w.line()
                renderIdentifier(t, &w)
            case .enum:
                w.line()
                renderEnum(t, &w)
            case .record where !Self.handWritten.contains(t.name):
                w.line()
                renderRecord(t, &w)
            case .union:
                w.line()
                renderUnion(t, &w)
                w.line()
                renderUnionVariants(t, &w)
            case .object where model.role(t.name) == .value:
                w.line()
                renderValueObject(t, &w)
            default: break
            }
        }
        return w.text
    }

    func renderIdentifier(_ t: TypeDecl, _ w: inout SourceWriter) {
        let length = t.bytes.map { Int($0) * 2 }
        rustDoc(&w, t.doc)
        w.line("#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]")
        w.line("pub struct \(t.name)(String);")
        w.line()
        w.block("impl \(t.name) {") { w in
            w.line("/// Checks the text: \(length.map { "\($0) " } ?? "")lowercase hex.")
            w.block("pub fn from_hex(text: &str) -> Option<\(t.name)> {") { w in
                let lengthCheck = length.map { "text.len() == \($0) && " } ?? "!text.is_empty() && "
                w.line("let valid = \(lengthCheck)text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));")
                w.line("if valid { Some(\(t.name)(text.to_owned())) } else { None }")
            }
            w.line()
            w.line("/// The hex text.")
            w.block("pub fn to_hex(&self) -> String {") { w in w.line("self.0.clone()") }
            w.line()
            w.block("pub fn as_str(&self) -> &str {") { w in w.line("&self.0") }
        }
        w.line()
        w.block("impl AsRef<str> for \(t.name) {") { w in
            w.block("fn as_ref(&self) -> &str {") { w in w.line("&self.0") }
        }
        textValueImpls(t.name, text: "&self.0", owned: "self.0.clone()", parse: "from_hex", &w)
    }

    /// `Display` and the JSON codec of a type whose value is one text (an identifier, an enum):
    /// `text` borrows it, `owned` copies it, `parse` is the constructor that checks it.
    func textValueImpls(_ name: String, text: String, owned: String, parse: String, lenient: String? = nil, _ w: inout SourceWriter) {
        w.line()
        fmtImpl("Display", for: name, "f.write_str(\(text))", &w)
        w.line()
        w.block("impl FromJson for \(name) {") { w in
            w.block("fn from_json(value: &Json) -> Result<Self, String> {") { w in
                w.line("let text = String::from_json(value)?;")
                if let lenient {
                    // A text this crate does not know came from a newer library: kept as Unrecognized.
                    w.line("Ok(\(name)::\(parse)(&text).unwrap_or(\(name)::\(lenient)))")
                } else {
                    w.line("\(name)::\(parse)(&text).ok_or_else(|| format!(\"not a \(name): {text}\"))")
                }
            }
        }
        w.line()
        w.block("impl ToJson for \(name) {") { w in
            w.block("fn to_json(&self) -> Json {") { w in w.line("Json::String(\(owned))") }
        }
    }

    func renderEnum(_ t: TypeDecl, _ w: inout SourceWriter) {
        rustDoc(&w, t.doc)
        w.line("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]")
        w.block("pub enum \(t.name) {") { w in
            for c in t.cases {
                rustDoc(&w, c.doc)
                w.line("\(variantName(c.name)),")
            }
            rustDoc(&w, Self.unrecognizedDoc)
            w.line("Unrecognized,")
        }
        w.line()
        w.block("impl \(t.name) {") { w in
            w.line("/// Every case, in schema order.")
            w.line("pub const ALL: &'static [\(t.name)] = &[\(t.cases.map { "\(t.name)::\(variantName($0.name))" }.joined(separator: ", "))];")
            w.line()
            w.line("/// The case's JSON text (`\(t.cases.first?.value ?? "")`); empty for `Unrecognized`.")
            w.block("pub fn as_str(self) -> &'static str {") { w in
                w.block("match self {") { w in
                    for c in t.cases { w.line("\(t.name)::\(variantName(c.name)) => \(quoted(c.value)),") }
                    w.line("\(t.name)::Unrecognized => \"\",")
                }
            }
            w.line()
            w.line("/// The case with this JSON text.")
            w.block("pub fn from_text(text: &str) -> Option<\(t.name)> {") { w in
                w.line("\(t.name)::ALL.iter().copied().find(|c| c.as_str() == text)")
            }
        }
        textValueImpls(t.name, text: "self.as_str()", owned: "self.as_str().to_owned()", parse: "from_text", lenient: "Unrecognized", &w)
    }

    /// What an enum's `Unrecognized` case means, in every enum.
    static let unrecognizedDoc =
        "A value this version of the crate does not know: a newer library reported it. Read from the library, it decodes to this instead of failing; handle it as the cautious case. Sent back, the library refuses it."

    /// The accessor of a field: by value for copies, borrowed otherwise (`event.id()`, the form
    /// the page's ingestion recipe reads; the field itself is public too).
    func accessor(_ f: Field, _ w: inout SourceWriter) {
        let name = ident(f.name)
        switch f.type {
        case .bool, .int, .int64:
            w.line("pub fn \(name)(&self) -> \(rustType(f.type)) { self.\(name) }")
        case .named(let n) where kind(n) == .enum:
            w.line("pub fn \(name)(&self) -> \(n) { self.\(name) }")
        case .string, .json:
            w.line("pub fn \(name)(&self) -> &str { &self.\(name) }")
        case .list(let e):
            w.line("pub fn \(name)(&self) -> &[\(rustType(e))] { &self.\(name) }")
        case .optional(let inner):
            switch inner {
            case .bool, .int, .int64: w.line("pub fn \(name)(&self) -> Option<\(rustType(inner))> { self.\(name) }")
            case .named(let n) where kind(n) == .enum: w.line("pub fn \(name)(&self) -> Option<\(n)> { self.\(name) }")
            case .string, .json: w.line("pub fn \(name)(&self) -> Option<&str> { self.\(name).as_deref() }")
            default: w.line("pub fn \(name)(&self) -> Option<&\(rustType(inner))> { self.\(name).as_ref() }")
            }
        default:
            w.line("pub fn \(name)(&self) -> &\(rustType(f.type)) { &self.\(name) }")
        }
    }

    func renderRecord(_ t: TypeDecl, _ w: inout SourceWriter) {
        rustDoc(&w, t.doc)
        // A record whose every field may be empty (options and lists) has a Default, so
        // `ManagedTransportContext { relay_urls, ..Default::default() }` reads as Kotlin's defaults.
        let defaultable = t.fields.allSatisfy { f in
            switch f.type {
            case .optional, .list: true
            default: false
            }
        }
        w.line("#[derive(Clone, Debug, PartialEq, Eq\(defaultable ? ", Default" : ""))]")
        w.block("pub struct \(t.name) {") { w in
            for f in t.fields {
                rustDoc(&w, f.doc)
                // A sealed record's proof is the crate's to set: outside it, no struct literal can
                // make one (a proof type), and every other field stays as readable as before.
                let visibility = t.sealed && f.name == TypeDecl.proofField.name ? "pub(crate)" : "pub"
                w.line("\(visibility) \(ident(f.name)): \(rustType(f.type)),")
            }
        }
        w.line()
        w.block("impl \(t.name) {") { w in
            for (i, f) in t.fields.enumerated() {
                if i > 0 { w.line() }
                rustDoc(&w, f.doc)
                accessor(f, &w)
            }
        }
        w.line()
        w.block("impl FromJson for \(t.name) {") { w in
            w.block("fn from_json(value: &Json) -> Result<Self, String> {") { w in
                w.block("Ok(\(t.name) {", closer: "})") { w in
                    for f in t.fields { w.line("\(ident(f.name)): field(value, \(quoted(t.name)), \(quoted(f.name)))?,") }
                }
            }
        }
        w.line()
        w.block("impl ToJson for \(t.name) {") { w in
            w.block("fn to_json(&self) -> Json {") { w in
                w.block("Json::Object(vec![", closer: "])") { w in
                    for f in t.fields { w.line("(\(quoted(f.name)).to_owned(), self.\(ident(f.name)).to_json()),") }
                }
            }
        }
    }

    /// A union is the tag plus one `Option` per field, which is its C ABI JSON form and what the
    /// page's recipes read (`action.kind == RelaySessionActionKind::PersistEvent`, then
    /// `action.event`). A field a variant does not carry is `None`.
    func renderUnion(_ t: TypeDecl, _ w: inout SourceWriter) {
        guard let tag = t.tag else { return }
        let variants = t.variants.map { v in
            "`\(v.name)`" + (t.fields(of: v).isEmpty ? "" : " (" + t.fields(of: v).map { ident($0.name) }.joined(separator: ", ") + ")")
        }
        rustDoc(
            &w,
            t.doc + "\nVariants, by `\(ident(tag.name))`: " + variants.joined(separator: "; ")
                + ". `into_variant()` gives the same value as an enum with data (`\(t.name)Variant`).")
        w.line("#[derive(Clone, Debug, PartialEq, Eq)]")
        w.block("pub struct \(t.name) {") { w in
            rustDoc(&w, tag.doc)
            w.line("pub \(ident(tag.name)): \(rustType(tag.type)),")
            for f in t.fields {
                rustDoc(&w, f.doc)
                w.line("pub \(ident(f.name)): \(rustType(.optional(f.type.nonOptional))),")
            }
        }
        w.line()
        w.block("impl FromJson for \(t.name) {") { w in
            w.block("fn from_json(value: &Json) -> Result<Self, String> {") { w in
                w.block("Ok(\(t.name) {", closer: "})") { w in
                    w.line("\(ident(tag.name)): field(value, \(quoted(t.name)), \(quoted(tag.name)))?,")
                    for f in t.fields { w.line("\(ident(f.name)): field(value, \(quoted(t.name)), \(quoted(f.name)))?,") }
                }
            }
        }
        w.line()
        w.block("impl ToJson for \(t.name) {") { w in
            w.line("/// The tag plus exactly the variant's fields (an absent optional one as null).")
            w.block("fn to_json(&self) -> Json {") { w in
                w.line("let mut members = vec![(\(quoted(tag.name)).to_owned(), self.\(ident(tag.name)).to_json())];")
                w.block("match self.\(ident(tag.name)) {") { w in
                    for v in t.variants {
                        let fields = t.fields(of: v)
                        let pattern = "\(rustType(tag.type))::\(variantName(v.name))"
                        if fields.isEmpty {
                            w.line("\(pattern) => {}")
                        } else {
                            w.block("\(pattern) => {") { w in
                                for f in fields { w.line("members.push((\(quoted(f.name)).to_owned(), self.\(ident(f.name)).to_json()));") }
                            }
                        }
                    }
                    w.line("\(rustType(tag.type))::Unrecognized => {}")
                }
                w.line("Json::Object(members)")
            }
        }
    }

    /// The union as an enum with data, one variant per tag case with exactly its fields, for an
    /// exhaustive `match`; `into_variant` and `From` convert between the two forms.
    func renderUnionVariants(_ t: TypeDecl, _ w: inout SourceWriter) {
        guard let tag = t.tag else { return }
        let name = "\(t.name)Variant"
        let kindType = rustType(tag.type)
        rustDoc(&w, "`\(t.name)` as an enum with data: one variant per `\(kindType)`, carrying exactly that variant's fields.")
        w.line("#[derive(Clone, Debug, PartialEq, Eq)]")
        w.block("pub enum \(name) {") { w in
            for v in t.variants {
                rustDoc(&w, v.doc)
                let fields = t.fields(of: v)
                if fields.isEmpty {
                    w.line("\(variantName(v.name)),")
                } else {
                    w.line("\(variantName(v.name)) { \(fields.map { "\(ident($0.name)): \(rustType($0.type))" }.joined(separator: ", ")) },")
                }
            }
        }
        w.line()
        w.block("impl \(t.name) {") { w in
            w.line("/// The variant with its fields; `None` when a field the variant requires is missing, which")
            w.line("/// only a value built by hand can be, or for a kind this crate does not know (`Unrecognized`).")
            w.block("pub fn into_variant(self) -> Option<\(name)> {") { w in
                w.block("Some(match self.\(ident(tag.name)) {", closer: "})") { w in
                    for v in t.variants {
                        let fields = t.fields(of: v)
                        let pattern = "\(kindType)::\(variantName(v.name))"
                        if fields.isEmpty {
                            w.line("\(pattern) => \(name)::\(variantName(v.name)),")
                        } else {
                            let values = fields.map { f -> String in
                                if case .optional = f.type { return "\(ident(f.name)): self.\(ident(f.name))" }
                                return "\(ident(f.name)): self.\(ident(f.name))?"
                            }
                            w.line("\(pattern) => \(name)::\(variantName(v.name)) { \(values.joined(separator: ", ")) },")
                        }
                    }
                    w.line("\(kindType)::Unrecognized => return None,")
                }
            }
        }
        w.line()
        w.block("impl From<\(name)> for \(t.name) {") { w in
            w.block("fn from(variant: \(name)) -> \(t.name) {") { w in
                w.block("match variant {") { w in
                    for v in t.variants {
                        let fields = t.fields(of: v)
                        let carried = Set(fields.map(\.name))
                        var members = ["\(ident(tag.name)): \(kindType)::\(variantName(v.name))"]
                        for f in t.fields {
                            guard carried.contains(f.name) else {
                                members.append("\(ident(f.name)): None")
                                continue
                            }
                            let optional = fields.first { $0.name == f.name }.map { if case .optional = $0.type { true } else { false } } ?? false
                            members.append(optional ? ident(f.name) : "\(ident(f.name)): Some(\(ident(f.name)))")
                        }
                        let binding = fields.isEmpty ? "" : " { \(fields.map { ident($0.name) }.joined(separator: ", ")) }"
                        w.line("\(name)::\(variantName(v.name))\(binding) => \(t.name) { \(members.joined(separator: ", ")) },")
                    }
                }
            }
        }
    }

    /// A value object (`RelayFilter`) holds its JSON form as the core validated it; its methods
    /// call the core with that JSON.
    func renderValueObject(_ t: TypeDecl, _ w: inout SourceWriter) {
        rustDoc(&w, t.doc + " Holds its JSON form exactly as the core validated it.")
        w.line("#[derive(Clone, Debug, PartialEq, Eq)]")
        w.block("pub struct \(t.name) {") { w in
            w.line("pub(crate) json: Json,")
        }
        w.line()
        w.block("impl FromJson for \(t.name) {") { w in
            w.block("fn from_json(value: &Json) -> Result<Self, String> {") { w in
                w.line("Ok(\(t.name) { json: value.clone() })")
            }
        }
        w.line()
        w.block("impl ToJson for \(t.name) {") { w in
            w.block("fn to_json(&self) -> Json {") { w in w.line("self.json.clone()") }
        }
    }
}
