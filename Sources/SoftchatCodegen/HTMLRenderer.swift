public import SoftchatContracts

// The static HTML documentation site: the reference pages rendered from the schema (laid out
// like the Markdown reference and the product page), the hand-written docs/**/*.md converted
// with a small Markdown reader written for the subset the docs use, a stylesheet, and a little
// JavaScript for the recipe language selector. Every page is complete without JavaScript.

// MARK: - Site structure

/// What the navigation of every page lists besides the reference: the guides, in order.
public struct SiteNavigation: Sendable, Equatable {
    public struct Link: Sendable, Equatable {
        /// Site-relative path (`guides/host-loop.html`).
        public var path: String
        public var title: String
        public init(path: String, title: String) {
            self.path = path
            self.title = title
        }
    }

    public var siteTitle: String
    public var guides: [Link]

    public init(siteTitle: String = "Softchat", guides: [Link] = []) {
        self.siteTitle = siteTitle
        self.guides = guides
    }
}

/// One Markdown file of `docs/`, by its path relative to `docs/` (`guides/recovery.md`).
public struct DocsPage: Sendable, Equatable {
    public var path: String
    public var markdown: String
    public init(path: String, markdown: String) {
        self.path = path
        self.markdown = markdown
    }
}

/// The whole site: the reference from the schema, every docs page but the generated
/// reference converted from Markdown, and the assets. Paths are relative to the site root.
public struct HTMLSite {
    public let set: ContractSet
    public let documents: [DocsPage]

    public init(set: ContractSet, documents: [DocsPage]) {
        self.set = set
        self.documents = documents
    }

    /// The guides the navigation lists first, in reading order; others follow by name.
    public static let guideOrder = ["getting-started", "host-loop", "durability", "recovery"]

    /// The Swift API reference's first page: `scripts/docc` writes the merged DocC archive to
    /// `api/` (static hosting, base path `/api/`), beside the pages this renderer writes.
    public static let swiftAPIPath = "api/documentation/softchatcore/index.html"

    /// Markdown under this folder of `docs/` is generated from the schema: the site renders
    /// those pages from the schema itself instead of converting the Markdown.
    public static let generatedFolder = "reference/"

    /// The documents the site converts (everything but the generated reference).
    public var convertedDocuments: [DocsPage] {
        documents.filter { !$0.path.hasPrefix(Self.generatedFolder) && $0.path.hasSuffix(".md") }
    }

    public var navigation: SiteNavigation {
        let guides = convertedDocuments.filter { $0.path.hasPrefix("guides/") }
        func rank(_ p: DocsPage) -> (Int, String) {
            let name = String(p.path.dropFirst("guides/".count).dropLast(".md".count))
            return (Self.guideOrder.firstIndex(of: name) ?? Self.guideOrder.count, p.path)
        }
        let ordered = guides.sorted { rank($0) < rank($1) }
        return SiteNavigation(
            guides: ordered.map {
                .init(path: Self.htmlPath(forDocsPath: $0.path), title: MarkdownHTML.title(of: $0.markdown) ?? $0.path)
            })
    }

    /// `README.md` → `index.html`, `guides/x.md` → `guides/x.html`.
    public static func htmlPath(forDocsPath path: String) -> String {
        let dot = path.hasSuffix(".md") ? String(path.dropLast(3)) : path
        if dot == "README" { return "index.html" }
        if dot.hasSuffix("/README") { return String(dot.dropLast("README".count)) + "index.html" }
        return dot + ".html"
    }

    public func render() -> [GeneratedFile] {
        let nav = navigation
        var files = HTMLRenderer(set: set, navigation: nav).render()
        var hasIndex = false
        for doc in convertedDocuments.sorted(by: { $0.path < $1.path }) {
            let path = Self.htmlPath(forDocsPath: doc.path)
            if path == "index.html" { hasIndex = true }
            var converter = MarkdownHTML(link: { Self.resolveLink($0, from: doc.path) })
            let body = converter.render(doc.markdown)
            let title = MarkdownHTML.title(of: doc.markdown) ?? doc.path
            files.append(
                GeneratedFile(
                    path: path,
                    contents: HTMLPage.document(
                        path: path, title: title, body: body, navigation: nav, contracts: set.contracts.map(\.id),
                        footer: "Hand-written: <code>docs/\(escapeHTML(doc.path))</code>.")))
        }
        if !hasIndex {
            let body = """
                <h1 id="\(escapeHTML(HeadingSlug.slug(nav.siteTitle)))">\(escapeHTML(nav.siteTitle))</h1>
                <p><a href="reference/index.html">Reference</a> · <a href="reference/errors.html">Error catalog</a></p>

                """
            files.append(
                GeneratedFile(
                    path: "index.html",
                    contents: HTMLPage.document(
                        path: "index.html", title: nav.siteTitle, body: body, navigation: nav, contracts: set.contracts.map(\.id),
                        footer: "No <code>docs/README.md</code>: this index is generated.")))
        }
        files.append(GeneratedFile(path: "style.css", contents: SiteAssets.stylesheet))
        files.append(GeneratedFile(path: "site.js", contents: SiteAssets.script))
        return files
    }

    /// How a link in `docs/<from>` appears in the site: Markdown pages become their HTML page
    /// (anchors are kept: headings get the same ids in both); a link that leaves `docs/`
    /// becomes plain text naming the repository path, so the site stands alone.
    public static func resolveLink(_ url: String, from docsPath: String) -> MarkdownHTML.LinkTarget {
        if url.contains("://") || url.hasPrefix("mailto:") || url.hasPrefix("#") || url.isEmpty { return .href(url) }
        var target = url
        var fragment = ""
        if let hash = url.firstIndex(of: "#") {
            target = String(url[..<hash])
            fragment = String(url[hash...])
        }
        if target.hasPrefix("/") { return .unlinked(String(target.dropFirst())) }
        var parts = docsPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().map(String.init)
        var escaped = 0
        for part in target.split(separator: "/", omittingEmptySubsequences: false) {
            switch part {
            case ".", "": continue
            case "..":
                if parts.isEmpty { escaped += 1 } else { parts.removeLast() }
            default:
                if escaped > 0 { return .unlinked(Self.repositoryPath(escaped: escaped, rest: target, from: docsPath)) }
                parts.append(String(part))
            }
        }
        if escaped > 0 { return .unlinked(Self.repositoryPath(escaped: escaped, rest: target, from: docsPath)) }
        guard target.hasSuffix(".md") else { return .href(url) }
        let lastSlash = target.lastIndex(of: "/")
        let directory = lastSlash.map { String(target[...$0]) } ?? ""
        let file = lastSlash.map { String(target[target.index(after: $0)...]) } ?? target
        return .href(directory + htmlPath(forDocsPath: file) + fragment)
    }

