import Foundation
import RelayBasics

/// The built-in load generator: drives a relay running in another process
/// (`apns-relay serve`) through `POST /v1/send` or `POST /v1/send/batch` from
/// keep-alive HTTP/1.1 connections, one request in flight on each, all on one
/// thread's poll loop (``LoadLoop``), and counts the sends the relay answered
/// as succeeded.
///
/// It runs out of the relay's process so that the relay's own CPU time can be
/// read from `/proc/PID/stat` around a run (scripts/lib/send_bench.py does),
/// and it is checked against `wrk` on the same relay in the same run.
struct LoadGenerator {
    /// What one send asks for.
    enum Body: Sendable {
        /// An alert from a Live Activity snapshot (JSON parse, snapshot validation and projection).
        case alert
        /// A raw alert whose APNs payload is exactly this many bytes (padded with a custom key).
        case raw(payloadBytes: Int)
    }

    struct Result {
        var requests: Int
        var sends: Int
        var succeeded: Int
        var failedRequests: Int
        var seconds: Double
        /// Per request (a whole batch for the batch route), milliseconds, sorted.
        var latencies: [Double]
        /// Per send as the relay timed it (each batch result's `latencyMs`), sorted; empty for single sends.
        var sendLatencies: [Double]

        func percentile(_ p: Double, of values: [Double]? = nil) -> Double {
            let values = values ?? latencies
            return values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * p))]
        }

        /// One line of `key=value` fields, for people and for the bench driver's parser.
        var line: String {
            String(format: "load: requests=%d sends=%d succeeded=%d failed_requests=%d seconds=%.3f sends_per_s=%.1f p50_ms=%.3f p99_ms=%.3f send_p50_ms=%.3f send_p99_ms=%.3f",
                   requests, sends, succeeded, failedRequests, seconds, Double(succeeded) / seconds, percentile(0.5), percentile(0.99),
                   percentile(0.5, of: sendLatencies), percentile(0.99, of: sendLatencies))
        }
    }

    /// What to send, where, how much and how: the command line's options.
    var options: LoadBenchCommand
    private var host: String { "127.0.0.1" }
    private var batchSize: Int { options.batchSize }
    private var body: Body { options.payloadBytes > 0 ? .raw(payloadBytes: options.payloadBytes) : .alert }

    /// The text of one send to `token`.
    func item(_ token: String) -> String {
        switch body {
        case .alert:
            return #"{"app":"\#(options.app)","environment":"development","operation":"alert","token":"\#(token)","snapshot":\#(DemoWorkload.liveSnapshot)}"#
        case .raw(let bytes):
            return #"{"app":"\#(options.app)","environment":"development","operation":"raw","token":"\#(token)","headers":{"apns-push-type":"alert"},"payload":\#(Self.payload(bytes: bytes))}"#
        }
    }

    /// A compact APNs payload of exactly `bytes` bytes (at least the bare alert's size).
    static func payload(bytes: Int) -> String {
        let bare = #"{"aps":{"alert":{"title":"bench","body":"a push of typical size"}},"pad":""}"#
        return #"{"aps":{"alert":{"title":"bench","body":"a push of typical size"}},"pad":"\#(String(repeating: "x", count: max(0, bytes - bare.utf8.count)))"}"#
    }

    /// One send's text split around its token, so a request is built by copying bytes.
    func itemTemplate() -> (prefix: [UInt8], suffix: [UInt8]) {
        let marker = String(repeating: "T", count: 64)
        let text = item(marker)
        let range = text.range(of: marker)!
        return (Array(text[..<range.lowerBound].utf8), Array(text[range.upperBound...].utf8))
    }

    func run() async -> Result {
        let perRequest = max(1, batchSize)
        let requests = (options.sends + perRequest - 1) / perRequest
        let request = LoadRequest(
            path: batchSize > 0 ? "/v1/send/batch" : "/v1/send", host: host, port: options.port, apiKey: options.apiKey,
            template: itemTemplate(), items: perRequest, batch: batchSize > 0)
        let (host, port, connections, tokenOffset, batchSize) = (host, options.port, options.connections, options.tokenOffset, batchSize)
        let started = ContinuousClock.now
        let counts = await IngressBenchmark.onThreads(1) { _ in
            let loop = LoadLoop(
                host: host, port: port, connections: connections, requests: requests, request: request,
                firstToken: { tokenOffset + $0 * perRequest }
            ) { status, body, counts in
                guard status == 200 else { return nil }
                guard batchSize > 0 else { return 1 }
                counts.sendLatencies.append(contentsOf: Self.numbers(after: #""latencyMs":"#, in: body))
                return Int(Self.numbers(after: #""succeeded":"#, in: body).last ?? 0)
            }
            return loop.run()
        }[0]
        let seconds = started.duration(to: .now).milliseconds / 1000
        return Result(
            requests: requests, sends: requests * perRequest, succeeded: counts.succeeded, failedRequests: counts.failed, seconds: seconds,
            latencies: counts.latencies.sorted(), sendLatencies: counts.sendLatencies.sorted())
    }

    /// Every number that follows `key` in a JSON answer, in order (a batch
    /// answer's `latencyMs` per result, its summary's `succeeded` last).
    static func numbers(after key: String, in body: ArraySlice<UInt8>) -> [Double] {
        let key = Array(key.utf8)
        var values: [Double] = []
        var index = body.startIndex
        while index + key.count <= body.endIndex {
            guard body[index] == key[0], body[index..<(index + key.count)].elementsEqual(key) else {
                index += 1
                continue
            }
            var end = index + key.count
            while end < body.endIndex, (body[end] >= 48 && body[end] <= 57) || body[end] == UInt8(ascii: ".") { end += 1 }
            if let value = Double(String(decoding: body[(index + key.count)..<end], as: UTF8.self)) { values.append(value) }
            index = end
        }
        return values
    }
}
