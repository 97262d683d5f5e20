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

    public var description: String {
        sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message
    }
}