    /// The repository-relative path of a link that leaves `docs/` (`../../Sources/X.swift`
    /// from `guides/a.md` → `Sources/X.swift`), assuming `docs/` sits at the repository root.
    static func repositoryPath(escaped: Int, rest: String, from docsPath: String) -> String {
        var parts = ["docs"] + docsPath.split(separator: "/").dropLast().map(String.init)
        for part in rest.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(String(part))
            }
        }
        return parts.joined(separator: "/")
    }
}

// MARK: - Reference pages

/// Renders the reference from the schema as HTML: one page per operation contract laid out
/// like the product page, the error catalog and an index. Section ids equal the anchors of
/// the Markdown reference, so `relay.session.md#stable-errors` and
/// `relay.session.html#stable-errors` name the same section. Recipes carry `data-lang`, which
/// the optional language selector uses; without JavaScript every recipe shows.
public struct HTMLRenderer {
    public let set: ContractSet
    public let navigation: SiteNavigation

    public init(set: ContractSet, navigation: SiteNavigation = SiteNavigation()) {
        self.set = set
        self.navigation = navigation
    }

    /// Site-relative folder of the reference pages.
    public static let directory = "reference"

    /// Languages whose recipes this repository's test suite compiles (Swift: every recipe
    /// runs in Tests/SoftchatRecipeTests). The facades' tests will add Kotlin and TypeScript.
    public static let compiledRecipeLanguages: [Language] = [.swift, .android, .typescript]

    public func render() -> [GeneratedFile] {
        [renderIndex(), renderErrors()] + set.contracts.map(renderContract)
    }

    var markdown: MarkdownRenderer { MarkdownRenderer(set: set) }

    func page(_ name: String, title: String, body: String) -> GeneratedFile {
        let path = "\(Self.directory)/\(name)"
        return GeneratedFile(
            path: path,
            contents: HTMLPage.document(
                path: path, title: title, body: body, navigation: navigation, contracts: set.contracts.map(\.id),
                footer: "Generated by softchat-codegen from <code>Schema/</code> (schema v\(set.schemaVersion)), like the Markdown in "
                    + "<code>docs/reference/</code>. Do not edit: edit <code>Schema/*.json</code>, then run <code>generate-bindings</code> "
                    + "and <code>scripts/docs-site</code>."))
    }

    func code(_ s: String) -> String { "<code>\(escapeHTML(s))</code>" }
    func errorLink(_ code: String) -> String { "<a href=\"errors.html#\(escapeHTML(code))\">\(self.code(code))</a>" }
    func contractLink(_ id: String, text: String? = nil) -> String { "<a href=\"\(escapeHTML(id)).html\">\(escapeHTML(text ?? id))</a>" }

    func renderIndex() -> GeneratedFile {
        var slugs = SlugRegistry()
        var h = HTMLWriter()
        h.heading(1, "Softchat reference", slugs: &slugs)
        h.line("<p>The operation contracts of Softchat's relay and persistence core, generated from <code>Schema/</code>")
        h.line("(schema v\(set.schemaVersion), checksum \(code(contractChecksum(set)))).</p>")
        h.line("<table class=\"contracts\">")
        h.line("<thead><tr><th>contract</th><th>summary</th><th>bounds</th><th>stable errors</th></tr></thead>")
        h.line("<tbody>")
        for c in set.contracts {
            let bounds = c.bounds.map { "\(escapeHTML($0.name)) \(escapeHTML(markdown.boundText($0)))" }.joined(separator: "; ")
            let errors = c.errors.map(errorLink).joined(separator: ", ")
            h.line("<tr><td>\(contractLink(c.id))</td><td>\(escapeHTML(c.summary))</td><td>\(bounds)</td><td>\(errors)</td></tr>")
        }
        h.line("</tbody>")
        h.line("</table>")
        h.line("<p>See also the <a href=\"errors.html\">error catalog</a>, and the <a href=\"../\(HTMLSite.swiftAPIPath)\">Swift API")
        h.line("reference</a> (DocC: every public type of SoftchatCore, SoftchatJSON, SoftchatStorage, SoftchatSync,")
        h.line("SoftchatTransport and SoftchatClient, built by <code>scripts/docc</code>; serve the site over HTTP to read it).</p>")
        return page("index.html", title: "Reference", body: h.text)
    }

    func renderErrors() -> GeneratedFile {
        var slugs = SlugRegistry()
        var h = HTMLWriter()
        h.heading(1, "Error catalog", slugs: &slugs)
        h.line("<p>Every Softchat error carries one of these stable codes, in every language and in the CLI's")
        h.line("<code>{\"error\":{\"code\":…,\"message\":…}}</code> lines. Branch on the code; messages are diagnostic.</p>")
        for e in set.errors {
            h.line("<section class=\"error\">")
            h.heading(2, e.code, html: escapeHTML(e.code), slugs: &slugs)
            h.line("<p>\(escapeHTML(e.meaning))</p>")
            h.line("<ul>")
            h.line("<li><strong>Retry:</strong> <span class=\"retry-\(e.retry.rawValue)\">\(e.retry.rawValue)</span></li>")
            h.line("<li><strong>Handling:</strong> \(escapeHTML(e.handling))</li>")
            let users = set.contracts(raising: e.code).map { contractLink($0) }
            let bounds = set.contracts.flatMap(\.bounds).filter { $0.error == e.code && $0.restates == nil }
                .map { "<a href=\"\(escapeHTML($0.contract)).html#bound-\(escapeHTML($0.name))\">\(code("\($0.contract).\($0.name)"))</a>" }
            if !users.isEmpty { h.line("<li><strong>Contracts:</strong> \(users.joined(separator: ", "))</li>") }
            if !bounds.isEmpty { h.line("<li><strong>Raised by bounds:</strong> \(bounds.joined(separator: ", "))</li>") }
            h.line("</ul>")
            h.line("</section>")
        }
        return page("errors.html", title: "Error catalog", body: h.text)
    }

    /// `#decl-…` ids of declarations: `Type`, `Type.member`, `function`.
    static func declarationID(_ neutralName: String) -> String { "decl-" + neutralName }

