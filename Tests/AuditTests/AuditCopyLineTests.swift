@testable import Audit
import APNs
import Relay
import RelayBasics
import RelayJSON
import Testing

/// The exact bytes of an audit row's COPY line, pinned: the row's layout is
/// a contract with the table and with spool segments already on disk, so a
/// refactor of how the line is built must not change a single byte.
@Suite("Audit COPY line")
struct AuditCopyLineTests {
    static let apnsID = APNsID("7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70")!
    static let startedAt: UInt64 = 1_763_800_000_000_000_000
    static let finishedAt: UInt64 = 1_763_800_000_123_456_789

    /// Every column set, nothing to escape: a send retried once past a 429.
    static func fullRecord() -> AuditRecord {
        let send = SendDescriptor(
            app: "alpha", environment: .production, operation: .alert, apnsID: apnsID, pushType: .alert, priority: .immediate,
            topic: "com.example.app", tokenFingerprint: "fp-1234abcd", channelID: "channel-9", snapshotID: "snap-1",
            surfaceID: "surface-2", payloadBytes: 321, caller: "backend-1", traceID: "4bf92f3577b34da6a3ce929d0e0e4736",
            idempotencyKeyHash: keyHash)
        let event = SendEvent(
            send: send, outcome: .success, status: 200, reason: "TooManyRequests", errorType: "TooManyRequests", attempts: 2,
            trapHits: [TrapID(rawValue: "MS015"), TrapID(rawValue: "TR-429")], latencySeconds: 0.25, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", unregisteredAt: 1_763_744_531_250, dropsToken: false,
            attemptLog: [
                AttemptSummary(status: 429, reason: "TooManyRequests", durationSeconds: 0.004),
                AttemptSummary(status: 200, reason: nil, durationSeconds: 0.00325),
            ],
            deadToken: nil)
        var record = AuditRecord(event: event, relayInstance: "relay-a")
        record.id = "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11"  // random by design; fixed for the pin
        return record
    }

    /// Every optional column NULL, and text that COPY must escape (tab,
    /// newline, carriage return, backslash, NUL, quotes in an array element).
    static func awkwardRecord() -> AuditRecord {
        let send = SendDescriptor(
            app: "tab\tapp", environment: .production, operation: .alert, apnsID: apnsID, snapshotID: "snap\t1\n\\x\r",
            payloadBytes: 321, caller: "nul\u{0}here")
        let event = SendEvent(
            send: send, outcome: .success, status: nil, reason: nil, errorType: nil, attempts: 1,
            trapHits: [TrapID(rawValue: "a\"b"), TrapID(rawValue: "c\\d")], latencySeconds: 0, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: nil, unregisteredAt: nil, dropsToken: false, attemptLog: [], deadToken: nil)
        var record = AuditRecord(event: event, relayInstance: "relay-a")
        record.id = "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11"
        return record
    }

    /// SHA-256 hex of "backend-1", a newline and "order-1".
    static let keyHash = "becd2bc6535f152d3a168a508de770330ffdb44d5d34b52147396a148cb43a81"

    /// What this build writes (format 3): the format 1 line, `idempotency_key_hash` and `apns_timestamp`.
    static var fullLineFormat3: String { String(fullLine.dropLast()) + "\t" + keyHash + "\t2025-11-21T17:02:11.250Z\n" }
    static var awkwardLineFormat3: String { String(awkwardLine.dropLast()) + "\t\\N\t\\N\n" }

    /// Format 1's lines (spool segments on disk hold them; AuditSpoolFormatTests reads them).
    static let fullLine = [
        "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11", "2025-11-22T08:26:40.123Z", "2025-11-22T08:26:40.000Z",
        "2025-11-22T08:26:40.123Z", "7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70", "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
        "4bf92f3577b34da6a3ce929d0e0e4736", "alpha", "production", "alert", "alert", "10", "com.example.app", "fp-1234abcd",
        "channel-9", "snap-1", "surface-2", "success", "200", "TooManyRequests", "TooManyRequests", #"{"MS015","TR-429"}"#, "2",
        "t", "250.0", #"[{"status":429,"reason":"TooManyRequests","duration_ms":4},{"status":200,"reason":null,"duration_ms":3.25}]"#,
        "321", "backend-1", "relay-a",
    ].joined(separator: "\t") + "\n"

