@testable import Audit
import APNs
import Relay
import Testing

/// A finished send's COPY line is written straight from its ``SendEvent``;
/// ``AuditRecord/init(event:relayInstance:)`` and the layout's record line
/// are the oracle: the bytes must not differ (journals, spool segments and
/// the table already hold lines the record path wrote).
@Suite("Audit completion line")
struct AuditCompletionLineTests {
    static let apnsID = APNsID("7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70")!
    static let rowID = AuditRowID.Words(high: 0x0b7c_6f43_86e4_4a8e, low: 0x9d55_1f0e_7a6c_2b11)
    /// ``rowID`` as its row holds it.
    static let rowIDText: String = {
        var text: [UInt8] = []
        rowID.append(to: &text)
        return String(decoding: text, as: UTF8.self)
    }()
    static let long = String(repeating: "long reason é\t", count: 400)
    static let odd = ["tab\tapp", "nl\nx\r\\y", "nul\u{0}here", "é日本\u{1}\u{7F}", "quote\"and\\", long, ""]

    /// Descriptors from bare to every field set, with awkward text in each.
    static func sends() -> [SendDescriptor] {
        var sends = [
            SendDescriptor(app: "a", environment: .production, operation: .alert, apnsID: apnsID),
            SendDescriptor(
                app: "alpha", environment: .development, operation: .notification, apnsID: apnsID, pushType: .liveactivity,
                priority: .conservePower, topic: "com.example.app", tokenFingerprint: "fp-1234abcd", channelID: "channel-9",
                snapshotID: "snap-1", surfaceID: "surface-2", payloadBytes: 4096, caller: "backend-1",
                traceID: "4bf92f3577b34da6a3ce929d0e0e4736", idempotencyKeyHash: "becd2bc6"),
            // A channel (broadcast) send: a channel id and no token.
            SendDescriptor(
                app: "beta", environment: .production, operation: .alert, apnsID: apnsID, pushType: .liveactivity,
                priority: .immediate, topic: "com.example.app.push-type.liveactivity", channelID: "dHN0LWNoYW5uZWw=",
                payloadBytes: 0, caller: nil),
        ]
        for (index, text) in odd.enumerated() {
            sends.append(SendDescriptor(
                app: text, environment: index % 2 == 0 ? .production : .development, operation: index % 3 == 0 ? .update : .alert,
                apnsID: apnsID, pushType: index % 2 == 0 ? .alert : nil, priority: index % 2 == 0 ? .immediate : nil,
                topic: text, tokenFingerprint: index % 3 == 0 ? nil : text, channelID: index % 2 == 0 ? text : nil,
                snapshotID: text, surfaceID: text, payloadBytes: index * 1000, caller: text, traceID: text,
                idempotencyKeyHash: text))
        }
        return sends + (0..<12).map { EventFactory.event($0).send }
    }

