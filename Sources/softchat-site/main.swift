// softchat-site: renders the static documentation site (scripts/build/docs-site). A tool of its own so
// that cmark-gfm, the site's Markdown, is linked here and nowhere a consumer of the libraries
// builds (the build plugin's softchat-codegen does not link it).
//
//   softchat-site --schema DIR --docs DIR --output DIR
//
// Exit status: 0 done, 1 schema invalid, 2 usage, 3 cannot read or write.
import Foundation
import SoftchatCodegen
import SoftchatContracts
import SoftchatSite

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(status)
}

let usage = "usage: softchat-site --schema DIR --docs DIR --output DIR"
var options: [String: String] = [:]
var args = Array(CommandLine.arguments.dropFirst())
while let arg = args.first {
    args.removeFirst()
    guard ["--schema", "--docs", "--output"].contains(arg), let value = args.first else { fail(usage, status: 2) }
    args.removeFirst()
    options[arg] = value
}
guard let schema = options["--schema"], let docs = options["--docs"], let output = options["--output"] else { fail(usage, status: 2) }

let set: ContractSet
do {
    set = try SchemaLoader(displayPrefix: "Schema/").load(from: DirectorySchemaSource(directory: schema))
} catch {
    fail(error.description, status: 1)
}

/// Every regular file under `dir` (not hidden), as sorted paths relative to it.
func files(under dir: String) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: dir) else { return [] }
    var out: [String] = []
    while let rel = walker.nextObject() as? String {
        if rel.split(separator: "/").contains(where: { $0.hasPrefix(".") }) { continue }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir + "/" + rel, isDirectory: &isDir), !isDir.boolValue { out.append(rel) }
    }
    return out.sorted()
}

// The site: the reference from the schema, docs/**/*.md converted, assets; other files of docs/
// copied; files it no longer produces removed (except screenshots/); a warning when the
// checked-in Markdown reference is stale.
var pages: [DocsPage] = []
var copies: [String] = []
for rel in files(under: docs) {
    if rel.hasSuffix(".md") {
        guard let text = try? String(contentsOfFile: docs + "/" + rel, encoding: .utf8) else {
            fail("softchat-site: cannot read \(docs)/\(rel) as UTF-8", status: 3)
        }
        pages.append(DocsPage(path: rel, markdown: text))
    } else if !rel.hasPrefix(HTMLSite.generatedFolder) {
        copies.append(rel)
    }
}
let site = HTMLSite(set: set, documents: pages)
let rendered = site.render()
var written = 0
do {
    for file in rendered where try file.write(under: output) { written += 1 }
    for rel in copies {
        let data = try Data(contentsOf: URL(fileURLWithPath: docs + "/" + rel))
        if try GeneratedFile(path: rel, contents: "").write(data, under: output) { written += 1 }
    }
} catch {
    fail("softchat-site: cannot write the site: \(error)", status: 3)
}
let expected = Set(rendered.map(\.path) + copies)
var removed = 0
for rel in files(under: output) where !expected.contains(rel) && !rel.hasPrefix("screenshots/") {
    try? FileManager.default.removeItem(atPath: output + "/" + rel)
    removed += 1
}
let stale = MarkdownRenderer(set: set).render().filter { file in
    let rel = String(file.path.dropFirst("docs/".count))
    return (try? String(contentsOfFile: docs + "/" + rel, encoding: .utf8)) != file.contents
}
let reference = rendered.filter { $0.path.hasPrefix(HTMLRenderer.directory + "/") }.count
print(
    "docs-site: \(rendered.count + copies.count) files (\(reference) reference pages from Schema/, \(site.convertedDocuments.count) pages from "
        + "\(docs)/), \(written) changed, \(removed) removed -> \(output)/index.html")
if !stale.isEmpty {
    FileHandle.standardError.write(
        Data(
            ("docs-site: warning: the checked-in Markdown reference is stale ("
                + stale.map(\.path).joined(separator: ", ")
                + "); run: swift package --allow-writing-to-package-directory generate-bindings\n").utf8))
}
