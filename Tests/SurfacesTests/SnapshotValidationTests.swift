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
        // Field for field, as the producer wrote it (the annotation aside).
        var original = try JSONParser.parse(SnapshotFixtures.bytes("fixtures", name)).objectValue!
        original["$schema"] = nil
        #expect(snapshot.encodeJSON().encodedString() == JSONValue.object(original).encodedString())
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

    /// Fixture JSON with `edit` applied, validated; the issues as "path rule".
    static func problems(_ fixture: String, _ edit: (inout JSONObject) -> Void) throws -> Set<String> {
        var object = try JSONParser.parse(SnapshotFixtures.bytes("fixtures", fixture + ".json")).objectValue!
        edit(&object)
        do {
            _ = try LiveSurfaceSnapshot(json: .object(object))
            return []
        } catch {
            return Set(error.issues.map { "\($0.path) \($0.rule)" })
        }
    }

    @Test("\"$schema\" is accepted at the top as a string, and nowhere else")
    func schemaAnnotation() throws {
        #expect(try Self.problems("widget-minimal") { $0["$schema"] = "https://example.com/any.json" } == [])
        #expect(try Self.problems("widget-minimal") { $0["$schema"] = nil } == [])
        #expect(try Self.problems("widget-minimal") { $0["$schema"] = 5 } == ["$[\"$schema\"] type"])
        #expect(try Self.problems("widget-minimal") {
            var slice = $0["widget"]!.objectValue!
            slice["$schema"] = "https://example.com/any.json"
            $0["widget"] = .object(slice)
        } == ["$.widget[\"$schema\"] additionalProperties"])
    }

    @Test("kind: missing, unknown, or of the wrong type is reported at $.kind")
    func kindProblems() throws {
        #expect(try Self.problems("control-toggle") { $0["kind"] = nil } == ["$.kind required"])
        #expect(try Self.problems("control-toggle") { $0["kind"] = "toaster" } == ["$.kind enum"])
        #expect(try Self.problems("control-toggle") { $0["kind"] = 3 } == ["$.kind type"])
        // A known kind whose slice is missing, with its own slice under another name.
        #expect(try Self.problems("control-toggle") { $0["kind"] = "notification" }
            == ["$.notification required", "$.control additionalProperties"])
    }

    @Test("integer fields: 3.0 and 1e2 count, fractions do not, bounds are 0 and 2^53 - 1")
    func integers() throws {
        func estimate(_ value: JSONValue) throws -> Set<String> {
            try Self.problems("active-progress") {
                var slice = $0["liveActivity"]!.objectValue!
                slice["estimatedSeconds"] = value
                $0["liveActivity"] = .object(slice)
            }
        }
        #expect(try estimate(.double(3.0)) == [])
        #expect(try estimate(.double(100)) == [])
        #expect(try estimate(.integer(9_007_199_254_740_991)) == [])
        #expect(try estimate(.integer(9_007_199_254_740_992)) == ["$.liveActivity.estimatedSeconds maximum"])
        #expect(try estimate(.double(1e20)) == ["$.liveActivity.estimatedSeconds maximum"])
        #expect(try estimate(.double(-1e20)) == ["$.liveActivity.estimatedSeconds minimum"])
        #expect(try estimate(.integer(-1)) == ["$.liveActivity.estimatedSeconds minimum"])
        #expect(try estimate(.double(2.5)) == ["$.liveActivity.estimatedSeconds type"])
        #expect(try estimate("5") == ["$.liveActivity.estimatedSeconds type"])
    }

    @Test("lengths count Unicode code points, as JSON Schema does")
    func codePointLengths() throws {
        func shortText(_ text: String) throws -> Set<String> {
            try Self.problems("lock-accessory-inline") {
                var slice = $0["lockAccessory"]!.objectValue!
                slice["shortText"] = .string(text)
                $0["lockAccessory"] = .object(slice)
            }
        }
        #expect(try shortText(String(repeating: "😀", count: 20)) == [])  // 40 UTF-16 units
        #expect(try shortText(String(repeating: "e\u{301}", count: 10)) == [])  // 20 code points, 10 characters
        #expect(try shortText(String(repeating: "e\u{301}", count: 11)) == ["$.lockAccessory.shortText maxLength"])
    }

    @Test("each message names the field and the rule it breaks")
    func messages() throws {
        let text = #"{"schemaVersion":"5","kind":"notification","id":"n","surfaceId":"s","updatedAt":"2026-05-12T18:30:00Z","state":"active","notification":{"title":"t","body":"b","deepLink":"app://x","interruptionLevel":"time-sensitive","relevanceScore":1.5}}"#
        do {
            _ = try LiveSurfaceSnapshot(parsing: Array(text.utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.issues.map(\.message) == [
                #"$.notification.interruptionLevel must be one of "passive", "active", "timeSensitive", "critical" (got "time-sensitive")"#,
                "$.notification.relevanceScore must be at most 1 (got 1.5)",
            ])
            #expect(SnapshotValidationError.code == "InvalidSnapshot")
            #expect(SnapshotValidationError.trapID == "MS008")
            #expect(error.description.hasPrefix("invalid snapshot (2 problems): "))
        }
    }
}
