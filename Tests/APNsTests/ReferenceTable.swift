import Foundation

/// A tab-separated reference table from the test bundle (a copy of
/// `docs/reference/`), as rows of column name → value.
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

    /// The same table in the repository's `docs/reference/`, where operators read it.
    static func documentedText(named name: String) throws -> String {
        let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOf: repoRoot.appendingPathComponent("docs/reference/\(name).tsv"), encoding: .utf8)
    }

    static func bundledText(named name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "tsv"))
        return try String(contentsOf: url, encoding: .utf8)
    }
}

import Testing
