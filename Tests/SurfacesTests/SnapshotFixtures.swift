import Foundation
import RelayJSON
import Surfaces
import Testing

/// The LiveSurfaceSnapshot v5 contract's fixtures, bundled with the tests, and its schema.
enum SnapshotFixtures {
    static var directory: URL { Bundle.module.url(forResource: "Fixtures", withExtension: nil)! }

    /// The contract schema: the one copy in the repository, the one users read
    /// (docs/schemas), found from this file's place in the checkout rather
    /// than bundled, so the tests cannot check a copy that has drifted.
    static var schema: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/schemas/live-surface-snapshot.schema.json")
    }

    static func names(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(folder).path)
            .filter { $0.hasSuffix(".json") }.sorted()
    }

    static func bytes(_ folder: String, _ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: directory.appendingPathComponent(folder).appendingPathComponent(name)))
    }

    static func snapshot(_ name: String) throws -> LiveSurfaceSnapshot {
        try LiveSurfaceSnapshot(parsing: bytes("fixtures", name + ".json"))
    }
}
