import SoftchatContracts

/// api.rs: one Rust function per C ABI entry point, walked from `FFIModel`, so the Rust names,
/// arguments and results cannot disagree with the header.
extension RustRenderer {
    func renderAPI() -> String {
        var w = SourceWriter()
        header(&w)
        w.line()
        w.line("//! The handles (`RelaySession`, `SoftchatIdentity`, `SoftchatAccount`, `ManagedTransport`),")
        w.line("//! their views, and the free functions of the operation contracts.")
        w.line()
        w.line("use crate::json::Json;")
        w.line("use crate::runtime::{self, text_list, Call, FromJson, ToJson};")
        w.line("use crate::types::*;")
        w.line("use crate::{ClientRelayFrame, RelayResponseFrame, SoftchatError};")
        w.line("use softchat_sys as sys;")
        w.line("use std::ffi::{c_char, c_void, CStr};")
        w.line("use std::ptr::{self, NonNull};")
        for t in set.allTypes where t.kind == .callback {
            w.line()
            renderCallback(t, &w)
        }
        for t in set.allTypes where t.kind == .object {
            w.line()
            switch model.role(t.name)! {
            case .handle: renderHandle(t, &w)
            case .view(let owner, _): renderView(t, owner: owner, &w)
            case .namespace:
                rustDoc(&w, t.doc)
                w.line("pub struct \(t.name);")
                w.line()
                renderMethods(of: t, &w)
            case .value: renderMethods(of: t, &w)
            }
        }
        for e in model.entryPoints where e.kind == .function {
            w.line()
            renderEntryPoint(e, &w)
        }
        return w.text
    }

    func points(of t: TypeDecl) -> [FFIModel.EntryPoint] {
        model.entryPoints.filter { $0.type == t.name && $0.kind != .free }
    }

    func renderHandle(_ t: TypeDecl, _ w: inout SourceWriter) {
        let sysName = FFIModel.cPrefix(t.name)
        rustDoc(&w, t.doc)
        w.block("pub struct \(t.name) {") { w in
            w.line("pub(crate) raw: NonNull<sys::\(sysName)>,")
        }
        w.line()
        w.line("// SAFETY: the C ABI serializes the calls on one handle with the handle's lock (a concurrent")
        w.line("// handle needs none), and the library's objects are not tied to a thread.")
        w.line("unsafe impl Send for \(t.name) {}")
        w.line("unsafe impl Sync for \(t.name) {}")
        w.line()
        w.block("impl Drop for \(t.name) {") { w in
            w.block("fn drop(&mut self) {") { w in
                w.line("// SAFETY: the handle is owned and freed once.")
                w.line("unsafe { sys::\(sysName)_free(self.raw.as_ptr()) }")
            }
        }
        w.line()
        renderMethods(of: t, &w)
        if let new = points(of: t).first(where: { $0.kind == .constructor && $0.params.isEmpty && !isFallible($0) }) {
            w.line()
            w.block("impl Default for \(t.name) {") { w in
                w.line("/// `\(t.name)::\(rustName(new))()`.")
                w.block("fn default() -> \(t.name) {") { w in w.line("\(t.name)::\(rustName(new))()") }
            }
        }
    }

    func renderView(_ t: TypeDecl, owner: String, _ w: inout SourceWriter) {
        rustDoc(&w, t.doc + " Borrowed from its \(owner).")
        w.line("#[derive(Clone, Copy)]")
        w.block("pub struct \(t.name)<'a> {") { w in
            w.line("pub(crate) owner: &'a \(owner),")
        }
        w.line()
        w.block("impl<'a> \(t.name)<'a> {") { w in
            for (i, e) in points(of: t).enumerated() {
                if i > 0 { w.line() }
                renderEntryPoint(e, &w)
            }
        }
    }

    func renderMethods(of t: TypeDecl, _ w: inout SourceWriter) {
        let views = t.properties.compactMap { p -> (Field, String)? in
            guard case .named(let n) = p.type, case .view = model.role(n) else { return nil }
            return (p, n)
        }
        w.block("impl \(t.name) {") { w in
            var first = true
            for (p, view) in views {
                if !first { w.line() }
                first = false
                rustDoc(&w, p.doc)
                w.line("pub fn \(ident(p.name))(&self) -> \(view)<'_> { \(view) { owner: self } }")
            }
            for e in points(of: t) {
                if !first { w.line() }
                first = false
                renderEntryPoint(e, &w)
            }
        }
    }