    /// Outcomes a send ends with: success, rejections with reasons, retries
    /// with several attempts, trap hits, transport failures, cancellation.
    static func events(of send: SendDescriptor) -> [SendEvent] {
        func event(
            _ outcome: SendOutcome, status: Int?, reason: String?, errorType: String?, attempts: Int, traps: [TrapID] = [],
            latency: Double, unique: String? = nil, log: [AttemptSummary], dead: DeadToken? = nil
        ) -> SendEvent {
            SendEvent(
                send: send, outcome: outcome, status: status, reason: reason, errorType: errorType, attempts: attempts,
                trapHits: traps, latencySeconds: latency, startedAt: 1_763_800_000_000_000_000,
                finishedAt: 1_763_800_000_123_456_789, apnsUniqueID: unique, unregisteredAt: dead == nil ? nil : 1_763_700_000_000,
                dropsToken: dead != nil, attemptLog: log, deadToken: dead)
        }
        var events = [
            event(.success, status: 200, reason: nil, errorType: nil, attempts: 1, latency: 0.00325, unique: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
                  log: [AttemptSummary(status: 200, reason: nil, durationSeconds: 0.00325)]),
            event(.success, status: 200, reason: nil, errorType: nil, attempts: 0, latency: 0, log: []),
            event(.rejected, status: 410, reason: "Unregistered", errorType: "Unregistered", attempts: 1, traps: [.deadToken], latency: 0.004,
                  log: [AttemptSummary(status: 410, reason: "Unregistered", durationSeconds: 0.004)],
                  dead: DeadToken(token: "ab", fingerprint: "fp", reason: "Unregistered", apnsTimestampMilliseconds: 1_763_700_000_000)),
            event(.success, status: 200, reason: "TooManyRequests", errorType: "TooManyRequests", attempts: 3,
                  traps: [TrapID(rawValue: "MS015"), TrapID(rawValue: "TR-429")], latency: 1.25,
                  log: [
                      AttemptSummary(status: 429, reason: "TooManyRequests", durationSeconds: 0.0040004),
                      AttemptSummary(status: 503, reason: nil, durationSeconds: 1e-9),
                      AttemptSummary(status: 200, reason: nil, durationSeconds: 12.5),
                  ]),
            event(.failed, status: nil, reason: "transport_timeout", errorType: "transport_timeout", attempts: 2, latency: 30,
                  log: [AttemptSummary(status: nil, reason: "transport_timeout é", durationSeconds: 1e13)]),
            event(.cancelled, status: nil, reason: nil, errorType: "cancelled", attempts: 1, latency: -0.5, log: []),
        ]
        for text in odd {
            events.append(event(
                .rejected, status: 400, reason: text, errorType: text, attempts: 2,
                traps: [TrapID(rawValue: text), TrapID(rawValue: "a\"b"), TrapID(rawValue: "c\\d")], latency: 0.1 + 0.2,
                unique: text, log: [AttemptSummary(status: 400, reason: text, durationSeconds: 0.1), AttemptSummary(status: nil, reason: "\u{1}", durationSeconds: 0)]))
        }
        return events
    }

    @Test("a completion's row written from the event is AuditRecord(event:)'s line, byte for byte")
    func completionLineFromEvent() {
        #expect(AuditRowLayout.standard.completionPlan != nil)
        var compared = 0
        for send in Self.sends() {
            for event in Self.events(of: send) {
                for relayInstance in ["relay-a", "relay\tb\u{0}", ""] {
                    var line = Array("previous\t".utf8)
                    AuditRowLayout.standard.appendCompletionLine(event, id: Self.rowID, relayInstance: relayInstance, to: &line)
                    var record = AuditRecord(event: event, relayInstance: relayInstance)
                    record.id = Self.rowIDText
                    #expect(line == Array("previous\t".utf8) + AuditRowLayout.standard.line(record))
                    compared += 1
                }
            }
        }
        #expect(compared > 500)
    }

    @Test("without a pinned id the row gets a fresh random id, the rest of the line unchanged")
    func completionLineRandomID() throws {
        let event = Self.events(of: Self.sends()[1])[3]
        var first: [UInt8] = []
        AuditRowLayout.standard.appendCompletionLine(event, relayInstance: "r", to: &first)
        var second: [UInt8] = []
        AuditRowLayout.standard.appendCompletionLine(event, relayInstance: "r", to: &second)
        let firstID = try #require(CopyText.field(0, of: first))
        let secondID = try #require(CopyText.field(0, of: second))
        #expect(APNsID(firstID)?.value == firstID)
        #expect(firstID != secondID)
        var record = AuditRecord(event: event, relayInstance: "r")
        record.id = firstID
        #expect(first == AuditRowLayout.standard.line(record))
    }

    @Test("a layout whose columns do not say what a completion holds builds the row through AuditRecord")
    func completionLineWithoutPlan() {
        let layout = AuditRowLayout.withoutPlans
        #expect(layout.completionPlan == nil)
        let event = Self.events(of: Self.sends()[0])[3]
        var line: [UInt8] = []
        layout.appendCompletionLine(event, id: Self.rowID, relayInstance: "r", to: &line)
        #expect(String(decoding: line, as: UTF8.self) == "\(Self.rowIDText)\tsuccess\t3\n")
    }
}
