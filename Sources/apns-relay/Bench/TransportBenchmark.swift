import APNs
import Foundation
import HTTP2
import MockAPNs
import RelayBasics

/// Measures the HTTP/2 client against h2load on one mock APNs.
struct TransportBenchmark {
    let requests: Int
    let connections: Int
    let streams: Int
    let delayMilliseconds: Int
    let runH2load: Bool
    /// A mock APNs in another process (`apns-relay mock-apns`) instead of one
    /// in this process, so that peers (h2load, aioapns) meet the same server.
    /// Its port, certificate (the CA to trust), a provider key it accepts, and the topic to send.
    var external: (port: Int, caFile: String, credentials: ProviderCredentials, topic: String)? = nil

    struct ClientRun {
        var seconds: Double
        var latencies: [Double]
        var failures: Int
        var rate: Double { Double(latencies.count) / seconds }
        func percentile(_ p: Double) -> Double {
            let sorted = latencies.sorted()
            return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
    }

    func run() async throws -> String {
        let directory = NSTemporaryDirectory() + "apns-relay-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let credentials: ProviderCredentials
        let mockPort: Int
        let caFile: String
        let topic: String
        var mock: MockAPNsServer?
        if let external {
            (mockPort, caFile, credentials, topic) = external
        } else {
            // The mock's own certificate key doubles as the provider key (P-256, PKCS#8, 0600).
            let tls = try SelfSignedCertificate.generate(in: directory)
            credentials = try ProviderCredentials(keyID: "BENCHKEY01", teamID: "BENCHTEAM1", key: SigningKey(contentsOfFile: tls.privateKeyFile))
            var configuration = MockAPNsConfiguration()
            configuration.keys = [.init(keyID: credentials.keyID, teamID: credentials.teamID, publicKeyPEM: credentials.key.publicKeyPEM)]
            configuration.bundleIDs = ["com.example.bench"]
            configuration.logCapacity = 1000
            configuration.responseDelay = delayMilliseconds > 0 ? .fixed(milliseconds: delayMilliseconds) : .none
            let server = try MockAPNsServer(engine: MockAPNsEngine(configuration: configuration), certificate: tls, directory: directory)
            mock = server
            (mockPort, caFile, topic) = (server.port, tls.certificateFile, "com.example.bench")
        }
        defer { mock?.stop() }

        let jwt = ProviderToken(credentials: credentials, issuedAt: UnixTime.nowSeconds()).authorizationHeaderValue
        let token = String(repeating: "ab", count: 32)
        let body = Array(#"{"aps":{"alert":{"title":"bench","body":"a push of typical size for the benchmark"}}}"#.utf8)
        let headers = [
            HTTPHeader("authorization", jwt), HTTPHeader("apns-topic", topic), HTTPHeader("apns-push-type", "alert"),
            HTTPHeader("apns-priority", "10"),
        ]

        let rssBefore = Self.residentMegabytes()
        let ours = try await runClient(port: mockPort, caFile: caFile, headers: headers, body: body, path: "/3/device/\(token)")
        let rssAfter = Self.residentMegabytes()
        var lines = [
            "transport benchmark: \(requests) requests, \(connections) connections × \(streams) streams, "
                + (external == nil ? "mock delay \(delayMilliseconds) ms" : "the mock on port \(mockPort) (another process)"),
            String(format: "  apns-relay client: %.0f req/s  p50 %.2f ms  p99 %.2f ms  failures %d  RSS %.1f → %.1f MB",
                   ours.rate, ours.percentile(0.50) * 1000, ours.percentile(0.99) * 1000, ours.failures, rssBefore, rssAfter),
        ]
        if delayMilliseconds > 0 {
            let ceiling = Double(connections * streams) / (Double(delayMilliseconds) / 1000)
            lines.append(String(format: "  latency-bound ceiling (connections × streams / delay): %.0f req/s", ceiling))
            lines.append(String(format: "  ratio to the ceiling: %.2f", ours.rate / ceiling))
        }
        if runH2load {
            let bodyFile = directory + "/body.json"
            try Data(body).write(to: URL(fileURLWithPath: bodyFile))
            let h2load = try Self.h2load(requests: requests, connections: connections, streams: streams, body: bodyFile, headers: headers, url: "https://127.0.0.1:\(mockPort)/3/device/\(token)")
            lines.append(String(format: "  h2load:            %.0f req/s  mean %.2f ms", h2load.rate, h2load.meanMilliseconds))
            lines.append(String(format: "  ratio (apns-relay / h2load): %.2f", ours.rate / h2load.rate))
        }
        return lines.joined(separator: "\n")
    }

    private func runClient(port: Int, caFile: String, headers: [HTTPHeader], body: [UInt8], path: String) async throws -> ClientRun {
        var connectionConfiguration = HTTP2Connection.Configuration(host: "127.0.0.1", port: port)
        connectionConfiguration.tls = TLSClientConfiguration(caFile: caFile)
        connectionConfiguration.maxConcurrentStreams = streams
        var poolConfiguration = HTTP2Pool.Configuration(connection: connectionConfiguration)
        poolConfiguration.size = connections
        let pool = HTTP2Pool(configuration: poolConfiguration)
        defer { Task { await pool.close() } }
        let request = HTTP2Request(method: "POST", path: path, headers: headers, body: body, timeout: 30)
        // Warm-up: open every connection before timing.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<(connections * 2) { group.addTask { _ = try? await pool.send(request) } }
        }
        let workers = connections * streams
        let perWorker = (requests + workers - 1) / workers
        let clock = ContinuousClock()
        let start = clock.now
        let results = await withTaskGroup(of: ([Double], Int).self) { group in
            for worker in 0..<workers {
                let count = min(perWorker, max(0, requests - worker * perWorker))
                group.addTask {
                    var latencies: [Double] = []
                    latencies.reserveCapacity(count)
                    var failures = 0
                    for _ in 0..<count {
                        let sent = clock.now
                        do {
                            let response = try await pool.send(request)
                            if response.status == 200 { latencies.append((clock.now - sent).seconds) } else { failures += 1 }
                        } catch {
                            failures += 1
                        }
                    }
                    return (latencies, failures)
                }
            }
            var all: [Double] = []
            var failures = 0
            for await (latencies, failed) in group {
                all.append(contentsOf: latencies)
                failures += failed
            }
            return (all, failures)
        }
        return ClientRun(seconds: (clock.now - start).seconds, latencies: results.0, failures: results.1)
    }