    /// Where a page symbol is declared (`relay.session.html#decl-RelaySession.confirmSent`).
    func symbolHref(_ symbol: String, language: Language) -> String? {
        guard let neutral = SymbolResolver(set: set).resolve(symbol, language: language) else { return nil }
        let typeName = neutral.split(separator: ".").first.map(String.init) ?? neutral
        let owner =
            set.type(named: typeName)?.contract
            ?? set.contracts.first { c in c.api.functions.contains { $0.name == neutral } }?.id
        guard let owner else { return nil }
        return "\(owner).html#\(Self.declarationID(neutral))"
    }

    func renderContract(_ c: Contract) -> GeneratedFile {
        var slugs = SlugRegistry()
        var h = HTMLWriter()
        h.heading(1, c.title, slugs: &slugs)
        h.line(
            "<p class=\"contract-id\">Operation contract \(code(c.id)) · <a href=\"index.html\">index</a> · <a href=\"errors.html\">errors</a></p>")
        h.line("<p class=\"summary\">\(escapeHTML(c.summary))</p>")

        h.heading(2, "Inputs and exact bounds", slugs: &slugs)
        h.line("<table class=\"bounds\">")
        h.line("<thead><tr><th>bound</th><th>value</th><th>error</th><th>meaning</th></tr></thead>")
        h.line("<tbody>")
        for b in c.bounds {
            var meaning = escapeHTML(b.doc)
            if let r = b.restates {
                let dot = r.lastIndex(of: ".")!
                let href = "\(r[..<dot]).html#bound-\(r[r.index(after: dot)...])"
                meaning += " (restates <a href=\"\(escapeHTML(href))\">\(code(r))</a>)"
            }
            h.line(
                "<tr id=\"bound-\(escapeHTML(b.name))\"><td>\(code(b.name))</td><td class=\"value\">\(escapeHTML(markdown.boundText(b)))</td>"
                    + "<td>\(errorLink(b.error))</td><td>\(meaning)</td></tr>")
        }
        h.line("</tbody>")
        h.line("</table>")

        h.heading(2, "Output", slugs: &slugs)
        h.line("<p>\(escapeHTML(c.output))</p>")
        h.heading(2, "Trust and authentication", slugs: &slugs)
        h.line("<p>\(escapeHTML(c.trust))</p>")

        h.heading(2, "Stable errors", slugs: &slugs)
        h.line("<table class=\"errors\">")
        h.line("<thead><tr><th>code</th><th>retry</th><th>handling</th></tr></thead>")
        h.line("<tbody>")
        for code in c.errors {
            let e = set.error(code)!
            h.line(
                "<tr><td>\(errorLink(code))</td><td class=\"retry-\(e.retry.rawValue)\">\(e.retry.rawValue)</td><td>\(escapeHTML(e.handling))</td></tr>"
            )
        }
        h.line("</tbody>")
        h.line("</table>")
        h.line("<p class=\"see-also\">Meanings, retry and handling rules of every code: the <a href=\"errors.html\">error catalog</a>.</p>")

        h.heading(2, "Ownership, lifecycle, and execution rules", slugs: &slugs)
        h.line("<dl class=\"rules\">")
        for (name, text) in c.rules.all {
            h.line("<dt>\(escapeHTML(name))</dt><dd>\(escapeHTML(text))</dd>")
        }
        h.line("</dl>")

        h.heading(2, "Exact public symbols", slugs: &slugs)
        h.line("<table class=\"symbols\">")
        h.line("<thead><tr><th>language</th><th>symbols</th></tr></thead>")
        h.line("<tbody>")
        for language in Language.allCases {
            let symbols = (c.symbols[language] ?? []).map { s in
                symbolHref(s, language: language).map { "<a href=\"\(escapeHTML($0))\">\(code(s))</a>" } ?? code(s)
            }
            h.line(
                "<tr data-lang=\"\(language.rawValue)\"><th scope=\"row\">\(language.displayName)</th><td>\(symbols.joined(separator: ", "))</td></tr>"
            )
        }
        h.line("</tbody>")
        h.line("</table>")

        if !c.notes.isEmpty || !c.sequence.isEmpty || !c.steps.isEmpty {
            h.heading(2, "Semantics", slugs: &slugs)
            for note in c.notes { h.line("<p>\(escapeHTML(note))</p>") }
            if !c.sequence.isEmpty {
                h.line("<pre class=\"sequence\"><code class=\"language-text\">\(escapeHTML(c.sequence.joined(separator: "\n")))</code></pre>")
            }
            if !c.steps.isEmpty {
                h.line("<ol class=\"steps\">")
                for step in c.steps { h.line("<li>\(escapeHTML(step))</li>") }
                h.line("</ol>")
            }
        }

        if !c.api.types.isEmpty || !c.api.functions.isEmpty {
            h.heading(2, "Declarations", slugs: &slugs)
            var ids = Set<String>()
            func id(_ name: String) -> String {
                let value = Self.declarationID(name)
                return ids.insert(value).inserted ? " id=\"\(escapeHTML(value))\"" : ""
            }
            h.line("<ul class=\"declarations\">")
            for t in c.api.types {
                h.line("<li\(id(t.name))><strong>\(code(t.name))</strong> <span class=\"kind\">\(t.kind.rawValue)</span>: \(escapeHTML(t.doc))")
                let members =
                    (t.tag.map { [($0.name, "tag " + code("\($0.name): \($0.type)"), $0.doc)] } ?? [])
                    + t.variants.map { ($0.name, "variant " + code(t.variantSignature($0)), $0.doc) }
                    + t.fields.map { ($0.name, code("\($0.name): \($0.type)"), $0.doc) }
                    + t.cases.map { ($0.name, code($0.value), $0.doc) }
                    + t.properties.map { ($0.name, code("\($0.name): \($0.type)"), $0.doc) }
                    + t.methods.map { ($0.name, signature($0), $0.doc) }
                if !members.isEmpty {
                    h.line("<ul>")
                    for (name, text, doc) in members {
                        h.line("<li\(id("\(t.name).\(name)"))>\(text) — \(escapeHTML(doc))</li>")
                    }
                    h.line("</ul>")
                }
                h.line("</li>")
            }
            for f in c.api.functions {
                h.line("<li\(id(f.name))><strong>\(signature(f))</strong>: \(escapeHTML(f.doc))</li>")
            }
            h.line("</ul>")
        }

        if !c.recipes.isEmpty {
            h.heading(2, "Recipes", slugs: &slugs)
            h.line("<div class=\"recipes\">")
            let present = Language.allCases.filter { l in c.recipes.contains { $0.language == l } }
            let compiled = present.filter { Self.compiledRecipeLanguages.contains($0) }
            let notCompiled = present.filter { !Self.compiledRecipeLanguages.contains($0) }
            var status: [String] = []
            if !compiled.isEmpty {
                status.append(
                    "The \(compiled.map(\.displayName).joined(separator: ", ")) recipes compile and run as part of the "
                        + "test suite, verbatim from <code>Schema/\(escapeHTML(c.file))</code> (Swift: <code>Tests/SoftchatRecipeTests</code>; "
                        + "Android and TypeScript: <code>scripts/test-facades</code>, over the C ABI).")
            }
            if !notCompiled.isEmpty {
                status.append(
                    notCompiled.map { $0.unbuiltNote ?? "\($0.displayName): shown as specified; not compiled in this repository yet." }
                        .joined(separator: " "))
            }
            h.line("<p class=\"recipe-status\">\(status.joined(separator: " "))</p>")
            for language in present {
                let r = c.recipes.first { $0.language == language }!
                h.line("<section class=\"recipe\" data-lang=\"\(language.rawValue)\">")
                h.heading(3, language.displayName, slugs: &slugs)
                h.line("<pre><code class=\"language-\(language.fence)\">\(escapeHTML(r.code.joined(separator: "\n")))</code></pre>")
                if let note = r.note { h.line("<p>\(escapeHTML(note))</p>") }
                h.line("</section>")
            }
            h.line("</div>")
        }
        return page("\(c.id).html", title: c.title, body: h.text)
    }

