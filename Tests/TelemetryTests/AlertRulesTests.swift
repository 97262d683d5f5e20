import Foundation
import Testing

@Suite("Alert rules")
struct AlertRulesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("promtool check rules accepts the rules file")
    func checkRules() async throws {
        let (status, output) = try await runTool(["promtool", "check", "rules", Self.root.appendingPathComponent("alerts/apns-relay.rules.yml").path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("SUCCESS"))
    }

    @Test("promtool test rules: every alert fires on its inputs and stays silent otherwise")
    func testRules() async throws {
        let (status, output) = try await runTool(["promtool", "test", "rules", Self.root.appendingPathComponent("alerts/apns-relay.tests.yml").path])
        #expect(status == 0, "\(output)")
        let rules = try String(contentsOf: Self.root.appendingPathComponent("alerts/apns-relay.rules.yml"), encoding: .utf8)
        let tests = try String(contentsOf: Self.root.appendingPathComponent("alerts/apns-relay.tests.yml"), encoding: .utf8)
        let alerts = rules.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst(9)) : nil
        }
        #expect(alerts.count >= 18)
        for alert in alerts {
            #expect(tests.contains("name: \(alert) fires"), "\(alert) has no firing test")
            #expect(tests.contains("name: \(alert) stays silent"), "\(alert) has no silent test")
        }
    }

    @Test("every alert links to a runbook section that exists")
    func runbooks() throws {
        let rules = try String(contentsOf: Self.root.appendingPathComponent("alerts/apns-relay.rules.yml"), encoding: .utf8)
        let runbook = try String(contentsOf: Self.root.appendingPathComponent("docs/runbooks.md"), encoding: .utf8)
        let anchors = Set(runbook.split(separator: "\n").filter { $0.hasPrefix("## ") }.map { $0.dropFirst(3).lowercased() })
        let links = rules.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: "docs/runbooks.md#") else { return nil }
            return String(line[range.upperBound...])
        }
        #expect(links.count >= 18)
        for link in links { #expect(anchors.contains(link), "runbook section missing for #\(link)") }
    }
}