    static func h2load(requests: Int, connections: Int, streams: Int, body: String, headers: [HTTPHeader], url: String) throws -> (rate: Double, meanMilliseconds: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["h2load", "-n", String(requests), "-c", String(connections), "-m", String(streams), "-d", body]
            + headers.flatMap { ["-H", "\($0.name): \($0.value)"] } + [url]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "finished in 1.23s, 40650.41 req/s, ..." and "time for request:  1.02ms  12.3ms  2.31ms ..."
        guard output.contains("\(requests) succeeded"),
              let finished = output.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
              let rate = finished.split(separator: ",").dropFirst().first.flatMap({ Double($0.split(separator: " ")[0]) })
        else { throw BenchmarkError(description: "h2load did not complete cleanly:\n\(output)") }
        let meanLine = output.split(separator: "\n").first { $0.hasPrefix("time for request:") }
        let mean = meanLine.map { line -> Double in
            let fields = line.split(separator: " ").filter { $0.hasSuffix("ms") || $0.hasSuffix("us") || $0.hasSuffix("s") }
            guard fields.count >= 3 else { return 0 }
            let text = String(fields[2])
            if text.hasSuffix("ms") { return Double(text.dropLast(2)) ?? 0 }
            if text.hasSuffix("us") { return (Double(text.dropLast(2)) ?? 0) / 1000 }
            return (Double(text.dropLast(1)) ?? 0) * 1000
        } ?? 0
        return (rate, mean)
    }

    static func residentMegabytes() -> Double {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let pages = Double(statm.split(separator: " ")[1]) ?? 0
        return pages * SystemInfo.pageSize / 1_048_576
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
}
