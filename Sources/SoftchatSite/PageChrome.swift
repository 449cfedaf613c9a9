internal import SoftchatCodegen

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
