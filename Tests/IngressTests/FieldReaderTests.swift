@testable import Ingress
import APNs
import Relay
import RelayJSON
import Testing

/// `FieldReader` keeps which members were read by their position (a bit per
/// member, a set past 64), not a list of names: the unknown-field check must
/// still name the first member nobody read, in the body's order.
@Suite("Ingress decoding: FieldReader")
struct FieldReaderTests {
    static func reader(_ text: String, path: String = "") throws -> FieldReader {
        try FieldReader(try JSONParser.parse(text), path: path)
    }

    static func unknownField(_ reader: FieldReader) -> IngressError? {
        do {
            try reader.rejectUnknown(allowed: "a, b")
            return nil
        } catch {
            return error
        }
    }

    @Test("the first member never read is the unknown one, in the body's order; a null that was read counts as read")
    func firstUnreadInOrder() throws {
        var reader = try Self.reader(#"{"a":1,"x":2,"b":null,"y":3}"#, path: "items[2]")
        #expect(try reader.integer("a") == 1)
        #expect(try reader.string("b") == nil)
        #expect(try reader.string("missing") == nil)
        let error = try #require(Self.unknownField(reader))
        #expect(error.status == 400)
        #expect(error.field == "items[2].x")
        #expect(error.message == "items[2].x: unknown field (allowed here: a, b)")
        #expect(try reader.integer("x") == 2)
        #expect(Self.unknownField(reader)?.field == "items[2].y")
        #expect(try reader.integer("y") == 3)
        #expect(Self.unknownField(reader) == nil)
    }

    @Test("members past the 64th are tracked too")
    func pastSixtyFour() throws {
        let members = (0..<70).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        var reader = try Self.reader("{\(members)}")
        for index in 0..<70 where index != 66 {
            #expect(try reader.integer("k\(index)") == Int64(index))
        }
        #expect(Self.unknownField(reader)?.field == "k66")
        _ = try reader.integer("k66")
        #expect(Self.unknownField(reader) == nil)
        // Only the last one unread: found past the bit set as well.
        var other = try Self.reader("{\(members)}")
        for index in 0..<69 { _ = try other.integer("k\(index)") }
        #expect(Self.unknownField(other)?.field == "k69")
    }

    @Test("has, typed reads and their errors name the field's path")
    func typedReads() throws {
        var reader = try Self.reader(#"{"s":"text","n":1.5,"o":{},"a":[1],"z":null}"#, path: "items[0]")
        #expect(reader.has("s") && !reader.has("z") && !reader.has("missing"))
        #expect(try reader.number("n") == 1.5)
        #expect(try reader.object("o") == .object(JSONObject()))
        #expect(try reader.array("a") == [.integer(1)])
        #expect(throws: IngressError.self) { try reader.integer("n") }
        do {
            _ = try reader.string("n")
            Issue.record("a number read as a string")
        } catch {
            #expect(error.message == "items[0].n: must be a string, not number")
        }
    }
}

/// Send bodies for the decoding tests below.
enum SendBodies {
    static let token = String(repeating: "ab", count: 32)

    static func snapshot(id: String = "s-1", surfaceID: String = "o-1") -> String {
        #"{"schemaVersion":"5","kind":"liveActivity","id":"\#(id)","surfaceId":"\#(surfaceID)","updatedAt":"2026-11-22T10:00:00Z","state":"active","liveActivity":{"title":"T","body":"B","progress":0.4,"deepLink":"demo://o/1","modeLabel":"active","stage":"inProgress"}}"#
    }

    /// A send of `operation` with `extra` members (`"k":v,` each) and `snapshot`.
    static func body(_ operation: String, _ extra: String = "", snapshot: String = snapshot()) throws -> JSONValue {
        try JSONParser.parse(#"{"app":"a","environment":"development","operation":"\#(operation)","token":"\#(token)",\#(extra)"snapshot":\#(snapshot)}"#)
    }

    /// The error decoding `body` fails with, or nil when it decodes.
    static func refusal(_ body: JSONValue) -> IngressError? {
        do {
            _ = try SendRequestDecoder.decode(body)
            return nil
        } catch {
            return error
        }
    }
}

/// An operation without the Live Activity fields decodes with no Live
/// Activity options (they are only read for the operations that use them);
/// one that uses them still reads them.
@Suite("Ingress decoding: Live Activity options")
struct LiveOptionsDecodingTests {
    @Test("an alert reads no live options and refuses them as unused; an update reads them")
    func liveOptions() throws {
        let alert = try SendRequestDecoder.decode(try SendBodies.body("alert"))
        guard case .alert(_, _, let options) = alert.operations[0] else { Issue.record("not an alert"); return }
        #expect(options == DeviceSendOptions())
        #expect(SendBodies.refusal(try SendBodies.body("alert", #""staleDate":5,"#))?.message == "staleDate: is not used by operation alert")
        let update = try SendRequestDecoder.decode(try SendBodies.body(
            "update", #""timestamp":7,"staleDate":9,"dismissalDate":11,"relevanceScore":0.5,"contentState":{"k":1},"#))
        guard case .update(_, _, let live, _) = update.operations[0] else { Issue.record("not an update"); return }
        #expect(live == LiveActivityOptions(timestamp: 7, staleDate: 9, dismissalDate: 11, relevanceScore: 0.5, contentState: ["k": 1]))
        #expect(SendBodies.refusal(try SendBodies.body("update", #""timestamp":-1,"#))?.message == "timestamp: must be unix seconds ≥ 0")
    }
}

/// The snapshot's `id` and `surfaceId` are refused for a control character,
/// each under its own field name.
@Suite("Ingress decoding: snapshot identifiers")
struct SnapshotIdentifierTests {
    @Test("a control character in id or surfaceId names that field, the byte and its offset")
    func controlCharacters() throws {
        #expect(SendBodies.refusal(try SendBodies.body("alert")) == nil)
        let id = try #require(SendBodies.refusal(try SendBodies.body("alert", snapshot: SendBodies.snapshot(id: #"s\u00071"#))))
        #expect(id.field == "snapshot.id")
        #expect(id.message == "snapshot.id: must not contain control characters (found byte 0x07 at byte 1)")
        let surface = try #require(SendBodies.refusal(try SendBodies.body("alert", snapshot: SendBodies.snapshot(surfaceID: #"o-\u001f"#))))
        #expect(surface.field == "snapshot.surfaceId")
        #expect(surface.message == "snapshot.surfaceId: must not contain control characters (found byte 0x1f at byte 2)")
    }
}
