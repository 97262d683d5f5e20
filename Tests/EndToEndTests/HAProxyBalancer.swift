import Foundation
import TestSupport

/// HAProxy from Debian's package, on loopback, balancing over relays'
/// ingress ports: the load balancer of a multi-instance test, a peer nobody
/// here wrote.
///
/// Every relay is checked with `GET /readyz` every 100 ms and leaves the pool
/// on its first failure (a draining relay answers 503, a killed one refuses
/// the connection); a request whose connection to a relay fails is sent to
/// another (`retry-on conn-failure` plus `option redispatch`). Nothing else is
/// retried: a request a relay may have sent to APNs before it died is never
/// sent twice by the balancer (that is what idempotency keys are for).
final class HAProxyBalancer: Sendable {
    /// One relay behind the balancer.
    struct Backend: Sendable {
        var name: String
        var port: UInt16
    }

    let port: UInt16
    let configurationFile: String
    private let child: ChildProcess

    var base: String { "http://127.0.0.1:\(port)" }
    /// The stats page as CSV (`;csv`), on the balancer's own frontend.
    static let statsPath = "/haproxy-stats"

    /// The configuration the test runs with: the same text `deploy/haproxy/haproxy.cfg` shows, with loopback ports.
    static func configuration(port: UInt16, backends: [Backend]) -> String {
        let servers = backends.map { "    server \($0.name) 127.0.0.1:\($0.port) check" }.joined(separator: "\n")
        return """
            global
                maxconn 1024

            defaults
                mode http
                timeout connect 2s
                timeout client 60s
                timeout server 60s
                # Only a connection that never reached a relay is tried again, on
                # another one: a request that did reach one may have been sent to APNs.
                retries 3
                retry-on conn-failure
                option redispatch 1

            frontend apns_relay
                bind 127.0.0.1:\(port)
                stats enable
                stats uri \(statsPath)
                default_backend relays

            backend relays
                balance roundrobin
                option httpchk
                http-check send meth GET uri /readyz
                http-check expect status 200
                default-server inter 100ms fastinter 50ms downinter 100ms fall 1 rise 1
            \(servers)

            """
    }

    /// Writes the configuration into `directory`, checks it with `haproxy -c`
    /// and starts HAProxy in the foreground. The frontend's port is a free one
    /// found by binding port 0; should another process take it in between,
    /// HAProxy exits at once and another port is tried.
    init(directory: String, backends: [Backend]) async throws {
        var lastError = ""
        for attempt in 1...5 {
            let port = try await Self.freePort()
            let file = directory + "/haproxy-\(attempt).cfg"
            try Self.configuration(port: port, backends: backends).write(toFile: file, atomically: true, encoding: .utf8)
            let checked = try await ProcessRunner.runOffPool(["haproxy", "-c", "-q", "-f", file])
            guard checked.status == 0 else { throw TestRelayError("haproxy -c refused \(file): \(checked.output)") }
            let child = try ChildProcess(["haproxy", "-db", "-f", file], standardOutput: .discard, standardError: .file(file + ".log"))
            // Started when the frontend answers its stats page; exited when the bind failed.
            let up = await eventually(20) {
                if !child.isRunning { return true }
                let answer = try? await ProcessRunner.runOffPool(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)\(Self.statsPath)"])
                return answer?.output == "200"
            }
            if up, child.isRunning {
                self.port = port
                self.configurationFile = file
                self.child = child
                return
            }
            child.kill()
            _ = await child.exited()
            lastError = (try? String(contentsOfFile: file + ".log", encoding: .utf8)) ?? "no log"
        }
        throw TestRelayError("haproxy did not start: \(lastError)")
    }

    /// Each server's status as HAProxy sees it ("UP", "DOWN", "MAINT", …).
    func serverStates() async -> [String: String] {
        guard let answer = try? await ProcessRunner.runOffPool(["curl", "-s", "--max-time", "10", base + Self.statsPath + ";csv"]) else { return [:] }
        var states: [String: String] = [:]
        // # pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,…
        for line in answer.output.split(separator: "\n") where line.hasPrefix("relays,") {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count > 17, fields[1] != "BACKEND" else { continue }
            states[String(fields[1])] = String(fields[17])
        }
        return states
    }

    /// Waits until HAProxy reports `server` in `state` (a prefix: "UP" matches "UP 1/2").
    /// Returns nil when it did, else every server's last state (for the failure message).
    func waitFor(_ server: String, _ state: String, timeout: Double = 30) async -> [String: String]? {
        var last: [String: String] = [:]
        let reached = await eventually(timeout) {
            last = await serverStates()
            return last[server]?.hasPrefix(state) == true
        }
        return reached ? nil : last
    }

    func stop() async {
        child.terminate()
        _ = await child.exited()
    }

    private static func freePort() async throws -> UInt16 {
        let (status, output) = try await ProcessRunner.runOffPool([
            "python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()",
        ])
        guard status == 0, let port = UInt16(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestRelayError("no free port: \(output)")
        }
        return port
    }
}
