import Foundation
import RelayJSON
import Surfaces
import TestSupport
import Testing

@Suite("Snapshot contract: differential against Python jsonschema")
struct DifferentialValidationTests {
    @Test("the relay's verdict equals jsonschema's on thousands of fixture mutations")
    func matchesJSONSchema() throws {
        let directory = SnapshotFixtures.directory
        let (status, text) = try ProcessRunner.run([
            "python3", directory.appendingPathComponent("differential.py").path,
            directory.appendingPathComponent("fixtures").path, directory.appendingPathComponent("schema.json").path,
        ])
        try #require(status == 0, "python3 with jsonschema and rfc3339-validator is needed (scripts/test installs them): \(text)")

        let lines = Array(text.utf8).split(separator: UInt8(ascii: "\n"))
        #expect(lines.count > 5_000)
        var disagreements: [String] = []
        var valid = 0
        for line in lines {
            let case_ = try JSONParser.parse(Array(line))
            let document = try #require(case_["doc"])
            let expected = try #require(case_["valid"]?.boolValue)
            let ours: Bool
            do {
                _ = try LiveSurfaceSnapshot(json: document)
                ours = true
            } catch {
                ours = false
            }
            if expected { valid += 1 }
            if ours != expected, disagreements.count < 10 {
                disagreements.append("jsonschema says \(expected ? "valid" : "invalid"): \(document.encodedString())")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        #expect(valid > 1_000, "the corpus must exercise the accepting side too")
    }
}
