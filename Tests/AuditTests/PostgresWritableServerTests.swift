@testable import Audit
import Foundation
import RelayBasics
import Testing
import TestSupport

/// A conninfo that lists several servers connects to one that takes writes:
/// the relay only writes (audit rows, idempotency keys, migrations) or reads
/// what it wrote, and libpq's default takes the first server that answers,
/// a read-only standby included.
@Suite("A server list connects to a server that takes writes", .timeLimit(.minutes(2)))
struct PostgresWritableServerTests {
    static func keywords(_ pairs: [(keyword: String, value: String)]) -> [String: String] {
        Dictionary(pairs.map { ($0.keyword, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    @Test("read-write is asked for when more than one server may be tried, and only when the conninfo and PGTARGETSESSIONATTRS leave it open")
    func asksForWritesOnlyForLists() throws {
        let pairs: [(keyword: String, value: String)] = [("dbname", "audit"), ("host", "a,b")]
        #expect(Self.keywords(PostgresConninfo.requiringWrites(pairs, entries: 2, environment: [:]))["target_session_attrs"] == "read-write")
        #expect(Self.keywords(PostgresConninfo.requiringWrites(pairs, entries: 1, environment: [:]))["target_session_attrs"] == nil)
        let chosen = pairs + [("target_session_attrs", "any")]
        #expect(PostgresConninfo.requiringWrites(chosen, entries: 2, environment: [:]).filter { $0.keyword == "target_session_attrs" }.map(\.value) == ["any"])
        #expect(Self.keywords(PostgresConninfo.requiringWrites(pairs, entries: 2, environment: ["PGTARGETSESSIONATTRS": "prefer-standby"]))["target_session_attrs"] == nil)
        #expect(Self.keywords(PostgresConninfo.requiringWrites(pairs, entries: 2, environment: ["PGTARGETSESSIONATTRS": ""]))["target_session_attrs"] == "read-write")

        // How many servers a conninfo gives libpq: its host list, or its hostaddr list.
        #expect(PostgresConninfo("host=a dbname=x")?.entries == 1)
        #expect(PostgresConninfo("host=a,b dbname=x")?.entries == 2)
        #expect(PostgresConninfo("hostaddr=10.0.0.1,10.0.0.2,10.0.0.3 dbname=x")?.entries == 3)
        #expect(PostgresConninfo("postgresql://u@primary:5432,standby:5433/audit")?.entries == 2)
        #expect(PostgresConninfo("dbname=x")?.entries == 0)

        // One name with two addresses is two servers to libpq as well.
        func addresses(_ hosts: [String]) throws -> [HostLookup.Address] {
            try hosts.flatMap { host in
                guard case .addresses(let found)? = HostLookup.start(host: host, port: 5432).outcome else {
                    throw PostgresError(message: "no numeric lookup of \(host)", sqlState: nil)
                }
                return found
            }
        }
        let parsed = try #require(PostgresConninfo("host=db port=5432 dbname=x"))
        let server = try #require(parsed.serversToLookUp?.first)
        let one = try #require(parsed.connectParameters([.init(server: server, addresses: try addresses(["10.0.0.1"]))]))
        #expect(Self.keywords(one)["hostaddr"] == "10.0.0.1")
        #expect(Self.keywords(one)["target_session_attrs"] == nil)
        let two = try #require(parsed.connectParameters([.init(server: server, addresses: try addresses(["10.0.0.1", "10.0.0.2"]))]))
        #expect(Self.keywords(two)["hostaddr"] == "10.0.0.1,10.0.0.2")
        #expect(Self.keywords(two)["target_session_attrs"] == "read-write")
    }

    @Test("a read-only server first in the list (an old primary back as a standby) is passed over for the writable one; a conninfo that asks for any keeps it")
    func passesOverReadOnlyServer() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let components = try #require(URLComponents(string: database.conninfo))
        let port = try #require(components.port)
        let user = try #require(components.user, "the test database URL names its user")
        let standby = try ReadOnlyCluster.start(user: user, database: database.name)
        defer { standby.stop() }
        func conninfo(_ servers: String, _ query: String = "") -> String { "postgresql://\(user)@\(servers)\(components.path)\(query)" }
        func serverAnswering(_ connection: PostgresConnection) throws -> (port: String?, readOnly: String?) {
            let result = try connection.execute("SELECT inet_server_port() AS port, current_setting('transaction_read_only') AS read_only")
            return (result.value(0, "port"), result.value(0, "read_only"))
        }
        // The standby alone: it answers, and takes no writes (the fixture is what it claims).
        let alone = try PostgresConnection(conninfo: conninfo("127.0.0.1:\(standby.port)"), bound: PostgresWaitBound(seconds: 10))
        #expect(try serverAnswering(alone) == ("\(standby.port)", "on"))
        #expect(throws: PostgresError.self) { try alone.execute("CREATE TABLE refused (id int)") }

        // Standby first, by name (looked up by the relay) and by address (not looked up): the writable server answers.
        for servers in ["localhost:\(standby.port),localhost:\(port)", "127.0.0.1:\(standby.port),127.0.0.1:\(port)"] {
            let connection = try PostgresConnection(conninfo: conninfo(servers), bound: PostgresWaitBound(seconds: 10))
            #expect(try serverAnswering(connection) == ("\(port)", "off"), "\(servers)")
            try connection.execute("CREATE TABLE IF NOT EXISTS written (id int)")
        }
        let byAddress = "host=127.0.0.1,127.0.0.1 hostaddr=127.0.0.1,127.0.0.1 port=\(standby.port),\(port) user=\(user) dbname=\(database.name)"
        let listedByAddress = try PostgresConnection(conninfo: byAddress, bound: PostgresWaitBound(seconds: 10))
        #expect(try serverAnswering(listedByAddress) == ("\(port)", "off"))

        // The operator's own choice stands.
        let any = try PostgresConnection(
            conninfo: conninfo("localhost:\(standby.port),localhost:\(port)", "?target_session_attrs=any"), bound: PostgresWaitBound(seconds: 10))
        #expect(try serverAnswering(any) == ("\(standby.port)", "on"))
    }
}

/// A Postgres cluster of the test's own whose sessions are read-only unless
/// they say otherwise (`default_transaction_read_only`, which libpq reads as
/// it reads a hot standby's), holding an empty database of the given name.
struct ReadOnlyCluster {
    let directory: String
    let port: Int
    let bin: String
    let asRoot = getuid() == 0

    /// Runs `command` through the shell (as the postgres user when the tests
    /// run as root), its output into a log file: pg_ctl leaves postgres
    /// running, which would hold a pipe open.
    func run(_ command: String) throws {
        let line = (asRoot ? "runuser -u postgres -- " : "") + command + " >>\(directory)/ctl.log 2>&1"
        let (status, output) = try ProcessRunner.run(["sh", "-c", line])
        guard status == 0 else {
            let log = (try? String(contentsOfFile: directory + "/ctl.log", encoding: .utf8)) ?? ""
            throw PostgresError(message: "\(command) failed (\(status)): \(output) \(log.suffix(1500))", sqlState: nil)
        }
    }

    static func start(user: String, database: String) throws -> ReadOnlyCluster {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let bin = try #require(versions.sorted().last.map { "/usr/lib/postgresql/\($0)/bin" }, "Postgres' server binaries (scripts/test installs them)")
        let directory = "/tmp/apns-relay-readonly-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cluster = ReadOnlyCluster(directory: directory, port: try ClosedPort.take(), bin: bin)
        do {
            if cluster.asRoot { _ = try ProcessRunner.run(["chown", "-R", "postgres", directory]) }
            try cluster.run("\(bin)/initdb -D \(directory)/data -A trust -U \(user) --no-sync")
            try cluster.run(
                "\(bin)/pg_ctl -D \(directory)/data -l \(directory)/server.log -w -t 60 -o '-p \(cluster.port) -k \(directory) "
                    + "-c listen_addresses=127.0.0.1 -c fsync=off -c default_transaction_read_only=on' start")
            // The database is made in a session that sets itself writable; every other session is read-only.
            try cluster.run(
                "psql -X -h 127.0.0.1 -p \(cluster.port) -U \(user) -d postgres -v ON_ERROR_STOP=1 "
                    + "-c 'SET default_transaction_read_only = off' -c 'CREATE DATABASE \(database)'")
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    func stop() {
        try? run("\(bin)/pg_ctl -D \(directory)/data -w -t 60 -m immediate stop")
        try? FileManager.default.removeItem(atPath: directory)
    }
}
