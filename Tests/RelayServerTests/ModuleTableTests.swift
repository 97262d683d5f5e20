import Foundation
import Testing

/// docs/architecture.md's module table against Package.swift and the code:
/// each module under Sources/ has one row, the row lists exactly the target's
/// dependencies, and the module's `import` lines name nothing else.
@Suite("Module table")
struct ModuleTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Modules every target may import without declaring them: the toolchain's.
    static let toolchain: Set<String> = ["Foundation", "FoundationEssentials", "Synchronization", "Dispatch", "Glibc", "Musl", "Darwin"]
    /// Modules a product brings along: `Tracing` re-exports `Instrumentation`
    /// (`@_exported import` in swift-distributed-tracing).
    static let reexported: [String: Set<String>] = ["Tracing": ["Instrumentation"]]

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Each target of Package.swift with its dependencies, by name (a product
    /// by its product name: `.product(name: "Logging", …)` is `Logging`).
    static func packageTargets() throws -> [String: Set<String>] {
        let manifest = try text("Package.swift")
        let starts = manifest.matches(of: /\.(?:target|testTarget|executableTarget|systemLibrary)\(\s*name:\s*"([^"]+)"/)
        var targets: [String: Set<String>] = [:]
        for (index, start) in starts.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1].range.lowerBound : manifest.endIndex
            let declaration = manifest[start.range.lowerBound..<end]
            var dependencies: Set<String> = []
            if let open = declaration.range(of: "dependencies: [") {
                var depth = 1
                var cursor = open.upperBound
                while depth > 0, cursor < declaration.endIndex {
                    if declaration[cursor] == "[" { depth += 1 } else if declaration[cursor] == "]" { depth -= 1 }
                    cursor = declaration.index(after: cursor)
                }
                let list = String(declaration[open.upperBound..<cursor]).replacing(/package:\s*"[^"]*"/, with: "")
                dependencies = Set(list.matches(of: /"([^"]+)"/).map { String($0.output.1) })
            }
            targets[String(start.output.1)] = dependencies
        }
        return targets
    }

    /// The module table's rows: each module named in the first column, with
    /// the modules its third column names (explanations in parentheses left out).
    static func documentedModules() throws -> [(module: String, dependencies: Set<String>)] {
        let architecture = try text("docs/architecture.md")
        let start = try #require(architecture.range(of: "\n## Modules"), "docs/architecture.md has no Modules section")
        let section = architecture[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        var rows: [(String, Set<String>)] = []
        for line in section[..<end].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            try #require(cells.count >= 4, "a module row needs three columns: \(line)")
            var imports = cells[3]
            // Innermost parentheses first, until none is left.
            while imports.contains(/\([^()]*\)/) { imports = imports.replacing(/\([^()]*\)/, with: "") }
            let dependencies = Set(imports.matches(of: /`([A-Za-z0-9_-]+)`/).map { String($0.output.1) })
            for module in cells[1].matches(of: /`([A-Za-z0-9_-]+)`/) { rows.append((String(module.output.1), dependencies)) }
        }
        return rows
    }

    /// The modules the Swift files under `Sources/<module>` import.
    static func imports(of module: String) throws -> Set<String> {
        let directory = root.appendingPathComponent("Sources/\(module)")
        var found: Set<String> = []
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let source = try String(contentsOf: file, encoding: .utf8)
            // Swift's Regex is slow: only lines that can be imports are matched.
            for line in source.split(separator: "\n") where line.contains("import ") {
                if let match = line.wholeMatch(of: /\s*(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(\w+)\s*/) {
                    found.insert(String(match.output.1))
                }
            }
        }
        return found
    }

    /// The targets whose code lives in Sources/ (not the test targets, not TestSupport).
    static func sourceModules() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path).sorted()
    }

    @Test("every module under Sources/ has one row, listing exactly its Package.swift dependencies")
    func tableMatchesPackage() throws {
        let targets = try Self.packageTargets()
        let rows = try Self.documentedModules()
        let modules = try Self.sourceModules()
        #expect(rows.map(\.module).sorted() == modules, "docs/architecture.md's module table rows differ from Sources/")
        for row in rows {
            let declared = try #require(targets[row.module], "\(row.module) is in the table but not in Package.swift")
            #expect(row.dependencies == declared,
                    "\(row.module): the table says \(row.dependencies.sorted()), Package.swift says \(declared.sorted())")
        }
    }

    @Test("each module imports exactly what Package.swift declares for it, plus the toolchain")
    func importsMatchPackage() throws {
        let targets = try Self.packageTargets()
        for module in try Self.sourceModules() {
            let declared = try #require(targets[module], "Sources/\(module) is not a target in Package.swift")
            let allowed = declared.union(Self.toolchain).union(declared.flatMap { Self.reexported[$0] ?? [] })
            let imported = try Self.imports(of: module)
            #expect(imported.isSubset(of: allowed),
                    "\(module) imports \(imported.subtracting(allowed).sorted()) without declaring it in Package.swift")
            // C modules (module maps and shims) have no Swift file to import anything.
            if !imported.isEmpty {
                #expect(declared.isSubset(of: imported),
                        "\(module) declares \(declared.subtracting(imported).sorted()) in Package.swift but never imports it")
            }
        }
    }
}
