import APNs
import Relay
import RelayJSON

/// The journal's send records (``AuditSpool/Kind/sendIntent``,
/// ``AuditSpool/Kind/sendCompletion``): the send's and the event's values
/// as bytes, not as the COPY line they become.
///
/// Why not the line: a line is formatted (every string scanned for escapes,
/// three timestamps and a double turned into text, the attempt log into
/// JSON) on the sending task, once for the intent and once for the
/// completion, while a send's rest of the path waits for the pool's two
/// threads; and that formatting code, run once per send between the
/// request's and the answer's, is cold in the instruction cache every time
/// (issue 26: the audit's share cost twice its instructions). Here the
/// sending task copies the values (lengths and bytes, fixed-width numbers);
/// the writer thread formats the finished send's line when it takes the
/// row, one batch after another, and an intent's `unknown` row is formatted
/// only by recovery, for a send whose completion never came.
///
/// Every record is self-contained (a completion carries its send too), so
/// recovery needs no intent to read a completion. The dead token's own
/// value is never here: it stays in its dead-token record.
///
/// Layout, after the record's `key TAB`: a version byte (``version``),
/// then fields in a fixed order. Numbers are little-endian, 8 bytes;
/// strings are a length (LEB128 of length + 1; 0 is nil) and their UTF-8
/// bytes; an optional number is a byte (0 nil, 1 present) and the number.
enum JournalSendCodec {
    /// The version this build writes and reads. A record of another
    /// version (a newer relay's) is not read: recovery fails and keeps the
    /// journal on disk for a build that can.
    static let version: UInt8 = 1

    /// A record this build cannot read.
    struct Unreadable: Error, CustomStringConvertible {
        var what: String
        var description: String { "an audit journal record this build cannot read: \(what)" }
    }

    // MARK: - Writing