    /// `name(params) -> T` in code, then `throws` with each code linked to the catalog.
    func signature(_ f: FunctionDecl) -> String {
        let params = f.params.map { "\($0.name): \($0.type)" }.joined(separator: ", ")
        let text = "\(f.isStatic ? "static " : "")\(f.name)(\(params))\(f.returns.map { " -> \($0)" } ?? "")"
        let throwsText = f.throwsCodes.isEmpty ? "" : " throws " + f.throwsCodes.map(errorLink).joined(separator: ", ")
        return code(text) + throwsText
    }
}

/// Accumulates HTML lines; headings get ids from the page's slug registry.
struct HTMLWriter {
    private(set) var text = ""

    mutating func line(_ s: String) { text += s + "\n" }
    mutating func raw(_ s: String) { text += s }

    mutating func heading(_ level: Int, _ plain: String, html: String? = nil, slugs: inout SlugRegistry) {
        let id = slugs.unique(plain)
        line("<h\(level) id=\"\(escapeHTML(id))\">\(html ?? escapeHTML(plain))</h\(level)>")
    }
}

// MARK: - Page chrome

enum HTMLPage {
    /// A complete page: header, navigation (guides, reference), the body, a footer. Links are
    /// relative, so the site works from `file://` and from any folder it is served from.
    static func document(
        path: String, title: String, body: String, navigation: SiteNavigation, contracts: [String],
        footer: String
    ) -> String {
        let depth = path.split(separator: "/").count - 1
        let root = String(repeating: "../", count: depth)
        func navLink(_ target: String, _ text: String, code: Bool = false) -> String {
            let current = target == path ? " aria-current=\"page\"" : ""
            let label = code ? "<code>\(escapeHTML(text))</code>" : escapeHTML(text)
            return "<li><a href=\"\(escapeHTML(root + target))\"\(current)>\(label)</a></li>"
        }
        var h = HTMLWriter()
        h.line("<!DOCTYPE html>")
        h.line("<html lang=\"en\">")
        h.line("<head>")
        h.line("<meta charset=\"utf-8\">")
        h.line("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        h.line("<title>\(escapeHTML(title)) · \(escapeHTML(navigation.siteTitle))</title>")
        h.line("<link rel=\"stylesheet\" href=\"\(root)style.css\">")
        h.line("<script src=\"\(root)site.js\" defer></script>")
        h.line("</head>")
        h.line("<body>")
        h.line(
            "<header class=\"site-header\"><a class=\"brand\" href=\"\(root)index.html\">\(escapeHTML(navigation.siteTitle))</a>"
                + " <span class=\"tagline\">relay validation, a sans-IO relay session, durable persistence</span></header>")
        h.line("<div class=\"layout\">")
        h.line("<nav class=\"sidebar\" aria-label=\"Documentation\">")
        h.line("<ul>")
        h.line(navLink("index.html", "Overview"))
        h.line("</ul>")
        if !navigation.guides.isEmpty {
            h.line("<h2>Guides</h2>")
            h.line("<ul>")
            for g in navigation.guides { h.line(navLink(g.path, g.title)) }
            h.line("</ul>")
        }
        h.line("<h2>Reference</h2>")
        h.line("<ul>")
        h.line(navLink("\(HTMLRenderer.directory)/index.html", "Contracts"))
        for id in contracts { h.line(navLink("\(HTMLRenderer.directory)/\(id).html", id, code: true)) }
        h.line(navLink("\(HTMLRenderer.directory)/errors.html", "Error catalog"))
        h.line(navLink(HTMLSite.swiftAPIPath, "Swift API (DocC)"))
        h.line("</ul>")
        h.line("</nav>")
        h.line("<main>")
        h.raw(body)
        h.line("</main>")
        h.line("</div>")
        h.line("<footer class=\"site-footer\">\(footer)</footer>")
        h.line("</body>")
        h.line("</html>")
        return h.text
    }
}

// MARK: - Text helpers

/// Escapes text for HTML element content and double-quoted attribute values.
func escapeHTML(_ s: String) -> String {
    var out = ""
    out.reserveCapacity(s.utf8.count)
    for ch in s {
        switch ch {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        default: out.append(ch)
        }
    }
    return out
}

/// Heading anchors as GitHub computes them for Markdown, so a `#fragment` written against the
/// Markdown works on the HTML page too: the heading's text, lowercased, keeping letters,
/// digits, `-` and `_`, with each space turned into `-` (`Inputs and exact bounds` →
/// `inputs-and-exact-bounds`, `relay.wire` → `relaywire`).
public enum HeadingSlug {
    public static func slug(_ text: String) -> String {
        var out = ""
        for ch in text.lowercased() {
            if ch == " " {
                out.append("-")
            } else if ch == "-" || ch == "_" || ch.isLetter || ch.isNumber {
                out.append(ch)
            }
        }
        return out
    }
}

/// Unique ids within one page the way GitHub numbers repeated headings: `x`, `x-1`, `x-2`.
struct SlugRegistry {
    private var occurrences: [String: Int] = [:]

