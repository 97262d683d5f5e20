import APNs
import Foundation
import Logging
import Relay
import RelayJSON
import Surfaces
import Synchronization
import RelayBasics

/// End-to-end sends/s through the ingress (HTTP/1.1 keep-alive clients on
/// threads of their own → relay → TLS HTTP/2 → mock APNs, audit on), the
/// latency the ingress adds over calling the relay directly at half that
/// load, and throughput with the audit on against off.
struct IngressBenchmark {
    var requests: Int
    var connections: Int
    var databaseURL: String?

    struct Run {
        var rate: Double
        var latencies: [Double]
        var failures: Int

        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
    }

    func run() async throws -> String {
        var lines: [String] = []
        let logger = makeLogger(level: "error")
        let audited = try await DemoEnvironment.start(databaseURL: databaseURL, logger: logger, scriptedFaults: false)
        let auditLabel = databaseURL == nil ? "audit to the spool" : "audit to Postgres"
        _ = try await Self.closedLoop(environment: audited, requests: min(2000, requests), connections: connections)  // warm-up
        let full = try await Self.closedLoop(environment: audited, requests: requests, connections: connections)
        lines.append(String(format: "ingress, %d keep-alive connections, %d sends (%@): %.0f sends/s, p50 %.2f ms, p99 %.2f ms, %d failed",
                            connections, requests, auditLabel, full.rate, full.percentile(0.5), full.percentile(0.99), full.failures))
        lines.append(String(format: "  target ≥ 15,000 sends/s on this machine: %@", full.rate >= 15_000 ? "met" : "NOT met"))
        if databaseURL != nil {
            // The same closed loop, each send with its own Idempotency-Key: the claim and the answer are two Postgres statements per send.
            let keyed = try await Self.closedLoop(environment: audited, requests: requests, connections: connections, idempotencyKeys: true)
            lines.append(String(format: "with an Idempotency-Key per send: %.0f vs %.0f sends/s without = %.2f, p50 %.2f ms, p99 %.2f ms, %d failed",
                                keyed.rate, full.rate, keyed.rate / full.rate, keyed.percentile(0.5), keyed.percentile(0.99), keyed.failures))
        }

        // Half that load, paced: the ingress path against the direct call into the same relay.
        let halfRate = full.rate / 2
        let paced = max(1000, min(requests / 2, Int(halfRate * 4)))
        let viaIngress = try await Self.paced(environment: audited, requests: paced, connections: connections, rate: halfRate, direct: false)
        let direct = try await Self.paced(environment: audited, requests: paced, connections: connections, rate: halfRate, direct: true)
        let added50 = viaIngress.percentile(0.5) - direct.percentile(0.5)
        let added99 = viaIngress.percentile(0.99) - direct.percentile(0.99)
        lines.append(String(format: "half load (%.0f sends/s paced, %d sends): ingress p50 %.2f / p99 %.2f ms; direct relay call p50 %.2f / p99 %.2f ms",
                            halfRate, paced, viaIngress.percentile(0.5), viaIngress.percentile(0.99), direct.percentile(0.5), direct.percentile(0.99)))
        lines.append(String(format: "  added by the ingress: p50 %.2f ms, p99 %.2f ms (target p99 ≤ 5 ms: %@)", added50, added99, added99 <= 5 ? "met" : "NOT met"))
        let statistics = audited.server.audit.statistics
        await audited.stop()
        lines.append("  audit: \(statistics.written) rows written, \(statistics.spooled) spooled, \(statistics.dropped) dropped")

        // The same closed loop with the audit writer out of the send path.
        let unaudited = try await DemoEnvironment.start(databaseURL: nil, logger: logger, scriptedFaults: false, recordsAudit: false)
        _ = try await Self.closedLoop(environment: unaudited, requests: min(2000, requests), connections: connections)
        let off = try await Self.closedLoop(environment: unaudited, requests: requests, connections: connections)
        await unaudited.stop()
        lines.append(String(format: "audit on vs off: %.0f vs %.0f sends/s = %.2f (target ≥ 0.9: %@)",
                            full.rate, off.rate, full.rate / off.rate, full.rate / off.rate >= 0.9 ? "met" : "NOT met"))
        return lines.joined(separator: "\n")
    }