    static let awkwardLine = [
        "0b7c6f43-86e4-4a8e-9d55-1f0e7a6c2b11", "2025-11-22T08:26:40.123Z", "2025-11-22T08:26:40.000Z",
        "2025-11-22T08:26:40.123Z", "7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70", #"\N"#, #"\N"#, #"tab\tapp"#, "production",
        "alert", #"\N"#, #"\N"#, #"\N"#, #"\N"#, #"\N"#, #"snap\t1\n\\x\r"#, #"\N"#, "success", #"\N"#, #"\N"#, #"\N"#,
        #"{"a\\"b","c\\\\d"}"#, "1", "f", "0.0", "[]", "321", "nul\u{FFFD}here", "relay-a",
    ].joined(separator: "\t") + "\n"

    @Test("a full record's COPY line, byte for byte")
    func fullRecordLine() {
        let line = Self.fullRecord().copyLine()
        #expect(String(decoding: line, as: UTF8.self) == Self.fullLineFormat3)
    }

    @Test("NULLs as \\N, and tab, newline, CR, backslash, NUL and quotes escaped, byte for byte")
    func awkwardRecordLine() {
        let line = Self.awkwardRecord().copyLine()
        #expect(String(decoding: line, as: UTF8.self) == Self.awkwardLineFormat3)
    }

    @Test("an unknown row's id is derived from its journal key, byte for byte as relays before have derived it")
    func derivedIDPinned() {
        // Computed by the String(format: "%016llx%016llx") version: a journal
        // recovered twice, by an older and a newer relay, must give one id.
        #expect(AuditRecord.derivedID("6e1f0a4c-0000-4000-8000-000000000001/1763800000000000000") == "4dfc4db8-b9aa-0928-4d35-777154deb304")
        #expect(AuditRecord.derivedID("a").utf8.count == 36)
    }

    @Test("appending to a batch buffer adds exactly the row's line after what is there")
    func appendsToBuffer() {
        var buffer = Array("previous\n".utf8)
        Self.fullRecord().appendCopyLine(to: &buffer)
        Self.awkwardRecord().appendCopyLine(to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "previous\n" + Self.fullLineFormat3 + Self.awkwardLineFormat3)
    }