    /// Appends an intent's values: the send, its start, which attempt is
    /// about to leave (1, or a retry's number), and the relay instance. The
    /// values alone, as a record holds them after its `key TAB`: the journal
    /// writes whole records (``intentRecord(_:startedAt:attempts:relayInstance:key:format:)``);
    /// the recovery tests build journals of their own shapes from these.
    static func appendIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int, relayInstance: String, to bytes: inout [UInt8]) {
        Writer.append(intentSize(send, relayInstance: relayInstance), to: &bytes) { writer in
            writeIntent(send, startedAt: startedAt, attempts: attempts, relayInstance: relayInstance, to: &writer)
        }
    }

    /// Appends a finished send's values: the row's id, the relay instance,
    /// the send and every value of the event its row holds (the values
    /// alone, as ``appendIntent(_:startedAt:attempts:relayInstance:to:)``).
    static func appendCompletion(_ event: SendEvent, id: AuditRowID.Words, relayInstance: String, to bytes: inout [UInt8]) {
        Writer.append(completionSize(event, relayInstance: relayInstance), to: &bytes) { writer in
            writeCompletion(event, id: id, relayInstance: relayInstance, to: &writer)
        }
    }

    /// A whole intent record, ready for the journal: the spool's framing
    /// (``AuditSpool/frameRecord(kind:format:in:)``), `key TAB` and the
    /// values of ``appendIntent(_:startedAt:attempts:relayInstance:to:)``,
    /// sized first and written into one buffer of that size, so the sending
    /// task makes one allocation and no copy of them (issue 26: the values'
    /// own buffer and its copy into the record were ~900 instructions a record).
    static func intentRecord(
        _ send: SendDescriptor, startedAt: UInt64, attempts: Int, relayInstance: String, key: AuditJournalKey, format: AuditRowFormat
    ) -> [UInt8] {
        Writer.record(kind: .sendIntent, format: format, key: key, size: intentSize(send, relayInstance: relayInstance)) { writer in
            writeIntent(send, startedAt: startedAt, attempts: attempts, relayInstance: relayInstance, to: &writer)
        }
    }

    /// ``intentRecord(_:startedAt:attempts:relayInstance:key:format:)`` for
    /// a finished send: the values of ``appendCompletion(_:id:relayInstance:to:)``.
    static func completionRecord(
        _ event: SendEvent, id: AuditRowID.Words, relayInstance: String, key: AuditJournalKey, format: AuditRowFormat
    ) -> [UInt8] {
        Writer.record(kind: .sendCompletion, format: format, key: key, size: completionSize(event, relayInstance: relayInstance)) { writer in
            writeCompletion(event, id: id, relayInstance: relayInstance, to: &writer)
        }
    }

    private static func intentSize(_ send: SendDescriptor, relayInstance: String) -> Int {
        1 + 8 + 8 + Writer.size(relayInstance) + Writer.size(send)
    }

    private static func writeIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int, relayInstance: String, to writer: inout Writer) {
        writer.byte(version)
        writer.number(startedAt)
        writer.number(UInt64(bitPattern: Int64(attempts)))
        writer.string(relayInstance)
        writer.send(send)
    }

    private static func completionSize(_ event: SendEvent, relayInstance: String) -> Int {
        var size = 1 + 16 + Writer.size(relayInstance) + Writer.size(event.send)
        size += Writer.size(event.outcome.rawValue) + Writer.size(event.status) + Writer.size(event.reason) + Writer.size(event.errorType) + 8
        size += Writer.lengthSize(event.trapHits.count)
        for trap in event.trapHits { size += Writer.size(trap.rawValue) }
        size += 8 + 8 + 8 + Writer.size(event.apnsUniqueID) + Writer.size(event.unregisteredAt.map(Int.init)) + 1
        size += Writer.lengthSize(event.attemptLog.count)
        for attempt in event.attemptLog { size += Writer.size(attempt.status) + Writer.size(attempt.reason) + 8 }
        return size
    }

    private static func writeCompletion(_ event: SendEvent, id: AuditRowID.Words, relayInstance: String, to writer: inout Writer) {
        writer.byte(version)
        writer.number(id.high)
        writer.number(id.low)
        writer.string(relayInstance)
        writer.send(event.send)
        writer.string(event.outcome.rawValue)
        writer.optional(event.status)
        writer.string(event.reason)
        writer.string(event.errorType)
        writer.number(UInt64(bitPattern: Int64(event.attempts)))
        writer.length(event.trapHits.count)
        for trap in event.trapHits { writer.string(trap.rawValue) }
        writer.number(event.latencySeconds.bitPattern)
        writer.number(event.startedAt)
        writer.number(event.finishedAt)
        writer.string(event.apnsUniqueID)
        writer.optional(event.unregisteredAt.map(Int.init))
        writer.byte(event.dropsToken ? 1 : 0)
        writer.length(event.attemptLog.count)
        for attempt in event.attemptLog {
            writer.optional(attempt.status)
            writer.string(attempt.reason)
            writer.number(attempt.durationSeconds.bitPattern)
        }
    }

    /// Writes a record's values through a pointer into room made for them
    /// at once: sized first (a native string's UTF-8 count is stored, not
    /// counted), then each field stored or copied with no capacity check,
    /// about a quarter of the instructions of appending field by field.
    private struct Writer {
        var cursor: UnsafeMutablePointer<UInt8>
        let end: UnsafeMutablePointer<UInt8>

        /// Appends `size` bytes to `bytes`, written by `body`, which must write exactly that many.
        static func append(_ size: Int, to bytes: inout [UInt8], _ body: (inout Writer) -> Void) {
            // Written into a buffer of its own, then copied (one `memcpy`):
            // an array's tail cannot be grown uninitialized.
            let values = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                var writer = Writer(cursor: buffer.baseAddress!, end: buffer.baseAddress! + size)
                body(&writer)
                precondition(writer.cursor == writer.end, "a journal record's size was miscounted")
                count = size
            }
            bytes.append(contentsOf: values)
        }

        /// A whole record of `kind`: its head, `key TAB`, then `size` bytes
        /// of values written by `body`, which must write exactly that many.
        static func record(kind: AuditSpool.Kind, format: AuditRowFormat, key: AuditJournalKey, size: Int, _ body: (inout Writer) -> Void) -> [UInt8] {
            // The key's text as ``AuditJournalKey/append(to:)`` writes it: `apns-id/started-at`.
            let digits = DecimalDigits.count(key.startedAt)
            let total = AuditSpool.recordHeadSize + key.apnsID.utf8.count + 1 + digits + 1 + size
            return [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
                let base = buffer.baseAddress!
                var writer = Writer(cursor: base + AuditSpool.recordHeadSize, end: base + total)
                writer.raw(key.apnsID)
                writer.byte(UInt8(ascii: "/"))
                writer.digits(key.startedAt, count: digits)
                writer.byte(0x09)
                body(&writer)
                precondition(writer.cursor == writer.end, "a journal record's size was miscounted")
                AuditSpool.frameRecord(kind: kind, format: format, in: UnsafeMutableBufferPointer(start: base, count: total))
                count = total
            }
        }

        static func lengthSize(_ count: Int) -> Int {
            var value = UInt64(count) &+ 1
            var size = 1
            while value >= 0x80 {
                value >>= 7
                size += 1
            }
            return size
        }

        static func size(_ string: String?) -> Int {
            guard let string else { return 1 }
            let count = string.utf8.count
            return lengthSize(count) + count
        }

        static func size(_ value: Int?) -> Int { value == nil ? 1 : 9 }

        static func size(_ send: SendDescriptor) -> Int {
            size(send.app) + size(send.environment.rawValue) + size(send.operation.rawValue) + size(send.apnsID.value)
                + size(send.pushType?.rawValue) + size(send.priority?.rawValue) + size(send.topic) + size(send.tokenFingerprint) + size(send.channelID)
                + size(send.snapshotID) + size(send.surfaceID) + 8 + size(send.caller) + size(send.traceID)
                + size(send.idempotencyKeyHash)
        }

        mutating func byte(_ value: UInt8) {
            precondition(cursor < end, "a journal record's size was miscounted")
            cursor.pointee = value
            cursor += 1
        }

        mutating func number(_ value: UInt64) {
            precondition(end - cursor >= 8, "a journal record's size was miscounted")
            UnsafeMutableRawPointer(cursor).storeBytes(of: value.littleEndian, as: UInt64.self)
            cursor += 8
        }

        mutating func optional(_ value: Int?) {
            guard let value else { return byte(0) }
            byte(1)
            number(UInt64(bitPattern: Int64(value)))
        }

        /// LEB128 of `count + 1`: one byte below 127.
        mutating func length(_ count: Int) {
            var value = UInt64(count) &+ 1
            while value >= 0x80 {
                byte(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            byte(UInt8(value))
        }

        /// A string: its length (nil: 0), then its bytes.
        mutating func string(_ string: String?) {
            guard let string else { return byte(0) }
            Self.withBytes(of: string) { utf8 in
                length(utf8.count)
                copy(utf8)
            }
        }

        /// A string's bytes with no length before them (the key's apns-id).
        mutating func raw(_ string: String) {
            Self.withBytes(of: string) { copy($0) }
        }

        /// `body` with `string`'s UTF-8: native and small strings lend their
        /// bytes without a copy of the string (`withUTF8` on a `var` copy
        /// cost twice as much); any other is copied first.
        @inline(__always)
        private static func withBytes(of string: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
            let lent: Void? = string.utf8.withContiguousStorageIfAvailable(body)
            if lent == nil { Array(string.utf8).withUnsafeBufferPointer(body) }
        }

        mutating func digits(_ value: UInt64, count: Int) {
            precondition(end - cursor >= count, "a journal record's size was miscounted")
            DecimalDigits.write(value, count: count, to: cursor)
            cursor += count
        }

        private mutating func copy(_ utf8: some Collection<UInt8>) {
            precondition(end - cursor >= utf8.count, "a journal record's size was miscounted")
            let written = UnsafeMutableBufferPointer(start: cursor, count: utf8.count).initialize(fromContentsOf: utf8)
            cursor += written
        }

        mutating func send(_ send: SendDescriptor) {
            string(send.app)
            string(send.environment.rawValue)
            string(send.operation.rawValue)
            string(send.apnsID.value)
            string(send.pushType?.rawValue)
            optional(send.priority?.rawValue)
            string(send.topic)
            string(send.tokenFingerprint)
            string(send.channelID)
            string(send.snapshotID)
            string(send.surfaceID)
            number(UInt64(bitPattern: Int64(send.payloadBytes)))
            string(send.caller)
            string(send.traceID)
            string(send.idempotencyKeyHash)
        }
    }

    // MARK: - Reading

    /// An intent's values, as ``appendIntent(_:startedAt:attempts:relayInstance:to:)`` wrote them.
    struct Intent {
        var send: SendDescriptor
        var startedAt: UInt64
        var attempts: Int
        var relayInstance: String
    }

    /// A finished send's values, as ``appendCompletion(_:id:relayInstance:to:)``
    /// wrote them (its dead token is not among them: nil).
    struct Completion {
        var event: SendEvent
        var id: AuditRowID.Words
        var relayInstance: String
    }

    static func readIntent(_ bytes: ArraySlice<UInt8>) throws(Unreadable) -> Intent {
        var reader = Reader(bytes: bytes)
        try reader.expectVersion()
        let startedAt = try reader.number("started_at")
        let attempts = try reader.integer("attempts")
        let relayInstance = try reader.string("relay_instance")
        let send = try reader.send()
        try reader.expectEnd()
        return Intent(send: send, startedAt: startedAt, attempts: attempts, relayInstance: relayInstance)
    }

    static func readCompletion(_ bytes: ArraySlice<UInt8>) throws(Unreadable) -> Completion {
        var reader = Reader(bytes: bytes)
        try reader.expectVersion()
        let id = AuditRowID.Words(high: try reader.number("id"), low: try reader.number("id"))
        let relayInstance = try reader.string("relay_instance")
        let send = try reader.send()
        let outcomeText = try reader.string("outcome")
        guard let outcome = SendOutcome(rawValue: outcomeText) else { throw Unreadable(what: "outcome \(outcomeText)") }
        let status = try reader.optionalInteger("status")
        let reason = try reader.optionalString("reason")
        let errorType = try reader.optionalString("error_type")
        let attempts = try reader.integer("attempts")
        var trapHits: [TrapID] = []
        for _ in 0..<(try reader.count("trap_ids")) { trapHits.append(TrapID(rawValue: try reader.string("trap_ids"))) }
        let latency = Double(bitPattern: try reader.number("latency"))
        let startedAt = try reader.number("started_at")
        let finishedAt = try reader.number("finished_at")
        let apnsUniqueID = try reader.optionalString("apns_unique_id")
        let unregisteredAt = try reader.optionalInteger("unregistered_at").map(Int64.init)
        let dropsToken = try reader.byte("drops_token") != 0
        var attemptLog: [AttemptSummary] = []
        for _ in 0..<(try reader.count("attempt_log")) {
            let status = try reader.optionalInteger("attempt_log")
            let reason = try reader.optionalString("attempt_log")
            let duration = Double(bitPattern: try reader.number("attempt_log"))
            attemptLog.append(AttemptSummary(status: status, reason: reason, durationSeconds: duration))
        }
        try reader.expectEnd()
        let event = SendEvent(
            send: send, outcome: outcome, status: status, reason: reason, errorType: errorType, attempts: attempts,
            trapHits: trapHits, latencySeconds: latency, startedAt: startedAt, finishedAt: finishedAt,
            apnsUniqueID: apnsUniqueID, unregisteredAt: unregisteredAt, dropsToken: dropsToken, attemptLog: attemptLog,
            deadToken: nil)
        return Completion(event: event, id: id, relayInstance: relayInstance)
    }

    /// Reads fields in order; every read checks the bytes are there.
    private struct Reader {
        var bytes: ArraySlice<UInt8>

        mutating func expectVersion() throws(Unreadable) {
            let found = try byte("version")
            guard found == JournalSendCodec.version else { throw Unreadable(what: "version \(found), this build reads \(JournalSendCodec.version)") }
        }

        func expectEnd() throws(Unreadable) {
            guard bytes.isEmpty else { throw Unreadable(what: "\(bytes.count) bytes after the last field") }
        }

        mutating func byte(_ field: String) throws(Unreadable) -> UInt8 {
            guard let first = bytes.popFirst() else { throw Unreadable(what: "\(field) cut short") }
            return first
        }

        mutating func number(_ field: String) throws(Unreadable) -> UInt64 {
            guard bytes.count >= 8 else { throw Unreadable(what: "\(field) cut short") }
            var value: UInt64 = 0
            for (shift, byte) in bytes.prefix(8).enumerated() { value |= UInt64(byte) << UInt64(shift * 8) }
            bytes = bytes.dropFirst(8)
            return value
        }

        mutating func integer(_ field: String) throws(Unreadable) -> Int {
            Int(Int64(bitPattern: try number(field)))
        }

        mutating func optionalInteger(_ field: String) throws(Unreadable) -> Int? {
            switch try byte(field) {
            case 0: return nil
            case 1: return try integer(field)
            case let flag: throw Unreadable(what: "\(field) flag \(flag)")
            }
        }

        /// A length as written (nil for 0); at most what is left of the record.
        mutating func length(_ field: String) throws(Unreadable) -> Int? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte(field)
                guard shift < 63 else { throw Unreadable(what: "\(field) length too long") }
                value |= UInt64(next & 0x7F) << shift
                if next & 0x80 == 0 { break }
                shift += 7
            }
            guard value > 0 else { return nil }
            guard value - 1 <= UInt64(bytes.count) else { throw Unreadable(what: "\(field) longer than its record") }
            return Int(value - 1)
        }

        /// A count of entries: each takes at least a byte, so no more than the bytes left.
        mutating func count(_ field: String) throws(Unreadable) -> Int {
            guard let count = try length(field) else { throw Unreadable(what: "\(field) count missing") }
            return count
        }

        mutating func optionalString(_ field: String) throws(Unreadable) -> String? {
            guard let length = try length(field) else { return nil }
            let text = String(decoding: bytes.prefix(length), as: UTF8.self)
            bytes = bytes.dropFirst(length)
            return text
        }

        mutating func string(_ field: String) throws(Unreadable) -> String {
            guard let text = try optionalString(field) else { throw Unreadable(what: "\(field) missing") }
            return text
        }

        mutating func send() throws(Unreadable) -> SendDescriptor {
            let app = try string("app")
            let environmentText = try string("environment")
            guard let environment = Environment(rawValue: environmentText) else { throw Unreadable(what: "environment \(environmentText)") }
            let operationText = try string("operation")
            guard let operation = Operation(rawValue: operationText) else { throw Unreadable(what: "operation \(operationText)") }
            let apnsIDText = try string("apns_id")
            guard let apnsID = APNsID(apnsIDText) else { throw Unreadable(what: "apns_id \(apnsIDText)") }
            let pushType = try optionalString("push_type")
            let pushTypeValue = try pushType.map { (text: String) throws(Unreadable) -> PushType in
                guard let value = PushType(rawValue: text) else { throw Unreadable(what: "push_type \(text)") }
                return value
            }
            let priorityValue = try optionalInteger("priority")
            let priority = try priorityValue.map { (value: Int) throws(Unreadable) -> Priority in
                guard let priority = Priority(rawValue: value) else { throw Unreadable(what: "priority \(value)") }
                return priority
            }
            return SendDescriptor(
                app: app, environment: environment, operation: operation, apnsID: apnsID, pushType: pushTypeValue,
                priority: priority, topic: try optionalString("topic"), tokenFingerprint: try optionalString("token_fingerprint"),
                channelID: try optionalString("channel_id"), snapshotID: try optionalString("snapshot_id"),
                surfaceID: try optionalString("surface_id"), payloadBytes: try integer("payload_bytes"),
                caller: try optionalString("caller"), traceID: try optionalString("trace_id"),
                idempotencyKeyHash: try optionalString("idempotency_key_hash"))
        }
    }
}