    mutating func unique(_ text: String) -> String {
        let base = HeadingSlug.slug(text)
        var result = base
        while occurrences[result] != nil {
            occurrences[base, default: 0] += 1
            result = "\(base)-\(occurrences[base]!)"
        }
        occurrences[result] = 0
        return result
    }
}

// MARK: - Markdown

/// Converts the Markdown subset the docs use to HTML: ATX headings (with GitHub's ids),
/// paragraphs, nested bullet and numbered lists, pipe tables, fenced code, block quotes,
/// rules, and inline code, links and bold. Raw HTML is escaped, never passed through; HTML
/// comments are dropped.
public struct MarkdownHTML {
    public enum LinkTarget: Sendable, Equatable {
        /// Link to this (rewritten) address.
        case href(String)
        /// Do not link; the text names this repository path instead.
        case unlinked(String)
    }

    let link: (String) -> LinkTarget
    var slugs = SlugRegistry()

    public init(link: @escaping (String) -> LinkTarget = { .href($0) }) {
        self.link = link
    }

    /// The text of the first level-1 heading.
    public static func title(of markdown: String) -> String? {
        var inFence = false
        for raw in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.hasSuffix("\r") ? String(raw.dropLast()) : String(raw)
            let t = line.drop { $0 == " " }
            if t.hasPrefix("```") || t.hasPrefix("~~~") { inFence.toggle() }
            if !inFence, line.hasPrefix("# ") {
                return MarkdownHTML().inline(String(line.dropFirst(2)).trimmed).plain
            }
        }
        return nil
    }

    public mutating func render(_ markdown: String) -> String {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map { raw -> String in
            var line = raw.hasSuffix("\r") ? String(raw.dropLast()) : String(raw)
            if line.contains("\t") { line = line.replacingOccurrences(of: "\t", with: "    ") }
            return line
        }
        return blocks(lines).map(html).joined()
    }

    indirect enum Block {
        case paragraph(String)
        case heading(Int, id: String, String)
        case code(language: String, text: String)
        case list(ordered: Bool, start: Int, items: [[Block]], loose: Bool)
        case table(header: [String], align: [String?], rows: [[String]])
        case quote([Block])
        case rule
    }

    func html(_ block: Block) -> String {
        switch block {
        case .paragraph(let text):
            return "<p>\(text)</p>\n"
        case .heading(let level, let id, let text):
            return "<h\(level) id=\"\(escapeHTML(id))\">\(text)</h\(level)>\n"
        case .code(let language, let text):
            let cls = language.isEmpty ? "" : " class=\"language-\(escapeHTML(language))\""
            return "<pre><code\(cls)>\(escapeHTML(text))</code></pre>\n"
        case .list(let ordered, let start, let items, let loose):
            let tag = ordered ? "ol" : "ul"
            var out = ordered && start != 1 ? "<ol start=\"\(start)\">\n" : "<\(tag)>\n"
            for item in items {
                out += "<li>"
                for (i, b) in item.enumerated() {
                    if !loose, case .paragraph(let text) = b {
                        out += (i == 0 ? "" : "\n") + text
                    } else {
                        out += (i == 0 ? "\n" : "") + html(b)
                    }
                }
                out += "</li>\n"
            }
            return out + "</\(tag)>\n"
        case .table(let header, let align, let rows):
            func style(_ i: Int) -> String { i < align.count ? align[i].map { " style=\"text-align: \($0)\"" } ?? "" : "" }
            var out = "<table>\n<thead><tr>"
            for (i, cell) in header.enumerated() { out += "<th\(style(i))>\(cell)</th>" }
            out += "</tr></thead>\n<tbody>\n"
            for row in rows {
                out += "<tr>"
                for i in header.indices { out += "<td\(style(i))>\(i < row.count ? row[i] : "")</td>" }
                out += "</tr>\n"
            }
            return out + "</tbody>\n</table>\n"
        case .quote(let inner):
            return "<blockquote>\n" + inner.map(html).joined() + "</blockquote>\n"
        case .rule:
            return "<hr>\n"
        }
    }

    // MARK: Blocks

    static func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
    static func isBlank(_ line: String) -> Bool { line.allSatisfy { $0 == " " } }

    struct ListMarker {
        var indent: Int
        var ordered: Bool
        var start: Int
        /// Column where the item's content starts.
        var contentColumn: Int
    }

    static func listMarker(_ line: String) -> ListMarker? {
        let chars = Array(line)
        let n = indent(line)
        var i = n
        guard i < chars.count else { return nil }
        var ordered = false
        var start = 1
        if chars[i] == "-" || chars[i] == "*" || chars[i] == "+" {
            i += 1
        } else if chars[i].isASCII && chars[i].isNumber {
            var digits = ""
            while i < chars.count, chars[i].isASCII, chars[i].isNumber, digits.count < 9 {
                digits.append(chars[i])
                i += 1
            }
            guard i < chars.count, chars[i] == "." || chars[i] == ")" else { return nil }
            i += 1
            ordered = true
            start = Int(digits) ?? 1
        } else {
            return nil
        }
        if i == chars.count { return ListMarker(indent: n, ordered: ordered, start: start, contentColumn: i + 1) }
        guard chars[i] == " " else { return nil }
        var spaces = 0
        while i + spaces < chars.count, chars[i + spaces] == " " { spaces += 1 }
        if spaces > 4 || i + spaces == chars.count { spaces = 1 }
        return ListMarker(indent: n, ordered: ordered, start: start, contentColumn: i + spaces)
    }

    static func isRule(_ line: String) -> Bool {
        let t = line.filter { $0 != " " }
        guard t.count >= 3, let first = t.first, first == "-" || first == "*" || first == "_" else { return false }
        return t.allSatisfy { $0 == first }
    }

    static func isFence(_ line: String) -> Bool {
        let t = line.drop { $0 == " " }
        return t.hasPrefix("```") || t.hasPrefix("~~~")
    }

    static func headingLevel(_ line: String) -> Int? {
        guard indent(line) < 4 else { return nil }
        let t = line.drop { $0 == " " }
        let hashes = t.prefix { $0 == "#" }.count
        guard (1...6).contains(hashes) else { return nil }
        let rest = t.dropFirst(hashes)
        return rest.isEmpty || rest.first == " " ? hashes : nil
    }

