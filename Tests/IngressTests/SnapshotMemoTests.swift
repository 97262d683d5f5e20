@testable import Ingress
import RelayJSON
import Testing
import TestSupport

/// A batch validates a snapshot its items repeat once, and every other one as before.
@Suite("Batch decoding: repeated snapshots")
struct SnapshotMemoTests {
    static func item(_ snapshot: String, token: String) throws -> JSONValue {
        try JSONParser.parse(Array(#"{"app":"app-a","environment":"development","operation":"notification","token":"\#(token)","snapshot":\#(snapshot)}"#.utf8))
    }

    @Test("an equal snapshot decodes to the same value; a different one is decoded on its own; an invalid one fails by its field, memo or not")
    func memo() throws {
        let memo = SendRequestDecoder.SnapshotMemo()
        let first = try SendRequestDecoder.decode(try Self.item(TestSnapshots.notification, token: "aa"), path: "items[0]", allowFanOut: true, snapshots: memo)
        let again = try SendRequestDecoder.decode(try Self.item(TestSnapshots.notification, token: "bb"), path: "items[1]", allowFanOut: true, snapshots: memo)
        #expect(first.operations[0].snapshot == again.operations[0].snapshot)
        #expect(again.operations[0].deviceToken == "bb")
        let other = TestSnapshots.notification.replacingOccurrences(of: #""title":"Shipped""#, with: #""title":"Delivered""#)
        let third = try SendRequestDecoder.decode(try Self.item(other, token: "cc"), path: "items[2]", allowFanOut: true, snapshots: memo)
        #expect(third.operations[0].snapshot != first.operations[0].snapshot)
        #expect(third.operations[0].snapshot == (try SendRequestDecoder.decode(try Self.item(other, token: "cc"), path: "items[2]", allowFanOut: true)).operations[0].snapshot)
        let invalid = TestSnapshots.notification.replacingOccurrences(of: #""schemaVersion":"5""#, with: #""schemaVersion":"4""#)
        for snapshots in [memo, nil] {
            do {
                _ = try SendRequestDecoder.decode(try Self.item(invalid, token: "dd"), path: "items[3]", allowFanOut: true, snapshots: snapshots)
                Issue.record("an invalid snapshot was accepted")
            } catch {
                #expect((error as? IngressError)?.field?.hasPrefix("items[3].snapshot") == true, "\(error)")
            }
        }
    }
}
