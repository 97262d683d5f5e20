import Foundation
import RelayJSON
import Surfaces
import Testing

/// The LiveSurfaceSnapshot v5 contract's fixtures and schema, bundled with the tests
/// (`Fixtures/schema.json` is the same file as docs/schemas/live-surface-snapshot.schema.json).
enum SnapshotFixtures {
    static var directory: URL { Bundle.module.url(forResource: "Fixtures", withExtension: nil)! }

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
