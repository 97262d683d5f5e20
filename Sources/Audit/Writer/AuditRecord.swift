import APNs
public import Relay
import RelayJSON
import RelayBasics

/// One row of `apns_audit`, built from a finished send.
///
/// The row's id and `recorded_at` are fixed when the record is made, so the
/// same record written twice (a COPY whose acknowledgement was lost, then
/// replayed from the spool) is the same primary key and lands once.
public struct AuditRecord: Sendable, Hashable {
    public var id: String
    public var recordedAtNanoseconds: UInt64
    public var startedAtNanoseconds: UInt64
    public var finishedAtNanoseconds: UInt64
    public var apnsID: String
    public var apnsUniqueID: String?
    public var traceID: String?
    public var app: String
    public var environment: String
    public var operation: String
    public var pushType: String?
    public var priority: Int?
    public var topic: String?
    public var tokenFingerprint: String?
    public var channelID: String?
    public var snapshotID: String?
    public var surfaceID: String?
    public var outcome: String
    public var status: Int?
    public var reason: String?
    public var errorType: String?
    public var trapIDs: [String]
    public var attempts: Int
    public var retried: Bool
    public var latencyMilliseconds: Double
    /// `[{"status":…,"reason":…,"duration_ms":…}, …]`
    public var attemptLog: String
    public var payloadBytes: Int
    public var caller: String?
    public var relayInstance: String

    /// The table's columns in COPY order.
    public static let columns = [
        "id", "recorded_at", "started_at", "finished_at", "apns_id", "apns_unique_id", "trace_id", "app",
        "environment", "operation", "push_type", "priority", "topic", "token_fingerprint", "channel_id", "snapshot_id",
        "surface_id", "outcome", "status", "reason", "error_type", "trap_ids", "attempts", "retried", "latency_ms",
        "attempt_log", "payload_bytes", "caller", "relay_instance",
    ]

    public init(event: SendEvent, relayInstance: String) {
        id = APNsID.random().value
        recordedAtNanoseconds = event.finishedAt
        startedAtNanoseconds = event.startedAt
        finishedAtNanoseconds = event.finishedAt
        apnsID = event.send.apnsID.value
        apnsUniqueID = event.apnsUniqueID
        traceID = event.send.traceID
        app = event.send.app
        environment = event.send.environment.rawValue
        operation = event.send.operation.rawValue
        pushType = event.send.pushType?.rawValue
        priority = event.send.priority?.rawValue
        topic = event.send.topic
        tokenFingerprint = event.send.tokenFingerprint
        channelID = event.send.channelID
        snapshotID = event.send.snapshotID
        surfaceID = event.send.surfaceID
        outcome = event.outcome.rawValue
        status = event.status
        reason = event.reason
        errorType = event.errorType
        trapIDs = event.trapHits.map(\.rawValue)
        attempts = event.attempts
        retried = event.retried
        latencyMilliseconds = event.latencySeconds * 1000
        attemptLog = JSONValue.array(event.attemptLog.map { attempt in
            var entry = JSONObject()
            entry["status"] = attempt.status.map { .integer(Int64($0)) } ?? .null
            entry["reason"] = attempt.reason.map { .string($0) } ?? .null
            entry["duration_ms"] = .double((attempt.durationSeconds * 1000 * 1000).rounded() / 1000)
            return .object(entry)
        }).encodedString()
        payloadBytes = event.send.payloadBytes
        caller = event.send.caller
        self.relayInstance = relayInstance
    }

    /// The row a send gets when the relay stopped (crash, SIGKILL, a drain
    /// that could not wait) between its intent and its result: outcome
    /// `unknown`, attempts 0, error type `relay_stopped`. APNs may or may not
    /// have delivered it. The id is derived from the journal key, so the same
    /// intent recovered twice is the same primary key and lands once.
    public init(intent send: SendDescriptor, startedAt: UInt64, relayInstance: String) {
        let key = Self.journalKey(apnsID: send.apnsID.value, startedAt: startedAt)
        id = Self.derivedID(key)
        recordedAtNanoseconds = startedAt
        startedAtNanoseconds = startedAt
        finishedAtNanoseconds = startedAt
        apnsID = send.apnsID.value
        apnsUniqueID = nil
        traceID = send.traceID
        app = send.app
        environment = send.environment.rawValue
        operation = send.operation.rawValue
        pushType = send.pushType?.rawValue
        priority = send.priority?.rawValue
        topic = send.topic
        tokenFingerprint = send.tokenFingerprint
        channelID = send.channelID
        snapshotID = send.snapshotID
        surfaceID = send.surfaceID
        outcome = Self.unknownOutcome
        status = nil
        reason = nil
        errorType = "relay_stopped"
        trapIDs = []
        attempts = 0
        retried = false
        latencyMilliseconds = 0
        attemptLog = "[]"
        payloadBytes = send.payloadBytes
        caller = send.caller
        self.relayInstance = relayInstance
    }

    /// The outcome of a send whose result the relay never recorded.
    public static let unknownOutcome = "unknown"

    /// What ties a send's intent to its completion in the journal: one
    /// logical send is one apns-id started at one instant.
    static func journalKey(apnsID: String, startedAt: UInt64) -> String { "\(apnsID)/\(startedAt)" }

