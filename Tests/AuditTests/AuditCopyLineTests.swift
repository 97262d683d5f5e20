@testable import Audit
import Testing

/// The exact bytes of an audit row's COPY line, pinned: the row's layout is
/// a contract with the table and with spool segments already on disk, so a
/// refactor of how the line is built must not change a single byte.
@Suite("Audit COPY line")
struct AuditCopyLineTests {
    /// Every column set, nothing to escape.
    static func fullRecord() -> AuditRecord {
        var record = AuditRecord(event: EventFactory.event(3), relayInstance: "relay-a")
        record.id = "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11"
        record.recordedAtNanoseconds = 1_763_800_000_123_456_789
        record.startedAtNanoseconds = 1_763_800_000_000_000_000
        record.finishedAtNanoseconds = 1_763_800_000_123_456_789
        record.apnsID = "7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70"
        record.apnsUniqueID = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
        record.traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        record.app = "alpha"
        record.environment = "production"
        record.operation = "alert"
        record.pushType = "alert"
        record.priority = 10
        record.topic = "com.example.app"
        record.tokenFingerprint = "fp-1234abcd"
        record.channelID = "channel-9"
        record.snapshotID = "snap-1"
        record.surfaceID = "surface-2"
        record.outcome = "success"
        record.status = 200
        record.reason = "TooManyRequests"
        record.errorType = "TooManyRequests"
        record.trapIDs = ["MS015", "TR-429"]
        record.attempts = 2
        record.retried = true
        record.latencyMilliseconds = 12.5
        record.attemptLog = #"[{"status":429,"reason":"TooManyRequests","duration_ms":4.0},{"status":200,"reason":null,"duration_ms":3.25}]"#
        record.payloadBytes = 321
        record.caller = "backend-1"
        record.relayInstance = "relay-a"
        return record
    }

    /// Every optional column NULL, and text that COPY must escape (tab,
    /// newline, carriage return, backslash, NUL, quotes in an array element).
    static func awkwardRecord() -> AuditRecord {
        var record = fullRecord()
        record.apnsUniqueID = nil
        record.traceID = nil
        record.pushType = nil
        record.priority = nil
        record.topic = nil
        record.tokenFingerprint = nil
        record.channelID = nil
        record.snapshotID = "snap\t1\n\\x\r"
        record.surfaceID = nil
        record.status = nil
        record.reason = nil
        record.errorType = nil
        record.trapIDs = ["a\"b", "c\\d"]
        record.retried = false
        record.latencyMilliseconds = 0
        record.attemptLog = "[]"
        record.caller = "nul\u{0}here"
        record.app = "tab\tapp"
        return record
    }

    static let fullLine = [
        "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11", "2025-11-22T08:26:40.123Z", "2025-11-22T08:26:40.000Z",
        "2025-11-22T08:26:40.123Z", "7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70", "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
        "4bf92f3577b34da6a3ce929d0e0e4736", "alpha", "production", "alert", "alert", "10", "com.example.app", "fp-1234abcd",
        "channel-9", "snap-1", "surface-2", "success", "200", "TooManyRequests", "TooManyRequests", #"{"MS015","TR-429"}"#, "2",
        "t", "12.5", #"[{"status":429,"reason":"TooManyRequests","duration_ms":4.0},{"status":200,"reason":null,"duration_ms":3.25}]"#,
        "321", "backend-1", "relay-a",
    ].joined(separator: "\t") + "\n"

    static let awkwardLine = [
        "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11", "2025-11-22T08:26:40.123Z", "2025-11-22T08:26:40.000Z",
        "2025-11-22T08:26:40.123Z", "7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70", #"\N"#, #"\N"#, #"tab\tapp"#, "production",
        "alert", #"\N"#, #"\N"#, #"\N"#, #"\N"#, #"\N"#, #"snap\t1\n\\x\r"#, #"\N"#, "success", #"\N"#, #"\N"#, #"\N"#,
        #"{"a\\"b","c\\\\d"}"#, "2", "f", "0.0", "[]", "321", "nul\u{FFFD}here", "relay-a",
    ].joined(separator: "\t") + "\n"

    @Test("a full record's COPY line, byte for byte")
    func fullRecordLine() {
        let line = Self.fullRecord().copyLine()
        #expect(String(decoding: line, as: UTF8.self) == Self.fullLine)
    }

    @Test("NULLs as \\N, and tab, newline, CR, backslash, NUL and quotes escaped, byte for byte")
    func awkwardRecordLine() {
        let line = Self.awkwardRecord().copyLine()
        #expect(String(decoding: line, as: UTF8.self) == Self.awkwardLine)
    }

    @Test("appending to a batch buffer adds exactly the row's line after what is there")
    func appendsToBuffer() {
        var buffer = Array("previous\n".utf8)
        Self.fullRecord().appendCopyLine(to: &buffer)
        Self.awkwardRecord().appendCopyLine(to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "previous\n" + Self.fullLine + Self.awkwardLine)
    }
}
