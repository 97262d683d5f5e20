/// The rows a statement returned, as text (libpq's text format).
public struct PostgresRows: Sendable {
    public var columns: [String]
    public var rows: [[String?]]
    /// Each column's type OID (`PQftype`), when the statement returned rows.
    public var types: [UInt32] = []

    /// The OID of `timestamptz`.
    public static let timestampWithTimeZone: UInt32 = 1184

    /// The value of `column` in `row`.
    public func value(_ row: Int, _ column: String) -> String? {
        guard let index = columns.firstIndex(of: column) else { return nil }
        return rows[row][index]
    }
}

/// A failure reported by libpq or the server.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The SQLSTATE code, e.g. `23505` for a unique violation.
    public var sqlState: String?
    /// Postgres did not answer within the connection's ``PostgresWaitBound``
    /// (or its cutoff passed): the connection was given up, and whether the
    /// statement took effect is unknown.
    public var timedOut = false

    public init(message: String, sqlState: String?, timedOut: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.timedOut = timedOut
    }

    /// Postgres did not finish in time: this relay gave the connection up
    /// (``timedOut``), or the server cancelled the statement at its
    /// `statement_timeout` (SQLSTATE 57014, a table locked by a long
    /// transaction). A fault of the database every relay on it shares.
    public var notAnswered: Bool { timedOut || sqlState == "57014" }

    public var description: String {
        sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message
    }
}
