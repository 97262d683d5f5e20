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
/// the names up first (``HostLookup``), within the bound, and hands libpq the addresses.
@Suite("Postgres host names looked up within the bound", .timeLimit(.minutes(1)))
struct PostgresHostLookupTests {
    typealias Server = PostgresConninfo.Server

    /// Waits for `lookups` of `servers` as a connect begun at `started` with `deadline` does.
    static func resolve(
        _ servers: [Server], _ lookups: [HostLookup?], started: UInt64 = MonotonicClock.now(), deadline: UInt64, seconds: Double,
        cutoff: PostgresCutoff? = nil
    ) throws(PostgresError) -> [PostgresConninfo.Resolved] {
        try PostgresConnection.resolve(servers, lookups: lookups, started: started, deadline: deadline, seconds: seconds, cutoff: cutoff)
    }

    /// A lookup of `host` that ends with the addresses of 127.0.0.1.
    static func found(_ host: String) throws -> HostLookup {
        guard case .addresses(let addresses)? = HostLookup.start(host: "127.0.0.1", port: 5432).outcome else {
            throw PostgresError(message: "no numeric lookup", sqlState: nil)
        }
        let lookup = HostLookup.pendingForTesting(host: host, port: 5432)
        lookup.finishForTesting(.addresses(addresses))
        return lookup
    }