    func renderCallback(_ t: TypeDecl, _ w: inout SourceWriter) {
        guard let payload = t.payload else { return }
        let payloadType = rustType(payload)
        rustDoc(
            &w,
            t.doc
                + " Called on the library's delivery thread, in order, one call at a time. A panic is caught at the boundary (unwinding into C is undefined) and skips that one update; the closure is dropped after the final call, and a panic in its `Drop` is caught too."
        )
        w.line("pub type \(t.name) = Box<dyn FnMut(\(payloadType)) + Send + 'static>;")
        w.line()
        let trampoline = "trampoline_\(Naming.snake(t.name))"
        w.line("/// The C side of `\(t.name)`: the context is the boxed closure; JSON NULL is the final call.")
        w.line("/// All of it runs inside `runtime::contain`, so no panic (the listener's, its closure's `Drop`'s,")
        w.line("/// its payload's) unwinds into the library.")
        w.block("extern \"C\" fn \(trampoline)(context: *mut c_void, json: *const c_char) {") { w in
            w.block("runtime::contain(|| {", closer: "});") { w in
                w.line("let slot = context as *mut \(t.name);")
                w.block("if json.is_null() {") { w in
                    w.line("// SAFETY: the final call; the box was leaked for this listener and is freed once.")
                    w.line("drop(unsafe { Box::from_raw(slot) });")
                    w.line("return;")
                }
                w.line("// SAFETY: the library passes NUL-terminated JSON valid during the call.")
                w.line("let text = unsafe { CStr::from_ptr(json) }.to_string_lossy();")
                w.block("let value = match Json::parse(&text).and_then(|json| \(payloadType)::from_json(&json)) {", closer: "};") { w in
                    w.line("Ok(value) => value,")
                    w.block("Err(why) => {") { w in
                        w.line("runtime::warn(format_args!(\"softchat: a malformed \(payloadType) from the library was skipped: {why}\"));")
                        w.line("return;")
                    }
                }
                w.line("// SAFETY: calls come one at a time, so this is the only reference to the closure.")
                w.line("let listener = unsafe { &mut *slot };")
                w.line("listener(value);")
            }
        }
    }

    // MARK: one entry point

    /// A trailing run of parameters that default to null and are plain values (`now`, a relay
    /// URL): the method leaves them out and a `…_with` form takes them, as Rust has no default
    /// arguments. Handles, callbacks and records stay explicit `Option`s.
    func defaultedTail(_ e: FFIModel.EntryPoint) -> Int {
        var n = 0
        for p in e.params.reversed() {
            guard p.defaultValue == .null, case .optional(let inner) = p.type else { break }
            switch inner {
            case .string, .int, .int64, .bool: n += 1
            default: return n
            }
        }
        return n
    }

    func renderEntryPoint(_ e: FFIModel.EntryPoint, _ w: inout SourceWriter) {
        let tail = defaultedTail(e)
        if tail > 0 {
            let name = rustName(e)
            let shortParams = Array(e.params.dropLast(tail))
            let doc =
                docText(e) + " The form without `\(e.params.suffix(tail).map { ident($0.name) }.joined(separator: "`, `"))`; see `\(name)_with`."
            rustDoc(&w, doc)
            let signature = shortParams.map { "\(ident($0.name)): \(paramType($0.type))" }
            w.block(
                "pub fn \(name)(\(receiverParam(e))\(signature.isEmpty ? "" : (receiverParam(e).isEmpty ? "" : ", ") + signature.joined(separator: ", ")))\(returnClause(e)) {"
            ) { w in
                let args = shortParams.map { ident($0.name) } + Array(repeating: "None", count: tail)
                w.line("\(receiverCall(e))\(name)_with(\(args.joined(separator: ", ")))")
            }
            w.line()
            rustDoc(&w, docText(e))
            renderBody(e, name: name + "_with", &w)
        } else {
            rustDoc(&w, docText(e))
            renderBody(e, name: rustName(e), &w)
        }
    }

    func docText(_ e: FFIModel.EntryPoint) -> String {
        let decl = declaration(e)
        var text = decl?.doc ?? ""
        if !e.throwsCodes.isEmpty { text += "\nErrors: " + e.throwsCodes.map { "`\($0)`" }.joined(separator: ", ") + "." }
        return text
    }

