import Foundation
import RelayJSON
import Surfaces
import Testing

@Suite("Snapshot contract: fixtures")
struct SnapshotFixtureTests {
    @Test("every reference fixture parses and round-trips through encodeJSON", arguments: try! SnapshotFixtures.names("fixtures"))
    func fixtureParses(name: String) throws {
        let snapshot = try LiveSurfaceSnapshot(parsing: SnapshotFixtures.bytes("fixtures", name))
        let again = try LiveSurfaceSnapshot(json: snapshot.encodeJSON())
        #expect(again == snapshot)
        var original = try JSONParser.parse(SnapshotFixtures.bytes("fixtures", name)).objectValue!
        original["$schema"] = nil
        #expect(Set(snapshot.encodeJSON().objectValue!.keys) == Set(original.keys))
    }

    @Test(
        "every negative fixture fails at the right path and rule",
        arguments: [
            ("bad-deeplink-scheme.json", "$.widget.deepLink", "pattern"),
            ("empty-notification-subtitle.json", "$.notification.subtitle", "minLength"),
            ("missing-discriminator-kind.json", "$.kind", "required"),
            ("out-of-range-widget-progress.json", "$.widget.progress", "maximum"),
            ("wrong-schema-version.json", "$.schemaVersion", "const"),
            ("wrong-state-enum.json", "$.state", "enum"),
        ]
    )
    func negativeFails(name: String, path: String, rule: String) throws {
        #expect(try SnapshotFixtures.names("negative").contains(name))
        let bytes = try SnapshotFixtures.bytes("negative", name)
        var issues: [SnapshotValidationError.Issue] = []
        do {
            _ = try LiveSurfaceSnapshot(parsing: bytes)
            Issue.record("\(name) was accepted")
        } catch {
            issues = error.issues
        }
        let issue = try #require(issues.first { $0.path.description == path }, "no issue at \(path): \(issues)")
        #expect(issue.rule == rule)
        #expect(issue.message.hasPrefix(path))
    }

    @Test("every problem is listed, each at its own path")
    func listsEveryProblem() throws {
        let text = #"{"schemaVersion":"4","kind":"liveActivity","id":"","surfaceId":"s","updatedAt":"2023-02-29T00:00:00Z","state":"done","extra":1,"liveActivity":{"title":"","body":3,"progress":1.5,"deepLink":"nope","modeLabel":"m","stage":"x","estimatedSeconds":2.5,"mystery":true}}"#
        do {
            _ = try LiveSurfaceSnapshot(parsing: Array(text.utf8))
            Issue.record("accepted")
        } catch {
            let found = Set(error.issues.map { "\($0.path) \($0.rule)" })
            #expect(found == [
                "$.schemaVersion const", "$.id minLength", "$.updatedAt format", "$.state enum", "$.extra additionalProperties",
                "$.liveActivity.title minLength", "$.liveActivity.body type", "$.liveActivity.progress maximum",
                "$.liveActivity.deepLink pattern", "$.liveActivity.stage enum", "$.liveActivity.estimatedSeconds type",
                "$.liveActivity.mystery additionalProperties",
            ])
            #expect(error.description.contains("12 problems"))
        }
    }

    @Test("a slice of another kind is an unknown field; a missing slice is required")
    func kindSliceMismatch() throws {
        var object = try JSONParser.parse(SnapshotFixtures.bytes("fixtures", "widget-minimal.json")).objectValue!
        object["kind"] = "standby"
        do {
            _ = try LiveSurfaceSnapshot(json: .object(object))
            Issue.record("accepted")
        } catch {
            #expect(Set(error.issues.map { "\($0.path) \($0.rule)" }) == ["$.widget additionalProperties", "$.standby required"])
        }
    }

    @Test("bytes that are not JSON, and JSON that is not an object, fail cleanly")
    func notJSON() {
        #expect(throws: SnapshotValidationError.self) { try LiveSurfaceSnapshot(parsing: Array("{".utf8)) }
        #expect(throws: SnapshotValidationError.self) { try LiveSurfaceSnapshot(parsing: Array("[]".utf8)) }
    }

    @Test("updatedAt becomes unix seconds, offsets applied")
    func updatedAtSeconds() throws {
        let snapshot = try SnapshotFixtures.snapshot("queued")
        #expect(snapshot.updatedAtSeconds == 1_778_610_600)  // 2026-05-12T18:30:00Z
        var object = snapshot.encodeJSON().objectValue!
        object["updatedAt"] = "2026-05-12T20:30:00.5+02:00"
        #expect(try LiveSurfaceSnapshot(json: .object(object)).updatedAtSeconds == 1_778_610_600.5)
    }
}
