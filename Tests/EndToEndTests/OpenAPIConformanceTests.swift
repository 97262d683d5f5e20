import Foundation
import Testing
import TestSupport

/// docs/openapi.yaml against the running server, checked by scripts/check-openapi
/// (Python, jsonschema): every documented route is served, and every answer has a
/// documented status, headers and a body valid against its schema.
@Suite("OpenAPI conformance")
struct OpenAPIConformanceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the running ingress conforms to docs/openapi.yaml, with and without an audit database")
    func conforms() async throws {
        for databaseURL in [nil, ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]] {
            try await withRelay(databaseURL: databaseURL) { relay in
                let (status, output) = try await ProcessRunner.runOffPool([
                    "python3", Self.root.appendingPathComponent("scripts/check-openapi").path,
                    "--base-url", relay.base, "--api-key", TestRelay.keys["backend"]!, "--admin-key", TestRelay.keys["admin"]!,
                    "--app", "app-a", "--environment", "development", "--max-body-bytes", "65536", "--expect-success",
                    "--exercise-kill-switch",
                ])
                #expect(status == 0, "database \(databaseURL == nil ? "none" : "set"):\n\(output)")
                #expect(output.contains("passed"), "\(output.suffix(500))")
                // The documentation's own request examples were sent, and /3/device was posted as `curl -d` posts.
                let documented = output.split(separator: "\n").filter { $0.hasPrefix("PASS  [d] ") }
                #expect(documented.count >= 8, "\(output)")
                #expect(output.contains("PASS  [b] POST /3/device/{token} as curl -d posts it"), "\(output)")
                #expect(output.contains("PASS  [b] GET /v1/dead-tokens without since"), "\(output)")
                print(documented.joined(separator: "\n"))
            }
            if databaseURL == nil, ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] == nil { break }
        }
    }

    @Test("every example in the spec and in docs/api.md validates against its schema")
    func examples() async throws {
        let (status, output) = try await ProcessRunner.runOffPool([
            "python3", Self.root.appendingPathComponent("scripts/check-openapi").path, "--examples-only",
        ])
        #expect(status == 0, "\(output)")
    }
}
