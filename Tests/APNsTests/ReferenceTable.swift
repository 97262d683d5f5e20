import Foundation

/// A tab-separated reference table from the test bundle (copied from
/// `shared/reference/`), as rows of column name → value.
struct ReferenceTable {
    let columns: [String]
    let rows: [[String: String]]

    init(resource name: String) throws {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "tsv"))
        let text = try String(contentsOf: url, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        let header = lines[0].components(separatedBy: "\t")
        columns = header
        rows = lines.dropFirst().map { line in
            let cells = line.components(separatedBy: "\t")
            return Dictionary(uniqueKeysWithValues: zip(header, cells).map { ($0, $1) })
        }
    }

    /// The same file in `../shared/reference/` when the checkout sits beside
    /// it (as on developer machines and CI), else nil.
    static func sharedCopy(named name: String) -> String? {
        let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let url = repoRoot.deletingLastPathComponent().appendingPathComponent("shared/reference/\(name).tsv")
        return try? String(contentsOf: url, encoding: .utf8)
    }

    static func bundledText(named name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "tsv"))
        return try String(contentsOf: url, encoding: .utf8)
    }
}

import Testing
