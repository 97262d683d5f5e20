import Foundation
import RelayJSON
import RelayServer
import Testing
import TestSupport

/// The attack campaign's probes against the assembled relay, both listeners.
@Suite("Ingress against hostile clients")
struct IngressHardeningTests {
    /// Sends `request` byte for byte with Python's socket module (a peer
    /// nobody here wrote) and returns what came back until the relay closed.
    static func raw(_ port: Int, _ request: String) async throws -> TestRelay.Answer {
        try await raw(port, bytes: Array(request.utf8))
    }

    /// ``raw(_:_:)`` for a request that is not UTF-8 (a Latin-1 header value).
    static func raw(_ port: Int, bytes request: [UInt8]) async throws -> TestRelay.Answer {
        let script = """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.settimeout(10)
            s.sendall(bytes.fromhex(sys.argv[2]))
            out = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                out += chunk
            sys.stdout.write(out.decode("latin-1"))
            """
        let hex = request.map { String(format: "%02x", $0) }.joined()
        let (status, output) = try await ProcessRunner.runOffPool(["python3", "-c", script, String(port), hex])
        try #require(status == 0, "python failed: \(output)")
        return try TestRelay.parse(output)
    }

    @Test("Accept-Encoding ';' on /healthz of the ingress and of the metrics listener: answered, the process lives")
    func acceptEncodingSemicolon() async throws {
        try await withRelay { relay in
            for base in [relay.base, relay.metricsBase] {
                let health = try await relay.curl("GET", "/healthz", key: nil, headers: ["Accept-Encoding: ;"], base: base)
                #expect(health.status == 200)
            }
            let metrics = try await relay.curl("GET", "/metrics", key: nil, headers: ["Accept-Encoding: ;"], base: relay.metricsBase)
            #expect(metrics.status == 200)
            #expect(try await relay.curl("GET", "/healthz", key: nil).status == 200)
        }
    }

    @Test("404, 405, 413 and the framing refusals carry a traceparent continuing the caller's trace, and the ingress' envelope")
    func traceparentEverywhere() async throws {
        try await withRelay { relay in
            let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
            let parent = "00-\(traceID)-00f067aa0ba902b7-01"
            let port = Int(relay.server.ingressAddress.port)
            let answers: [(String, TestRelay.Answer, Int, String)] = [
                ("404", try await relay.curl("GET", "/nowhere", headers: ["traceparent: \(parent)"]), 404, "NotFound"),
                ("405", try await relay.curl("GET", "/v1/send", headers: ["traceparent: \(parent)"]), 405, "MethodNotAllowed"),
                ("413", try await relay.curl("POST", "/v1/send", body: String(repeating: "x", count: 70 * 1024), headers: ["traceparent: \(parent)"]), 413, "PayloadTooLarge"),
                ("400 two Content-Length", try await Self.raw(port, "POST /v1/send HTTP/1.1\r\nHost: x\r\ntraceparent: \(parent)\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"), 400, "InvalidRequest"),
                ("400 CL and TE", try await Self.raw(port, "POST /v1/send HTTP/1.1\r\nHost: x\r\ntraceparent: \(parent)\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400, "InvalidRequest"),
                ("400 space before colon", try await Self.raw(port, "POST /v1/send HTTP/1.1\r\nHost: x\r\ntraceparent: \(parent)\r\nTransfer-Encoding : chunked\r\nContent-Length: 2\r\n\r\n{}"), 400, "InvalidRequest"),
                ("413 declared", try await Self.raw(port, "POST /v1/send HTTP/1.1\r\nHost: x\r\ntraceparent: \(parent)\r\nContent-Length: 99999999\r\n\r\n"), 413, "PayloadTooLarge"),
                ("501", try await Self.raw(port, "POST /v1/send HTTP/1.1\r\nHost: x\r\ntraceparent: \(parent)\r\nTransfer-Encoding: gzip\r\n\r\n"), 501, "NotImplemented"),
            ]
            for (name, answer, status, type) in answers {
                #expect(answer.status == status, "\(name): \(answer)")
                #expect(answer.error?["type"]?.stringValue == type, "\(name): \(answer.body)")
                let traceparent = answer.headers["traceparent"] ?? ""
                #expect(traceparent.hasPrefix("00-\(traceID)-"), "\(name): traceparent \(traceparent)")
                #expect(!traceparent.contains("00f067aa0ba902b7"), "\(name): the relay's own span id, not the caller's")
            }
            // No traceparent sent, or a malformed one: a fresh trace.
            for header in [[String](), ["traceparent: 00-zz-bad-01"]] {
                let missing = try await relay.curl("GET", "/nowhere", headers: header)
                let traceparent = try #require(missing.headers["traceparent"])
                #expect(traceparent.split(separator: "-").count == 4)
                #expect(!traceparent.contains(traceID))
            }
            #expect(try await relay.curl("GET", "/healthz", key: nil).headers["traceparent"] != nil)
            #expect(relay.apnsRequests == 0, "nothing reached APNs")
        }
    }

    @Test("a client dribbling header lines to the ingress is cut at ingress.request_timeout_seconds; others are served meanwhile")
    func dribblingClientCut() async throws {
        try await withRelay(configure: { $0.ingress.requestTimeoutSeconds = 2 }) { relay in
            // One header line every 0.5 s: far inside the 30 s idle timeout,
            // so only the whole-request deadline can end it. Prints the
            // seconds until the relay closed the socket (or "open").
            let script = """
                import socket, sys, time, select
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                start = time.monotonic()
                s.sendall(b"POST /v1/send HTTP/1.1\\r\\nHost: x\\r\\n")
                line = 0
                while time.monotonic() - start < 20:
                    readable, _, _ = select.select([s], [], [], 0.5)
                    if readable and not s.recv(4096):
                        print("%.1f" % (time.monotonic() - start)); sys.exit(0)
                    line += 1
                    try:
                        s.sendall(b"X-Slow-%d: y\\r\\n" % line)
                    except OSError:
                        print("%.1f" % (time.monotonic() - start)); sys.exit(0)
                print("open")
                """
            let port = String(relay.server.ingressAddress.port)
            async let dribble = ProcessRunner.runOffPool(["python3", "-c", script, port])
            let health = try await relay.curl("GET", "/healthz", key: nil)
            #expect(health.status == 200)
            let (status, output) = try await dribble
            #expect(status == 0, "\(output)")
            let seconds = Double(output.trimmingCharacters(in: .whitespacesAndNewlines))
            // Cut within the script's 20 s while a header line arrives every
            // 0.5 s (so not by the 30 s idle timeout); that the request
            // deadline cut it is told by its counter below, not by the seconds.
            #expect(seconds != nil, "the relay never closed the dribbling connection: \(output)")
            // On-call sees it: the cut is counted.
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            #expect(scrape.body.contains("apns_relay_ingress_requests_timed_out_total 1"), "\(scrape.body.split(separator: "\n").filter { $0.contains("timed_out") })")
        }
    }
}
