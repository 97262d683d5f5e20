import Foundation
import RelayJSON
import Surfaces
import Testing

/// The reference fixtures bundled with the tests (copied from shared/reference).
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
