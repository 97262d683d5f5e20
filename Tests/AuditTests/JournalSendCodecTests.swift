@testable import Audit
import APNs
import Relay
import Testing

/// The journal's send records hold values, and the rows are formatted from
/// what is read back: the oracle is the line formatted from the original
/// send or event (itself held to ``AuditRecord``'s line by
/// `AuditCompletionLineTests` and `AuditCopyLineTests`). A record cut short
/// or altered must be refused with an error, never read as another row and
/// never crash the reader.
@Suite("Journal send records")
struct JournalSendCodecTests {
    typealias Lines = AuditCompletionLineTests
    static let startedAt: UInt64 = 1_763_800_000_000_000_000

    static func completionBytes(_ event: SendEvent, id: AuditRowID.Words = Lines.rowID, relayInstance: String = "relay-a") -> [UInt8] {
        var bytes: [UInt8] = []
        JournalSendCodec.appendCompletion(event, id: id, relayInstance: relayInstance, to: &bytes)
        return bytes
    }

    static func intentBytes(_ send: SendDescriptor, attempts: Int = 1, relayInstance: String = "relay-a") -> [UInt8] {
        var bytes: [UInt8] = []
        JournalSendCodec.appendIntent(send, startedAt: startedAt, attempts: attempts, relayInstance: relayInstance, to: &bytes)
        return bytes
    }

    @Test("a completion read back formats the same row as the event it was written from, byte for byte")
    func completionRoundTrip() throws {
        var compared = 0
        for send in Lines.sends() {
            for event in Lines.events(of: send) {
                for relayInstance in ["relay-a", "relay\tb\u{0}", ""] {
                    let read = try JournalSendCodec.readCompletion(Self.completionBytes(event, relayInstance: relayInstance)[...])
                    #expect(read.id == Lines.rowID)
                    #expect(read.relayInstance == relayInstance)
                    // The raw token is never in the record.
                    #expect(read.event.deadToken == nil)
                    #expect(read.event.dropsToken == event.dropsToken)
                    var expected: [UInt8] = []
                    AuditRowLayout.standard.appendCompletionLine(event, id: Lines.rowID, relayInstance: relayInstance, to: &expected)
                    var line: [UInt8] = []
                    AuditRowLayout.standard.appendCompletionLine(read.event, id: read.id, relayInstance: read.relayInstance, to: &line)
                    #expect(line == expected, "\(String(decoding: line, as: UTF8.self))")
                    #expect(read.event.send == event.send)
                    #expect(read.event.attemptLog == event.attemptLog)
                    compared += 1
                }
            }
        }
        #expect(compared > 500)
    }

    @Test("an intent read back formats the same unknown row as its send, retries included")
    func intentRoundTrip() throws {
        for send in Lines.sends() {
            for attempts in [1, 2, 7] {
                let read = try JournalSendCodec.readIntent(Self.intentBytes(send, attempts: attempts, relayInstance: "relay\tb")[...])
                #expect(read.send == send)
                #expect(read.startedAt == Self.startedAt)
                #expect(read.attempts == attempts)
                #expect(read.relayInstance == "relay\tb")
            }
        }
    }

    @Test("the dead token's value never enters a completion's record")
    func noRawToken() {
        let send = Lines.sends()[1]
        let dead = Lines.events(of: send).first { $0.deadToken != nil }!
        var marked = dead
        marked.deadToken?.token = "f00dfeedcafe0123456789abcdef"
        let bytes = Self.completionBytes(marked)
        #expect(!String(decoding: bytes, as: UTF8.self).contains("f00dfeedcafe0123456789abcdef"))
    }

    @Test("every record cut short is refused, naming what is missing")
    func truncated() {
        let event = Lines.events(of: Lines.sends()[1])[3]
        let completion = Self.completionBytes(event)
        for end in 0..<completion.count {
            #expect(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readCompletion(completion[..<end]) }
        }
        let intent = Self.intentBytes(Lines.sends()[1])
        for end in 0..<intent.count {
            #expect(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readIntent(intent[..<end]) }
        }
        // And one byte too many.
        #expect(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readIntent((intent + [0])[...]) }
    }

