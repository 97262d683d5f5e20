internal import CLibPQ
import Logging
import Foundation

/// One blocking libpq connection. Used only from the audit writer's own
/// thread and from command-line tools, never from Swift's cooperative pool.
final class PostgresConnection: @unchecked Sendable {
    // Not shared: each connection is used by one thread at a time (the
    // writer thread, or a CLI command); @unchecked only lets it be handed
    // to that thread.
    private let connection: OpaquePointer
    /// Retained for libpq's notice callback; released in deinit.
    private let noticeSink: Unmanaged<NoticeSink>

    /// Connects with a libpq connection string or URL; an empty string uses
    /// the PG* environment variables (PGHOST, PGSSLMODE, …), as libpq does.
    ///
    /// Server notices and warnings ("relation … already exists, skipping")
    /// go to `logger` as structured lines, never raw to standard error
    /// (libpq's default), which would break a JSON log stream. Without a
    /// logger they are discarded.
    init(conninfo: String, logger: Logger? = nil) throws(PostgresError) {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgresError(message: "out of memory creating a libpq connection", sqlState: nil)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(message: message, sqlState: nil)
        }
        self.connection = connection
        noticeSink = Unmanaged.passRetained(NoticeSink(logger: logger))
        PQsetNoticeReceiver(connection, { context, result in
            guard let context, let result else { return }
            Unmanaged<NoticeSink>.fromOpaque(context).takeUnretainedValue().receive(result)
        }, noticeSink.toOpaque())
    }

    deinit {
        PQfinish(connection)
        noticeSink.release()
    }

    /// True inside a transaction block (idle, failed or active), when a
    /// ROLLBACK has something to end.
    var inTransaction: Bool {
        let status = PQtransactionStatus(connection)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Ends a transaction left open by a failure; nothing when none is open
    /// (a ROLLBACK outside one only earns a warning).
    func rollbackIfNeeded() {
        if inTransaction { _ = try? execute("ROLLBACK") }
    }

    /// False once the server went away; the writer then reconnects.
    var isHealthy: Bool { PQstatus(connection) == CONNECTION_OK }

    /// Runs one or more statements without parameters.
    @discardableResult
    func execute(_ sql: String) throws(PostgresError) -> PostgresRows {
        let result = PQexec(connection, sql)
        return try consume(result)
    }

    /// Runs one statement with text parameters ($1, $2, … ; nil is NULL).
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?]) throws(PostgresError) -> PostgresRows {
        let cStrings = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { cStrings.forEach { free($0) } }
        let result = cStrings.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
            PQexecParams(connection, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
        }
        return try consume(result)
    }

    /// `COPY … FROM STDIN` with `data` (text format) as the whole input.
    /// Returns the number of rows copied.
    @discardableResult
    func copyIn(_ copyStatement: String, data: [UInt8]) throws(PostgresError) -> Int {
        let start = PQexec(connection, copyStatement)
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            _ = try consume(start)
            throw PostgresError(message: "COPY did not start", sqlState: nil)
        }
        PQclear(start)
        var offset = 0
        let chunk = 1 << 20
        while offset < data.count {
            let length = min(chunk, data.count - offset)
            let sent = data.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.advanced(by: offset).withMemoryRebound(to: CChar.self, capacity: length) {
                    PQputCopyData(connection, $0, Int32(length))
                }
            }
            guard sent == 1 else { break }
            offset += length
        }
        let ended = PQputCopyEnd(connection, offset == data.count ? nil : "client could not send all data")
        guard ended == 1 else { throw PostgresError(message: Self.trimmed(PQerrorMessage(connection)), sqlState: nil) }
        var copied = 0
        var failure: PostgresError?
        while let result = PQgetResult(connection) {
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                copied = Int(String(cString: PQcmdTuples(result))) ?? 0
            } else if failure == nil {
                failure = Self.error(from: result, connection: connection)
            }
            PQclear(result)
        }
        if let failure { throw failure }
        return copied
    }

    private func consume(_ result: OpaquePointer?) throws(PostgresError) -> PostgresRows {
        guard let result else { throw PostgresError(message: Self.trimmed(PQerrorMessage(connection)), sqlState: nil) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(columns: [], rows: [])
        case PGRES_TUPLES_OK:
            let columns = (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) }
            var rows: [[String?]] = []
            rows.reserveCapacity(Int(PQntuples(result)))
            for row in 0..<PQntuples(result) {
                rows.append((0..<PQnfields(result)).map { column in
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                })
            }
            var answer = PostgresRows(columns: columns, rows: rows)
            answer.types = (0..<PQnfields(result)).map { UInt32(PQftype(result, $0)) }
            return answer
        default:
            throw Self.error(from: result, connection: connection)
        }
    }

    private static func error(from result: OpaquePointer, connection: OpaquePointer) -> PostgresError {
        let message = PQresultErrorMessage(result).map { trimmed($0) } ?? ""
        let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        return PostgresError(message: message.isEmpty ? trimmed(PQerrorMessage(connection)) : message, sqlState: sqlState)
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        var string = String(cString: text)
        while string.last == "\n" || string.last == " " { string.removeLast() }
        return string
    }
}

/// Turns libpq notices into log lines: severity, SQLSTATE and message as
/// fields. NOTICE and DEBUG are routine (IF NOT EXISTS skips) and log at
/// debug; INFO and LOG at info; WARNING at warning.
final class NoticeSink: @unchecked Sendable {
    // Called by libpq on the thread using the connection, one at a time.
    let logger: Logger?

    init(logger: Logger?) { self.logger = logger }

    func receive(_ result: OpaquePointer) {
        guard let logger else { return }
        func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
        let severity = field(Int32(UInt8(ascii: "V"))) ?? field(Int32(UInt8(ascii: "S"))) ?? "NOTICE"
        let level: Logger.Level = switch severity {
        case "WARNING": .warning
        case "INFO", "LOG": .info
        default: .debug
        }
        var metadata: Logger.Metadata = ["severity": "\(severity)"]
        if let code = field(Int32(UInt8(ascii: "C"))) { metadata["sqlstate"] = "\(code)" }
        if let detail = field(Int32(UInt8(ascii: "D"))) { metadata["detail"] = "\(detail)" }
        let message = field(Int32(UInt8(ascii: "M"))) ?? Self.trimmed(PQresultErrorMessage(result))
        logger.log(level: level, "postgres: \(message)", metadata: metadata)
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        return String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// Versions of the C libraries the audit runs on.
public enum AuditLibraryVersions {
    /// The running libpq's version (`15.18`), for `apns_relay_build_info`.
    public static var libpq: String {
        let number = Int(PQlibVersion())
        guard number >= 100_000 else { return "\(number / 10000).\(number / 100 % 100).\(number % 100)" }
        return "\(number / 10000).\(number % 10000)"
    }
}
