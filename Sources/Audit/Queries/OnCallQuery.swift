public import Logging

/// One of the on-call queries in `sql/queries`: the SQL as psql runs it, with
/// `:'name'` variables, and a form libpq can bind.
public struct OnCallQuery: Sendable, Hashable {
    /// The file name without `.sql`, e.g. `by_apns_id`.
    public var name: String
    public var sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }

    /// The query's first comment line: which question it answers.
    public var question: String {
        sql.split(separator: "\n").first.map { String($0.drop(while: { $0 == "-" || $0 == " " })) } ?? name
    }

    /// The psql variable names, in order of first use.
    public var variables: [String] { bindable.variables }

    /// The SQL with each `:'name'` replaced by `$1`, `$2`… and the variable order.
    public var bindable: (sql: String, variables: [String]) {
        var variables: [String] = []
        var output = ""
        var rest = Substring(sql)
        while let start = rest.range(of: ":'") {
            output += rest[..<start.lowerBound]
            let afterQuote = rest[start.upperBound...]
            guard let end = afterQuote.firstIndex(of: "'") else { break }
            let name = String(afterQuote[..<end])
            if !variables.contains(name) { variables.append(name) }
            output += "$\(variables.firstIndex(of: name)! + 1)"
            rest = afterQuote[afterQuote.index(after: end)...]
        }
        output += rest
        return (output, variables)
    }

    public static func named(_ name: String) -> OnCallQuery? { all.first { $0.name == name } }
}

/// Runs on-call queries against the audit database.
public struct AuditQueryRunner: Sendable {
    public let conninfo: String
    /// Where server notices go (nil discards them).
    public let logger: Logger?

    public init(conninfo: String, logger: Logger? = nil) {
        self.conninfo = conninfo
        self.logger = logger
    }

    /// Runs `query` with `values` for its variables.
    public func run(_ query: OnCallQuery, _ values: [String: String]) throws -> PostgresRows {
        let (sql, variables) = query.bindable
        let parameters: [String?] = try variables.map { name in
            guard let value = values[name] else { throw PostgresError(message: "query \(query.name) needs a value for \(name)", sqlState: nil) }
            return value
        }
        let connection = try PostgresConnection(conninfo: conninfo, logger: logger)
        // UTC, so every timestamp comes back as "…+00" and is printed as RFC 3339 "…Z", as the API does.
        try connection.execute("SET TIME ZONE 'UTC'")
        var rows = try connection.execute(sql.trimmingTrailingSemicolon(), parameters)
        for (column, type) in rows.types.enumerated() where type == PostgresRows.timestampWithTimeZone {
            for row in rows.rows.indices { rows.rows[row][column] = rows.rows[row][column].map(Self.rfc3339) }
        }
        return rows
    }

    /// Postgres' ISO output of a UTC `timestamptz` (`2026-11-22 08:41:37.123456+00`)
    /// as RFC 3339 with milliseconds (`2026-11-22T08:41:37.123Z`), the API's form.
    static func rfc3339(_ text: String) -> String {
        guard text.hasSuffix("+00"), text.count >= 19 else { return text }
        let body = text.dropLast(3)
        let seconds = body.prefix(19)
        let fraction = body.dropFirst(19).drop { $0 == "." }
        let milliseconds = (fraction + "000").prefix(3)
        return seconds.replacingOccurrences(of: " ", with: "T") + "." + milliseconds + "Z"
    }

    /// Runs any statement with `$1…` parameters (the demo's summaries, tests).
    public func execute(_ sql: String, _ parameters: [String?] = []) throws -> PostgresRows {
        try PostgresConnection(conninfo: conninfo, logger: logger).execute(sql, parameters)
    }
}

extension String {
    func trimmingTrailingSemicolon() -> String {
        var text = self
        while let last = text.last, last == ";" || last == "\n" || last == " " { text.removeLast() }
        return text
    }
}