    @Test("a dead-token upsert's COPY line, byte for byte, with and without APNs' timestamp")
    func deadTokenLine() throws {
        func line(_ milliseconds: Int64?) throws -> String {
            let event = SendEvent(
                send: SendDescriptor(app: "alpha", environment: .development, operation: .alert, apnsID: Self.apnsID), outcome: .rejected,
                status: 410, reason: "Unregistered", errorType: "Unregistered", attempts: 1, trapHits: [], latencySeconds: 0,
                startedAt: Self.startedAt, finishedAt: Self.finishedAt, apnsUniqueID: nil, unregisteredAt: milliseconds,
                dropsToken: true, attemptLog: [],
                deadToken: DeadToken(token: "ab\tcd", fingerprint: "fp-1", reason: "Unregistered", apnsTimestampMilliseconds: milliseconds))
            return String(decoding: try #require(DeadTokenRecord(event: event)).copyLine(), as: UTF8.self)
        }
        #expect(try line(1_763_700_000_000) == "alpha\tdevelopment\tab\\tcd\tfp-1\tUnregistered\t2025-11-21T04:40:00.000Z\t2025-11-22T08:26:40.123Z\t2025-11-22T08:26:40.123Z\n")
        #expect(try line(nil) == "alpha\tdevelopment\tab\\tcd\tfp-1\tUnregistered\t\\N\t2025-11-22T08:26:40.123Z\t2025-11-22T08:26:40.123Z\n")
    }

    @Test("integers, booleans and timestamps written straight into the line read as Swift and RFC3339 print them")
    func directFields() {
        let integers = [0, 7, 9, 10, 99, 100, 321, 1_000_000, -1, -10, -321, Int.max, Int.min]
        var writer = CopyLineWriter(line: [])
        for value in integers { writer.integer(value) }
        writer.integer(nil)
        writer.boolean(true)
        writer.boolean(false)
        let instants: [UInt64] = [0, 999_999, 1_000_000, Self.finishedAt, UInt64.max]
        for instant in instants { writer.timestamp(instant) }
        writer.timestamp(nil)
        writer.textArray([])
        writer.textArray(["a\"b"])
        let expected = integers.map(String.init) + ["\\N", "t", "f"] + instants.map(RFC3339.format(nanoseconds:)) + ["\\N", "{}", #"{"a\\"b"}"#]
        #expect(String(decoding: writer.finish(), as: UTF8.self) == expected.joined(separator: "\t") + "\n")
    }

    /// Sends for the intent's row: every optional set, every one nil, text to escape, and the factory's mix.
    static func intentSends() -> [SendDescriptor] {
        let full = fullRecord()
        let fullSend = SendDescriptor(
            app: full.app, environment: .development, operation: .notification, apnsID: apnsID, pushType: .liveactivity,
            priority: .conservePower, topic: full.topic, tokenFingerprint: full.tokenFingerprint, channelID: full.channelID,
            snapshotID: full.snapshotID, surfaceID: full.surfaceID, payloadBytes: 4096, caller: full.caller, traceID: full.traceID,
            idempotencyKeyHash: keyHash)
        let bare = SendDescriptor(app: "a", environment: .production, operation: .alert, apnsID: apnsID)
        let awkward = SendDescriptor(
            app: "tab\tapp", environment: .production, operation: .alert, apnsID: apnsID, topic: "t\\x\r", snapshotID: "snap\t1\n\\x\r",
            payloadBytes: 0, caller: "nul\u{0}here", traceID: "é", idempotencyKeyHash: "k\tk")
        return [fullSend, bare, awkward] + (0..<12).map { EventFactory.event($0).send }
    }

    @Test("an intent's row written from the send is AuditRecord(intent:)'s line, byte for byte")
    func intentLineFromSend() throws {
        #expect(AuditRowLayout.standard.intentPlan != nil)
        for send in Self.intentSends() {
            for startedAt: UInt64 in [0, 9, Self.startedAt, UInt64.max] {
                let key = AuditJournalKey(apnsID: send.apnsID.value, startedAt: startedAt)
                var line = Array("previous\t".utf8)
                AuditRowLayout.standard.appendIntentLine(send, startedAt: startedAt, key: key.bytes, relayInstance: "relay\tb", to: &line)
                let record = AuditRecord(intent: send, startedAt: startedAt, relayInstance: "relay\tb")
                #expect(String(decoding: line, as: UTF8.self) == "previous\t" + String(decoding: record.copyLine(), as: UTF8.self))
            }
        }
    }

    @Test("a layout whose columns do not say what an intent holds builds the intent's row through AuditRecord")
    func intentLineWithoutPlan() {
        let layout = AuditRowLayout.withoutPlans
        #expect(layout.intentPlan == nil)
        let send = Self.intentSends()[0]
        let key = AuditJournalKey(apnsID: send.apnsID.value, startedAt: Self.startedAt)
        var line: [UInt8] = []
        layout.appendIntentLine(send, startedAt: Self.startedAt, key: key.bytes, relayInstance: "r", to: &line)
        let id = AuditRecord.derivedID(key.text)
        // attempts 1: the intent is journaled just before the first attempt leaves (issue 28.3).
        #expect(String(decoding: line, as: UTF8.self) == "\(id)\tunknown\t1\n")
    }

    @Test("the journal key's text is `apns-id/started-at`, the start as Swift prints it, byte for byte")
    func journalKeyBytes() {
        for startedAt: UInt64 in [0, 1, 9, 10, 99, 100, 1_000_000_007, Self.startedAt, UInt64.max] {
            let key = AuditJournalKey(apnsID: Self.apnsID.value, startedAt: startedAt)
            #expect(key.text == "\(Self.apnsID.value)/\(startedAt)")
            var appended = Array("previous".utf8)
            key.append(to: &appended)
            #expect(appended == Array("previous".utf8) + key.bytes)
        }
        var id: [UInt8] = []
        AuditRecord.appendDerivedID(of: Array("6e1f0a4c-0000-4000-8000-000000000001/1763800000000000000".utf8), to: &id)
        #expect(String(decoding: id, as: UTF8.self) == "4dfc4db8-b9aa-0928-4d35-777154deb304")
    }

    @Test("the attempt log is the JSON a JSONValue array of objects encodes")
    func attemptLogJSON() {
        let logs: [[AttemptSummary]] = [
            [],
            [AttemptSummary(status: 200, reason: nil, durationSeconds: 0.00325)],
            [
                AttemptSummary(status: 429, reason: "Too\"Many\\Requests\n", durationSeconds: 0.0040004),
                AttemptSummary(status: nil, reason: "transport_timeout é", durationSeconds: 12.5),
                AttemptSummary(status: 503, reason: nil, durationSeconds: 1e-9),
                AttemptSummary(status: 200, reason: "\u{1}", durationSeconds: 1e13),
            ],
        ]
        for log in logs {
            let expected = JSONValue.array(log.map { attempt in
                var entry = JSONObject()
                entry["status"] = attempt.status.map { .integer(Int64($0)) } ?? .null
                entry["reason"] = attempt.reason.map { .string($0) } ?? .null
                entry["duration_ms"] = .double((attempt.durationSeconds * 1000 * 1000).rounded() / 1000)
                return .object(entry)
            }).encodedString()
            #expect(AuditRecord.attemptLogJSON(log) == expected)
        }
    }
}
