import RelayJSON
import Testing

/// The parser takes an object whose text repeats the last large object of
/// the same depth (a batch's items repeating one snapshot) from that object
/// instead of parsing it again. These pin that it parses every document as
/// if each object were read on its own: the same values, errors and limits.
@Suite("JSON parser: repeated objects")
struct JSONParserRepeatTests {
    static let snapshot = #"{"schemaVersion":"5","kind":"liveActivity","id":"order-1","liveActivity":{"title":"Order #1 · on its way","progress":0.4,"n":7}}"#

    static func item(_ token: String, snapshot: String = snapshot) -> String {
        #"{"app":"demo","operation":"alert","token":"\#(token)","snapshot":\#(snapshot)}"#
    }

    @Test("a batch repeating one snapshot parses item by item alike")
    func repeatedItems() throws {
        // Repeated, then changed in its last member, in its first byte after
        // the brace, and in its nested object; then repeated again.
        let snapshots = [
            Self.snapshot, Self.snapshot,
            Self.snapshot.replacing( #""n":7"#, with: #""n":8"#),
            Self.snapshot.replacing( #"{"schemaVersion""#, with: #"{"schemaVersioN""#),
            Self.snapshot.replacing( "on its way", with: "on its wax"),
            Self.snapshot, Self.snapshot,
        ]
        let items = snapshots.enumerated().map { Self.item("t\($0.offset)", snapshot: $0.element) }
        let batch = try JSONParser.parse(#"{"items":[\#(items.joined(separator: ","))]}"#)
        let parsed = try #require(batch.objectValue?["items"]?.arrayValue)
        #expect(parsed.count == items.count)
        for (index, item) in items.enumerated() {
            #expect(parsed[index] == (try JSONParser.parse(item)), "item \(index)")
        }
        #expect(parsed[2] != parsed[1] && parsed[3] != parsed[1] && parsed[4] != parsed[1])
    }

    @Test("an error inside or after a repeated object is found where it is")
    func errorsAfterRepeat() throws {
        let first = Self.item("a")
        // Cut inside the second copy of the snapshot: the error the cut
        // item has on its own, past the first item.
        let second = String(Self.item("b").dropLast(20))
        let prefix = "[\(first),"
        var alone: JSONParseError?
        do { _ = try JSONParser.parse(second) } catch { alone = error }
        let expected = try #require(alone)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(prefix + second) }
        do { _ = try JSONParser.parse(prefix + second) } catch {
            #expect(error.offset == prefix.utf8.count + expected.offset)
            #expect(error.message == expected.message)
        }
        // A duplicate key right after the second copy: at its opening quote.
        let head = #"[\#(first),{"token":"b","snapshot":\#(Self.snapshot),"#
        let duplicate = head + #""snapshot":1}]"#
        #expect(throws: JSONParseError.self) { try JSONParser.parse(duplicate) }
        do { _ = try JSONParser.parse(duplicate) } catch {
            #expect(error.offset == head.utf8.count)
            #expect(error.message == #"duplicate key "snapshot""#)
        }
    }

    @Test("a repeated object deeper than the first is held to the nesting limit")
    func depthLimit() throws {
        let object = #"{"a":{"b":"a long enough value, well over sixty-four bytes of text"}}"#
        // The object at depth 2, then the same text with its inner object at 257.
        let nested = String(repeating: "[", count: JSONParser.maximumDepth - 2) + object + String(repeating: "]", count: JSONParser.maximumDepth - 2)
        #expect(throws: JSONParseError.self) { try JSONParser.parse("[\(object),\(nested)]") }
        // One level shallower it fits, and equals the first.
        let fits = String(repeating: "[", count: JSONParser.maximumDepth - 3) + object + String(repeating: "]", count: JSONParser.maximumDepth - 3)
        let value = try JSONParser.parse("[\(object),\(fits)]")
        var inner = try #require(value.arrayValue?[1])
        for _ in 0..<(JSONParser.maximumDepth - 3) { inner = try #require(inner.arrayValue?.first) }
        #expect(inner == value.arrayValue?[0])
    }
}
