import Foundation

/// How Grafana turns a panel's SQL into what Postgres runs: the browser
/// interpolates dashboard variables and `$__interval` (the SQL data sources'
/// quoting), then the server expands the macros
/// (pkg/tsdb/grafana-postgresql-datasource/macros.go).
enum GrafanaSQL {
    struct Range: CustomStringConvertible {
        var from: Date
        var to: Date
        var description: String { "\(GrafanaSQL.rfc3339(from)) to \(GrafanaSQL.rfc3339(to))" }
    }

    enum Value {
        case single(String)
        case multi([String])

        var text: String? {
            if case .single(let value) = self { return value }
            return nil
        }
    }

    struct Unknown: Error, CustomStringConvertible {
        var description: String
    }

    static func expand(_ sql: String, range: Range, interval: String?, values: [String: Value]) throws -> String {
        try macros(try variables(sql, interval: interval, values: values), range: range)
    }

    /// `$name`, `${name}` and `${name:sqlstring}`. A single value (textbox)
    /// has its quotes doubled; a multi-value one becomes a list of quoted
    /// literals, ready for `IN (...)`; `:sqlstring` quotes either.
    static func variables(_ sql: String, interval: String?, values: [String: Value]) throws -> String {
        let pattern = #/\$(\w+)|\$\{(\w+)(?::(\w+))?\}/#
        var output = ""
        var rest = Substring(sql)
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            rest = rest[match.range.upperBound...]
            let name = String(match.output.1 ?? match.output.2!)
            let format = match.output.3.map(String.init)
            if name == "__interval", let interval {
                output += interval
                continue
            }
            if name == "__interval_ms", let interval {
                guard let seconds = seconds(interval) else { throw Unknown(description: "interval \(interval)") }
                output += String(Int((seconds * 1_000).rounded()))
                continue
            }
            if name.hasPrefix("__") {  // a macro or built-in the server expands
                output += match.output.0
                continue
            }
            guard let value = values[name] else { throw Unknown(description: "no value for variable $\(name)") }
            switch (value, format) {
            case (.single(let text), nil): output += escape(text)
            case (.single(let text), "sqlstring"): output += "'\(escape(text))'"
            case (.multi(let texts), nil), (.multi(let texts), "sqlstring"): output += texts.map { "'\(escape($0))'" }.joined(separator: ",")
            default: throw Unknown(description: "format \(format!) of $\(name)")
            }
        }
        return output + rest
    }

    static func escape(_ text: String) -> String { text.replacingOccurrences(of: "'", with: "''") }

    static func macros(_ sql: String, range: Range) throws -> String {
        let pattern = #/\$([_a-zA-Z0-9]+)\(([^\)]*)\)/#
        var output = ""
        var rest = Substring(sql)
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            rest = rest[match.range.upperBound...]
            let arguments = match.output.2.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            output += try macro(String(match.output.1), arguments, range: range)
        }
        return output + rest
    }

    static func macro(_ name: String, _ arguments: [String], range: Range) throws -> String {
        switch name {
        case "__timeFilter": return "\(arguments[0]) BETWEEN '\(rfc3339(range.from))' AND '\(rfc3339(range.to))'"
        case "__timeFrom": return "'\(rfc3339(range.from))'"
        case "__timeTo": return "'\(rfc3339(range.to))'"
        case "__timeGroup", "__timeGroupAlias":
            guard arguments.count >= 2, let seconds = seconds(arguments[1].trimmingCharacters(in: CharacterSet(charactersIn: "'"))) else {
                throw Unknown(description: "$\(name)(\(arguments.joined(separator: ", "))): needs a column and an interval")
            }
            let number = seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
            let group = "floor(extract(epoch from \(arguments[0]))/\(number))*\(number)"
            return name == "__timeGroup" ? group : group + " AS \"time\""
        default: throw Unknown(description: "macro $\(name)")
        }
    }

    /// `$__interval` as the data source computes it for a panel
    /// (pkg/tsdb/grafana-postgresql-datasource/sqleng, intervalv2.Calculate):
    /// the range over the panel's maxDataPoints, at least its minimum
    /// interval, else rounded to Grafana's steps; written as gtime.FormatInterval
    /// writes it ("5m", "1h", "2d").
    static func interval(range: Range, maxDataPoints: Int, minimum: String?) -> String {
        let raw = range.to.timeIntervalSince(range.from) * 1_000 / Double(maxDataPoints)
        let minimumMs = minimum.flatMap(seconds).map { $0 * 1_000 } ?? 0
        let ms = raw < minimumMs ? minimumMs : roundInterval(raw)
        let units: [(Double, String)] = [(31_536_000_000, "y"), (86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s"), (1, "ms")]
        let (size, unit) = units.first { ms >= $0.0 } ?? (1, "ms")
        return "\(max(1, Int(ms / size)))\(unit)"
    }

    /// Grafana's roundInterval (intervalv2, rangeutil.ts): milliseconds to its steps.
    static func roundInterval(_ ms: Double) -> Double {
        let steps: [(below: Double, step: Double)] = [
            (10, 1), (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1_500, 1_000), (3_500, 2_000), (7_500, 5_000),
            (12_500, 10_000), (17_500, 15_000), (25_000, 20_000), (45_000, 30_000), (90_000, 60_000), (210_000, 120_000),
            (450_000, 300_000), (750_000, 600_000), (1_050_000, 900_000), (1_500_000, 1_200_000), (2_700_000, 1_800_000),
            (5_400_000, 3_600_000), (9_000_000, 7_200_000), (16_200_000, 10_800_000), (32_400_000, 21_600_000),
            (86_400_000, 43_200_000), (604_800_000, 86_400_000), (1_814_400_000, 604_800_000), (3_628_800_000, 2_592_000_000),
        ]
        return steps.first { ms < $0.below }?.step ?? 31_536_000_000
    }

    /// "30s", "5m", "1h", "1d" as seconds.
    static func seconds(_ interval: String) -> Double? {
        let units: [String: Double] = ["ms": 0.001, "s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        guard let unit = units.keys.sorted(by: { $0.count > $1.count }).first(where: { interval.hasSuffix($0) }),
              let amount = Double(interval.dropLast(unit.count)) else { return nil }
        return amount * units[unit]!
    }

    /// Go's time.RFC3339Nano in UTC: fractional seconds only when non-zero,
    /// without trailing zeros.
    static func rfc3339(_ date: Date) -> String {
        let whole = date.timeIntervalSince1970.rounded(.down)
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        var text = formatter.string(from: Date(timeIntervalSince1970: whole))
        let nanoseconds = Int(((date.timeIntervalSince1970 - whole) * 1e9).rounded())
        if nanoseconds > 0 {
            var fraction = String(format: "%09d", nanoseconds)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text.removeLast()  // "Z"
            text += "." + fraction + "Z"
        }
        return text
    }
}