    static func isTableSeparator(_ line: String) -> Bool {
        let cells = splitRow(line)
        guard !cells.isEmpty, line.contains("-") else { return false }
        return cells.allSatisfy { cell in
            var c = Substring(cell.trimmed)
            if c.hasPrefix(":") { c = c.dropFirst() }
            if c.hasSuffix(":") { c = c.dropLast() }
            return !c.isEmpty && c.allSatisfy { $0 == "-" }
        }
    }

    /// Splits `| a | b |` into cells, leaving `|` inside code spans and `\|` in place.
    static func splitRow(_ line: String) -> [String] {
        var t = Substring(line.trimmed)
        if t.hasPrefix("|") { t = t.dropFirst() }
        if t.hasSuffix("|") && !t.hasSuffix("\\|") { t = t.dropLast() }
        var cells: [String] = []
        var current = ""
        var inCode = 0
        var chars = Array(t)[...]
        while let ch = chars.popFirst() {
            if ch == "\\", chars.first == "|" {
                current.append("|")
                chars.removeFirst()
            } else if ch == "`" {
                var run = 1
                while chars.first == "`" {
                    run += 1
                    chars.removeFirst()
                }
                current += String(repeating: "`", count: run)
                inCode = inCode == 0 ? run : (inCode == run ? 0 : inCode)
            } else if ch == "|" && inCode == 0 {
                cells.append(current.trimmed)
                current = ""
            } else {
                current.append(ch)
            }
        }
        cells.append(current.trimmed)
        return cells
    }

    static func startsTable(_ lines: [String], _ i: Int) -> Bool {
        lines[i].trimmed.hasPrefix("|") && i + 1 < lines.count && isTableSeparator(lines[i + 1])
    }

    /// Whether a line opens a block that interrupts a paragraph.
    static func interruptsParagraph(_ lines: [String], _ i: Int) -> Bool {
        let line = lines[i]
        return headingLevel(line) != nil || isFence(line) || isRule(line) || line.trimmed.hasPrefix(">")
            || listMarker(line) != nil || startsTable(lines, i) || line.trimmed.hasPrefix("<!--")
    }

    mutating func blocks(_ lines: [String]) -> [Block] {
        var out: [Block] = []
        var i = 0
        while i < lines.count {
            let line = lines[i]
            if Self.isBlank(line) {
                i += 1
                continue
            }
            if line.trimmed.hasPrefix("<!--") {
                while i < lines.count && !lines[i].contains("-->") { i += 1 }
                i += 1
                continue
            }
            if Self.isFence(line) {
                let fenceIndent = Self.indent(line)
                let t = line.dropFirst(fenceIndent)
                let fenceChar = t.first!
                let run = t.prefix { $0 == fenceChar }.count
                let language = String(t.dropFirst(run)).trimmed
                var body: [String] = []
                i += 1
                while i < lines.count {
                    let l = lines[i]
                    let lt = l.drop { $0 == " " }
                    if lt.prefix(while: { $0 == fenceChar }).count >= run && lt.drop(while: { $0 == fenceChar }).allSatisfy({ $0 == " " }) {
                        break
                    }
                    body.append(String(l.dropFirst(min(fenceIndent, Self.indent(l)))))
                    i += 1
                }
                i += 1
                out.append(.code(language: language, text: body.joined(separator: "\n")))
                continue
            }
            if let level = Self.headingLevel(line) {
                var text = String(line.drop { $0 == " " }.dropFirst(level)).trimmed
                while text.hasSuffix("#") { text.removeLast() }
                text = text.trimmed
                let rendered = inline(text)
                out.append(.heading(level, id: slugs.unique(rendered.plain), rendered.html))
                i += 1
                continue
            }
            if Self.isRule(line) {
                out.append(.rule)
                i += 1
                continue
            }
            if line.trimmed.hasPrefix(">") {
                var inner: [String] = []
                while i < lines.count, lines[i].trimmed.hasPrefix(">") {
                    var t = Substring(lines[i].trimmed.dropFirst())
                    if t.first == " " { t = t.dropFirst() }
                    inner.append(String(t))
                    i += 1
                }
                out.append(.quote(blocks(inner)))
                continue
            }
            if Self.startsTable(lines, i) {
                let header = Self.splitRow(line).map { inline($0).html }
                let align: [String?] = Self.splitRow(lines[i + 1]).map { cell in
                    let c = cell.trimmed
                    switch (c.hasPrefix(":"), c.hasSuffix(":")) {
                    case (true, true): return "center"
                    case (false, true): return "right"
                    case (true, false): return "left"
                    default: return nil
                    }
                }
                i += 2
                var rows: [[String]] = []
                while i < lines.count, lines[i].trimmed.hasPrefix("|") {
                    rows.append(Self.splitRow(lines[i]).map { inline($0).html })
                    i += 1
                }
                out.append(.table(header: header, align: align, rows: rows))
                continue
            }
            if let marker = Self.listMarker(line) {
                out.append(list(lines, &i, marker))
                continue
            }
            var paragraph = [line.trimmed]
            i += 1
            while i < lines.count, !Self.isBlank(lines[i]), !Self.interruptsParagraph(lines, i) {
                paragraph.append(lines[i].trimmed)
                i += 1
            }
            out.append(.paragraph(inline(paragraph.joined(separator: "\n")).html))
        }
        return out
    }

    mutating func list(_ lines: [String], _ i: inout Int, _ first: ListMarker) -> Block {
        var items: [[String]] = []
        var column = first.contentColumn
        var loose = false
        func sibling(_ line: String) -> ListMarker? {
            guard let m = Self.listMarker(line), m.ordered == first.ordered, m.indent >= first.indent, m.indent < column else { return nil }
            return m
        }
        while i < lines.count {
            let line = lines[i]
            if !Self.isBlank(line), Self.isRule(line), Self.indent(line) < column {
                break
            } else if let m = sibling(line) {
                items.append([String(line.dropFirst(min(m.contentColumn, line.count)))])
                column = m.contentColumn
                i += 1
            } else if items.isEmpty {
                break
            } else if Self.isBlank(line) {
                var j = i
                while j < lines.count && Self.isBlank(lines[j]) { j += 1 }
                guard j < lines.count else { break }
                if Self.indent(lines[j]) >= column {
                    items[items.count - 1] += Array(repeating: "", count: j - i)
                    i = j
                } else if sibling(lines[j]) != nil {
                    loose = true
                    i = j
                } else {
                    break
                }
            } else if Self.indent(line) >= column {
                items[items.count - 1].append(String(line.dropFirst(column)))
                i += 1
            } else if !Self.interruptsParagraph(lines, i), let last = items.last?.last, !Self.isBlank(last) {
                // A lazy continuation line of the item's paragraph.
                items[items.count - 1].append(line.trimmed)
                i += 1
            } else {
                break
            }
        }
        return .list(ordered: first.ordered, start: first.start, items: items.map { blocks($0) }, loose: loose)
    }

