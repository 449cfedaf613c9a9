// Build-tool plugin: regenerates SoftchatCore's contract surface (errors, bounds, metadata),
// or a recipe test target's recipe code, from Schema/ whenever a schema file changes.
// Generated Swift is never checked in.
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
        // every other target gets the contract surface.
        let recipes = target.name.hasSuffix("RecipeTests")
        let fileName = recipes ? "SchemaRecipes.swift" : "SoftchatContractSurface.swift"
        return [
            .buildCommand(
                displayName: recipes ? "Generating Swift recipes from Schema/" : "Generating the Softchat contract surface from Schema/",
                executable: try context.tool(named: "softchat-codegen").url,
                arguments: [recipes ? "recipes" : "swift", "--schema", schema.path, "--output", context.pluginWorkDirectoryURL.path],
                inputFiles: inputs,
                outputFiles: [context.pluginWorkDirectoryURL.appending(path: fileName)])
        ]
    }
}
