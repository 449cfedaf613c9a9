internal import CCmarkGFM
internal import SoftchatCodegen

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Converts the docs' Markdown to HTML with cmark-gfm (CommonMark plus GitHub's tables and
/// strikethrough), the library GitHub renders the same files with, so a page reads the same in
/// the repository and on the site.
///
/// On top of cmark-gfm's own rendering it does what the site needs:
/// - headings get GitHub's ids (``HeadingSlug``, repeats numbered `-1`, `-2`), so a link
///   written against `x.md#anchor` works on `x.html#anchor`;
/// - every link and image target goes through the `link` function, which may rewrite it
///   (`b.md` → `b.html`) or unlink it: the link's text then names the repository path;
/// - raw HTML is never passed through: comments are dropped and other tags shown as text.
public struct MarkdownHTML {
    /// What becomes of a link target.
    public enum LinkTarget: Sendable, Equatable {
        /// Link to this (rewritten) address.
        case href(String)
        /// Do not link; the text names this repository path instead.
        case unlinked(String)
    }

    let link: (String) -> LinkTarget
    var slugs = SlugRegistry()

    /// A converter whose links go through `link`.
    ///
    /// - Parameter link: Decides each link and image target; by default every target is kept.
    public init(link: @escaping (String) -> LinkTarget = { .href($0) }) {
        self.link = link
    }

    /// The plain text of the first level-1 heading, the page's title.
    ///
    /// - Parameter markdown: A Markdown document.
    /// - Returns: The heading's text without markup, or `nil` when the document has no `#` heading.
    public static func title(of markdown: String) -> String? {
        CMarkDocument(markdown).withRoot { root in
            var title: String?
            CMarkDocument.walk(root) { node, entering in
                if title == nil, entering, cmark_node_get_type(node) == CMARK_NODE_HEADING, cmark_node_get_heading_level(node) == 1 {
                    title = CMarkDocument.plainText(node)
                }
            }
            return title
        }
    }

    /// The HTML of `markdown`; heading ids continue this converter's numbering (one converter per page).
    ///
    /// - Parameter markdown: A Markdown document.
    /// - Returns: The body HTML, block by block.
    public mutating func render(_ markdown: String) -> String {
        let document = CMarkDocument(markdown)
        var ids: [String] = []
        let html = document.withParsed { root, parser -> String in
            var links: [OpaquePointer] = []
            var rawHTML: [OpaquePointer] = []
            CMarkDocument.walk(root) { node, entering in
                guard entering else { return }
                switch cmark_node_get_type(node) {
                case CMARK_NODE_HEADING: ids.append(slugs.unique(CMarkDocument.plainText(node)))
                case CMARK_NODE_LINK, CMARK_NODE_IMAGE: links.append(node)
                case CMARK_NODE_HTML_INLINE, CMARK_NODE_HTML_BLOCK: rawHTML.append(node)
                default: break
                }
            }
            // Changed after the walk: replacing a node the iterator would still visit is undefined.
            for node in links { rewrite(node) }
            for node in rawHTML { Self.neutralize(node) }
            return CMarkDocument.html(root, parser: parser)
        }
        return Self.insertingHeadingIDs(ids, into: html)
    }

    /// Applies `link` to one link or image node.
    private func rewrite(_ node: OpaquePointer) {
        let url = cmark_node_get_url(node).map { String(cString: $0) } ?? ""
        switch link(url) {
        case .href(let href):
            cmark_node_set_url(node, href)
        case .unlinked(let path):
            // A file named by its own name becomes its repository path in code; other text keeps
            // its words and gets the path beside it.
            let text = CMarkDocument.plainText(node)
            let name = path.split(separator: "/").last.map(String.init) ?? path
            if text == name || text == path {
                let code = cmark_node_new(CMARK_NODE_CODE)
                cmark_node_set_literal(code, path)
                cmark_node_replace(node, code)
            } else {
                while let child = cmark_node_first_child(node) {
                    cmark_node_unlink(child)
                    cmark_node_insert_before(node, child)
                }
                if !text.contains(path) {
                    let open = cmark_node_new(CMARK_NODE_TEXT)
                    cmark_node_set_literal(open, " (")
                    let code = cmark_node_new(CMARK_NODE_CODE)
                    cmark_node_set_literal(code, path)
                    let close = cmark_node_new(CMARK_NODE_TEXT)
                    cmark_node_set_literal(close, ")")
                    for piece in [open, code, close] { cmark_node_insert_before(node, piece) }
                }
                cmark_node_unlink(node)
            }
            cmark_node_free(node)
        }
    }