    // MARK: Inline

    /// Inline Markdown to HTML, and the plain text (for heading ids and titles).
    func inline(_ text: String) -> (html: String, plain: String) {
        inline(Array(text)[...])
    }

    func inline(_ c: ArraySlice<Character>) -> (html: String, plain: String) {
        var html = ""
        var plain = ""
        var i = c.startIndex
        func find(_ pattern: [Character], from start: Int) -> Int? {
            var j = start
            while j + pattern.count <= c.endIndex {
                if c[j] == "`" {
                    // Skip a code span.
                    var run = 0
                    while j + run < c.endIndex && c[j + run] == "`" { run += 1 }
                    if let close = Self.closingBackticks(c, from: j + run, run: run) {
                        j = close + run
                        continue
                    }
                    j += run
                    continue
                }
                if Array(c[j..<(j + pattern.count)]) == pattern { return j }
                j += 1
            }
            return nil
        }
        while i < c.endIndex {
            let ch = c[i]
            if ch == "\\", i + 1 < c.endIndex, c[i + 1].isASCII, c[i + 1].isPunctuation || c[i + 1].isSymbol {
                html += escapeHTML(String(c[i + 1]))
                plain.append(c[i + 1])
                i += 2
                continue
            }
            if ch == "`" {
                var run = 0
                while i + run < c.endIndex && c[i + run] == "`" { run += 1 }
                if let close = Self.closingBackticks(c, from: i + run, run: run) {
                    var content = String(c[(i + run)..<close]).replacingOccurrences(of: "\n", with: " ")
                    if content.count >= 2, content.first == " ", content.last == " ", content.contains(where: { $0 != " " }) {
                        content = String(content.dropFirst().dropLast())
                    }
                    html += "<code>\(escapeHTML(content))</code>"
                    plain += content
                    i = close + run
                } else {
                    html += String(repeating: "`", count: run)
                    plain += String(repeating: "`", count: run)
                    i += run
                }
                continue
            }
            if ch == "*", i + 2 < c.endIndex, c[i + 1] == "*", c[i + 2] != " ",
                let close = find(["*", "*"], from: i + 3)
            {
                let inner = inline(c[(i + 2)..<close])
                html += "<strong>\(inner.html)</strong>"
                plain += inner.plain
                i = close + 2
                continue
            }
            if ch == "[", let (textEnd, urlEnd) = Self.linkExtent(c, from: i) {
                let inner = inline(c[(i + 1)..<textEnd])
                let url = String(c[(textEnd + 2)..<urlEnd]).trimmed
                switch link(url) {
                case .href(let href):
                    html += "<a href=\"\(escapeHTML(href))\">\(inner.html)</a>"
                case .unlinked(let path):
                    // A file named by its own name becomes its repository path; other text keeps
                    // its words and gets the path beside it.
                    let name = path.split(separator: "/").last.map(String.init) ?? path
                    if inner.plain == name || inner.plain == path {
                        html += "<code>\(escapeHTML(path))</code>"
                    } else {
                        html += inner.html
                        if !inner.plain.contains(path) { html += " (<code>\(escapeHTML(path))</code>)" }
                    }
                }
                plain += inner.plain
                i = urlEnd + 1
                continue
            }
            html += escapeHTML(String(ch))
            plain.append(ch)
            i += 1
        }
        return (html, plain)
    }

    static func closingBackticks(_ c: ArraySlice<Character>, from start: Int, run: Int) -> Int? {
        var j = start
        while j < c.endIndex {
            if c[j] == "`" {
                var m = 0
                while j + m < c.endIndex && c[j + m] == "`" { m += 1 }
                if m == run { return j }
                j += m
            } else {
                j += 1
            }
        }
        return nil
    }

    /// For `[text](url)` starting at `start`: the index of `]` and of the closing `)`.
    static func linkExtent(_ c: ArraySlice<Character>, from start: Int) -> (Int, Int)? {
        var depth = 0
        var j = start
        var textEnd: Int?
        while j < c.endIndex {
            let ch = c[j]
            if ch == "\\" {
                j += 2
                continue
            }
            if ch == "`" {
                var run = 0
                while j + run < c.endIndex && c[j + run] == "`" { run += 1 }
                if let close = Self.closingBackticks(c, from: j + run, run: run) {
                    j = close + run
                    continue
                }
                j += run
                continue
            }
            if ch == "[" { depth += 1 }
            if ch == "]" {
                depth -= 1
                if depth == 0 {
                    textEnd = j
                    break
                }
            }
            j += 1
        }
        guard let textEnd, textEnd + 1 < c.endIndex, c[textEnd + 1] == "(" else { return nil }
        var parens = 0
        var k = textEnd + 1
        while k < c.endIndex {
            if c[k] == "(" { parens += 1 }
            if c[k] == ")" {
                parens -= 1
                if parens == 0 { return (textEnd, k) }
            }
            if c[k] == " " && parens == 1 { return nil }
            k += 1
        }
        return nil
    }
}

extension String {
    var trimmed: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}

// MARK: - Assets

