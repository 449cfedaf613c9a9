// Build-tool plugin: regenerates SoftchatCore's contract surface (errors, bounds, metadata),
// a recipe test target's recipe code, or the SoftchatFFI library's C ABI exports, from
// Schema/ whenever a schema file changes. Generated Swift is never checked in.
import Foundation
import PackagePlugin

@main
struct SoftchatContractPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let schema = context.package.directoryURL.appending(path: "Schema")
        let inputs = try FileManager.default.contentsOfDirectory(at: schema, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.path < $1.path }
        // Test targets whose name ends in "RecipeTests" get the schema's Swift recipes as code;
        // the SoftchatFFI library gets the C ABI's @_cdecl exports; every other target gets the
        // contract surface.
        let command: String
        let fileNames: [String]
        let displayName: String
        if target.name.hasSuffix("RecipeTests") {
            (command, fileNames, displayName) = ("recipes", ["SchemaRecipes.swift"], "Generating Swift recipes from Schema/")
        } else if target.name == "SoftchatFFI" {
            // The portable exports (also compiled into the WebAssembly build) and the native-only ones.
            (command, fileNames, displayName) = (
                "ffi", ["SoftchatFFIExports.swift", "SoftchatFFIExports+Native.swift"], "Generating the C ABI exports from Schema/"
            )
        } else {
            (command, fileNames, displayName) = ("swift", ["SoftchatContractSurface.swift"], "Generating the Softchat contract surface from Schema/")
        }
        return [
            .buildCommand(
                displayName: displayName,
                executable: try context.tool(named: "softchat-codegen").url,
                arguments: [command, "--schema", schema.path, "--output", context.pluginWorkDirectoryURL.path],
                inputFiles: inputs,
                outputFiles: fileNames.map { context.pluginWorkDirectoryURL.appending(path: $0) })
        ]
    }
}
