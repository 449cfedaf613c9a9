// Build-tool plugin: regenerates SoftchatCore's contract surface (errors, bounds, metadata)
// from Schema/ whenever a schema file changes. Generated Swift is never checked in.
import Foundation
import PackagePlugin

@main
struct SoftchatContractPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let schema = context.package.directoryURL.appending(path: "Schema")
        let inputs = try FileManager.default.contentsOfDirectory(at: schema, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "SoftchatContractSurface.swift")
        return [
            .buildCommand(
                displayName: "Generating the Softchat contract surface from Schema/",
                executable: try context.tool(named: "softchat-codegen").url,
                arguments: ["swift", "--schema", schema.path, "--output", context.pluginWorkDirectoryURL.path],
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
