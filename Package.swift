// swift-tools-version: 6.0
// Softchat: relay validation, a sans-IO relay session and durable persistence for Nostr chat apps.
// The operation contracts in Schema/ drive the generated Swift surface (build plugin) and the
// Kotlin/TypeScript facades and docs (command plugin). System C libraries only.
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// scripts/fuzz/fuzz sets SOFTCHAT_FUZZ=1 (with its own --build-path): the parsers and the fuzz
// executable are then built with libFuzzer and AddressSanitizer; nothing else changes.
let fuzzing = Context.environment["SOFTCHAT_FUZZ"] == "1"
let fuzzedSwift: [SwiftSetting] = strictSwift + (fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"]), .define("FUZZING")] : [])
let fuzzLinker: [LinkerSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []

let package = Package(
    name: "Softchat",
    // Linux is what CI builds and tests. macOS 15 links Homebrew's libsecp256k1, sqlite and
    // openssl@3 through pkg-config; no macOS machine builds it here, so that is unverified. iOS is not claimed:
    // libsecp256k1 and OpenSSL come in as pkg-config system libraries, which iOS cannot link.
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SoftchatCore", targets: ["SoftchatCore"]),
        .library(name: "SoftchatStorage", targets: ["SoftchatStorage"]),
        .library(name: "SoftchatTransport", targets: ["SoftchatTransport"]),
        .library(name: "SoftchatSync", targets: ["SoftchatSync"]),
        .library(name: "SoftchatClient", targets: ["SoftchatClient"]),
        .executable(name: "softchat", targets: ["SoftchatCLI"]),
        // The developer tools (benchmarks, fault runs, the crash harness's child), apart from the user's CLI.
        .executable(name: "softchat-dev", targets: ["SoftchatDevCLI"]),
        // The C ABI (generated/c/softchat.h) the Kotlin/JNA and Node-API facades load.
        .library(name: "SoftchatFFI", type: .dynamic, targets: ["SoftchatFFI"]),
        .plugin(name: "SoftchatContractPlugin", targets: ["SoftchatContractPlugin"]),
        .plugin(name: "GenerateBindings", targets: ["GenerateBindings"]),
    ],
    targets: [
        // MARK: System libraries (Debian: libsecp256k1-dev, libsqlite3-dev, libssl-dev, libcmark-gfm-dev)
        .systemLibrary(
            name: "CSecp256k1", pkgConfig: "libsecp256k1",
            providers: [.apt(["libsecp256k1-dev"]), .brew(["secp256k1"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        // The docs site's Markdown: softchat-site only, which scripts/build/docs-site builds. Neither
        // the build plugin's softchat-codegen nor any library product links it.
        .systemLibrary(
            name: "CCmarkGFM", pkgConfig: "libcmark-gfm",
            providers: [.apt(["libcmark-gfm-dev", "libcmark-gfm-extensions-dev"]), .brew(["cmark-gfm"])]),

        // MARK: Strict JSON over UTF-8 bytes, shared by the core and the schema loader
        .target(name: "SoftchatJSON", swiftSettings: fuzzedSwift),

        // MARK: The contract schema: load/validate → model → render
        .target(name: "SoftchatContracts", dependencies: ["SoftchatJSON"], swiftSettings: strictSwift),
        .target(
            name: "SoftchatCodegen", dependencies: ["SoftchatContracts"], resources: [.copy("Templates")],
            swiftSettings: strictSwift),
        .executableTarget(
            name: "softchat-codegen", dependencies: ["SoftchatCodegen"], swiftSettings: strictSwift,
            // Under SOFTCHAT_FUZZ its SoftchatJSON is instrumented: link the sanitizer runtime.
            linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=address"])] : []),
        // The static docs site (scripts/build/docs-site): HTML from the schema and docs/ through cmark-gfm.
        .target(
            name: "SoftchatSite", dependencies: ["SoftchatCodegen", "SoftchatContracts", "CCmarkGFM"],
            resources: [.copy("Assets")], swiftSettings: strictSwift),
        .executableTarget(name: "softchat-site", dependencies: ["SoftchatSite", "SoftchatCodegen", "SoftchatContracts"], swiftSettings: strictSwift),
        .plugin(
            name: "SoftchatContractPlugin", capability: .buildTool(),
            dependencies: ["softchat-codegen"]),
        .plugin(
            name: "GenerateBindings",
            capability: .command(
                intent: .custom(
                    verb: "generate-bindings",
                    description: "Regenerate generated/kotlin, generated/typescript and docs/ from Schema/"),
                permissions: [.writeToPackageDirectory(reason: "Writes generated/ and docs/ from Schema/")]),
            dependencies: ["softchat-codegen"]),

        // MARK: The Swift core: generated contract surface, verified events, wire, session
        .target(
            name: "SoftchatCore",
            dependencies: ["SoftchatJSON", "CSecp256k1", "COpenSSL"],
            swiftSettings: fuzzedSwift,
            plugins: ["SoftchatContractPlugin"]),

        // MARK: Sync: the sans-IO SyncEngine over many relays and the per-subscription planner (no I/O, no storage)
        .target(name: "SoftchatSync", dependencies: ["SoftchatCore", "SoftchatJSON"], swiftSettings: fuzzedSwift),

        // MARK: Storage: the durable SoftchatAccount on SQLite
        .target(
            name: "SoftchatStorage", dependencies: ["SoftchatCore", "SoftchatJSON", "CSQLite"],
            swiftSettings: strictSwift),

        // MARK: The C ABI over the core and storage: @_cdecl exports generated from Schema/
        // (SoftchatContractPlugin), hand-written handle boxes and codecs (Sources/SoftchatFFI)
        .target(
            name: "SoftchatFFI",
            dependencies: ["SoftchatCore", "SoftchatStorage", "SoftchatJSON", "SoftchatClient", "SoftchatSync", "SoftchatTransport"],
            swiftSettings: strictSwift, plugins: ["SoftchatContractPlugin"]),

        // MARK: Transport: TCP/TLS/Noise streams, WebSocket (RFC 6455), the one-thread I/O driver (core only, no storage)
        .target(
            name: "SoftchatTransport",
            dependencies: ["SoftchatCore", "SoftchatJSON", "COpenSSL"],
            swiftSettings: fuzzedSwift),

        // MARK: The managed client: an account + the SyncEngine + the I/O driver (account.startManagedTransport)
        .target(
            name: "SoftchatClient",
            dependencies: ["SoftchatCore", "SoftchatJSON", "SoftchatSync", "SoftchatStorage", "SoftchatTransport"],
            swiftSettings: strictSwift),

        // MARK: The embedded loopback test relay (the demo, `softchat relay` and tests; no library product uses it)
        .target(
            name: "SoftchatTestRelay", dependencies: ["SoftchatCore", "SoftchatTransport", "SoftchatJSON"],
            swiftSettings: strictSwift),
        // MARK: The fault proxy (the fault harness and tests only)
        .target(name: "SoftchatFaultProxy", dependencies: ["SoftchatCore", "SoftchatTransport"], swiftSettings: strictSwift),

        // MARK: Benchmarks (corpora, baselines, measurement) behind `softchat-dev bench`
        .target(
            name: "SoftchatBenchmarks",
            dependencies: [
                "SoftchatCore", "SoftchatJSON", "SoftchatStorage", "SoftchatTransport", "SoftchatClient", "SoftchatSync", "SoftchatTestRelay",
                "SoftchatFaultProxy", "SoftchatCommandLine", "CSecp256k1", "CSQLite",
            ],
            swiftSettings: strictSwift),

        // MARK: libFuzzer targets (scripts/fuzz/fuzz builds them with -sanitize=fuzzer; normally a replay runner)
        .target(name: "CFuzzerDriver"),
        .executableTarget(
            name: "softchat-fuzz",
            dependencies: ["SoftchatCore", "SoftchatJSON", "SoftchatTransport", "SoftchatSync", "SoftchatClient", "CFuzzerDriver"],
            path: "Sources/SoftchatFuzz", swiftSettings: fuzzedSwift, linkerSettings: fuzzLinker),

        // MARK: The thin CLIs: `softchat` for users (the demo and its relay included), `softchat-dev` for us
        .target(name: "SoftchatCommandLine", dependencies: ["SoftchatCore", "SoftchatJSON"], swiftSettings: strictSwift),
        .executableTarget(
            name: "SoftchatCLI",
            dependencies: [
                "SoftchatCore", "SoftchatJSON", "SoftchatStorage", "SoftchatTransport", "SoftchatClient", "SoftchatSync", "SoftchatTestRelay",
                "SoftchatCommandLine",
            ],
            swiftSettings: strictSwift),
        .executableTarget(
            name: "SoftchatDevCLI",
            dependencies: ["SoftchatCore", "SoftchatJSON", "SoftchatStorage", "SoftchatBenchmarks", "SoftchatCommandLine"],
            swiftSettings: strictSwift),

        // MARK: Tests
        .target(
            name: "SoftchatTestSupport", dependencies: ["SoftchatCore", "SoftchatJSON"],
            path: "Tests/SoftchatTestSupport", swiftSettings: strictSwift),
        .testTarget(name: "SoftchatJSONTests", dependencies: ["SoftchatJSON"], swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatContractsTests", dependencies: ["SoftchatCodegen", "SoftchatContracts", "SoftchatSite"],
            exclude: ["Fixtures", "Golden"], swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatStorageTests", dependencies: ["SoftchatStorage", "SoftchatCore", "SoftchatJSON", "SoftchatTestSupport", "CSQLite"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatTransportTests",
            dependencies: [
                "SoftchatTransport", "SoftchatClient", "SoftchatSync", "SoftchatTestRelay", "SoftchatFaultProxy", "SoftchatStorage", "SoftchatCore",
                "SoftchatJSON", "SoftchatBenchmarks",
            ],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatFFITests",
            dependencies: ["SoftchatFFI", "SoftchatTestRelay", "SoftchatCore", "SoftchatJSON", "SoftchatClient", "SoftchatSync"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatSyncTests", dependencies: ["SoftchatSync", "SoftchatCore", "SoftchatJSON"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatRecipeTests", dependencies: ["SoftchatCore"],
            swiftSettings: strictSwift, plugins: ["SoftchatContractPlugin"]),
        // The guides' and DocC articles' Swift samples, compiled against the real API
        // (GuideSamples.swift is generated by scripts/check/guide-samples; the test command checks it is fresh).
        .testTarget(
            name: "SoftchatGuideSampleTests",
            dependencies: ["SoftchatCore", "SoftchatJSON", "SoftchatStorage", "SoftchatSync", "SoftchatTransport", "SoftchatClient"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SoftchatCoreTests", dependencies: ["SoftchatCore", "SoftchatJSON", "SoftchatContracts", "SoftchatTestSupport"],
            exclude: ["BadInputs"], swiftSettings: strictSwift),
    ]
)
