@testable import Audit
import Foundation
import RelayBasics
import Synchronization
import Testing
import TestSupport

/// A Postgres that stops answering without closing anything (a frozen host,
/// a network path that drops packets: a ``FreezingTCPProxy`` plays it; a
/// table locked by a long transaction: a real lock) ends each call of a
/// bounded ``PostgresConnection`` in an error within its bound, never a hang.
@Suite("Postgres connections within a bound", .timeLimit(.minutes(1)))
struct PostgresWaitBoundTests {
    /// `conninfo` (a URL) with its host and port replaced by the proxy's.
    static func through(_ proxy: FreezingTCPProxy, _ conninfo: String) throws -> String {
        var components = try #require(URLComponents(string: conninfo))
        components.host = "127.0.0.1"
        components.port = proxy.port
        return try #require(components.string)
    }

    static func serverPort(_ conninfo: String) throws -> Int {
        try #require(URLComponents(string: conninfo)?.port, "the test database URL names its port")
    }

    @Test("a server that takes the connection and never answers: the connect ends in a timeout, with what it was doing")
    func silentServerOnConnect() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let proxy = try FreezingTCPProxy(targetPort: try Self.serverPort(database.conninfo), frozen: true)
        defer { proxy.stop() }
        let error = #expect(throws: PostgresError.self) {
            _ = try PostgresConnection(conninfo: try Self.through(proxy, database.conninfo), bound: PostgresWaitBound(seconds: 0.3))
        }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("did not answer within 0.3 s (opening a connection)") == true, "\(String(describing: error))")
        #expect(proxy.bytesHeld > 0, "the client did send its startup message")
    }

    @Test("a statement to a server frozen after the connect: it ends in a timeout, the connection is given up, and later calls are refused at once")
    func frozenMidStatement() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let proxy = try FreezingTCPProxy(targetPort: try Self.serverPort(database.conninfo))
        defer { proxy.stop() }
        let connection = try PostgresConnection(conninfo: try Self.through(proxy, database.conninfo), bound: PostgresWaitBound(seconds: 0.3))
        #expect(try connection.execute("SELECT 1").rows == [["1"]])
        #expect(try connection.execute("SHOW statement_timeout").rows == [["300ms"]], "the server is told the bound")
        proxy.freeze()
        let error = #expect(throws: PostgresError.self) { try connection.execute("SELECT $1::int", ["2"]) }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("(waiting for a statement)") == true, "\(String(describing: error))")
        #expect(!connection.isHealthy)
        let held = proxy.bytesHeld
        let again = #expect(throws: PostgresError.self) { try connection.execute("SELECT 3") }
        #expect(again?.timedOut == true)
        #expect(proxy.bytesHeld == held, "a given-up connection sends nothing more")
    }

    @Test("COPY into a server frozen mid-data (8 MiB, more than the socket takes): it ends in a timeout, and once the server runs again nothing was copied")
    func frozenMidCopy() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let admin = try database.connect()
        try admin.execute("CREATE TABLE copied (line text)")
        let proxy = try FreezingTCPProxy(targetPort: try Self.serverPort(database.conninfo))
        defer { proxy.stop() }
        do {
            let connection = try PostgresConnection(conninfo: try Self.through(proxy, database.conninfo), bound: PostgresWaitBound(seconds: 0.3))
            proxy.freeze()
            let line = Array(repeating: UInt8(ascii: "x"), count: 1023) + [0x0A]
            let data = Array((0..<8192).map { _ in line }.joined())
            let error = #expect(throws: PostgresError.self) { try connection.copyIn("COPY copied FROM STDIN", data: data) }
            #expect(error?.timedOut == true)
            #expect(!connection.isHealthy)
        }
        // The connection is closed: once the proxy passes its bytes on, the
        // server sees the COPY end without its data and rolls it back.
        proxy.thaw()
        #expect(try admin.execute("SELECT count(*) FROM copied").rows == [["0"]])
    }

    @Test("COPY into a table another transaction holds locked: the server cancels it at the bound (57014), the connection stays usable, and nothing was copied")
    func lockedTable() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let holder = try database.connect()
        try holder.execute("CREATE TABLE copied (line text)")
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE copied IN ACCESS EXCLUSIVE MODE")
        let connection = try PostgresConnection(conninfo: database.conninfo, bound: PostgresWaitBound(seconds: 0.3))
        let error = #expect(throws: PostgresError.self) { try connection.copyIn("COPY copied FROM STDIN", data: Array("a\nb\n".utf8)) }
        #expect(error?.sqlState == "57014", "\(String(describing: error))")
        #expect(error?.timedOut == false)
        #expect(connection.isHealthy)
        try holder.execute("ROLLBACK")
        #expect(try connection.copyIn("COPY copied FROM STDIN", data: Array("c\n".utf8)) == 1)
        #expect(try holder.execute("SELECT string_agg(line, ',') FROM copied").rows == [["c"]])
    }

    @Test("a cutoff set while a statement waits on a frozen server ends the wait, whatever the bound leaves, and says so")
    func cutoffWhileWaiting() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let proxy = try FreezingTCPProxy(targetPort: try Self.serverPort(database.conninfo))
        defer { proxy.stop() }
        let cutoff = PostgresCutoff()
        let connection = try PostgresConnection(
            conninfo: try Self.through(proxy, database.conninfo), bound: PostgresWaitBound(seconds: 600, cutoff: cutoff))
        proxy.freeze()
        // On a thread of its own: the wait blocks, and must not block the pool.
        let outcome = Mutex<(done: Bool, error: PostgresError?)>((false, nil))
        Thread.detachNewThread {
            do throws(PostgresError) {
                try connection.execute("SELECT 1")
                outcome.withLock { $0.done = true }
            } catch {
                outcome.withLock { $0 = (true, error) }
            }
        }
        #expect(await eventually { proxy.bytesHeld > 0 }, "the statement reached the frozen server")
        cutoff.cut(at: MonotonicClock.now())
        #expect(await eventually { outcome.withLock { $0.done } })
        let error = outcome.withLock { $0.error }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("before the drain's end") == true, "\(String(describing: error))")
    }

    @Test("no new connection once the cutoff has passed")
    func cutoffBeforeConnect() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let cutoff = PostgresCutoff()
        cutoff.cut(at: MonotonicClock.now())
        let error = #expect(throws: PostgresError.self) {
            _ = try PostgresConnection(conninfo: database.conninfo, bound: PostgresWaitBound(seconds: 600, cutoff: cutoff))
        }
        #expect(error?.timedOut == true)
    }

    @Test("the conninfo's own connect_timeout applies when shorter than the bound (libpq's floor of 2 s included)")
    func connectTimeoutFromConninfo() {
        #expect(PostgresConnection.connectSeconds(conninfo: "postgresql://a@127.0.0.1:1/b?connect_timeout=5", bound: 10) == 5)
        #expect(PostgresConnection.connectSeconds(conninfo: "host=127.0.0.1 connect_timeout=1", bound: 10) == 2)
        #expect(PostgresConnection.connectSeconds(conninfo: "host=127.0.0.1 connect_timeout=30", bound: 10) == 10)
        #expect(PostgresConnection.connectSeconds(conninfo: "host=127.0.0.1 connect_timeout=0", bound: 10) == 10)
        #expect(PostgresConnection.connectSeconds(conninfo: "postgresql://a@127.0.0.1:1/b", bound: 0.5) == 0.5)
        #expect(PostgresConnection.connectSeconds(conninfo: "not a conninfo ===", bound: 3) == 3)
    }
}