    func declaration(_ e: FFIModel.EntryPoint) -> FunctionDecl? {
        if e.kind == .function { return set.allFunctions.first { $0.name == e.member } }
        guard let t = e.type.flatMap({ set.type(named: $0) }) else { return nil }
        if e.kind == .constructor {
            return t.constructors.first { c in
                (c.params.isEmpty ? "new" : "new_with_" + c.params.map { Naming.snake($0.name) }.joined(separator: "_and_")) == e.member
            }
        }
        return t.methods.first { $0.name == e.member }
    }

    func rustName(_ e: FFIModel.EntryPoint) -> String {
        switch e.kind {
        case .constructor: e.member
        default: ident(e.member)
        }
    }

    /// `&self`, `&mut self` (a state machine the host constructs, `RelaySession`, takes its
    /// calls by exclusive reference, as the page's `let mut session` reads), or nothing.
    func receiverParam(_ e: FFIModel.EntryPoint) -> String {
        switch e.receiver {
        case .none: return ""
        case .value: return "&self"
        case .handle(let t):
            if e.type == t, let decl = set.type(named: t), !decl.constructors.isEmpty { return "&mut self" }
            return "&self"
        }
    }

    func receiverCall(_ e: FFIModel.EntryPoint) -> String {
        switch e.receiver {
        case .none: e.type.map { "\($0)::" } ?? ""
        default: "self."
        }
    }

    func isFallible(_ e: FFIModel.EntryPoint) -> Bool { !e.throwsCodes.isEmpty }

    func returnType(_ e: FFIModel.EntryPoint) -> String {
        guard let r = e.returns else { return "()" }
        if let h = model.handleName(r) {
            return e.kind == .constructor || e.kind == .staticMethod ? "Self".replacingOccurrences(of: "Self", with: h) : h
        }
        return rustType(r)
    }

    func returnClause(_ e: FFIModel.EntryPoint) -> String {
        let t = returnType(e)
        if isFallible(e) { return " -> Result<\(t), SoftchatError>" }
        return t == "()" ? "" : " -> \(t)"
    }

    /// A parameter's Rust type: text borrows, lists of text take any iterator of text, lists of
    /// values any slice owner (`vec![event]`), records and handles by reference.
    func paramType(_ ref: TypeRef) -> String {
        switch ref {
        case .string, .json: return "&str"
        case .bool: return "bool"
        case .int, .int64: return "i64"
        case .list(let e):
            if isText(e) { return "impl IntoIterator<Item = impl AsRef<str>>" }
            return "impl AsRef<[\(rustType(e))]>"
        case .optional(let inner):
            if let cb = model.callback(inner) { return "Option<\(cb.name)>" }
            switch inner {
            case .string, .json: return "Option<&str>"
            case .bool, .int, .int64: return "Option<\(rustType(inner))>"
            case .named(let n) where kind(n) == .identifier: return "Option<&\(n)>"
            case .named(let n) where kind(n) == .enum: return "Option<\(n)>"
            default: return "Option<&\(rustType(inner))>"
            }
        case .named(let n):
            if model.callback(ref) != nil { return n }
            switch kind(n) {
            case .identifier: return "impl AsRef<str>"
            case .enum: return n
            default: return "&\(n)"
            }
        }
    }

