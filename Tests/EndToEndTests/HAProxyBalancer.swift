import Foundation
import TestSupport

/// HAProxy from Debian's package, on loopback, balancing over relays'
/// ingress ports: the load balancer of a multi-instance test, a peer nobody
/// here wrote, running the configuration `deploy/haproxy/haproxy.cfg` ships.
///
/// That file routes `POST /v1/send` by a consistent hash of its `token`
/// (round robin for the rest), checks every relay's `/readyz`, sends a
/// request whose connection to a relay failed to another one and retries
/// nothing else: a request a relay may have sent to APNs before it died is
/// never sent twice by the balancer. Here the checks run every 100 ms and a
/// relay leaves the pool on its first failure.
final class HAProxyBalancer: Sendable {
    /// One relay behind the balancer.
    struct Backend: Sendable {
        var name: String
        var port: UInt16
    }

    let port: UInt16
    let statsPort: UInt16
    let configurationFile: String
    private let child: ChildProcess

    var base: String { "http://127.0.0.1:\(port)" }
    /// The stats page (`;csv` for CSV), on a frontend of its own.
    static let statsPath = "/haproxy-stats"

    /// The example the deployment kit ships, which this balancer runs.
    static var shippedConfiguration: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/haproxy/haproxy.cfg").path
    }

    /// `deploy/haproxy/haproxy.cfg` with loopback ports in its two `bind`
    /// lines, `backends` in place of its `server` lines, and health checks
    /// every 100 ms that take a relay out on its first failure.
    static func configuration(port: UInt16, statsPort: UInt16, backends: [Backend]) throws -> String {
        let shipped = try String(contentsOfFile: shippedConfiguration, encoding: .utf8)
        var lines: [String] = []
        var replaced: Set<String> = []
        for line in shipped.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            switch line {
            case "    bind :8080":
                lines.append("    bind 127.0.0.1:\(port)"); replaced.insert("bind")
            case "    bind 127.0.0.1:8404":
                lines.append("    bind 127.0.0.1:\(statsPort)"); replaced.insert("stats")
            case _ where line.hasPrefix("    default-server "):
                lines.append("    default-server inter 100ms fastinter 50ms downinter 100ms fall 1 rise 1"); replaced.insert("checks")
            case _ where line.hasPrefix("    server relay-"):
                if !replaced.contains("servers") {
                    lines += backends.map { "    server \($0.name) 127.0.0.1:\($0.port) check" }
                    replaced.insert("servers")
                }
            default:
                lines.append(line)
            }
        }
        guard replaced == ["bind", "stats", "checks", "servers"] else {
            throw TestRelayError("\(shippedConfiguration) changed shape: replaced only \(replaced.sorted())")
        }
        return lines.joined(separator: "\n")
    }

    /// Writes the configuration into `directory`, checks it with `haproxy -c`
    /// and starts HAProxy in the foreground. The ports are free ones found by
    /// binding port 0; should another process take one in between, HAProxy
    /// exits at once and other ports are tried.
    init(directory: String, backends: [Backend]) async throws {
        var lastError = ""
        for attempt in 1...5 {
            let port = try await Self.freePort()
            let statsPort = try await Self.freePort()
            let file = directory + "/haproxy-\(attempt).cfg"
            try Self.configuration(port: port, statsPort: statsPort, backends: backends).write(toFile: file, atomically: true, encoding: .utf8)
            let checked = try await ProcessRunner.runOffPool(["haproxy", "-c", "-q", "-f", file])
            guard checked.status == 0 else { throw TestRelayError("haproxy -c refused \(file): \(checked.output)") }
            let child = try ChildProcess(["haproxy", "-db", "-f", file], standardOutput: .discard, standardError: .file(file + ".log"))
            // Started when the stats page answers; exited when a bind failed.
            let up = await eventually(20) {
                if !child.isRunning { return true }
                let answer = try? await ProcessRunner.runOffPool(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(statsPort)\(Self.statsPath)"])
                return answer?.output == "200"
            }
            if up, child.isRunning, port != statsPort {
                self.port = port
                self.statsPort = statsPort
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
        guard let answer = try? await ProcessRunner.runOffPool(["curl", "-s", "--max-time", "10", "http://127.0.0.1:\(statsPort)" + Self.statsPath + ";csv"]) else { return [:] }
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

    /// A loopback port nothing listens on now: bound to port 0 and closed again.
    static func freePort() async throws -> UInt16 {
        let (status, output) = try await ProcessRunner.runOffPool([
            "python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()",
        ])
        guard status == 0, let port = UInt16(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestRelayError("no free port: \(output)")
        }
        return port
    }
}
