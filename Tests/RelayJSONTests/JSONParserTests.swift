import RelayJSON
import Testing

@Suite("JSON parser")
struct JSONParserTests {
    @Test("keeps key order, integers and doubles apart")
    func orderAndNumbers() throws {
        let value = try JSONParser.parse(#"{"b":1,"a":2.5,"c":[true,null,"x"],"d":-0,"e":1e2}"#)
        let object = try #require(value.objectValue)
        #expect(object.keys == ["b", "a", "c", "d", "e"])
        #expect(object["b"] == .integer(1))
        #expect(object["a"] == .double(2.5))
        #expect(object["c"] == [true, nil, "x"])
        #expect(object["d"] == .integer(0))
        #expect(object["e"] == .double(100))
        #expect(object["e"]?.integerValue == 100)
        #expect(object["a"]?.integerValue == nil)
    }

    @Test("decodes escapes and surrogate pairs")
    func escapes() throws {
        let value = try JSONParser.parse(#""a\"b\\c\/d\n\u00e9\ud83d\ude00""#)
        #expect(value == .string("a\"b\\c/d\né😀"))
    }

    @Test(
        "rejects what RFC 8259 rejects",
        arguments: [
            ("", "unexpected end of input"),
            ("{", "expected a string key"),
            (#"{"a":1,}"#, "expected a string key"),
            ("[1,]", "unexpected character"),
            ("01", "leading zeros"),
            ("1.", "digit expected after '.'"),
            (#"{"a":1,"a":2}"#, "duplicate key \"a\""),
            ("\"\u{01}\"", "control character"),
            (#""\ud800""#, "unpaired high surrogate"),
            (#""\x""#, "invalid escape"),
            ("tru", "invalid literal"),
            ("1 2", "unexpected content after"),
            ("1e999", "out of range"),
        ]
    )
    func rejects(input: String, message: String) {
        #expect {
            try JSONParser.parse(input)
        } throws: { error in
            (error as? JSONParseError)?.message.contains(message) == true
        }
    }

    @Test("reports line and column")
    func position() {
        do {
            _ = try JSONParser.parse("{\n  \"a\": tru\n}")
            Issue.record("expected a parse error")
        } catch {
            #expect(error.line == 2)
            #expect(error.column == 8)
        }
    }

    @Test("rejects invalid UTF-8 inside strings")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) {
            try JSONParser.parse([0x22, 0xC3, 0x28, 0x22])
        }
    }

    @Test("limits nesting depth")
    func depth() {
        let deep = String(repeating: "[", count: JSONParser.maximumDepth + 1)
            + String(repeating: "]", count: JSONParser.maximumDepth + 1)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: JSONParser.maximumDepth)
            + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
    }
}

@Suite("JSON encoder")
struct JSONEncoderTests {
    @Test("round-trips byte for byte in compact form")
    func roundTrip() throws {
        let text = #"{"aps":{"alert":{"title":"Hi \"you\"","body":"é/😀"},"relevance-score":0.5,"timestamp":1700000000},"list":[1,2.25,false,null]}"#
        #expect(try JSONParser.parse(text).encodedString() == text)
    }

    @Test("writes integral doubles without a fraction and escapes control characters")
    func numbersAndControls() {
        let value: JSONValue = ["a": .double(1), "b": .double(0.1), "c": "\u{07}\t"]
        #expect(value.encodedString() == #"{"a":1,"b":0.1,"c":"\u0007\t"}"#)
    }

    @Test("strings: plain ones copied as they are (short, long, non-ASCII), escaped ones byte by byte, exact bytes")
    func stringBytes() {
        let long = String(repeating: "abcdefghij", count: 30)  // past the small-string form
        let cases: [(String, [UInt8])] = [
            ("", Array(#""""#.utf8)),
            ("short", Array(#""short""#.utf8)),
            (long, Array("\"\(long)\"".utf8)),
            ("é/😀 ~\u{7F}", [0x22] + Array("é/😀 ~".utf8) + [0x7F, 0x22]),
            ("a\"b\\c", Array(#""a\"b\\c""#.utf8)),
            (long + "\n", Array("\"\(long)\\n\"".utf8)),
            ("\u{00}\u{1F}\u{08}\u{0C}\r", Array(#""\u0000\u001f\b\f\r""#.utf8)),
        ]
        for (text, bytes) in cases {
            #expect(JSONValue.string(text).encoded() == bytes, "\(text.debugDescription)")
            // After other bytes, as inside an object: appended, nothing before it touched.
            var output = Array("{\"k\":".utf8)
            JSONValue.string(text).encode(into: &output)
            #expect(output == Array("{\"k\":".utf8) + bytes)
        }
    }

    @Test("literal dictionaries keep their order; replacing a key keeps its place")
    func order() {
        var object = JSONObject([("z", 1), ("a", 2)])
        object["z"] = 3
        object["m"] = 4
        #expect(JSONValue.object(object).encodedString() == #"{"z":3,"a":2,"m":4}"#)
        object["a"] = nil
        #expect(JSONValue.object(object).encodedString() == #"{"z":3,"m":4}"#)
    }

    @Test("paths render like JSONPath")
    func paths() {
        let path = JSONPath.root.appending("items").appending(index: 3).appending("a b")
        #expect(path.description == #"$.items[3]["a b"]"#)
    }
}

/// The parser's fast paths (strings without escapes, integers without a
/// String, duplicate keys found by a scan in small objects) against what the
/// general paths give.
@Suite("JSON parser fast paths")
struct JSONParserFastPathTests {
    @Test("a duplicate key is refused in a small object and past the scan limit, at the duplicate")
    func duplicatesAtAnySize() throws {
        for size in [1, 2, 15, 16, 17, 40] {
            let members = (0..<size).map { "\"k\($0)\":\($0)" }
            let unique = "{" + members.joined(separator: ",") + "}"
            #expect(try JSONParser.parse(unique).objectValue?.count == size)
            for repeated in [0, size - 1] {
                let text = "{" + (members + ["\"k\(repeated)\":true"]).joined(separator: ",") + "}"
                do {
                    _ = try JSONParser.parse(text)
                    Issue.record("size \(size): duplicate k\(repeated) accepted")
                } catch {
                    #expect(error.message == "duplicate key \"k\(repeated)\"")
                    #expect(error.offset == unique.utf8.count)  // the duplicate's opening quote
                }
            }
        }
    }

    @Test(
        "integers at and past the 64-bit edges",
        arguments: [
            ("0", JSONValue.integer(0)), ("-0", .integer(0)), ("9223372036854775807", .integer(.max)),
            ("-9223372036854775808", .integer(.min)), ("9223372036854775808", .double(9_223_372_036_854_775_808)),
            ("-9223372036854775809", .double(-9_223_372_036_854_775_809)), ("12345678901234567890123", .double(1.2345678901234568e22)),
            ("42", .integer(42)), ("-7", .integer(-7)),
        ]
    )
    func integerEdges(text: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(text) == expected)
    }

    @Test("strings with and without escapes, non-ASCII, and broken ones")
    func strings() throws {
        #expect(try JSONParser.parse(#""plain text""#) == "plain text")
        #expect(try JSONParser.parse(#""""#) == "")
        #expect(try JSONParser.parse("\"é😀 ü\"") == "é😀 ü")
        #expect(try JSONParser.parse(#"["a\tb","c"]"#) == ["a\tb", "c"])
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"unterminated") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"a\nb\"") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
    }
}
