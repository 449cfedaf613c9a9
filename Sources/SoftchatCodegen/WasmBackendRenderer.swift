public import SoftchatContracts

/// Renders the TypeScript facade's second backend: the same C ABI entry points the Node-API
/// addon exposes (NodeAddonRenderer), over the exports of `softchat.wasm` (scripts/build/build-wasm:
/// the core, the portable C ABI exports and libsecp256k1 as Embedded Swift and C for wasm32).
///
/// One table per portable entry point (`FFIModel.isPortable`) says what each C argument is —
/// text (a UTF-8 string copied into wasm memory, zeroed and freed after the call), a handle or
/// an optional handle of a named type (checked at the call: a handle of another type is refused)
/// — and what comes back: text, a handle (its type and free function), or nothing.
/// A small runtime walks the table, so the marshalling is written once. The native-only entry
/// points (the account, the managed transport) are listed too, and calling one throws an
/// Error that says it needs the Node backend. Also renders `browser.ts`, the browser build's
/// entry: the facade plus `loadSoftchat`.
public struct WasmBackendRenderer {
    public let set: ContractSet
    let model: FFIModel

    public init(set: ContractSet) {
        self.set = set
        model = FFIModel(set: set)
    }

    public func render() throws(Templates.Failure) -> [GeneratedFile] { [try renderBackend(), renderBrowserEntry()] }

    /// The TypeScript facade's file header.
    func header(_ w: inout SourceWriter) { TypeScriptRenderer(set: set).header(&w) }

    /// The argument kinds of one entry point, in C order without the error pointer.
    func argumentKinds(_ e: FFIModel.EntryPoint) -> [String] {
        var kinds: [String] = []
        switch e.receiver {
        case .none: break
        case .handle(let n): kinds.append("handle:\(FFIModel.cPrefix(n))")
        case .value: kinds.append("text")
        }
        for p in e.params {
            if let n = model.handleName(p.type) {
                if case .optional = p.type { kinds.append("handle?:\(FFIModel.cPrefix(n))") } else { kinds.append("handle:\(FFIModel.cPrefix(n))") }
            } else {
                kinds.append("text")
            }
        }
        return kinds
    }

    func resultKind(_ e: FFIModel.EntryPoint) -> String {
        guard let r = e.returns else { return "{ kind: \"none\" }" }
        if model.isHandle(r), case .named(let n) = r {
            return "{ kind: \"handle\", type: \(quoted(FFIModel.cPrefix(n))), free: \(quoted(FFIModel.cPrefix(n) + "_free")) }"
        }
        return "{ kind: \"text\" }"
    }

    func renderBackend() throws(Templates.Failure) -> GeneratedFile {
        var w = SourceWriter(indent: "  ")
        header(&w)
        for l in try Self.intro { w.line(l) }
        w.line()
        w.line("/** Each portable C ABI entry point: its arguments (C order, no error pointer) and its result. */")
        w.block("export const wasmEntryPoints: Readonly<Record<string, EntryPoint>> = {", closer: "};") { w in
            for e in model.entryPoints where e.kind != .free && model.isPortable(e) {
                let args = argumentKinds(e).map { quoted($0) }.joined(separator: ", ")
                w.line("\(e.cName): { symbol: \(quoted(e.symbol)), args: [\(args)], result: \(resultKind(e)) },")
            }
        }
        w.line()
        w.line("/** Entry points over the account and the managed transport: native only (`\"nativeOnly\": true`). */")
        w.block("export const nativeOnlyEntryPoints: readonly string[] = [", closer: "];") { w in
            for e in model.entryPoints where e.kind != .free && !model.isPortable(e) { w.line("\(quoted(e.cName)),") }
        }
        w.line()
        for l in try Self.runtime { w.line(l) }
        return GeneratedFile(path: "generated/typescript/wasm.ts", contents: w.text)
    }

    func renderBrowserEntry() -> GeneratedFile {
        var w = SourceWriter(indent: "  ")
        header(&w)
        w.line("// The browser build's entry (an ES module beside softchat.wasm; loadable in a Worker): the same")
        w.line("// classes as the Node package, over the WebAssembly backend. Call `await loadSoftchat()` once")
        w.line("// before anything else. The npm package's `browser` export condition resolves \"softchat\" here.")
        w.line("import { loadSoftchat as loadModule } from \"./wasm.js\";")
        w.line()
        w.line("export * from \"./contracts.js\";")
        w.line("export * from \"./api.js\";")
        w.line("export { instantiateSoftchat, wasmEntryPoints, nativeOnlyEntryPoints } from \"./wasm.js\";")
        w.line()
        w.line("/**")
        w.line(" * Compiles and instantiates softchat.wasm, once, before any other call. With no argument it")
        w.line(" * fetches `softchat.wasm` beside this module (or beside the bundle a bundler made of it: copy")
        w.line(" * `node_modules/softchat/browser/softchat.wasm` there); pass the bytes or a `fetch` to load it")
        w.line(" * from anywhere else.")
        w.line(" */")
        w.block(
            "export function loadSoftchat(source: ArrayBuffer | Uint8Array | Response | Promise<Response> = fetch(new URL(\"./softchat.wasm\", import.meta.url))): Promise<void> {",
            closer: "}"
        ) { w in
            w.line("return loadModule(source);")
        }
        return GeneratedFile(path: "generated/typescript/browser.ts", contents: w.text)
    }

    static var intro: [String] { get throws(Templates.Failure) { try Templates.lines("typescript/wasm-intro.ts") } }

    static var runtime: [String] { get throws(Templates.Failure) { try Templates.lines("typescript/wasm-runtime.ts") } }
}
