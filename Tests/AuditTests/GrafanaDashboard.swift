import Foundation
import Testing

/// The parts of a dashboard JSON file the SQL tests need.
struct GrafanaDashboard {
    struct Panel {
        var title: String
        var sql: String
        /// The panel's minimum interval ("5m"), what `$__interval` is at least.
        var interval: String?
        /// The most points Grafana asks for over the range (the panel's
        /// maxDataPoints; without it, the panel's width in pixels).
        var maxDataPoints: Int?
        /// Field names that carry data links.
        var links: [String]

        /// `$__interval` over `range`: from maxDataPoints when the panel sets
        /// it; otherwise its minimum interval, what the widest panel gets.
        func interval(over range: GrafanaSQL.Range) -> String? {
            guard let maxDataPoints else { return interval }
            return GrafanaSQL.interval(range: range, maxDataPoints: maxDataPoints, minimum: interval)
        }
    }

    struct Variable {
        var name: String
        var sql: String
    }

    var json: [String: Any]
    var panels: [Panel] = []
    var queryVariables: [Variable] = []

    init(contentsOf url: URL) throws {
        json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var stack = (json["panels"] as? [[String: Any]]) ?? []
        while !stack.isEmpty {
            let panel = stack.removeFirst()
            stack += (panel["panels"] as? [[String: Any]]) ?? []  // panels inside collapsed rows
            let title = panel["title"] as? String ?? "?"
            let overrides = ((panel["fieldConfig"] as? [String: Any])?["overrides"] as? [[String: Any]]) ?? []
            let links = overrides.compactMap { override -> String? in
                let properties = override["properties"] as? [[String: Any]] ?? []
                guard properties.contains(where: { $0["id"] as? String == "links" }) else { return nil }
                return (override["matcher"] as? [String: Any])?["options"] as? String
            }
            for target in (panel["targets"] as? [[String: Any]]) ?? [] {
                let sql = try #require(target["rawSql"] as? String, "panel \(title): a target without rawSql")
                panels.append(Panel(title: title, sql: sql, interval: panel["interval"] as? String,
                                    maxDataPoints: panel["maxDataPoints"] as? Int, links: links))
            }
        }
        for variable in ((json["templating"] as? [String: Any])?["list"] as? [[String: Any]]) ?? [] where variable["type"] as? String == "query" {
            let query = variable["query"]
            let sql = (query as? String) ?? ((query as? [String: Any])?["rawSql"] as? String) ?? ((query as? [String: Any])?["query"] as? String)
            queryVariables.append(Variable(name: variable["name"] as? String ?? "?", sql: try #require(sql)))
        }
    }

    /// The dashboard's default time range ("now-6h" to "now") at `now`.
    func defaultRange(now: Date) throws -> GrafanaSQL.Range {
        let time = try #require(json["time"] as? [String: String])
        return GrafanaSQL.Range(from: try Self.instant(try #require(time["from"]), now: now),
                                to: try Self.instant(try #require(time["to"]), now: now))
    }

    /// "now", "now-30m", "now-6h", "now-7d".
    static func instant(_ text: String, now: Date) throws -> Date {
        if text == "now" { return now }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        let amount = try #require(Double(text.dropFirst(4).dropLast()), "relative time \(text)")
        let unit = try #require(text.last.flatMap { units[$0] }, "relative time \(text)")
        #expect(text.hasPrefix("now-"), "relative time \(text)")
        return now.addingTimeInterval(-amount * unit)
    }
}
