import Foundation
import Synchronization
import RelayJSON
import Surfaces
import TestSupport
import Testing

/// The relay's validator against Python's `jsonschema`, an implementation
/// nobody here wrote, on mutations of every reference fixture that
/// `Fixtures/differential.py` generates (dropped and mistyped fields,
/// boundary numbers and lengths, dates, deep links, extra keys, kind/slice
/// mismatches, several problems at once).
@Suite("Snapshot contract: differential against Python jsonschema")
struct DifferentialValidationTests {
    /// One generated case and jsonschema's judgement of it.
    struct Case: Sendable {
        var document: JSONValue
        var valid: Bool
        /// Every location jsonschema reports, when the kind is known.
        var paths: Set<[String]>?
        var quirk: String?
    }

    @Test("the schema the differential reads is the contract schema users read (docs/schemas)")
    func schemaIsTheDocumentedOne() throws {
        let schema = try JSONParser.parse(Array(Data(contentsOf: SnapshotFixtures.schema)))
        #expect(schema["$id"]?.stringValue == "https://unpkg.com/@mobile-surfaces/surface-contracts@9.0/schema.json")
        #expect(!FileManager.default.fileExists(atPath: SnapshotFixtures.directory.appendingPathComponent("schema.json").path),
                "a bundled copy of the schema is back in Fixtures/")
    }

    /// Why the reference could not run.
    struct ReferenceUnavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// Generated once: both tests read the same corpus, and Python is the slow part.
    static let cache = Mutex<[Case]?>(nil)

    static func generated() async throws -> [Case] {
        if let cases = cache.withLock({ $0 }) { return cases }
        let cases = try await generate()
        cache.withLock { $0 = cases }
        return cases
    }

    /// Python runs off the cooperative pool: the in-process servers of other
    /// suites need its two threads while the corpus is generated.
    static func generate() async throws -> [Case] {
        let directory = SnapshotFixtures.directory
        let (status, text) = try await ProcessRunner.runOffPool([
            "python3", directory.appendingPathComponent("differential.py").path,
            directory.appendingPathComponent("fixtures").path, SnapshotFixtures.schema.path,
        ])
        guard status == 0 else {
            throw ReferenceUnavailable(description: """
                the differential test needs python3 with the jsonschema and rfc3339-validator packages \
                (pip install jsonschema rfc3339-validator); differential.py exited \(status): \(text.suffix(2_000))
                """)
        }
        return try Array(text.utf8).split(separator: UInt8(ascii: "\n")).map { line in
            let object = try JSONParser.parse(Array(line))
            guard let document = object["doc"], let valid = object["valid"]?.boolValue else {
                throw ReferenceUnavailable(description: "differential.py wrote an unexpected line: \(object.encodedString())")
            }
            let paths = object["paths"]?.arrayValue.map { list in
                Set(list.map { $0.arrayValue?.compactMap(\.stringValue) ?? [] })
            }
            return Case(document: document, valid: valid, paths: paths, quirk: object["quirk"]?.stringValue)
        }
    }

    @Test("verdict and every issue path equal jsonschema's on every fixture mutation")
    func matchesJSONSchema() async throws {
        let cases = try await Self.generated()
        #expect(cases.count > 1_000)
        #expect(cases.filter(\.valid).count > 500, "the corpus must exercise the accepting side too")
        #expect(cases.contains { ($0.paths?.count ?? 0) >= 3 }, "the corpus must hold documents with several problems")

        var disagreements: [String] = []
        for testCase in cases where testCase.quirk == nil {
            let issues = Self.issues(testCase.document)
            if issues.isEmpty != testCase.valid {
                disagreements.append(
                    "jsonschema says \(testCase.valid ? "valid" : "invalid"), we say \(issues.isEmpty ? "valid" : "invalid: \(issues)"): \(testCase.document.encodedString())")
            } else if let expected = testCase.paths {
                let ours = Set(issues.map(\.path.keys))
                if ours != expected {
                    disagreements.append(
                        "paths differ: jsonschema \(expected.sorted { $0.lexicographicallyPrecedes($1) }), ours \(issues.map(\.path.description)): \(testCase.document.encodedString())")
                }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements, first ones:\n\(disagreements.prefix(10).joined(separator: "\n"))")
    }

    /// JSON Schema patterns are ECMA-262 regexes, where `$` matches only at
    /// the end of the input; Python's `re` (which jsonschema and
    /// rfc3339-validator use) also matches before a final newline, so it
    /// accepts "…Z\n". The relay follows the specified dialect, as the
    /// contract's own Zod/JavaScript validator does.
    @Test("where jsonschema follows Python's regex dialect, the relay follows ECMA-262")
    func pythonRegexQuirks() async throws {
        let quirks = try await Self.generated().filter { $0.quirk != nil }
        #expect(!quirks.isEmpty)
        for quirk in quirks {
            #expect(quirk.valid, "the quirk no longer shows in jsonschema; fold the case back into the plain comparison")
            let issues = Self.issues(quirk.document)
            #expect(issues.map(\.path.description) == ["$.updatedAt"], "\(quirk.document.encodedString())")
        }
    }

    static func issues(_ document: JSONValue) -> [SnapshotValidationError.Issue] {
        do {
            _ = try LiveSurfaceSnapshot(json: document)
            return []
        } catch {
            return error.issues
        }
    }
}

extension JSONPath {
    /// The path as its object keys, the form differential.py writes.
    var keys: [String] {
        components.map { component in
            switch component {
            case .key(let key): key
            case .index(let index): String(index)
            }
        }
    }
}
