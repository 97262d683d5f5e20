import RelayJSON
import Surfaces
import Testing

/// Pins the exact messages of unknown, missing, mistyped and duplicate
/// members, and the order they are reported in: the reader's field lookup
/// may change, what a producer reads in an error body may not.
@Suite("Snapshot contract: messages and their order")
struct SnapshotMessageOrderTests {
    static func messages(_ text: String) -> [String] {
        do {
            _ = try LiveSurfaceSnapshot(parsing: Array(text.utf8))
            return []
        } catch {
            return error.issues.map(\.message)
        }
    }

    @Test("unknown members in member order, then each field in reading order")
    func unknownMissingAndMistyped() {
        let text = #"{"kind":"liveActivity","schemaVersion":"5","extra":1,"id":5,"updatedAt":"2026-05-12T18:30:00Z","state":"queued","liveActivity":{"mystery":true,"body":"b","zeta":1,"progress":"x","modeLabel":"m","stage":"prompted"}}"#
        let slice = "actionLabel, body, contextLabel, deepLink, estimatedSeconds, modeLabel, morePartsCount, progress, stage, statusLine, title"
        #expect(Self.messages(text) == [
            "$.extra is not a field of this object (allowed: $schema, id, kind, liveActivity, schemaVersion, state, surfaceId, updatedAt)",
            "$.id must be a string (got integer)",
            "$.surfaceId is required",
            "$.liveActivity.mystery is not a field of this object (allowed: \(slice))",
            "$.liveActivity.zeta is not a field of this object (allowed: \(slice))",
            "$.liveActivity.title is required",
            "$.liveActivity.progress must be a number (got string)",
            "$.liveActivity.deepLink is required",
        ])
    }

    @Test("an unknown kind allows every kind's slice at the top, sorted")
    func unknownKind() {
        let text = #"{"kind":"toaster","schemaVersion":"5","id":"i","surfaceId":"s","updatedAt":"2026-05-12T18:30:00Z","state":"queued","other":{}}"#
        #expect(Self.messages(text) == [
            #"$.kind must be one of "liveActivity", "widget", "control", "lockAccessory", "standby", "notification" (got "toaster")"#,
            "$.other is not a field of this object (allowed: $schema, control, id, kind, liveActivity, lockAccessory, notification, schemaVersion, standby, state, surfaceId, updatedAt, widget)",
        ])
    }

    @Test("a duplicate member is refused by the parser, naming the key")
    func duplicateMember() {
        let messages = Self.messages(#"{"kind":"widget","kind":"widget"}"#)
        #expect(messages.count == 1)
        #expect(messages.first?.hasPrefix("snapshot is not valid JSON: ") == true)
        #expect(messages.first?.contains(#"duplicate key "kind""#) == true)
    }
}