    static func body(_ index: Int) -> [UInt8] {
        let token = String(format: "%064x", index + 1)
        return Array(#"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"alert","token":"\#(token)","snapshot":\#(DemoWorkload.liveSnapshot)}"#.utf8)
    }

    /// Every connection sends back to back until `requests` are done.
    static func closedLoop(environment: DemoEnvironment, requests: Int, connections: Int, idempotencyKeys: Bool = false) async throws -> Run {
        let next = Atomic<Int>(0)
        let run = UInt64.random(in: 0...UInt64.max)
        let port = environment.ingressPort
        let headers = [HTTPHeader("authorization", "Bearer \(environment.apiKey)"), HTTPHeader("content-type", "application/json")]
        let started = ContinuousClock.now
        let results = await onThreads(connections) { _ in
            let client = BlockingHTTPClient(host: "127.0.0.1", port: port)
            var latencies: [Double] = []
            var failures = 0
            while true {
                let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard index < requests else { break }
                let sent = ContinuousClock.now
                let keyHeader = idempotencyKeys ? [HTTPHeader("idempotency-key", "bench-\(run)-\(index)")] : []
                let response = try? client.request("POST", "/v1/send", headers: headers + keyHeader, body: body(index))
                latencies.append(sent.duration(to: .now).milliseconds)
                if response?.status != 200 { failures += 1 }
            }
            return (latencies, failures)
        }
        let elapsed = started.duration(to: .now).milliseconds / 1000
        return Run(rate: Double(requests) / elapsed, latencies: results.flatMap(\.0).sorted(), failures: results.reduce(0) { $0 + $1.1 })
    }

    /// Sends at `rate` overall, each connection on its own schedule, through
    /// the ingress or straight into the relay service (same relay, same mock).
    static func paced(environment: DemoEnvironment, requests: Int, connections: Int, rate: Double, direct: Bool) async throws -> Run {
        let port = environment.ingressPort
        let headers = [HTTPHeader("authorization", "Bearer \(environment.apiKey)"), HTTPHeader("content-type", "application/json")]
        let service = environment.server.service
        let snapshot = try LiveSurfaceSnapshot(json: JSONParser.parse(DemoWorkload.liveSnapshot))
        let interval = Double(connections) / rate
        let perConnection = requests / connections
        let started = ContinuousClock.now
        let results = await onThreads(connections) { worker in
            let client = BlockingHTTPClient(host: "127.0.0.1", port: port)
            var latencies: [Double] = []
            var failures = 0
            for step in 0..<perConnection {
                let due = started + .nanoseconds(Int64((Double(step) * interval + Double(worker) / rate) * 1e9))
                let wait = ContinuousClock.now.duration(to: due)
                if wait > .zero { Thread.sleep(forTimeInterval: wait.milliseconds / 1000) }
                let index = 1_000_000 + worker * perConnection + step
                let sent = ContinuousClock.now
                if direct {
                    let token = String(format: "%064x", index + 1)
                    let done = DispatchSemaphore(value: 0)
                    let ok = Atomic<Bool>(false)
                    Task {
                        let result = try? await service.send(app: DemoEnvironment.app, environment: .development, .alert(token: token, snapshot: snapshot))
                        ok.store(result != nil, ordering: .relaxed)
                        done.signal()
                    }
                    done.wait()
                    if !ok.load(ordering: .relaxed) { failures += 1 }
                } else {
                    let response = try? client.request("POST", "/v1/send", headers: headers, body: body(index))
                    if response?.status != 200 { failures += 1 }
                }
                latencies.append(sent.duration(to: .now).milliseconds)
            }
            return (latencies, failures)
        }
        let elapsed = started.duration(to: .now).milliseconds / 1000
        return Run(rate: Double(perConnection * connections) / elapsed, latencies: results.flatMap(\.0).sorted(), failures: results.reduce(0) { $0 + $1.1 })
    }

    /// Runs `work` on `count` threads of its own and collects what each returned.
    static func onThreads<T: Sendable>(_ count: Int, _ work: @escaping @Sendable (Int) -> T) async -> [T] {
        await withCheckedContinuation { continuation in
            let results = Mutex<[T]>([])
            let remaining = Atomic<Int>(count)
            for index in 0..<count {
                let thread = Thread {
                    let value = work(index)
                    results.withLock { $0.append(value) }
                    if remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                        continuation.resume(returning: results.withLock { $0 })
                    }
                }
                thread.stackSize = 1 << 20
                thread.start()
            }
        }
    }
}

extension Duration {
    var milliseconds: Double { seconds * 1000 }
}
