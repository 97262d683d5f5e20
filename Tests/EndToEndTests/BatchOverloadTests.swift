import Foundation
import MockAPNs
import RelayJSON
import RelayServer
import Testing
import TestSupport

/// Overload behaviour of the send path: the relay-wide send budget, batches
/// whose client left, the batch deadline, single sends beside heavy batches,
/// and batches cut short by the drain.
@Suite("Batch overload", .serialized)
struct BatchOverloadTests {
    /// A batch of `count` background sends fanned out from one item.
    static func batch(_ count: Int, prefix: String = "") -> String {
        let tokens = (0..<count).map { "\"\(TestRelay.token($0, prefix: prefix))\"" }.joined(separator: ",")
        return #"{"items":[{"app":"app-a","environment":"development","operation":"background","priority":5,"tokens":[\#(tokens)]}]}"#
    }

    /// `curl` posting `body` in the background; killed to play a client that gives up.
    final class LeavingClient: Sendable {
        private let process: ChildProcess

        init(url: String, body: String) throws {
            let file = NSTemporaryDirectory() + "batch-\(UUID().uuidString).json"
            _ = FileManager.default.createFile(atPath: file, contents: Data(body.utf8))
            process = try ChildProcess([
                "curl", "-s", "-o", "/dev/null", "--max-time", "300", "-H", "authorization: Bearer \(TestRelay.keys["backend"]!)",
                "-H", "content-type: application/json", "--data-binary", "@\(file)", url,
            ])
            Task { [process] in
                _ = await process.exited()
                try? FileManager.default.removeItem(atPath: file)
            }
        }

        /// Kills curl: the kernel closes its socket, as for a client that crashed or timed out.
        func leave() { process.kill() }
        var hasExited: Bool { !process.isRunning }
    }

    static func results(_ answer: TestRelay.Answer) -> [JSONValue] { answer.json?["results"]?.arrayValue ?? [] }
    static func errorType(_ result: JSONValue) -> String? { result["error"]?["type"]?.stringValue }

    @Test("the relay-wide send budget refuses a batch that does not fit whole (503 Overloaded) but keeps room for single sends; a batch larger than the batches' share is 413")
    func sendBudget() async throws {
        try await withRelay(mockDelay: .fixed(milliseconds: 3000), configure: { configuration in
            // Batches may hold 18 of the 20; the last two are for single sends.
            configuration.ingress.maximumSendsInFlight = 20
            configuration.ingress.maximumBodyBytes = 1 << 20
        }) { relay in
            let tooLarge = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(19))
            #expect(tooLarge.status == 413, "\(tooLarge)")
            #expect(tooLarge.error?["field"]?.stringValue == "items")

            // Sixteen sends held by a slow APNs.
            let held = Task { try await relay.curl("POST", "/v1/send/batch", body: Self.batch(16)) }
            #expect(await eventually { relay.server.ingress.sendsAdmitted == 16 })

            let refused = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(3, prefix: "b"))
            #expect(refused.status == 503, "\(refused)")
            #expect(refused.error?["type"]?.stringValue == "Overloaded")
            #expect(refused.error?["message"]?.stringValue?.contains("max_sends_in_flight") == true)
            #expect(refused.headers["retry-after"] == "1")
            #expect(relay.server.ingress.sendsAdmitted == 16)
            #expect(!relay.mock.engine.log.entries.contains { $0.request.path.hasPrefix("/3/device/b") }, "nothing of the refused batch reached APNs")