    @Test("a resolver that does not answer ends the lookup at the bound, as a timeout that names it")
    func stalledResolver() throws {
        let lookup = HostLookup.pendingForTesting(host: "db.stalled.test", port: 5432)
        let error = #expect(throws: PostgresError.self) {
            _ = try Self.resolve([Server(host: "db.stalled.test")], [lookup], deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3)
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
            _ = try Self.resolve(
                [Server(host: "db.stalled.test")], [lookup], deadline: MonotonicClock.now() + 600_000_000_000, seconds: 600, cutoff: cutoff)
        }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("drain's end") == true, "\(String(describing: error))")
    }

    @Test("a failed lookup is libpq's own message, not a timeout")
    func failedLookup() throws {
        let lookup = HostLookup.pendingForTesting(host: "db.missing.test", port: 5432)
        lookup.finishForTesting(.failed("Name or service not known"))
        let error = #expect(throws: PostgresError.self) {
            _ = try Self.resolve([Server(host: "db.missing.test")], [lookup], deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3)
        }
        #expect(error?.timedOut == false)
        #expect(error?.message == "could not translate host name \"db.missing.test\" to address: Name or service not known")
    }

    @Test("a list of servers: one whose resolver hangs is left out once another is found, with half the bound left to connect")
    func stalledServerLeftOut() throws {
        let servers = [Server(host: "db.stalled.test", port: "5432"), Server(host: "db.found.test", port: "5433")]
        let stalled = HostLookup.pendingForTesting(host: "db.stalled.test", port: 5432)
        // Begun 300 s ago with a bound of 600 s: half the bound has passed,
        // so the stalled lookup gets no more time. Waiting it out to the
        // deadline would take 300 s, past the suite's limit.
        let now = MonotonicClock.now()
        let resolved = try Self.resolve(
            servers, [stalled, try Self.found("db.found.test")], started: now - 300_000_000_000, deadline: now + 300_000_000_000, seconds: 600)
        #expect(resolved.map(\.server) == servers)
        #expect(resolved[0].addresses == nil)
        #expect(resolved[1].addresses?.map(\.numericHost) == ["127.0.0.1"])
        let parameters = try #require(PostgresConninfo("host=db.stalled.test,db.found.test port=5432,5433 dbname=audit")?.connectParameters(resolved))
        #expect(Dictionary(parameters, uniquingKeysWith: { $1 }) == ["dbname": "audit", "host": "db.found.test", "hostaddr": "127.0.0.1", "port": "5433"])
    }

    @Test("a list of servers none of whose names is answered is a timeout that names them all")
    func everyServerStalled() throws {
        let servers = [Server(host: "a.stalled.test"), Server(host: "b.stalled.test")]
        let lookups = servers.map { HostLookup.pendingForTesting(host: $0.host, port: 5432) }
        let error = #expect(throws: PostgresError.self) {
            _ = try Self.resolve(servers, lookups, deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3)
        }
        #expect(error?.timedOut == true)
        #expect(error?.message.contains("the resolver, looking up the host names \"a.stalled.test\", \"b.stalled.test\"") == true,
                "\(String(describing: error))")
    }

    @Test("a failed name beside a socket directory: the socket is still tried; failed names alone give each message")
    func failedBesideSocket() throws {
        let failed = HostLookup.pendingForTesting(host: "db.missing.test", port: 5432)
        failed.finishForTesting(.failed("Name or service not known"))
        let servers = [Server(host: "db.missing.test"), Server(host: "/var/run/postgresql")]
        let resolved = try Self.resolve(servers, [failed, nil], deadline: MonotonicClock.now() + 300_000_000, seconds: 0.3)
        let parameters = try #require(PostgresConninfo("host=db.missing.test,/var/run/postgresql")?.connectParameters(resolved))
        #expect(Dictionary(parameters, uniquingKeysWith: { $1 }) == ["host": "/var/run/postgresql", "hostaddr": ""])

        let other = HostLookup.pendingForTesting(host: "db.gone.test", port: 5432)
        other.finishForTesting(.failed("Temporary failure in name resolution"))
        let error = #expect(throws: PostgresError.self) {
            _ = try Self.resolve(
                [Server(host: "db.missing.test"), Server(host: "db.gone.test")], [failed, other], deadline: MonotonicClock.now() + 300_000_000,
                seconds: 0.3)
        }
        #expect(error?.timedOut == false)
        #expect(error?.message == "could not translate host name \"db.missing.test\" to address: Name or service not known; "
            + "could not translate host name \"db.gone.test\" to address: Temporary failure in name resolution")
    }

    @Test("which conninfos have their servers looked up by the relay, each with its port")
    func serversToLookUp() {
        #expect(PostgresConninfo("postgresql://a@db.example:5433/b")?.serversToLookUp == [Server(host: "db.example", port: "5433")])
        #expect(PostgresConninfo("host=db.example dbname=b")?.serversToLookUp == [Server(host: "db.example")])
        #expect(PostgresConninfo("host=db.example hostaddr=10.0.0.1")?.serversToLookUp == nil)
        #expect(PostgresConninfo("host=/var/run/postgresql")?.serversToLookUp == nil)
        #expect(PostgresConninfo("dbname=b")?.serversToLookUp == nil)
        #expect(PostgresConninfo("not a conninfo ===") == nil)
        // Lists: one port for every server, or one each.
        #expect(PostgresConninfo("host=a.example,b.example")?.serversToLookUp == [Server(host: "a.example"), Server(host: "b.example")])
        #expect(PostgresConninfo("host=a.example,b.example port=5433")?.serversToLookUp
            == [Server(host: "a.example", port: "5433"), Server(host: "b.example", port: "5433")])
        #expect(PostgresConninfo("postgresql://u@a.example:5433,b.example:5434/d")?.serversToLookUp
            == [Server(host: "a.example", port: "5433"), Server(host: "b.example", port: "5434")])
        #expect(PostgresConninfo("host=/tmp,b.example port=5432,")?.serversToLookUp
            == [Server(host: "/tmp", port: "5432"), Server(host: "b.example", port: "")])
        // A port list libpq refuses: libpq says why.
        #expect(PostgresConninfo("host=a.example,b.example,c.example port=1,2")?.serversToLookUp == nil)
    }

    @Test("a URL that names the server as localhost connects through the relay's lookup, its options intact")
    func connectsByName() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        var components = try #require(URLComponents(string: database.conninfo))
        components.host = "localhost"
        components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "application_name", value: "host-lookup-test")]
        let conninfo = try #require(components.string)
        #expect(PostgresConninfo(conninfo)?.serversToLookUp?.map(\.host) == ["localhost"])
        let connection = try PostgresConnection(conninfo: conninfo, bound: PostgresWaitBound(seconds: 10))
        let result = try connection.execute("SELECT current_setting('application_name') AS name, current_database() AS database")
        #expect(result.value(0, "name") == "host-lookup-test")
        #expect(result.value(0, "database") == components.path.trimmingCharacters(in: ["/"]))
    }

    @Test("a list of servers connects through the relay's lookups: a server that refuses is passed over for the next, as libpq does")
    func connectsThroughList() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let components = try #require(URLComponents(string: database.conninfo))
        let port = try #require(components.port)
        // A port nothing listens on: bound on 0, then closed.
        let closed = try ClosedPort.take()
        let user = components.user.map { "\($0)@" } ?? ""
        let conninfo = "postgresql://\(user)127.0.0.1:\(closed),localhost:\(port)\(components.path)?application_name=host-list-test"
        #expect(PostgresConninfo(conninfo)?.serversToLookUp?.map(\.host) == ["127.0.0.1", "localhost"])
        let connection = try PostgresConnection(conninfo: conninfo, bound: PostgresWaitBound(seconds: 10))
        let result = try connection.execute("SELECT current_setting('application_name') AS name, inet_server_port() AS port")
        #expect(result.value(0, "name") == "host-list-test")
        #expect(result.value(0, "port") == "\(port)")
    }
}

/// A loopback TCP port nothing listens on: bound on port 0 to be given a free one, then closed.
enum ClosedPort {
    static func take() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw PostgresError(message: "socket failed", sqlState: nil) }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else { throw PostgresError(message: "bind failed", sqlState: nil) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
