import APNs
import Logging
import MockAPNs
@testable import Relay
import RelayBasics
import Synchronization
import Telemetry
import Testing

/// A JSON handler reached through swift-log's own call, with its metadata
/// dictionary: the path of a handler without ``SortedFieldsLogging``.
private struct DictionaryOnlyHandler: LogHandler {
    var inner: JSONLogHandler
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    func log(event: LogEvent) { inner.log(event: event) }
}

@Suite("the send finished line")
struct SendLineTests {
    /// A line with the values that differ from send to send (time, ids,
    /// latency) replaced, key order and every other byte kept.
    private static func masked(_ line: String) -> String {
        line.replacing(#/"(ts|apns_id|latency_ms|trace_id|span_id)":"[^"]*"/#) { match in #""\#(match.1)":"_""# }
    }

    @Test("the relay's JSON handler writes it from sorted fields, the same bytes as the dictionary swift-log takes: sends delivered and rejected, with the handler's own metadata")
    func sortedFieldsSameAsDictionary() async throws {
        let lines = Mutex<[String: [String]]>([:])
        func logger(_ name: String, dictionary: Bool) -> Logger {
            let sink = LogSink { line in lines.withLock { $0[name, default: []].append(String(decoding: line, as: UTF8.self)) } }
            var logger = Logger(label: "relay") { label in
                let handler = JSONLogHandler(label: label, sink: sink)
                return dictionary ? DictionaryOnlyHandler(inner: handler) : handler
            }
            // The handler's own keys merge in by key, and a field wins over one.
            logger[metadataKey: "relay_instance"] = "r1"
            logger[metadataKey: "outcome"] = "overridden"
            return logger
        }
        let rules = [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1))]
        let sorted = try PipelineFixture(rules: rules, logger: logger("sorted", dictionary: false))
        let dictionary = try PipelineFixture(rules: rules, logger: logger("dictionary", dictionary: true))
        #expect(sorted.client.sortedFieldsLogger != nil, "the JSON handler takes sorted fields")
        #expect(dictionary.client.sortedFieldsLogger == nil)
        for fixture in [sorted, dictionary] {
            _ = try? await fixture.client.send(try fixture.alert())
            _ = try? await fixture.client.send(try fixture.alert(token: "dead" + String(repeating: "7", count: 60)))
        }
        let written = lines.withLock { $0 }
        let fromFields = try #require(written["sorted"]).filter { $0.contains(#""msg":"send finished""#) }
        let fromDictionary = try #require(written["dictionary"]).filter { $0.contains(#""msg":"send finished""#) }
        #expect(fromFields.count == 2)
        #expect(fromFields.map(Self.masked) == fromDictionary.map(Self.masked))
        let rejected = try #require(fromFields.last)
        for part in [#""outcome":"rejected""#, #""reason":"Unregistered""#, #""status":"410""#, #""relay_instance":"r1""#, #""trace_id":""#] {
            #expect(rejected.contains(part), "\(part) in \(rejected)")
        }
    }

    @Test("its fields are sorted by key, whatever a send has and lacks")
    func fieldsSorted() throws {
        let apnsID = try #require(APNsID("00000000-0000-4000-8000-000000000000"))
        let bare = SendDescriptor(app: "a", environment: .production, operation: .alert, apnsID: apnsID)
        let full = SendDescriptor(
            app: "a", environment: .production, operation: .broadcast, apnsID: apnsID, tokenFingerprint: "f", channelID: "c")
        for (send, status, reason) in [(bare, nil, nil), (full, 400 as Int?, "BadChannelId" as String?)] {
            let event = SendEvent(
                send: send, outcome: status == nil ? .success : .rejected, status: status, reason: reason, errorType: reason,
                attempts: 1, trapHits: [], latencySeconds: 0.5, startedAt: 0, finishedAt: 0, apnsUniqueID: nil,
                unregisteredAt: nil, dropsToken: false, attemptLog: [], deadToken: nil)
            for traceParent in [nil, TraceParent(header: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")] {
                withUnsafeTemporaryAllocation(of: LogField.self, capacity: SendRun.sendLineFieldLimit) { storage in
                    let count = SendRun.sendLineFields(of: event, traceParent: traceParent, into: storage)
                    let keys = storage[..<count].map { $0.key.description }
                    #expect(keys == keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
                    #expect(Set(keys).count == keys.count)
                    #expect(keys.contains("trace_id") == (traceParent != nil))
                    if send.channelID != nil, traceParent != nil { #expect(count == SendRun.sendLineFieldLimit, "every field: \(keys)") }
                    _ = storage.baseAddress!.deinitialize(count: count)
                }
            }
        }
    }
}