    /// Writes the function: arguments to C strings, the call, the result.
    func renderBody(_ e: FFIModel.EntryPoint, name: String, _ w: inout SourceWriter) {
        let params = e.params.map { "\(ident($0.name)): \(paramType($0.type))" }
        let receiver = receiverParam(e)
        let all = (receiver.isEmpty ? [] : [receiver]) + params
        w.block("pub fn \(name)(\(all.joined(separator: ", ")))\(returnClause(e)) {") { w in
            let begin = "Call::begin(\(quoted(e.symbol)), \(quoted(model.argumentErrorCode(e))))"
            if isFallible(e) {
                w.line("let mut call = \(begin)?;")
            } else {
                w.line("let mut call = Call::begin_infallible(\(quoted(e.symbol)), \(quoted(model.argumentErrorCode(e))));")
            }
            var cArgs: [String] = []
            var cleanups: [String] = []
            var callbackFrees: [String] = []
            switch e.receiver {
            case .none: break
            case .handle:
                if case .view = e.type.flatMap({ model.role($0) }) {
                    cArgs.append("self.owner.raw.as_ptr()")
                } else {
                    cArgs.append("self.raw.as_ptr()")
                }
            case .value:
                w.line("let a_self = \(q(e, "call.json(\"self\", &self.json)"));")
                cArgs.append("a_self.as_ptr()")
            }
            for p in e.params {
                let n = ident(p.name)
                let a = "a_\(Naming.snake(p.name))"
                switch model.crossing(p.type) {
                case .callback(let cb, let optional):
                    let boxed = optional ? "\(n).map(|listener| Box::into_raw(Box::new(listener)))" : "Some(Box::into_raw(Box::new(\(n))))"
                    w.line("let \(a): Option<*mut \(cb.name)> = \(boxed);")
                    cArgs.append("if \(a).is_some() { Some(trampoline_\(Naming.snake(cb.name))) } else { None }")
                    cArgs.append("\(a).map_or(ptr::null_mut(), |b| b as *mut c_void)")
                    callbackFrees.append("if let Some(b) = \(a) { drop(unsafe { Box::from_raw(b) }); }")
                case .handle(_, optional: true):
                    cArgs.append("\(n).map_or(ptr::null_mut(), |h| h.raw.as_ptr())")
                case .handle(_, optional: false):
                    cArgs.append("\(n).raw.as_ptr()")
                case .text(let t):
                    let source = t == .string || t == .json ? n : "\(n).as_ref()"
                    w.line("let \(a) = \(q(e, "call.text(\(quoted(p.name)), \(source))"));")
                    cArgs.append("\(a).as_ptr()")
                    if p.secret { cleanups.append("runtime::wipe(\(a));") }
                case .json(.optional(let inner)):
                    // None crosses as NULL (JSON null); a value as its JSON text.
                    let value = "\(n).map(|v| call.json(\(quoted(p.name)), &\(jsonExpression(inner, "v")))).transpose()"
                    w.line("let \(a) = \(q(e, value));")
                    cArgs.append("\(a).as_ref().map_or(ptr::null(), |s| s.as_ptr())")
                case .json(let t):
                    w.line("let \(a) = \(q(e, "call.json(\(quoted(p.name)), &\(jsonExpression(t, n)))"));")
                    cArgs.append("\(a).as_ptr()")
                }
            }
            cArgs.append("call.slot()")
            let invocation = "unsafe { sys::\(e.cName)(\(cArgs.joined(separator: ", "))) }"
            w.line("// SAFETY: live handles, NUL-terminated arguments that outlive the call, an error slot.")
            let result: String
            switch model.result(e) {
            case .handle(let h):
                w.line("let result = \(invocation);")
                for c in cleanups { w.line(c) }
                if callbackFrees.isEmpty {
                    result = "\(h) { raw: \(q(e, "call.finish_handle(result)")) }"
                } else {
                    w.block("let raw = match call.finish_handle(result) {", closer: "};") { w in
                        w.line("Ok(raw) => raw,")
                        w.block("Err(error) => {") { w in
                            w.line("// The library never saw the listeners start: they are ours to free.")
                            for f in callbackFrees {
                                w.line("// SAFETY: boxes leaked above and never handed over.")
                                w.line(f)
                            }
                            w.line("return Err(error);")
                        }
                    }
                    result = "\(h) { raw }"
                }
            case .json(let r):
                w.line("let result = \(invocation);")
                for c in cleanups { w.line(c) }
                result = q(e, "call.finish_value::<\(rustType(r))>(result)")
            case .none:
                w.line("\(invocation);")
                for c in cleanups { w.line(c) }
                result = q(e, "call.finish()")
            }
            if isFallible(e), result.hasSuffix("?") {
                // The call's own Result is the function's: no `Ok(…?)` around it.
                w.line(String(result.dropLast()))
            } else if isFallible(e) {
                w.line("Ok(\(result))")
            } else {
                w.line(result)
            }
        }
    }

    /// `expr?` in a fallible function, `runtime::infallible(expr)` in one the schema declares
    /// infallible.
    func q(_ e: FFIModel.EntryPoint, _ expr: String) -> String {
        isFallible(e) ? "\(expr)?" : "runtime::infallible(\(expr))"
    }

    /// The ABI JSON of a parameter value.
    func jsonExpression(_ ref: TypeRef, _ name: String) -> String {
        switch ref {
        case .string, .json: return "Json::text(\(name))"
        case .named(let n) where kind(n) == .identifier: return "Json::text(\(name).as_str())"
        case .bool: return "Json::Bool(\(name))"
        case .int, .int64: return "Json::int(\(name))"
        case .list(let e) where isText(e): return "text_list(\(name))"
        case .list: return "\(name).as_ref().to_json()"
        case .named(let n) where kind(n) == .enum: return "\(name).to_json()"
        default: return "\(name).to_json()"
        }
    }
}

extension TypeRef {
    var isOptional: Bool {
        if case .optional = self { return true }
        return false
    }
}
