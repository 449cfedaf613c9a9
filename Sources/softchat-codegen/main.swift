// softchat-codegen: the thin executable over SoftchatCodegen that both plugins run.
//
//   softchat-codegen swift    --schema DIR --output DIR       Swift surface (build plugin)
//   softchat-codegen recipes  --schema DIR --output DIR       Swift recipes as test code
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

/// Writes `file` under `root` unless it already has exactly these contents.
func write(_ file: GeneratedFile, under root: String) throws -> Bool {
    let url = URL(fileURLWithPath: root).appendingPathComponent(file.path)
    let data = Data(file.contents.utf8)
    if let existing = try? Data(contentsOf: url), existing == data { return false }
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url, options: .atomic)
    return true
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
case "bindings":
    guard let root = options["--root"] else { fail(usage, status: 2) }
    let files = BindingsRenderer(set: set).render()
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
            fail("stale generated files (run: swift package --allow-writing-to-package-directory generate-bindings):\n"
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