            // Two more fit in the batches' share; a single send beside them still gets through.
            async let fits = relay.curl("POST", "/v1/send/batch", body: Self.batch(2, prefix: "c"))
            #expect(await eventually { relay.server.ingress.sendsAdmitted == 18 })
            let single = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "d")))
            #expect(single.status == 200, "\(single)")
            #expect(try await fits.json?["summary"]?["succeeded"]?.integerValue == 2)
            #expect(try await held.value.json?["summary"]?["succeeded"]?.integerValue == 16)
            #expect(relay.server.ingress.sendsAdmitted == 0)
        }
    }

    @Test(
        "one batch runs at most ingress.batch_concurrency sends at once, or an eighth of ingress.max_batch_sends_running without it; a batch larger than either finishes every item",
        arguments: [(concurrency: Optional(3), sends: 10, running: 3), (concurrency: nil, sends: 250, running: 100)])
    func batchConcurrency(_ concurrency: Int?, sends: Int, running: Int) async throws {
        try await withRelay(mockDelay: .fixed(milliseconds: 1000), configure: { configuration in
            configuration.ingress.maximumBodyBytes = 1 << 20
            configuration.ingress.maximumBatchSendsRunning = 800
            configuration.ingress.batchConcurrency = concurrency
        }) { relay in
            let batch = Task { try await relay.curl("POST", "/v1/send/batch", body: Self.batch(sends)) }
            // Held one second by APNs, the first `running` sends are running and no
            // more (800 lanes / 8 = 100: a fixed per-batch cap of 64 never got there).
            #expect(await eventually { relay.server.ingress.batchSendsRunning == running })
            #expect(relay.server.ingress.batchSendsRunning <= running)
            let answer = try await batch.value
            #expect(answer.status == 200, "\(answer)")
            let results = Self.results(answer)
            #expect(results.allSatisfy { $0["ok"] == .bool(true) }, "\(answer)")
            #expect(results.compactMap { $0["tokenIndex"]?.integerValue } == (0..<sends).map(Int64.init))
            #expect(relay.apnsRequests == sends)
            #expect(relay.server.ingress.batchSendsRunning == 0)
            #expect(relay.server.ingress.sendsAdmitted == 0)
        }
    }

    @Test("a batch whose client hung up starts no more sends; the rest are never sent and the budget is given back")
    func clientGone() async throws {
        try await withRelay(mockDelay: .fixed(milliseconds: 500), configure: { configuration in
            configuration.ingress.maximumBodyBytes = 1 << 20
            configuration.ingress.maximumBatchSendsRunning = 4
        }) { relay in
            let client = try LeavingClient(url: relay.base + "/v1/send/batch", body: Self.batch(200))
            #expect(await eventually { relay.apnsRequests >= 4 })
            client.leave()
            #expect(await eventually { client.hasExited })
            // The handler ends once the sends it had running come back.
            #expect(await eventually(60) { relay.server.ingress.requestsInFlight == 0 })
            #expect(relay.apnsRequests < 200, "the abandoned batch kept sending: \(relay.apnsRequests) of 200 reached APNs")
            #expect(relay.server.ingress.sendsAdmitted == 0)
            #expect(relay.server.ingress.batchSendsRunning == 0)
        }
    }

    @Test("past the batch deadline unstarted sends are answered NotSent (BatchDeadline) and running ones Cancelled, in one response")
    func deadline() async throws {
        try await withRelay(mockDelay: .fixed(milliseconds: 400), configure: { configuration in
            configuration.ingress.maximumBatchSendsRunning = 2
            configuration.ingress.batchDeadlineSeconds = 1
        }) { relay in
            let answer = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(40))
            #expect(answer.status == 200, "\(answer)")
            let results = Self.results(answer)
            #expect(results.count == 40)
            let ok = results.filter { $0["ok"] == .bool(true) }.count
            let notSent = results.filter { Self.errorType($0) == "NotSent" }
            let cancelled = results.filter { Self.errorType($0) == "Cancelled" }.count
            #expect(ok > 0)
            #expect(!notSent.isEmpty)
            #expect(ok + notSent.count + cancelled == 40, "\(answer)")
            #expect(notSent.allSatisfy { $0["error"]?["reason"]?.stringValue == "BatchDeadline" && $0["tokenIndex"] != nil })
            #expect(answer.json?["summary"]?["notSent"]?.integerValue == Int64(notSent.count))
            #expect(answer.json?["summary"]?["failed"]?.integerValue == Int64(40 - ok))
            #expect(relay.apnsRequests == ok + cancelled, "sends answered NotSent never reached APNs")
            #expect(relay.server.ingress.sendsAdmitted == 0)
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            #expect(scrape.body.contains(#"apns_relay_batch_sends_not_sent_total{reason="BatchDeadline"} \#(notSent.count)"#), "\(scrape.body.split(separator: "\n").filter { $0.contains("not_sent") })")
            #expect(scrape.body.contains("apns_relay_ingress_sends_admitted 0"))
        }
    }

    @Test("a batch of one send, run on the request's own task, is still cancelled by the batch deadline")
    func deadlineOfOneSend() async throws {
        try await withRelay(mockDelay: .fixed(milliseconds: 20_000), configure: { $0.ingress.batchDeadlineSeconds = 1 }) { relay in
            let answer = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(1))
            #expect(answer.status == 200 && Self.results(answer).count == 1, "\(answer)")
            let only = try #require(Self.results(answer).first, "\(answer)")
            #expect(Self.errorType(only) == "Cancelled" && only["error"]?["apnsId"]?.stringValue != nil, "cancelled, with its apnsId: \(answer)")
            #expect(relay.apnsRequests == 1 && relay.server.ingress.sendsAdmitted == 0 && relay.server.ingress.batchSendsRunning == 0)
        }
    }

    @Test("after a batch cancelled at its deadline, the next requests run on tasks nobody cancelled and succeed")
    func sendsAfterADeadline() async throws {
        // The held token's batch of one runs on the request's own task, which
        // its deadline cancels; the server keeps handler tasks between requests.
        try await withRelay(rules: [MockRule(.tokenPrefix("cafe"), always: .hold)], configure: { $0.ingress.batchDeadlineSeconds = 1 }) { relay in
            let answer = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(1, prefix: "cafe"))
            #expect(Self.errorType(try #require(Self.results(answer).first, "\(answer)")) == "Cancelled", "\(answer)")
            for index in 0..<4 {
                let next = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(index)))
                #expect(next.status == 200 && next.json?["apnsId"] != nil, "send \(index) after the cancelled batch: \(next)")
            }
            let batch = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(3))
            #expect(batch.status == 200 && Self.results(batch).allSatisfy { $0["ok"] == .bool(true) }, "\(batch)")
        }
    }

    @Test("a fresh send beside abandoned heavy batches reaches APNs behind at most the batch sends already running, not their queue")
    func freshSendBesideAbandonedBatches() async throws {
        let delay = 1000
        try await withRelay(mockDelay: .fixed(milliseconds: delay), configure: { configuration in
            configuration.ingress.maximumBodyBytes = 1 << 20
            configuration.ingress.maximumSendsInFlight = 100_000
            configuration.apns.connectionsPerOrigin = 1
        }) { relay in
            // 60 clients × 1000 sends would be 60,000 streams: sixty times
            // what the one connection carries (1000), so without a relay-wide
            // bound a single send waits rounds of APNs latency in its queue.
            var clients: [LeavingClient] = []
            for client in 0..<60 {
                clients.append(try LeavingClient(url: relay.base + "/v1/send/batch", body: Self.batch(1000, prefix: String(client % 10))))
            }
            // Every batch admitted and running, and APNs well into its work.
            #expect(await eventually(60) { relay.server.ingress.requestsInFlight == 60 && relay.apnsRequests >= 1500 })
            for client in clients { client.leave() }
            #expect(relay.server.ingress.batchSendsRunning <= 512)

            let before = relay.apnsRequests
            let fresh = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(7, prefix: "f")))
            #expect(fresh.status == 200, "\(fresh)")
            let apnsID = try #require(fresh.json?["apnsId"]?.stringValue)
            let arrival = try #require(relay.mock.engine.log.arrival(apnsID: apnsID))
            // Queued behind the batches' sends it would reach APNs behind tens
            // of thousands of them. With the relay-wide bound only the batch
            // sends running when it was posted (at most 512, checked above),
            // and at most one more per lane started before the workers saw
            // their clients gone, can be ahead of it: counted in requests, not
            // timed, so a busy machine cannot fail it or make it pass.
            let ahead = arrival - before - 1
            print("a fresh send reached APNs behind \(ahead) batch sends, answered in \(fresh.json?["latencyMs"]?.numberValue ?? -1) ms (APNs answers in \(delay) ms)")
            #expect(ahead <= 2 * 512, "a fresh send reached APNs behind \(ahead) batch sends")
            #expect(await eventually(60) { relay.server.ingress.requestsInFlight == 0 })
            #expect(relay.server.ingress.sendsAdmitted == 0)
        }
    }

    @Test("a batch cut short by the drain answers the sends it finished and NotSent (Draining) for the rest; the audit holds exactly the finished ones")
    func drainMidBatch() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        let instance = "e2e-drain-\(UUID().uuidString.prefix(8))"
        let relay = try await TestRelay.start(databaseURL: url, instance: instance, mockDelay: .fixed(milliseconds: 1000)) { configuration in
            configuration.ingress.maximumBatchSendsRunning = 4
            // Batches start sends for 4 s into the drain; the connections close at 6.4 s.
            configuration.drainTimeoutSeconds = 8
        }
        do {
            // Ten rounds of four one-second sends: far more than fit in the drain.
            let batch = Task { try await relay.curl("POST", "/v1/send/batch", body: Self.batch(40)) }
            #expect(await eventually { relay.apnsRequests >= 4 })
            let draining = Task { await relay.server.drain() }
            let answer = try await batch.value
            await draining.value

            #expect(answer.status == 200, "\(answer)")
            let results = Self.results(answer)
            #expect(results.count == 40)
            let finished = results.filter { $0["ok"] == .bool(true) }
            let notSent = results.filter { Self.errorType($0) == "NotSent" }
            #expect(finished.count >= 4)
            #expect(!notSent.isEmpty)
            #expect(finished.count + notSent.count == 40, "\(answer)")
            #expect(notSent.allSatisfy { $0["error"]?["reason"]?.stringValue == "Draining" })
            #expect(answer.json?["summary"]?["notSent"]?.integerValue == Int64(notSent.count))

            // The drain flushed the audit: one success row per finished send, none for the others.
            let (status, output) = try await ProcessRunner.runOffPool([
                "psql", url, "-At", "-F", " ", "-c", "SELECT apns_id, outcome FROM apns_audit WHERE relay_instance = '\(instance)' ORDER BY apns_id",
            ])
            #expect(status == 0, "\(output)")
            let rows = output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            let expected = finished.compactMap { $0["apnsId"]?.stringValue }.sorted()
            #expect(rows.map { $0[0] } == expected)
            #expect(rows.allSatisfy { $0.count == 2 && $0[1] == "success" }, "\(output)")
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }
}
