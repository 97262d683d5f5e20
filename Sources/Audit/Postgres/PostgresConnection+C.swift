internal import CLibPQ
import Foundation
import Logging
import RelayBasics

/// One libpq connection, used by one thread at a time: the audit writer's
/// own, a Dispatch queue's (idempotency keys, the dead-token feed) or a
/// command-line tool's, never Swift's cooperative pool.
///
/// Its calls wait on Postgres, and with a ``PostgresWaitBound`` never longer
/// than the bound: libpq's socket is non-blocking and each wait is a
/// `poll(2)` with the time left, so a Postgres that stops answering ends the
/// call in ``PostgresError/timedOut`` and the connection is given up
/// (``isHealthy`` is false from then on).
final class PostgresConnection: @unchecked Sendable {
    // Not shared: each connection is used by one thread at a time (the
    // writer thread, or a CLI command); @unchecked only lets it be handed
    // to that thread.
    private let connection: OpaquePointer
    /// Retained for libpq's notice callback; released in deinit.
    private let noticeSink: Unmanaged<NoticeSink>
    let bound: PostgresWaitBound?
    /// A wait passed its bound: the connection's state is unknown and it is
    /// not used again.
    private var abandoned = false

    /// Connects with a libpq connection string or URL; an empty string uses
    /// the PG* environment variables (PGHOST, PGSSLMODE, …), as libpq does.
    ///
    /// With a `bound`, the connect (DNS aside) ends within it, or within the
    /// conninfo's own `connect_timeout` if that is shorter, and the server
    /// is told the bound as `statement_timeout`. Without one, libpq's own
    /// rules apply (`connect_timeout`, else no limit): the command-line tools.
    ///
    /// Server notices and warnings ("relation … already exists, skipping")
    /// go to `logger` as structured lines, never raw to standard error
    /// (libpq's default), which would break a JSON log stream. Without a
    /// logger they are discarded.
    init(conninfo: String, logger: Logger? = nil, bound: PostgresWaitBound? = nil) throws(PostgresError) {
        let connection: OpaquePointer
        if let bound {
            connection = try Self.connect(conninfo, within: bound)
        } else {
            connection = try Self.connect(conninfo)
        }
        // Every statement is sent and waited for by this type's own loop.
        guard PQsetnonblocking(connection, 1) == 0 else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(message: message, sqlState: nil)
        }
        self.connection = connection
        self.bound = bound
        noticeSink = Unmanaged.passRetained(NoticeSink(logger: logger))
        PQsetNoticeReceiver(connection, { context, result in
            guard let context, let result else { return }
            Unmanaged<NoticeSink>.fromOpaque(context).takeUnretainedValue().receive(result)
        }, noticeSink.toOpaque())
        if let bound {
            // Postgres cancels a statement at the bound itself, so a lock
            // wait ends server-side too, and the connection stays usable.
            try execute("SET statement_timeout = \(bound.statementTimeoutMilliseconds)")
        }
    }

    deinit {
        // Non-blocking: the goodbye is sent if the socket takes it, never waited on.
        PQfinish(connection)
        noticeSink.release()
    }

    /// libpq's blocking connect (the tools').
    private static func connect(_ conninfo: String) throws(PostgresError) -> OpaquePointer {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgresError(message: "out of memory creating a libpq connection", sqlState: nil)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(message: message, sqlState: nil)
        }
        return connection
    }

    /// libpq's non-blocking connect, each step's wait a `poll(2)` within
    /// `bound` (libpq's async connect ignores `connect_timeout`: it is read
    /// here, and the shorter of the two applies).
    private static func connect(_ conninfo: String, within bound: PostgresWaitBound) throws(PostgresError) -> OpaquePointer {
        let started = MonotonicClock.now()
        // Parsed once: for connect_timeout and for the host to look up.
        let parsed = PostgresConninfo(conninfo)
        let seconds = connectSeconds(parsed, bound: bound.seconds)
        let deadline = started &+ MonotonicClock.nanoseconds(seconds)
        // Host names are looked up here, within the bound: libpq's own lookup blocks.
        let startedConnect: OpaquePointer?
        if let parsed, let servers = parsed.serversToLookUp {
            let lookups = servers.map { $0.looksUp ? HostLookup.start(host: $0.host, port: Int($0.port ?? "") ?? 5432) : nil }
            let resolved = try resolve(servers, lookups: lookups, started: started, deadline: deadline, seconds: seconds, cutoff: bound.cutoff)
            // `resolve` returns only with a server left to connect to.
            startedConnect = parsed.connectParameters(resolved).flatMap(PostgresConninfo.startConnect)
        } else if let parsed, parsed.entries > 1 {
            // Servers given by address or socket directory: no lookup, but still a list to take a writable server from.
            startedConnect = PostgresConninfo.startConnect(PostgresConninfo.requiringWrites(parsed.options, entries: parsed.entries))
        } else {
            startedConnect = PQconnectStart(conninfo)
        }
        guard let connection = startedConnect else {
            throw PostgresError(message: "out of memory creating a libpq connection", sqlState: nil)
        }
        // As libpq's documentation says: first wait as if the poll asked to write.
        var polled = PGRES_POLLING_WRITING
        while PQstatus(connection) != CONNECTION_BAD {
            if polled == PGRES_POLLING_OK { return connection }
            let ready = waitForSocket(
                PQsocket(connection), writing: polled == PGRES_POLLING_WRITING, reading: polled != PGRES_POLLING_WRITING,
                deadline: deadline, cutoff: bound.cutoff)
            guard ready else {
                PQfinish(connection)
                throw timedOut("opening a connection", seconds: seconds, cutoff: bound.cutoff)
            }
            polled = PQconnectPoll(connection)
            if polled == PGRES_POLLING_FAILED { break }
        }
        let message = Self.trimmed(PQerrorMessage(connection))
        PQfinish(connection)
        throw PostgresError(message: message, sqlState: nil)
    }

    /// Waits for the servers' lookups (`lookups`: one per server, nil for
    /// a server not looked up), all running at once, until each has ended or
    /// `deadline` (or the cutoff) has passed; once one has found addresses,
    /// the others get until half the bound from `started`, so a name whose
    /// resolver hangs leaves the connect the other half for the servers
    /// found. A server whose lookup failed or did not answer is left out
    /// (nil addresses), as libpq leaves out a name it cannot look up. Throws
    /// when no server is left: a timeout naming the names not answered, else
    /// libpq's message for each failed lookup.
    static func resolve(
        _ servers: [PostgresConninfo.Server], lookups: [HostLookup?], started: UInt64, deadline: UInt64, seconds: Double,
        cutoff: PostgresCutoff?
    ) throws(PostgresError) -> [PostgresConninfo.Resolved] {
        func found(_ lookup: HostLookup?) -> Bool {
            if case .addresses(let addresses)? = lookup?.outcome { return !addresses.isEmpty }
            return false
        }
        let halfway = started &+ (deadline &- started) / 2
        while true {
            let running = lookups.compactMap { $0 }.filter { $0.outcome == nil }
            guard !running.isEmpty else { break }
            let until = lookups.contains(where: found) ? min(halfway, deadline) : deadline
            guard waitForAnyReadable(running.map(\.readyDescriptor), deadline: until, cutoff: cutoff) else { break }
        }
        var resolved: [PostgresConninfo.Resolved] = []
        var failures: [String] = []
        var unanswered: [String] = []
        for (server, lookup) in zip(servers, lookups) {
            switch lookup?.outcome {
            case .addresses(let addresses)? where !addresses.isEmpty:
                resolved.append(PostgresConninfo.Resolved(server: server, addresses: addresses))
                continue
            case .addresses?: failures.append("could not translate host name \"\(server.host)\" to address: no address")
            case .failed(let message)?: failures.append("could not translate host name \"\(server.host)\" to address: \(message)")
            case nil where lookup != nil: unanswered.append("\"\(server.host)\"")
            case nil: break
            }
            resolved.append(PostgresConninfo.Resolved(server: server, addresses: nil))
        }
        if resolved.contains(where: { !$0.server.looksUp || $0.addresses != nil }) { return resolved }
        if !unanswered.isEmpty {
            let names = unanswered.count == 1 ? "the host name \(unanswered[0])" : "the host names \(unanswered.joined(separator: ", "))"
            throw timedOut("the resolver, looking up \(names)", seconds: seconds, cutoff: cutoff)
        }
        throw PostgresError(message: failures.joined(separator: "; "), sqlState: nil)
    }

    /// Seconds a bounded connect may take: `bound`, or the conninfo's own
    /// `connect_timeout` when that is shorter (as libpq reads it: whole
    /// seconds, at least 2; 0 or none is no limit).
    static func connectSeconds(conninfo: String, bound: Double) -> Double {
        connectSeconds(PostgresConninfo(conninfo), bound: bound)
    }

    /// ``connectSeconds(conninfo:bound:)`` of a conninfo already parsed (nil: libpq refused it).
    static func connectSeconds(_ parsed: PostgresConninfo?, bound: Double) -> Double {
        guard let value = parsed?.value("connect_timeout"), let seconds = Int(value), seconds > 0 else { return bound }
        return min(bound, Double(max(seconds, 2)))
    }

    private static func timedOut(_ what: String, seconds: Double, cutoff: PostgresCutoff?) -> PostgresError {
        if let cutoff, cutoff.hasPassed {
            return PostgresError(message: "Postgres did not answer before the drain's end (\(what)); the connection was closed", sqlState: nil, timedOut: true)
        }
        let shown = seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)"
        return PostgresError(
            message: "Postgres did not answer within \(shown) s (\(what)); the connection was closed", sqlState: nil, timedOut: true)
    }

    /// Waits until `socket` can be written (`writing`) or read (`reading`),
    /// or it failed; false when `deadline` or the cutoff passed first.
    private static func waitForSocket(_ socket: Int32, writing: Bool, reading: Bool, deadline: UInt64, cutoff: PostgresCutoff?) -> Bool {
        guard socket >= 0 else { return true }  // libpq reports the broken connection itself
        // A failed poll is true too: the next libpq call reports it.
        var entries = [pollfd(fd: socket, events: Int16((writing ? POLLOUT : 0) | (reading ? POLLIN : 0)), revents: 0)]
        return poll(&entries, deadline: deadline, cutoff: cutoff)
    }

    /// Waits until one of `descriptors` can be read; false when `deadline`
    /// or the cutoff passed first (a failed poll is true: the caller reads the outcomes).
    private static func waitForAnyReadable(_ descriptors: [Int32], deadline: UInt64, cutoff: PostgresCutoff?) -> Bool {
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        return poll(&entries, deadline: deadline, cutoff: cutoff)
    }

    /// `poll(2)` on `entries` until one is ready (true; a failure other than
    /// EINTR is true too) or `deadline` or the cutoff passed (false). With a
    /// cutoff, waits in slices of 100 ms so one set meanwhile is seen.
    private static func poll(_ entries: inout [pollfd], deadline: UInt64, cutoff: PostgresCutoff?) -> Bool {
        while true {
            let now = MonotonicClock.now()
            let end = min(deadline, cutoff?.current ?? .max)
            guard now < end else { return false }
            var milliseconds: Int32 = -1
            if end != .max {
                var left = (end - now + 999_999) / 1_000_000
                if cutoff != nil { left = min(left, 100) }
                milliseconds = Int32(min(left, UInt64(Int32.max)))
            }
            let result = Glibc.poll(&entries, nfds_t(entries.count), milliseconds)
            if result > 0 { return true }
            if result < 0, errno != EINTR { return true }
        }
    }

    /// The deadline of a statement begun now: the bound and its grace.
    private func statementDeadline() -> UInt64 {
        guard let bound else { return .max }
        return MonotonicClock.now() &+ MonotonicClock.nanoseconds(bound.seconds + PostgresWaitBound.grace)
    }

    /// Waits for the socket, or gives the connection up and throws.
    private func wait(writing: Bool, reading: Bool, deadline: UInt64, doing what: String) throws(PostgresError) {
        guard Self.waitForSocket(PQsocket(connection), writing: writing, reading: reading, deadline: deadline, cutoff: bound?.cutoff) else {
            abandoned = true
            throw Self.timedOut(what, seconds: bound?.seconds ?? 0, cutoff: bound?.cutoff)
        }
    }

    /// libpq's own message for the last failure on this connection.
    private var libpqError: PostgresError {
        PostgresError(message: Self.trimmed(PQerrorMessage(connection)), sqlState: nil)
    }

    private func refuseIfAbandoned() throws(PostgresError) {
        if abandoned { throw PostgresError(message: "the connection was given up after Postgres did not answer", sqlState: nil, timedOut: true) }
    }

    /// Sends what libpq has queued (PQflush), reading what arrives meanwhile.
    private func flush(deadline: UInt64, doing what: String) throws(PostgresError) {
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { return }
            if flushed < 0 { throw libpqError }
            try wait(writing: true, reading: true, deadline: deadline, doing: what)
            if PQconsumeInput(connection) == 0 { throw libpqError }
        }
    }

    /// The next result of the statement in flight, nil after the last.
    private func nextResult(deadline: UInt64, doing what: String) throws(PostgresError) -> OpaquePointer? {
        while PQisBusy(connection) == 1 {
            try wait(writing: false, reading: true, deadline: deadline, doing: what)
            if PQconsumeInput(connection) == 0 { throw libpqError }
        }
        return PQgetResult(connection)
    }

    /// Collects every result of the statement in flight, as `PQexec` would
    /// return it: the first error, else the last result.
    private func finishStatement(deadline: UInt64, doing what: String) throws(PostgresError) -> PostgresRows {
        var answer = PostgresRows(columns: [], rows: [])
        var failure: PostgresError?
        var sawResult = false
        while let result = try nextResult(deadline: deadline, doing: what) {
            sawResult = true
            let status = PQresultStatus(result)
            if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                // A COPY sent through execute (copyIn is its way): libpq would
                // hand this result back forever. Not used again.
                PQclear(result)
                abandoned = true
                throw PostgresError(message: "a COPY statement was run where rows or a command were expected", sqlState: nil)
            }
            if failure == nil {
                do throws(PostgresError) {
                    answer = try consume(result)
                } catch {
                    failure = error
                }
            }
            PQclear(result)
        }
        if let failure { throw failure }
        guard sawResult else { throw libpqError }
        return answer
    }

    /// True inside a transaction block (idle, failed or active), when a
    /// ROLLBACK has something to end.
    var inTransaction: Bool {
        let status = PQtransactionStatus(connection)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Ends a transaction left open by a failure; nothing when none is open
    /// (a ROLLBACK outside one only earns a warning) or the connection was
    /// given up (closing it ends the transaction).
    func rollbackIfNeeded() {
        if !abandoned, inTransaction { _ = try? execute("ROLLBACK") }
    }

    /// False once the server went away or a wait passed its bound; the
    /// writer then reconnects.
    var isHealthy: Bool { !abandoned && PQstatus(connection) == CONNECTION_OK }

    /// Runs one or more statements without parameters.
    @discardableResult
    func execute(_ sql: String) throws(PostgresError) -> PostgresRows {
        try runStatement { PQsendQuery(connection, sql) }
    }

    /// Runs one statement with text parameters ($1, $2, … ; nil is NULL).
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?]) throws(PostgresError) -> PostgresRows {
        let cStrings = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { cStrings.forEach { free($0) } }
        return try runStatement {
            cStrings.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                PQsendQueryParams(connection, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
    }

    /// Sends a statement with `send` (libpq's `PQsendQuery…`, 1 when queued)
    /// and waits, within the bound, for its results as ``finishStatement(deadline:doing:)`` gathers them.
    private func runStatement(_ send: () -> Int32) throws(PostgresError) -> PostgresRows {
        try refuseIfAbandoned()
        let deadline = statementDeadline()
        guard send() == 1 else { throw libpqError }
        try flush(deadline: deadline, doing: "sending a statement")
        return try finishStatement(deadline: deadline, doing: "waiting for a statement")
    }

    /// `COPY … FROM STDIN` with `data` (text format) as the whole input.
    /// Returns the number of rows copied. The bound covers the whole COPY:
    /// its start, the data and its result.
    @discardableResult
    func copyIn(_ copyStatement: String, data: [UInt8]) throws(PostgresError) -> Int {
        try refuseIfAbandoned()
        let deadline = statementDeadline()
        guard PQsendQuery(connection, copyStatement) == 1 else { throw libpqError }
        try flush(deadline: deadline, doing: "starting a COPY")
        guard let start = try nextResult(deadline: deadline, doing: "starting a COPY") else {
            throw libpqError
        }
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            let failure = Self.error(from: start, connection: connection)
            PQclear(start)
            _ = try? finishStatement(deadline: deadline, doing: "starting a COPY")
            throw failure
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
            if sent < 0 { break }
            if sent == 0 {
                // libpq's buffer is full: wait until the socket takes more.
                try flush(deadline: deadline, doing: "sending COPY data")
                continue
            }
            offset += length
        }
        var ended: Int32
        repeat {
            ended = PQputCopyEnd(connection, offset == data.count ? nil : "client could not send all data")
            if ended == 0 { try flush(deadline: deadline, doing: "ending a COPY") }
        } while ended == 0
        guard ended == 1 else { throw libpqError }
        try flush(deadline: deadline, doing: "ending a COPY")
        var copied = 0
        var failure: PostgresError?
        while let result = try nextResult(deadline: deadline, doing: "waiting for a COPY's result") {
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

    /// A result's rows, or its error (the caller clears it).
    private func consume(_ result: OpaquePointer) throws(PostgresError) -> PostgresRows {
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
