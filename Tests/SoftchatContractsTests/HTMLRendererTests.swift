import Foundation
import SoftchatCodegen
import SoftchatContracts
import SoftchatSite
import Testing

extension Fixture {
    static let miniDocs = directory.appendingPathComponent("Fixtures/MiniDocs").path
    static let repositoryDocs = directory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs").path

    /// Every Markdown file under `dir`, by its path relative to it.
    static func docs(_ dir: String) throws -> [DocsPage] {
        let walker = try #require(FileManager.default.enumerator(atPath: dir))
        var pages: [DocsPage] = []
        while let rel = walker.nextObject() as? String {
            guard rel.hasSuffix(".md") else { continue }
            pages.append(DocsPage(path: rel, markdown: try String(contentsOfFile: dir + "/" + rel, encoding: .utf8)))
        }
        return pages.sorted { $0.path < $1.path }
    }
}

/// Site files under a `site/` prefix, so their goldens (`site__reference__demo.echo.html`) sit
/// beside the Markdown ones.
func sitePrefixed(_ files: [GeneratedFile]) -> [GeneratedFile] {
    files.map { GeneratedFile(path: "site/" + $0.path, contents: $0.contents) }
}

/// The `id`s and relative `href`/`src` targets of an HTML page (generated HTML: attributes
/// always double-quoted).
func htmlAttributes(_ html: String, _ name: String) -> [String] {
    var out: [String] = []
    var rest = Substring(html)
    let marker = " \(name)=\""
    while let r = rest.range(of: marker) {
        rest = rest[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { break }
        out.append(String(rest[..<end]).replacingOccurrences(of: "&amp;", with: "&"))
        rest = rest[end...]
    }
    return out
}

/// Every relative link of every page resolves to a rendered file and, with a fragment, to an
/// id in it. Returns the problems.
func brokenLinks(_ files: [GeneratedFile]) -> [String] {
    let byPath = Dictionary(uniqueKeysWithValues: files.map { ($0.path, $0.contents) })
    var problems: [String] = []
    for file in files where file.path.hasSuffix(".html") {
        for target in htmlAttributes(file.contents, "href") + htmlAttributes(file.contents, "src") {
            if target.contains("://") || target.hasPrefix("mailto:") { continue }
            let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
            var resolved = file.path.split(separator: "/").dropLast().map(String.init)
            if !parts[0].isEmpty {
                for component in parts[0].split(separator: "/") {
                    if component == ".." { _ = resolved.popLast() } else if component != "." { resolved.append(String(component)) }
                }
            } else {
                resolved = file.path.split(separator: "/").map(String.init)
            }
            let path = resolved.joined(separator: "/")
            // The Swift API reference is scripts/build/docc's, not this renderer's; scripts/check/check-links
            // checks it in the built site.
            if path == HTMLSite.swiftAPIPath { continue }
            guard let page = byPath[path] else {
                problems.append("\(file.path): \(target) → missing \(path)")
                continue
            }
            if parts.count == 2, !htmlAttributes(page, "id").contains(String(parts[1])) {
                problems.append("\(file.path): \(target) → no id \(parts[1]) in \(path)")
            }
        }
    }
    return problems
}

@Suite struct HTMLRendererTests {
    @Test func htmlSiteMatchesGolden() throws {
        let site = HTMLSite(set: try Fixture.mini(), documents: try Fixture.docs(Fixture.miniDocs))
        let files = site.render()
        #expect(
            files.map(\.path).sorted() == [
                "guides/echo.html", "index.html", "reference/demo.echo.html", "reference/demo.mirror.html",
                "reference/errors.html", "reference/index.html", "site.js", "style.css",
            ])
        try expectMatchesGolden(sitePrefixed(files))
    }

    @Test func htmlRenderingIsDeterministic() throws {
        let docs = try Fixture.docs(Fixture.miniDocs)
        #expect(HTMLSite(set: try Fixture.mini(), documents: docs).render() == HTMLSite(set: try Fixture.mini(), documents: docs).render())
    }

    /// An edit to one contract (or to the catalog) rewrites exactly the pages that show the
    /// edited value: the contract's own page, the index when it shows the value, the pages of
    /// contracts that restate it, the error catalog when it shows it. Nothing else.
    @Test(arguments: [
        // A bound only its own page and the index show (the index also shows the checksum).
        ContractEdit(
            file: "demo.echo.json", from: #""value": 8,"#, to: #""value": 9,"#,
            markdown: ["demo.echo.md", "index.md"], html: ["demo.echo.html", "index.html"]),
        // A bound demo.mirror restates: its page changes too.
        ContractEdit(
            file: "demo.echo.json", from: #""value": 1024,"#, to: #""value": 2048,"#,
            markdown: ["demo.echo.md", "demo.mirror.md", "index.md"],
            html: ["demo.echo.html", "demo.mirror.html", "index.html"]),
        // Prose only the page shows.
        ContractEdit(
            file: "demo.echo.json", from: #"Echoes are \"exact\"."#, to: "Echoes are verbatim.",
            markdown: ["demo.echo.md"], html: ["demo.echo.html"]),
        // The summary: the page and the index's summary column.
        ContractEdit(
            file: "demo.echo.json", from: "Echo text back.", to: "Echo text back, bounded.",
            markdown: ["demo.echo.md", "index.md"], html: ["demo.echo.html", "index.html"]),
        // The title: the page only (navigation lists contracts by id).
        ContractEdit(
            file: "demo.mirror.json", from: #""title": "Mirror""#, to: #""title": "Looking glass""#,
            markdown: ["demo.mirror.md"], html: ["demo.mirror.html"]),
        // A recipe: the page only.
        ContractEdit(
            file: "demo.echo.json", from: #"let e = make_echoer(\"wss://x\");"#, to: #"let e = make_echoer(\"wss://y\");"#,
            markdown: ["demo.echo.md"], html: ["demo.echo.html"]),
        // A rule override: the page only.
        ContractEdit(
            file: "demo.mirror.json", from: "Never retry mirrors.", to: "Retry mirrors once.",
            markdown: ["demo.mirror.md"], html: ["demo.mirror.html"]),
        // The catalog's handling text: the catalog and every page listing the code.
        ContractEdit(
            file: "errors.json", from: "Fix the input.", to: "Fix the input, then call again.",
            markdown: ["demo.echo.md", "demo.mirror.md", "errors.md"],
            html: ["demo.echo.html", "demo.mirror.html", "errors.html"]),
    ])
    func regeneratingAfterAnEditChangesExactlyTheAffectedPages(_ edit: ContractEdit) throws {
        var files = try Fixture.miniFiles()
        let original = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
        let text = try #require(files[edit.file])
        #expect(text.contains(edit.from), "the fixture no longer contains \(edit.from)")
        files[edit.file] = text.replacingOccurrences(of: edit.from, with: edit.to)
        let edited = try SchemaLoader().load(from: InMemorySchemaSource(files: files))
        #expect(original != edited)

        func changed(_ before: [GeneratedFile], _ after: [GeneratedFile]) -> Set<String> {
            #expect(before.map(\.path) == after.map(\.path), "the set of pages changed")
            return Set(zip(before, after).filter { $0.0.contents != $0.1.contents }.map(\.0.path))
        }
        let markdown = changed(MarkdownRenderer(set: original).render(), MarkdownRenderer(set: edited).render())
        #expect(markdown == Set(edit.markdown.map { "docs/reference/" + $0 }))

        // The whole site, guides and assets included: only reference pages may change.
        let docs = try Fixture.docs(Fixture.miniDocs)
        let html = changed(HTMLSite(set: original, documents: docs).render(), HTMLSite(set: edited, documents: docs).render())
        #expect(html == Set(edit.html.map { "reference/" + $0 }))
    }

    @Test func miniSiteLinksAndAnchorsResolve() throws {
        let files = HTMLSite(set: try Fixture.mini(), documents: try Fixture.docs(Fixture.miniDocs)).render()
        let problems = brokenLinks(files)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test func repositorySiteLinksAndAnchorsResolve() throws {
        let set = try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))
        let docs = try Fixture.docs(Fixture.repositoryDocs)
        let files = HTMLSite(set: set, documents: docs).render()
        #expect(files.contains { $0.path == "guides/host-loop.html" })
        let problems = brokenLinks(files)
        #expect(problems.isEmpty, "\(problems)")
    }

    /// The HTML reference carries every anchor of the Markdown reference, so a link written
    /// against `x.md#anchor` works on `x.html#anchor`.
    @Test func htmlReferenceHasEveryMarkdownAnchor() throws {
        for set in [try Fixture.mini(), try SchemaLoader().load(from: DirectorySchemaSource(directory: Fixture.repositorySchema))] {
            let html = Dictionary(uniqueKeysWithValues: HTMLRenderer(set: set).render().map { ($0.path, $0.contents) })
            for page in MarkdownRenderer(set: set).render() {
                var converter = MarkdownHTML()
                let anchors = htmlAttributes(converter.render(page.contents), "id")
                let name = page.path.dropFirst("docs/".count).dropLast(".md".count) + ".html"
                let ids = Set(htmlAttributes(try #require(html[String(name)]), "id"))
                #expect(!anchors.isEmpty)
                for anchor in anchors {
                    #expect(ids.contains(anchor), "\(name) lacks #\(anchor)")
                }
            }
        }
    }

    @Test func headingSlugsFollowGitHub() {
        #expect(HeadingSlug.slug("Inputs and exact bounds") == "inputs-and-exact-bounds")
        #expect(HeadingSlug.slug("Ownership, lifecycle, and execution rules") == "ownership-lifecycle-and-execution-rules")
        #expect(HeadingSlug.slug("invalid_relay_frame") == "invalid_relay_frame")
        #expect(HeadingSlug.slug("relay.wire") == "relaywire")
        #expect(HeadingSlug.slug("RelaySession lifecycle") == "relaysession-lifecycle")
        #expect(HeadingSlug.slug("A  B") == "a--b")
        var converter = MarkdownHTML()
        let html = converter.render("# Same\n## Same\n### Same\n## `code` **x**\n")
        #expect(htmlAttributes(html, "id") == ["same", "same-1", "same-2", "code-x"])
    }

    @Test func markdownSubsetConverts() {
        var converter = MarkdownHTML(link: { HTMLSite.resolveLink($0, from: "guides/a.md") })
        let html = converter.render(
            """
            <!-- dropped -->
            # Title with `code`

            Text with **bold**, `<tag>` & [a page](b.md#x), [out](../../Sources/X.swift),
            [`X.swift`](../../Sources/X.swift), [web](https://e.example/?a=1&b=2) and <raw>.

            - one
              - nested
            - two

            3. three
            4. four

            | a | b |
            |---|--:|
            | `x \\| y` | z \\| w |

            ```swift
            if a < b { }
            ```
            """)
        #expect(!html.contains("dropped"))
        #expect(!html.contains("<!--"))
        #expect(html.contains(#"<h1 id="title-with-code">Title with <code>code</code></h1>"#))
        #expect(html.contains("<strong>bold</strong>"))
        #expect(html.contains("<code>&lt;tag&gt;</code> &amp; "))
        #expect(html.contains(#"<a href="b.html#x">a page</a>"#))
        #expect(html.contains("out (<code>Sources/X.swift</code>)"))
        #expect(html.contains("\n<code>Sources/X.swift</code>, <a href"))
        #expect(html.contains(#"<a href="https://e.example/?a=1&amp;b=2">web</a>"#))
        #expect(html.contains("and &lt;raw&gt;."))
        #expect(html.contains("<ul>\n<li>one\n<ul>\n<li>nested</li>\n</ul>\n</li>\n<li>two</li>\n</ul>"))
        #expect(html.contains("<ol start=\"3\">\n<li>three</li>\n<li>four</li>\n</ol>"))
        #expect(html.contains("<th align=\"right\">b</th>"))
        #expect(html.contains("<td><code>x | y</code></td>\n<td align=\"right\">z | w</td>"))
        #expect(html.contains(#"<pre><code class="language-swift">if a &lt; b { }"#))
    }

    /// Raw HTML never reaches the page, inline or as a block: it reads as the text it was.
    @Test func rawHTMLBecomesTextAndCommentsAreDropped() {
        var converter = MarkdownHTML()
        let html = converter.render("<div onclick=\"x()\">block</div>\n\nA <script>alert(1)</script> line.\n\n<!-- note -->\n")
        #expect(!html.contains("<div"))
        #expect(!html.contains("<script"))
        #expect(html.contains("&lt;div onclick=&quot;x()&quot;&gt;block&lt;/div&gt;"))
        #expect(html.contains("A &lt;script&gt;alert(1)&lt;/script&gt; line."))
        #expect(!html.contains("note"))
    }

    @Test func linksOutOfDocsBecomeRepositoryPaths() {
        #expect(HTMLSite.resolveLink("../reference/x.md#y", from: "guides/a.md") == .href("../reference/x.html#y"))
        #expect(HTMLSite.resolveLink("../README.md", from: "guides/a.md") == .href("../index.html"))
        #expect(HTMLSite.resolveLink("guides/a.md", from: "README.md") == .href("guides/a.html"))
        #expect(HTMLSite.resolveLink("#here", from: "README.md") == .href("#here"))
        #expect(HTMLSite.resolveLink("../README.md", from: "README.md") == .unlinked("README.md"))
        #expect(HTMLSite.resolveLink("../../Schema/README.md", from: "guides/a.md") == .unlinked("Schema/README.md"))
        #expect(HTMLSite.resolveLink("picture.png", from: "guides/a.md") == .href("picture.png"))
    }

    @Test func swiftAndRustRecipesAreMarkedCompiledAndEveryRecipeIsInThePage() throws {
        let page = try #require(HTMLRenderer(set: try Fixture.mini()).render().first { $0.path == "reference/demo.echo.html" })
        #expect(page.contents.contains("The Rust, Swift recipes compile and run as part of the test suite"))
        #expect(page.contents.contains("Rust: <code>generated/rust/softchat</code>, a safe crate over the Swift core's C ABI"))
        // Without JavaScript nothing is hidden: every recipe is in the page, none carries `hidden`.
        #expect(page.contents.contains(#"<section class="recipe" data-lang="rust">"#))
        #expect(page.contents.contains(#"<section class="recipe" data-lang="swift">"#))
        #expect(!page.contents.contains("hidden"))
    }
}

struct ContractEdit: Sendable, CustomTestStringConvertible {
    var file: String
    var from: String
    var to: String
    var markdown: [String]
    var html: [String]
    var testDescription: String { "\(file): \(from) → \(to)" }
}
