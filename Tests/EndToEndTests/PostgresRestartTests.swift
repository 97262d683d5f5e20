import Foundation
import Testing
import TestSupport

/// A Postgres cluster of the test's own, so it can be stopped and started
/// under a running relay without touching the cluster other tests share.
struct PrivateCluster {
    let directory: String
    let port: Int
    let bin: String
    let asRoot = getuid() == 0

    var url: String { "postgresql://\(asRoot ? "postgres" : NSUserName())@127.0.0.1:\(port)/audit" }

    /// `pg_ctl` and friends, as the postgres user when the tests run as root.
    ///
    /// Output goes to a log file, not to ProcessRunner's pipe: pg_ctl leaves
    /// postgres running, which would hold the pipe open for ever. The child
    /// inherits no other descriptor of the test process (ProcessRunner closes
    /// them), so postgres holds no test's socket or pipe either.
    func run(_ command: String) async throws {
        let line = (asRoot ? "runuser -u postgres -- " : "") + command + " >>\(directory)/ctl.log 2>&1"
        let (status, output) = try await ProcessRunner.runOffPool(["sh", "-c", line])
        guard status == 0 else {
            let log = (try? String(contentsOfFile: directory + "/ctl.log", encoding: .utf8)) ?? ""
            throw TestRelayError("\(command) failed (\(status)): \(output) \(log.suffix(1500))")
        }
    }

    static func create() async throws -> PrivateCluster? {
        guard let bin = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted().last.map({ "/usr/lib/postgresql/\($0)/bin" }),
              FileManager.default.isExecutableFile(atPath: bin + "/initdb")
        else { return nil }
        let directory = "/tmp/apns-relay-pgrestart-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // The port must stay free while the server is stopped, so it is taken
        // below the kernel's ephemeral range (32768-60999 on Linux): a port
        // from bind(0) is one any outgoing connection, such as the relay's own
        // reconnects, may use as its source port meanwhile (a restart failed so).
        let picker = "import random, socket\nfor _ in range(1000):\n    p = random.randrange(20000, 32000)\n    s = socket.socket()\n    try:\n        s.bind(('127.0.0.1', p)); print(p); break\n    except OSError:\n        pass\n    finally:\n        s.close()"
        let (_, portText) = try await ProcessRunner.runOffPool(["python3", "-c", picker])
        let cluster = PrivateCluster(directory: directory, port: Int(portText.trimmingCharacters(in: .whitespacesAndNewlines))!, bin: bin)
        if cluster.asRoot { _ = try await ProcessRunner.runOffPool(["chown", "-R", "postgres", directory]) }
        try await cluster.run("\(bin)/initdb -D \(directory)/data -A trust -U \(cluster.asRoot ? "postgres" : NSUserName()) --no-sync")
        try await cluster.start()
        try await cluster.run("\(bin)/createdb -h 127.0.0.1 -p \(cluster.port) -U \(cluster.asRoot ? "postgres" : NSUserName()) audit")
        return cluster
    }

    func start() async throws {
        try await run("\(bin)/pg_ctl -D \(directory)/data -l \(directory)/server.log -w -t 60 -o '-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off' start")
    }

    func stop() async throws {
        try await run("\(bin)/pg_ctl -D \(directory)/data -w -t 60 -m fast stop")
    }

    func remove() async {
        try? await stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite("The audit through a Postgres restart")
struct PostgresRestartTests {
    @Test("Postgres stopped mid-run and started again: every send has exactly one row, none lost, none twice")
    func restart() async throws {
        guard let cluster = try await PrivateCluster.create() else { return }
        do {
            try await withRelay(databaseURL: cluster.url, configure: { $0.audit.flushIntervalMilliseconds = 10 }) { relay in
                func batch(_ count: Int, offset: Int) async throws {
                    let tokens = (0..<count).map { "\"\(TestRelay.token(offset + $0))\"" }.joined(separator: ",")
                    let body = #"{"items":[{"app":"app-a","environment":"development","operation":"alert","tokens":[\#(tokens)],"snapshot":\#(TestRelay.liveSnapshot)}]}"#
                    let answer = try await relay.curl("POST", "/v1/send/batch", body: body)
                    #expect(answer.json?["summary"]?["succeeded"] == .integer(Int64(count)), "\(answer.body.prefix(200))")
                }
                try await batch(300, offset: 0)
                #expect(await eventually { relay.server.audit.statistics.written == 300 }, "\(relay.server.audit.statistics)")

                try await cluster.stop()
                try await batch(300, offset: 300)  // sends go on; their rows go to the spool
                #expect(await eventually { relay.server.audit.statistics.spooled >= 300 }, "\(relay.server.audit.statistics)")

                try await cluster.start()
                try await batch(300, offset: 600)
                let settled = await eventually(60) {
                    let statistics = relay.server.audit.statistics
                    return statistics.written + statistics.replayed >= 900 && statistics.spoolBytes == 0
                }
                #expect(settled, "\(relay.server.audit.statistics)")
                #expect(relay.server.audit.statistics.dropped == 0)
                let (status, output) = try await ProcessRunner.runOffPool([
                    "psql", cluster.url, "-At", "-c", "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit",
                ])
                #expect(status == 0)
                #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "900|900")
            }
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }
}
