internal import Foundation
internal import SoftchatCodegen

/// The site's stylesheet and script, kept as the files `Assets/style.css` and `Assets/site.js`
/// (package resources) so they are edited, linted and reviewed as CSS and JavaScript.
enum SiteAssets {
    static let stylesheet = resource("style", "css")
    static let script = resource("site", "js")

    /// The text of a bundled asset. A missing asset is a broken build, not a condition to handle.
    private static func resource(_ name: String, _ type: String) -> String {
        guard let url = Bundle.module.url(forResource: name, withExtension: type, subdirectory: "Assets"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { fatalError("softchat-codegen: the site asset Assets/\(name).\(type) is missing from the package's resources") }
        return text
    }
}