/// libpq looks a host name up with a blocking `getaddrinfo`; the relay looks
/// it up first (``HostLookup``), within the bound, and hands libpq the addresses.
@Suite("Postgres host names looked up within the bound", .timeLimit(.minutes(1)))
struct PostgresHostLookupTests {
    @Test("a resolver that does not answer ends the lookup at the bound, as a timeout that names it")
    func stalledResolver() throws {
        let lookup = HostLookup.pendingForTesting(host: "db.stalled.test", port: 5432)
        let error = #expect(throws: PostgresError.self) {
            _ = try PostgresConnection.addresses(
                of: lookup, deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3, cutoff: nil)
        }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("did not answer within 0.3 s (the resolver, looking up the host name \"db.stalled.test\")") == true,
                "\(String(describing: error))")
    }

    @Test("the drain's cutoff ends a lookup the bound would still wait for")
    func cutoffEndsLookup() throws {
        let lookup = HostLookup.pendingForTesting(host: "db.stalled.test", port: 5432)
        let cutoff = PostgresCutoff()
        cutoff.cut(at: MonotonicClock.now() + 200_000_000)
        let error = #expect(throws: PostgresError.self) {
            _ = try PostgresConnection.addresses(of: lookup, deadline: MonotonicClock.now() + 600_000_000_000, seconds: 600, cutoff: cutoff)
        }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("drain's end") == true, "\(String(describing: error))")
    }

    @Test("a failed lookup is libpq's own message, not a timeout")
    func failedLookup() throws {
        let lookup = HostLookup.pendingForTesting(host: "db.missing.test", port: 5432)
        lookup.finishForTesting(.failed("Name or service not known"))
        let error = #expect(throws: PostgresError.self) {
            _ = try PostgresConnection.addresses(of: lookup, deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3, cutoff: nil)
        }
        #expect(error?.timedOut == false)
        #expect(error?.message == "could not translate host name \"db.missing.test\" to address: Name or service not known")
    }

    @Test("which conninfos have their host looked up by the relay")
    func hostToLookUp() {
        #expect(PostgresConninfo("postgresql://a@db.example:5433/b")?.hostNameToLookUp == "db.example")
        #expect(PostgresConninfo("host=db.example dbname=b")?.hostNameToLookUp == "db.example")
        #expect(PostgresConninfo("host=db.example hostaddr=10.0.0.1")?.hostNameToLookUp == nil)
        #expect(PostgresConninfo("host=/var/run/postgresql")?.hostNameToLookUp == nil)
        #expect(PostgresConninfo("host=a.example,b.example")?.hostNameToLookUp == nil)
        #expect(PostgresConninfo("dbname=b")?.hostNameToLookUp == nil)
        #expect(PostgresConninfo("not a conninfo ===") == nil)
    }

    @Test("a URL that names the server as localhost connects through the relay's lookup, its options intact")
    func connectsByName() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        var components = try #require(URLComponents(string: database.conninfo))
        components.host = "localhost"
        components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "application_name", value: "host-lookup-test")]
        let conninfo = try #require(components.string)
        #expect(PostgresConninfo(conninfo)?.hostNameToLookUp == "localhost")
        let connection = try PostgresConnection(conninfo: conninfo, bound: PostgresWaitBound(seconds: 10))
        let result = try connection.execute("SELECT current_setting('application_name') AS name, current_database() AS database")
        #expect(result.value(0, "name") == "host-lookup-test")
        #expect(result.value(0, "database") == components.path.trimmingCharacters(in: ["/"]))
    }
}
