// Command plugin: `swift package --allow-writing-to-package-directory generate-bindings`
// rewrites generated/kotlin, generated/typescript and docs/reference from Schema/.
// `generate-bindings --check` changes nothing and fails when a checked-in file is stale.
import Foundation
import PackagePlugin

@main
struct GenerateBindings: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        let tool = try context.tool(named: "softchat-codegen")
        let root = context.package.directoryURL
        var args = ["bindings", "--schema", root.appending(path: "Schema").path, "--root", root.path]
        if arguments.contains("--check") { args.append("--check") }
        let process = Process()
        process.executableURL = tool.url
        process.arguments = args
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            Diagnostics.error("generate-bindings failed (exit \(process.terminationStatus))")
            throw GenerateBindingsError.failed(process.terminationStatus)
        }
    }
}

enum GenerateBindingsError: Error {
    case failed(Int32)
}
