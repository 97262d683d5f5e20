import Foundation
import RelayJSON
import Surfaces
import Testing

@Suite("Snapshot contract: updatedAt")
struct UpdatedAtTests {
    /// The queued fixture with `updatedAt` replaced.
    static func snapshot(updatedAt: String) throws -> LiveSurfaceSnapshot {
        var object = try SnapshotFixtures.snapshot("queued").encodeJSON().objectValue!
        object["updatedAt"] = .string(updatedAt)
        return try LiveSurfaceSnapshot(json: .object(object))
    }

    @Test("accepted: real days, leap days, offsets, fractions", arguments: [
        "2024-02-29T00:00:00Z", "2000-02-29T12:00:00Z", "1600-02-29T00:00:00Z", "2026-12-31T23:59:59Z",
        "2026-05-12T18:30:00.123456789Z", "2026-05-12T18:30:00+23:59", "2026-05-12T18:30:00-00:00",
        "1582-10-10T00:00:00Z", "0001-01-01T00:00:00Z",
    ])
    func accepted(text: String) throws {
        let snapshot = try Self.snapshot(updatedAt: text)
        #expect(snapshot.updatedAt == text, "the producer's text is kept as written")
    }

    @Test("rejected as format, at $.updatedAt", arguments: [
        "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "1500-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
        "2026-13-01T00:00:00Z", "2026-05-12T24:00:00Z", "2026-05-12T23:60:00Z", "2026-05-12T23:59:60Z",
        "2026-05-12T18:30:00+24:00", "2026-05-12T18:30:00+00:60", "2026-05-12T18:30:00", "2026-05-12T18:30:00z",
        "2026-05-12 18:30:00Z", "2026-05-12T18:30:00.Z", "2026-05-12T18:30:00Z\n", "0000-01-01T00:00:00Z",
        // The pattern allows omitting seconds; format: date-time (RFC 3339's
        // partial-time) does not, and a snapshot must satisfy both.
        "2026-05-12T18:30Z",
    ])
    func rejected(text: String) throws {
        do {
            _ = try Self.snapshot(updatedAt: text)
            Issue.record("accepted \(text.debugDescription)")
        } catch let error as SnapshotValidationError {
            #expect(error.issues.map(\.path.description) == ["$.updatedAt"])
            #expect(error.issues.first?.rule == "format")
            #expect(error.issues.first?.message.contains("RFC 3339") == true)
        }
    }

    @Test("the instant applies the offset and keeps the fraction", arguments: [
        ("2026-05-12T18:30:00Z", 1_778_610_600.0),
        ("2026-05-12T20:30:00.5+02:00", 1_778_610_600.5),
        ("2026-05-12T13:00:00-05:30", 1_778_610_600.0),
        ("1970-01-01T00:00:00Z", 0.0),
        ("1969-12-31T23:59:59Z", -1.0),
        ("2000-03-01T00:00:00Z", 951_868_800.0),
        ("1600-02-29T00:00:00Z", -11_670_998_400.0),
    ])
    func instant(text: String, seconds: Double) throws {
        let snapshot = try Self.snapshot(updatedAt: text)
        #expect(snapshot.updatedAtSeconds == seconds)
        #expect(snapshot.updatedAtDate == Date(timeIntervalSince1970: seconds))
    }

    @Test("ordering by instant, not by text, across offsets")
    func ordering() throws {
        let earlier = try Self.snapshot(updatedAt: "2026-05-12T20:00:00+02:00")  // 18:00Z
        let later = try Self.snapshot(updatedAt: "2026-05-12T18:30:00Z")
        #expect(earlier.updatedAt > later.updatedAt)
        #expect(earlier.updatedAtDate < later.updatedAtDate)
    }
}
