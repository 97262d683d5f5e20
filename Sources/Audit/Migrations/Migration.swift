internal import Zlib

/// One numbered schema change from `sql/migrations`.
public struct Migration: Sendable, Hashable {
    public var version: Int
    /// The file name without `.sql`, e.g. `0001_audit_table`.
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// CRC-32 of the SQL, recorded when applied so an edited, already
    /// applied migration is caught instead of silently skipped.
    public var checksum: String {
        let value = Zlib.crc32(Array(sql.utf8))
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 8 - text.count)) + text
    }
}
