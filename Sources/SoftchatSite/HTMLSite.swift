public import SoftchatCodegen
public import SoftchatContracts

// The static HTML documentation site: the reference pages rendered from the schema (laid out
// like the Markdown reference and the product page), the hand-written docs/**/*.md converted
// with cmark-gfm (MarkdownHTML.swift), a stylesheet and a little JavaScript for the recipe
// language selector (Assets/). Every page is complete without JavaScript.
//
// The site model: its navigation, its pages and how links between them resolve.

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

    /// The Swift API reference's landing page, which links every module: `scripts/build/docc` writes
    /// the merged DocC archive to `api/` (static hosting, base path `/api/`), beside the pages
    /// this renderer writes.
    public static let swiftAPIPath = "api/documentation/index.html"

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