    @Test("a record of another version is refused, not guessed at")
    func otherVersion() throws {
        var bytes = Self.completionBytes(Lines.events(of: Lines.sends()[0])[0])
        bytes[0] = JournalSendCodec.version + 1
        let error = try #require(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readCompletion(bytes[...]) }
        #expect(error.description.contains("version 2"))
    }

    @Test("altered bytes are refused or read, never a crash: every byte of a record set to every value")
    func everyByteAltered() {
        let event = Lines.events(of: Lines.sends()[1])[3]
        let completion = Self.completionBytes(event)
        var refused = 0
        var read = 0
        for index in completion.indices {
            for value in [UInt8](arrayLiteral: 0, 1, 2, 0x7F, 0x80, 0xFF) where value != completion[index] {
                var altered = completion
                altered[index] = value
                do {
                    _ = try JournalSendCodec.readCompletion(altered[...])
                    read += 1
                } catch {
                    refused += 1
                }
            }
        }
        // A length, a flag or an enum's text altered is refused; a number's byte reads as another number.
        #expect(refused > 0)
        #expect(read > 0)
    }

    @Test("a length that claims more than the record holds is refused before anything is read")
    func hostileLength() {
        // Version, id, then a relay instance claiming 2^62 bytes.
        var bytes: [UInt8] = [JournalSendCodec.version] + [UInt8](repeating: 0, count: 16)
        bytes += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x3F]
        #expect(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readCompletion(bytes[...]) }
        // A varint that never ends.
        let endless: [UInt8] = [JournalSendCodec.version] + [UInt8](repeating: 0, count: 16) + [UInt8](repeating: 0x80, count: 40)
        #expect(throws: JournalSendCodec.Unreadable.self) { try JournalSendCodec.readCompletion(endless[...]) }
    }

    /// A record framed the way every other spool record is: its head, then
    /// `key TAB` and the values, appended piece by piece.
    static func framed(_ kind: AuditSpool.Kind, key: AuditJournalKey, values: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        let start = AuditSpool.startRecord(kind: kind, format: .current, into: &bytes)
        key.append(to: &bytes)
        bytes.append(0x09)
        bytes.append(contentsOf: values)
        AuditSpool.finishRecord(startingAt: start, in: &bytes)
        return bytes
    }

    @Test("a whole record written into one buffer is the record framed piece by piece, and the spool reads it whole")
    func wholeRecords() throws {
        // Starts of every digit count, the key's decimal part.
        let starts: [UInt64] = [0, 9, 10, 99, 100, Self.startedAt, UInt64.max]
        var compared = 0
        for (index, send) in Lines.sends().enumerated() {
            let startedAt = starts[index % starts.count]
            let key = AuditJournalKey(apnsID: send.apnsID.value, startedAt: startedAt)
            let intent = JournalSendCodec.intentRecord(send, startedAt: startedAt, attempts: 2, relayInstance: "relay-a", key: key, format: .current)
            var values: [UInt8] = []
            JournalSendCodec.appendIntent(send, startedAt: startedAt, attempts: 2, relayInstance: "relay-a", to: &values)
            #expect(intent == Self.framed(.sendIntent, key: key, values: values))
            for event in Lines.events(of: send) {
                let record = JournalSendCodec.completionRecord(event, id: Lines.rowID, relayInstance: "relay\tb", key: key, format: .current)
                #expect(record == Self.framed(.sendCompletion, key: key, values: Self.completionBytes(event, relayInstance: "relay\tb")))
                let contents = AuditSpool.parse(intent + record)
                #expect(contents.tornBytes == 0)
                #expect(contents.records.map(\.kind) == [.sendIntent, .sendCompletion])
                #expect(contents.records.last?.line.starts(with: key.bytes + [0x09]) == true)
                compared += 1
            }
        }
        #expect(compared > 100)
    }
}
