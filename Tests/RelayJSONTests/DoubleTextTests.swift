@testable import RelayJSON
import Testing

/// ``DoubleText`` and ``JSONValue/appendNumber(_:to:)`` write bytes the
/// audit's rows already hold as `String(value)` and ``JSONValue/numberText(_:)``
/// wrote them (issue 26): those stay the oracle.
@Suite("Double text, written straight into bytes")
struct DoubleTextTests {
    static let edges: [Double] = [
        0, -0.0, 1, -1, 5, 0.1, 0.2, 0.1 + 0.2, 12.345, 0.001, 0.0001, 0.00001, 1e-7, 123_456_789.123_456_789,
        1e15, 1e15 - 1, 1e15 + 1, -1e15, 1e16, 1e17, 9.007_199_254_740_993e15, 1e300, -1e-300,
        .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        .pi, 1.0 / 3.0, 2.0 / 3.0, 1234.5678, 0.5, 4_503_599_627_370_496.5,
    ]

    /// Finite doubles of every exponent (random bit patterns), durations as
    /// the audit rounds them to microseconds, and latencies as it computes them.
    static func samples() -> [Double] {
        var generator = SystemRandomNumberGenerator()
        var values = edges
        for _ in 0..<20_000 {
            let value = Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &generator))
            if value.isFinite { values.append(value) }
        }
        for _ in 0..<20_000 {
            let seconds = Double(UInt64.random(in: 0...120_000_000_000, using: &generator)) / 1e9
            values.append(seconds * 1000)
            values.append((seconds * 1000 * 1000).rounded() / 1000)
        }
        return values
    }

    @Test("a Double's bytes are its description, for every kind of value")
    func descriptionBytes() {
        for value in Self.samples() + [.infinity, -.infinity, .nan] {
            var bytes = Array("before\t".utf8)
            DoubleText.append(value, to: &bytes)
            #expect(bytes == Array("before\t\(value.description)".utf8), "\(value)")
        }
    }

    @Test("a JSON number's bytes are numberText's, integral and not, either sign")
    func numberBytes() {
        for value in Self.samples() {
            for signed in [value, -value] {
                var bytes = Array("[".utf8)
                JSONValue.appendNumber(signed, to: &bytes)
                #expect(bytes == Array("[\(JSONValue.numberText(signed))".utf8), "\(signed)")
                #expect(JSONValue.double(signed).encoded() == Array(JSONValue.numberText(signed).utf8))
            }
        }
    }
}
