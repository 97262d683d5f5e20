import Foundation
import Testing
import TestSupport

/// `scripts/audit-pg-cost`, the measurement of Postgres' CPU per audit row:
/// what it does without measuring anything.
@Suite("scripts/audit-pg-cost")
struct AuditPGCostScriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("--list prints the built-in variants without building the binary it does not need (a swift that fails is never run)")
    func listBuildsNothing() async throws {
        // A `swift` first in PATH that says it ran and fails: a build would show.
        let bin = temporaryDirectory()
        let swift = bin + "/swift"
        try "#!/bin/sh\necho 'swift was run' >&2\nexit 97\n".write(toFile: swift, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: swift)
        defer { try? FileManager.default.removeItem(atPath: bin) }
        let path = bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let script = Self.root.appendingPathComponent("scripts/audit-pg-cost").path
        let outcome = try await ProcessRunner.captureOffPool(["env", "PATH=\(path)", "APNS_RELAY_NO_INSTALL=1", script, "--list"])
        let output = String(decoding: outcome.standardOutput, as: UTF8.self)
        let errors = String(decoding: outcome.standardError, as: UTF8.self)
        #expect(outcome.status == 0, "\(errors)")
        #expect(!errors.contains("swift was run") && !errors.contains("building"), "\(errors)")
        let names = output.split(separator: "\n").map { $0.prefix { $0 != ":" } }
        #expect(names.contains("base") && names.contains("no_indexes") && names.contains("binary"), "\(output)")
    }
}