enum SiteAssets {
    static let stylesheet = """
        /* Softchat docs: generated by softchat-codegen. No external fonts or scripts. */
        :root {
          --fg: #1d232b; --muted: #5b6673; --bg: #ffffff; --panel: #f5f7f9; --line: #dde3e9;
          --accent: #1f6feb; --code-bg: #f2f4f7; --pre-bg: #0f1720; --pre-fg: #e6edf3;
          --ok: #1a7f37; --warn: #9a6700;
        }
        * { box-sizing: border-box; }
        html { -webkit-text-size-adjust: 100%; }
        body { margin: 0; color: var(--fg); background: var(--bg);
          font: 16px/1.55 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
        a { color: var(--accent); text-decoration: none; }
        a:hover { text-decoration: underline; }
        .site-header { display: flex; align-items: baseline; gap: 1rem; padding: .8rem 1.5rem;
          border-bottom: 1px solid var(--line); background: var(--panel); }
        .site-header .brand { font-weight: 700; font-size: 1.2rem; color: var(--fg); }
        .site-header .tagline { color: var(--muted); font-size: .9rem; }
        .layout { display: flex; align-items: flex-start; max-width: 76rem; margin: 0 auto; }
        .sidebar { flex: 0 0 15rem; padding: 1.2rem 1rem 2rem 1.5rem; position: sticky; top: 0;
          max-height: 100vh; overflow-y: auto; font-size: .93rem; }
        .sidebar h2 { font-size: .75rem; text-transform: uppercase; letter-spacing: .06em; color: var(--muted);
          margin: 1.2rem 0 .3rem; }
        .sidebar ul { list-style: none; margin: 0; padding: 0; }
        .sidebar li { margin: .15rem 0; }
        .sidebar a { display: block; padding: .15rem .5rem; border-radius: 4px; color: var(--fg); }
        .sidebar a[aria-current="page"] { background: #e3ecfb; color: var(--accent); font-weight: 600; }
        main { flex: 1 1 auto; min-width: 0; padding: 1rem 2rem 3rem; }
        h1 { font-size: 2rem; line-height: 1.2; margin: .6rem 0 1rem; }
        h2 { font-size: 1.35rem; margin: 2.2rem 0 .6rem; padding-bottom: .25rem; border-bottom: 1px solid var(--line); }
        h3 { font-size: 1.1rem; margin: 1.6rem 0 .4rem; }
        h1[id], h2[id], h3[id], h4[id], tr[id], li[id] { scroll-margin-top: 1rem; }
        :target { background: #fff8c5; }
        p, ul, ol, dl, table, pre, blockquote { margin: .6rem 0 1rem; }
        li { margin: .2rem 0; }
        code { font: .88em/1.4 ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, monospace;
          background: var(--code-bg); padding: .08em .3em; border-radius: 4px; overflow-wrap: anywhere; }
        pre { background: var(--pre-bg); color: var(--pre-fg); padding: .9rem 1rem; border-radius: 6px;
          overflow-x: auto; line-height: 1.45; }
        pre code { background: none; padding: 0; color: inherit; font-size: .85rem; overflow-wrap: normal; }
        table { border-collapse: collapse; width: 100%; font-size: .93rem; display: block; overflow-x: auto; }
        th, td { border: 1px solid var(--line); padding: .4rem .6rem; text-align: left; vertical-align: top; }
        td code, th code { overflow-wrap: normal; }
        thead th { background: var(--panel); }
        tbody th { background: var(--panel); white-space: nowrap; }
        td.value { white-space: nowrap; }
        blockquote { border-left: 4px solid var(--line); margin-left: 0; padding: .1rem 1rem; color: var(--muted); }
        dl.rules { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; }
        dl.rules dt { font-weight: 600; }
        dl.rules dd { margin: 0; }
        .contract-id { color: var(--muted); }
        .summary { font-size: 1.12rem; }
        .retry-permanent { color: #a40e26; font-weight: 600; }
        .retry-retryable { color: var(--ok); font-weight: 600; }
        .kind { color: var(--muted); font-size: .85rem; }
        ul.declarations > li { margin: .6rem 0; }
        .recipe-status { color: var(--muted); font-size: .93rem; }
        .lang-select { display: flex; flex-wrap: wrap; gap: .4rem; margin: .4rem 0 1rem; }
        .lang-select button { font: inherit; font-size: .9rem; padding: .25rem .8rem; border: 1px solid var(--line);
          border-radius: 999px; background: var(--bg); color: var(--fg); cursor: pointer; }
        .lang-select button[aria-pressed="true"] { background: var(--accent); border-color: var(--accent); color: #fff; }
        .site-footer { border-top: 1px solid var(--line); color: var(--muted); font-size: .85rem; padding: 1rem 1.5rem;
          text-align: center; }
        @media (max-width: 52rem) {
          .layout { display: block; }
          .sidebar { position: static; max-height: none; padding: .5rem 1.5rem; border-bottom: 1px solid var(--line); }
          main { padding: 1rem 1.2rem 2rem; }
        }

        """

    /// The optional recipe language selector. Without JavaScript every recipe and every
    /// symbol row shows; with it, a row of buttons filters them (the choice is remembered).
    static let script = """
        // Softchat docs: the recipe language selector. Everything is readable without it.
        (function () {
          "use strict";
          var KEY = "softchat-docs-language";
          function saved() { try { return localStorage.getItem(KEY) || "all"; } catch (e) { return "all"; } }
          function save(lang) { try { localStorage.setItem(KEY, lang); } catch (e) { /* file:// may refuse */ } }
          function apply(lang) {
            var found = false;
            document.querySelectorAll(".recipe[data-lang]").forEach(function (el) {
              if (el.getAttribute("data-lang") === lang) { found = true; }
            });
            if (!found) { lang = "all"; }
            document.querySelectorAll(".recipe[data-lang], table.symbols tr[data-lang]").forEach(function (el) {
              el.hidden = lang !== "all" && el.getAttribute("data-lang") !== lang;
            });
            document.querySelectorAll(".lang-select button").forEach(function (b) {
              b.setAttribute("aria-pressed", b.getAttribute("data-choice") === lang ? "true" : "false");
            });
          }
          document.addEventListener("DOMContentLoaded", function () {
            document.querySelectorAll(".recipes").forEach(function (box) {
              var choices = [["all", "All languages"]];
              box.querySelectorAll(".recipe[data-lang]").forEach(function (r) {
                var h = r.querySelector("h3");
                choices.push([r.getAttribute("data-lang"), h ? h.textContent : r.getAttribute("data-lang")]);
              });
              var bar = document.createElement("div");
              bar.className = "lang-select";
              bar.setAttribute("role", "group");
              bar.setAttribute("aria-label", "Recipe language");
              choices.forEach(function (c) {
                var b = document.createElement("button");
                b.type = "button";
                b.textContent = c[1];
                b.setAttribute("data-choice", c[0]);
                b.addEventListener("click", function () { save(c[0]); apply(c[0]); });
                bar.appendChild(b);
              });
              box.insertBefore(bar, box.firstChild);
            });
            apply(saved());
          });
        })();

        """
}
