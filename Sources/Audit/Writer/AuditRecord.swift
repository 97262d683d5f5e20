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
    /// SHA-256 hex of the caller and its `Idempotency-Key` (row format 2); nil without a key.
    public var idempotencyKeyHash: String?
    /// APNs' `timestamp` of a 410 Unregistered answer, milliseconds since the
    /// epoch (row format 3, column `apns_timestamp`); nil for any other outcome.
    public var unregisteredAtMilliseconds: Int64?

    /// The table's columns in COPY order (``AuditRowLayout/standard``).
    public static let columns = AuditRowLayout.standard.columns.map(\.name)

    public init(event: SendEvent, relayInstance: String) {
        id = {
            var text: [UInt8] = []
            text.reserveCapacity(36)
            AuditRowID.appendNext(to: &text)
            return String(decoding: text, as: UTF8.self)
        }()
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
        attemptLog = Self.attemptLogJSON(event.attemptLog)
        payloadBytes = event.send.payloadBytes
        caller = event.send.caller
        self.relayInstance = relayInstance
        idempotencyKeyHash = event.send.idempotencyKeyHash
        unregisteredAtMilliseconds = event.unregisteredAt
    }

    /// The row a send gets when the relay stopped (crash, SIGKILL, a drain
    /// that could not wait) between its intent and its result: outcome
    /// `unknown`, error type `relay_stopped`. APNs may or may not have
    /// delivered it. `attempts` is how many attempts may have reached APNs:
    /// 1 from the intent (journaled just before the first attempt leaves),
    /// more from a retry's record (``AuditWriter/sendRetrying(_:startedAt:attempt:)``).
    /// The id is derived from the journal key, so the same intent recovered
    /// twice is the same primary key and lands once.
    public init(intent send: SendDescriptor, startedAt: UInt64, relayInstance: String, attempts: Int = 1) {
        id = Self.derivedID(AuditJournalKey(apnsID: send.apnsID.value, startedAt: startedAt).text)
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
        self.attempts = attempts
        retried = attempts > 1
        latencyMilliseconds = 0
        attemptLog = "[]"
        payloadBytes = send.payloadBytes
        caller = send.caller
        self.relayInstance = relayInstance
        idempotencyKeyHash = send.idempotencyKeyHash
        unregisteredAtMilliseconds = nil
    }

    /// A timestamp of milliseconds since the epoch as COPY's nanoseconds (none before 1970).
    static func nanoseconds(milliseconds: Int64) -> UInt64 {
        UInt64(max(0, milliseconds)) * 1_000_000
    }

    /// The outcome of a send whose result the relay never recorded.
    public static let unknownOutcome = "unknown"

    /// A UUID-shaped id computed from `key` (two FNV-1a 64-bit hashes).
    static func derivedID(_ key: String) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(36)
        appendDerivedID(of: key.utf8, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends ``derivedID(_:)`` of the key whose UTF-8 bytes are `key`:
    /// the journal writes an intent's row id straight from its key's bytes.
    static func appendDerivedID(of key: some Collection<UInt8>, to text: inout [UInt8]) {
        let words = derivedIDWords(of: key)
        appendDerivedID(high: words.high, low: words.low, to: &text)
    }

    /// The two FNV-1a 64-bit hashes ``derivedID(_:)`` spells out.
    static func derivedIDWords(of key: some Collection<UInt8>) -> (high: UInt64, low: UInt64) {
        var high: UInt64 = 0xcbf2_9ce4_8422_2325
        var low: UInt64 = 0x84222325_cbf29ce4 ^ 0x5bd1_e995
        for byte in key {
            high = (high ^ UInt64(byte)) &* 0x100_0000_01b3
            low = (low ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return (high, low)
    }

    /// Appends the id of ``derivedIDWords(of:)``: `high`'s bytes then
    /// `low`'s, most significant first, as hex, 8-4-4-4-12. The 36 bytes on
    /// the stack and one append (a byte at a time into `text`, through an
    /// array of the two words, was ~1,600 instructions an intent).
    static func appendDerivedID(high: UInt64, low: UInt64, to text: inout [UInt8]) {
        // Most significant byte first: Hex.appendUUID takes each word low byte first.
        Hex.appendUUID(high: high.byteSwapped, low: low.byteSwapped, to: &text)
    }

    /// `[{"status":…,"reason":…,"duration_ms":…}, …]`: each value through
    /// RelayJSON's encoder, as a `JSONValue` array of objects would encode
    /// them, without building that array (a quarter of this record's cost).
    static func attemptLogJSON(_ attempts: [AttemptSummary]) -> String {
        guard !attempts.isEmpty else { return "[]" }
        var text: [UInt8] = []
        text.reserveCapacity(64 * attempts.count)
        appendAttemptLogJSON(attempts, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends ``attemptLogJSON(_:)``'s bytes to `text`: a completion's row
    /// writes them straight into its COPY line.
    static func appendAttemptLogJSON(_ attempts: [AttemptSummary], to text: inout [UInt8]) {
        // The fixed text from static strings' bytes in place: appending a
        // String's UTF8View went through its generic copy (~170
        // instructions each, three per attempt).
        func literal(_ text: StaticString, to bytes: inout [UInt8]) {
            text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        }
        text.append(UInt8(ascii: "["))
        for (index, attempt) in attempts.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            literal(#"{"status":"#, to: &text)
            // An integer's JSON is its decimal digits (`JSONValue.integer`
            // printed them through a String of their own).
            if let status = attempt.status { DecimalDigits.append(status, to: &text) } else { literal("null", to: &text) }
            literal(#","reason":"#, to: &text)
            if let reason = attempt.reason { JSONValue.string(jsonbSafe(reason)).encode(into: &text) } else { literal("null", to: &text) }
            literal(#","duration_ms":"#, to: &text)
            // The bytes `JSONValue.double` encodes, with no String in between.
            JSONValue.appendNumber((attempt.durationSeconds * 1000 * 1000).rounded() / 1000, to: &text)
            text.append(UInt8(ascii: "}"))
        }
        text.append(UInt8(ascii: "]"))
    }

    /// `text` with each NUL as U+FFFD. A reason is APNs' text, verbatim when
    /// the catalog does not know it, so an APNs (or a proxy) answering
    /// `{"reason":"…\u0000…"}` puts a NUL in it; JSON writes that as
    /// `\u0000`, which `jsonb` refuses (SQLSTATE 22P05), and the send's row
    /// was quarantined instead of written. The text columns store a NUL the
    /// same way (``CopyLineWriter/text(_:)``).
    static func jsonbSafe(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\u{0}" ? "\u{FFFD}" : $0 }))
    }

    /// The row as one line of `COPY … FROM STDIN` text format.
    public func copyLine() -> [UInt8] { AuditRowLayout.standard.line(self) }

    /// Appends the row's COPY line (every column of ``AuditRowLayout/standard``) to a batch buffer.
    public func appendCopyLine(to line: inout [UInt8]) {
        AuditRowLayout.standard.appendLine(self, to: &line)
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

    /// `apns_dead_tokens` as the writer fills it, in COPY order. Its lines
    /// have had one layout so far: a change here needs row formats as
    /// ``AuditRowLayout`` has them.
    static let layout: [CopyColumn<DeadTokenRecord>] = [
        CopyColumn("app") { $1.text($0.app) },
        CopyColumn("environment") { $1.text($0.environment) },
        CopyColumn("token") { $1.text($0.token) },
        CopyColumn("token_fingerprint") { $1.text($0.fingerprint) },
        CopyColumn("reason") { $1.text($0.reason) },
        CopyColumn("apns_timestamp") { $1.timestamp($0.apnsTimestampMilliseconds.map { UInt64(max(0, $0)) * 1_000_000 }) },
        CopyColumn("first_seen") { $1.timestamp($0.seenAtNanoseconds) },
        CopyColumn("last_seen") { $1.timestamp($0.seenAtNanoseconds) },
    ]

    public static let columns = layout.map(\.name)

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

    /// The text of field `column` in a dead-token COPY line (escapes kept).
    static func field(_ column: String, of line: [UInt8]) -> String? {
        columns.firstIndex(of: column).flatMap { CopyText.field($0, of: line) }
    }

    public func copyLine() -> [UInt8] {
        var writer = CopyLineWriter(line: [])
        for column in Self.layout { column.write(self, &writer) }
        return writer.finish()
    }
}
