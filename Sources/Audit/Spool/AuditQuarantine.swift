public import Foundation
import RelayJSON

/// Rows Postgres refused for their data (SQLSTATE class 22 or 23), kept on
/// disk next to the spool instead of blocking every row behind them.
///
/// One JSON object per line in `quarantine.jsonl`: when, the SQLSTATE and
/// message, the row's kind, its apns-id (audit rows), and the COPY line
/// itself (base64, byte for byte) so an operator can fix and re-insert it.
/// Written with `fsync` before the row leaves the spool or the journal.
public final class AuditQuarantine: @unchecked Sendable {
    // Appended only from the audit writer's thread; read by the CLI.

    /// One quarantined row.
    public struct Entry: Sendable, Hashable {
        public var quarantinedAt: String
        /// `audit` or `dead_token`.
        public var kind: String
        public var sqlState: String?
        public var error: String
        /// The send's apns-id (audit rows only; dead-token rows name no send).
        public var apnsID: String?
        public var app: String?
        /// The COPY text line as stored (may hold a token for dead-token rows: never print it).
        public var line: [UInt8]
    }

    public let directory: URL
    public var file: URL { directory.appendingPathComponent("quarantine.jsonl") }

    public init(directory: String) throws {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Appends one row durably: its line, the row format that names the
    /// line's columns, and the send and app it is for (read by the caller).
    func append(
        kind: AuditSpool.Kind, format: AuditRowFormat, line: [UInt8], apnsID: String?, app: String?, error: PostgresError,
        at nanoseconds: UInt64
    ) throws {
        var object = JSONObject()
        object["quarantined_at"] = .string(CopyText.timestamp(nanoseconds))
        object["kind"] = .string(kind == .deadToken ? "dead_token" : "audit")
        object["format"] = .integer(Int64(format.rawValue))
        object["sqlstate"] = error.sqlState.map { .string($0) } ?? .null
        object["error"] = .string(error.message)
        if let apnsID { object["apns_id"] = .string(apnsID) }
        if let app { object["app"] = .string(app) }
        object["line_base64"] = .string(Data(line).base64EncodedString())
        let text = JSONValue.object(object).encodedString() + "\n"
        if !FileManager.default.fileExists(atPath: file.path) {
            FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
        try handle.synchronize()
    }

    /// Every quarantined row, oldest first.
    public func entries() throws -> [Entry] {
        guard FileManager.default.fileExists(atPath: file.path) else { return [] }
        let text = try String(contentsOf: file, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line -> Entry? in
            guard case .object(let object)? = try? JSONParser.parse(String(line)) else { return nil }
            func string(_ key: String) -> String? {
                if case .string(let value)? = object[key] { return value }
                return nil
            }
            return Entry(
                quarantinedAt: string("quarantined_at") ?? "", kind: string("kind") ?? "", sqlState: string("sqlstate"),
                error: string("error") ?? "", apnsID: string("apns_id"), app: string("app"),
                line: string("line_base64").flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) } ?? [])
        }
    }
}