    /// A UUID-shaped id computed from `key` (two FNV-1a 64-bit hashes).
    static func derivedID(_ key: String) -> String {
        func fnv(_ seed: UInt64) -> UInt64 {
            var hash = seed
            for byte in key.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            return hash
        }
        let high = fnv(0xcbf2_9ce4_8422_2325)
        let low = fnv(0x84222325_cbf29ce4 ^ 0x5bd1_e995)
        let hex = String(format: "%016llx%016llx", high, low)
        let characters = Array(hex)
        func part(_ range: Range<Int>) -> String { String(characters[range]) }
        return [part(0..<8), part(8..<12), part(12..<16), part(16..<20), part(20..<32)].joined(separator: "-")
    }

    /// The row as one line of `COPY … FROM STDIN` text format.
    public func copyLine() -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(512)
        appendCopyLine(to: &line)
        return line
    }

    /// Appends the row's COPY line to a batch buffer.
    ///
    /// Field by field into the buffer, with no array of strings in between:
    /// the writer thread shares two cores with Postgres, so every microsecond
    /// spent here is one the COPY does not get.
    public func appendCopyLine(to line: inout [UInt8]) {
        var writer = CopyLineWriter(line: line)
        line = []
        writer.text(id)
        writer.text(CopyText.timestamp(recordedAtNanoseconds))
        writer.text(CopyText.timestamp(startedAtNanoseconds))
        writer.text(CopyText.timestamp(finishedAtNanoseconds))
        writer.text(apnsID)
        writer.text(apnsUniqueID)
        writer.text(traceID)
        writer.text(app)
        writer.text(environment)
        writer.text(operation)
        writer.text(pushType)
        writer.integer(priority)
        writer.text(topic)
        writer.text(tokenFingerprint)
        writer.text(channelID)
        writer.text(snapshotID)
        writer.text(surfaceID)
        writer.text(outcome)
        writer.integer(status)
        writer.text(reason)
        writer.text(errorType)
        writer.text(CopyText.array(trapIDs))
        writer.integer(attempts)
        writer.text(retried ? "t" : "f")
        writer.text(String(latencyMilliseconds))
        writer.text(attemptLog)
        writer.integer(payloadBytes)
        writer.text(caller)
        writer.text(relayInstance)
        line = writer.finish()
    }
}

/// One upsert into `apns_dead_tokens`.
public struct DeadTokenRecord: Sendable, Hashable {
    public var app: String
    public var environment: String
    public var token: String
    public var fingerprint: String
    public var reason: String
    public var apnsTimestampMilliseconds: Int64?
    public var seenAtNanoseconds: UInt64

    public static let columns = ["app", "environment", "token", "token_fingerprint", "reason", "apns_timestamp", "first_seen", "last_seen"]

    public init?(event: SendEvent) {
        guard let dead = event.deadToken else { return nil }
        app = event.send.app
        environment = event.send.environment.rawValue
        token = dead.token
        fingerprint = dead.fingerprint
        reason = dead.reason
        apnsTimestampMilliseconds = dead.apnsTimestampMilliseconds
        seenAtNanoseconds = event.finishedAt
    }

    public func copyLine() -> [UInt8] {
        var line: [UInt8] = []
        let seen = CopyText.timestamp(seenAtNanoseconds)
        CopyText.appendLine(
            [app, environment, token, fingerprint, reason,
             apnsTimestampMilliseconds.map { CopyText.timestamp(UInt64(max(0, $0)) * 1_000_000) }, seen, seen],
            to: &line)
        return line
    }
}

/// PostgreSQL COPY text format.
enum CopyText {
    static func appendLine(_ fields: [String?], to line: inout [UInt8]) {
        var writer = CopyLineWriter(line: line)
        line = []
        for field in fields { writer.text(field) }
        line = writer.finish()
    }

    static func timestamp(_ nanoseconds: UInt64) -> String {
        RFC3339.format(nanoseconds: nanoseconds)
    }

    /// A text[] literal: every element double-quoted, `"` and `\` escaped.
    static func array(_ values: [String]) -> String {
        "{" + values.map { value in
            "\"" + value.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
    }
}

/// Builds one COPY text line: fields separated by tabs, `\N` for NULL,
/// backslash, newline, carriage return and tab escaped.
///
/// A NUL character cannot be stored in a Postgres `text` value at all (COPY
/// refuses the whole batch with "invalid byte sequence for encoding UTF8:
/// 0x00"), so it is written as U+FFFD, the Unicode replacement character:
/// the row lands, and the replacement shows where the input was odd.
struct CopyLineWriter {
    private var line: [UInt8]
    private var first = true

    init(line: [UInt8]) { self.line = line }

    private mutating func separate() {
        if first { first = false } else { line.append(0x09) }
    }

    mutating func text(_ value: String?) {
        separate()
        guard var value else {
            line.append(contentsOf: [0x5C, UInt8(ascii: "N")])
            return
        }
        value.withUTF8 { bytes in
            // Most fields need no escaping: copy them whole.
            if !bytes.contains(where: { $0 == 0x5C || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 || $0 == 0x00 }) {
                line.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case 0x5C: line.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: line.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: line.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: line.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x00: line.append(contentsOf: [0xEF, 0xBF, 0xBD])  // U+FFFD
                default: line.append(byte)
                }
            }
        }
    }

    mutating func integer(_ value: Int?) {
        text(value.map(String.init))
    }

    mutating func finish() -> [UInt8] {
        line.append(0x0A)
        return line
    }
}
