// softchat-codegen: the thin executable over SoftchatCodegen that both plugins run. It links
// no Markdown library: the docs site is `softchat-site`, which only scripts/build/docs-site builds.
//
//   softchat-codegen swift    --schema DIR --output DIR       Swift surface (build plugin)
//   softchat-codegen recipes  --schema DIR --output DIR       Swift recipes as test code
//   softchat-codegen ffi      --schema DIR --output DIR       the C ABI's Swift exports (build plugin)
//   softchat-codegen bindings --schema DIR --root DIR [--check]  generated/ and docs/reference/
//   softchat-codegen validate --schema DIR                     diagnostics only
//
// Exit status: 0 done, 1 schema invalid or (with --check) files stale, 2 usage.
import Foundation
import SoftchatCodegen
import SoftchatContracts

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(status)
}

let usage = """
    usage: softchat-codegen swift --schema DIR --output DIR
           softchat-codegen recipes --schema DIR --output DIR
           softchat-codegen ffi --schema DIR --output DIR
           softchat-codegen bindings --schema DIR --root DIR [--check]
           softchat-codegen validate --schema DIR
    """

var args = Array(CommandLine.arguments.dropFirst())
guard let command = args.first else { fail(usage, status: 2) }
args.removeFirst()
var options: [String: String] = [:]
var check = false
while let arg = args.first {
    args.removeFirst()
    switch arg {
    case "--check": check = true
    case "--schema", "--output", "--root", "--display-prefix":
        guard let value = args.first else { fail("missing value for \(arg)\n\(usage)", status: 2) }
        args.removeFirst()
        options[arg] = value
    default: fail("unknown argument \(arg)\n\(usage)", status: 2)
    }
}
guard let schemaDir = options["--schema"] else { fail(usage, status: 2) }

let set: ContractSet
do {
    set = try SchemaLoader(displayPrefix: options["--display-prefix"] ?? "Schema/")
        .load(from: DirectorySchemaSource(directory: schemaDir))
} catch {
    fail(error.description, status: 1)
}

/// `text` as the toolchain's `swift-format` formats it, with the configuration found from `path`
/// upward (the repository's `.swift-format`), so generated Swift meets `swift format lint` as
/// hand-written Swift does. A toolchain without swift-format gets the text unformatted and a
/// warning on standard error; the test command's lint would then fail.
func formatSwift(_ text: String, as path: String) -> String {
    func unformatted(_ why: String) -> String {
        FileHandle.standardError.write(Data("softchat-codegen: warning: \(why); \(path) is written unformatted\n".utf8))
        return text
    }
    // The text goes in through a file, so neither side of a pipe can block the other.
    let source = FileManager.default.temporaryDirectory.appendingPathComponent(
        "softchat-codegen-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).swift")
    defer { try? FileManager.default.removeItem(at: source) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["swift-format", "format", "--assume-filename", path, "-"]
    let output = Pipe()
    process.standardOutput = output
    do {
        try Data(text.utf8).write(to: source)
        process.standardInput = try FileHandle(forReadingFrom: source)
        try process.run()
    } catch {
        return unformatted("cannot run swift-format (\(error))")
    }
    let formatted = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0, let result = String(data: formatted, encoding: .utf8) else {
        return unformatted("swift-format exited \(process.terminationStatus)")
    }
    return result
}

/// Writes `file` under `root` unless it already has exactly these contents; Swift is written
/// as `swift-format` formats it.
func write(_ file: GeneratedFile, data: Data? = nil, under root: String) throws -> Bool {
    let path = URL(fileURLWithPath: root).appendingPathComponent(file.path).path
    let data = data ?? Data((file.path.hasSuffix(".swift") ? formatSwift(file.contents, as: path) : file.contents).utf8)
    return try file.write(data, under: root)
}

switch command {
case "validate":
    print("schema OK: \(set.contracts.count) contracts, \(set.errors.count) errors, checksum \(contractChecksum(set))")
case "swift":
    guard let output = options["--output"] else { fail(usage, status: 2) }
    do {
        _ = try write(SwiftRenderer(set: set).render(), under: output)
    } catch {
        fail("softchat-codegen: cannot write the Swift surface: \(error)", status: 3)
    }
case "recipes":
    guard let output = options["--output"] else { fail(usage, status: 2) }
    do {
        _ = try write(SwiftRecipeRenderer(set: set).render(), under: output)
    } catch {
        fail("softchat-codegen: cannot write the recipes: \(error)", status: 3)
    }
case "ffi":
    guard let output = options["--output"] else { fail(usage, status: 2) }
    do {
        for file in CABIRenderer(set: set).renderSwiftExports() { _ = try write(file, under: output) }
    } catch {
        fail("softchat-codegen: cannot write the FFI exports: \(error)", status: 3)
    }
case "bindings":
    guard let root = options["--root"] else { fail(usage, status: 2) }
    let files: [GeneratedFile]
    do {
        files = try BindingsRenderer(set: set).render()
    } catch {
        fail(error.description, status: 3)
    }
    var stale: [String] = []
    for file in files {
        let url = URL(fileURLWithPath: root).appendingPathComponent(file.path)
        let current = try? Data(contentsOf: url)
        if current != Data(file.contents.utf8) { stale.append(file.path) }
    }
    // Files the renderers no longer produce are stale too (a removed contract's page).
    let expected = Set(files.map(\.path))
    for dir in BindingsRenderer.ownedDirectories {
        let base = URL(fileURLWithPath: root).appendingPathComponent(dir)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { continue }
        while let rel = walker.nextObject() as? String {
            var isDir: ObjCBool = false
            let path = dir + "/" + rel
            if BindingsRenderer.ignoredDirectories.contains(where: { path.hasPrefix($0 + "/") }) { continue }
            if FileManager.default.fileExists(atPath: base.appendingPathComponent(rel).path, isDirectory: &isDir),
                !isDir.boolValue, !expected.contains(path)
            {
                stale.append(path + " (no longer generated)")
                if !check { try? FileManager.default.removeItem(atPath: base.appendingPathComponent(rel).path) }
            }
        }
    }
    if check {
        if stale.isEmpty {
            print("generated files are fresh (\(files.count) files, checksum \(contractChecksum(set)))")
        } else {
            fail(
                "stale generated files (run: swift package --allow-writing-to-package-directory generate-bindings):\n"
                    + stale.sorted().map { "  " + $0 }.joined(separator: "\n"), status: 1)
        }
    } else {
        do {
            var written = 0
            for file in files where try write(file, under: root) { written += 1 }
            print("generate-bindings: \(files.count) files, \(written) changed (checksum \(contractChecksum(set)))")
        } catch {
            fail("softchat-codegen: cannot write: \(error)", status: 3)
        }
    }
default:
    fail(usage, status: 2)
}