    /// Raw HTML never reaches the page: a comment is dropped, anything else becomes the text it
    /// was (`a <relay url>` reads as written), escaped by the renderer like any text.
    private static func neutralize(_ node: OpaquePointer) {
        let literal = cmark_node_get_literal(node).map { String(cString: $0) } ?? ""
        let trimmed = literal.trimmingWhitespace
        if trimmed.hasPrefix("<!--") && trimmed.hasSuffix("-->") {
            cmark_node_unlink(node)
        } else {
            let text = cmark_node_new(CMARK_NODE_TEXT)
            cmark_node_set_literal(text, cmark_node_get_type(node) == CMARK_NODE_HTML_BLOCK ? trimmed : literal)
            if cmark_node_get_type(node) == CMARK_NODE_HTML_BLOCK {
                let paragraph = cmark_node_new(CMARK_NODE_PARAGRAPH)
                cmark_node_append_child(paragraph, text)
                cmark_node_replace(node, paragraph)
            } else {
                cmark_node_replace(node, text)
            }
        }
        cmark_node_free(node)
    }

    /// `html` with `id="…"` added to its headings, in document order. cmark-gfm writes each
    /// heading's opening tag as exactly `<hN>` and escapes `<` everywhere else (code, text; raw
    /// HTML is dropped), so the n-th such tag is the n-th heading.
    static func insertingHeadingIDs(_ ids: [String], into html: String) -> String {
        var out = ""
        out.reserveCapacity(html.utf8.count + ids.count * 24)
        var rest = Substring(html)
        var next = ids.makeIterator()
        while let open = rest.range(of: "<h") {
            let after = rest[open.upperBound...]
            guard let level = after.first, ("1"..."6").contains(level), after.dropFirst().first == ">" else {
                out += rest[..<open.upperBound]
                rest = after
                continue
            }
            out += rest[..<open.lowerBound]
            out += "<h\(level) id=\"\(escapeHTML(next.next() ?? ""))\">"
            rest = after.dropFirst(2)
        }
        out += rest
        return out
    }
}

/// One parsed cmark-gfm document (with the table and strikethrough extensions), freed when done.
struct CMarkDocument {
    let text: String

    init(_ text: String) { self.text = text }

    /// Parses the text and runs `body` on the root node, then frees the tree and the parser.
    func withRoot<T>(_ body: (_ root: OpaquePointer) -> T) -> T {
        withParsed { root, _ in body(root) }
    }

    /// Parses the text and runs `body` on the root node and the parser (whose extensions render
    /// their nodes), then frees both.
    func withParsed<T>(_ body: (_ root: OpaquePointer, _ parser: OpaquePointer) -> T) -> T {
        cmark_gfm_core_extensions_ensure_registered()
        let parser = cmark_parser_new(CMARK_OPT_DEFAULT)!
        defer { cmark_parser_free(parser) }
        for name in ["table", "strikethrough"] {
            if let syntax = cmark_find_syntax_extension(name) {
                cmark_parser_attach_syntax_extension(parser, syntax)
            }
        }
        var text = text
        text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { cmark_parser_feed(parser, $0.baseAddress, $0.count) }
        }
        let root = cmark_parser_finish(parser)!
        defer { cmark_node_free(root) }
        return body(root, parser)
    }

    /// The HTML of the tree under `root`, rendered with the extensions `parser` attached.
    static func html(_ root: OpaquePointer, parser: OpaquePointer) -> String {
        guard let rendered = cmark_render_html(root, CMARK_OPT_DEFAULT, cmark_parser_get_syntax_extensions(parser)) else {
            return ""
        }
        defer { free(rendered) }
        return String(cString: rendered)
    }

    /// Calls `visit` for every node under `root` (itself included), on entering and on leaving.
    static func walk(_ root: OpaquePointer, _ visit: (OpaquePointer, _ entering: Bool) -> Void) {
        let iterator = cmark_iter_new(root)
        defer { cmark_iter_free(iterator) }
        while true {
            let event = cmark_iter_next(iterator)
            if event == CMARK_EVENT_DONE { break }
            guard let node = cmark_iter_get_node(iterator) else { continue }
            visit(node, event == CMARK_EVENT_ENTER)
        }
    }

    /// The text a node shows: text and code literals of its descendants, line breaks as spaces.
    static func plainText(_ node: OpaquePointer) -> String {
        var out = ""
        walk(node) { child, entering in
            guard entering else { return }
            switch cmark_node_get_type(child) {
            case CMARK_NODE_TEXT, CMARK_NODE_CODE:
                if let literal = cmark_node_get_literal(child) { out += String(cString: literal) }
            case CMARK_NODE_SOFTBREAK, CMARK_NODE_LINEBREAK:
                out += " "
            default:
                break
            }
        }
        return out
    }
}

extension String {
    /// The text without leading and trailing spaces, tabs and line breaks.
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
