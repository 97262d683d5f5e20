@testable import HTTPServer
@testable import RelayServer
import Testing
import TestSupport

/// The HTTP/2 APNs ingress runs its requests on tasks kept from one request
/// to the next (``HandlerWorkers``), as the HTTP/1.1 listener does, instead of
/// a task per request whose stack-allocator slabs were allocated and freed
/// every time; and the relay's drain ends the ones left waiting.
@Suite("HTTP/2 APNs ingress workers", .serialized)
struct APNsIngressWorkersTests {
    @Test("requests one after another run on one kept task, over new connections too; the relay's drain ends it")
    func keptTask() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        var kept: APNsIngressListener?
        try await APNsHTTP2IngressTests.withIngress(key: key, tls: false) { relay, port, _ in
            let listener = try #require(relay.server.apnsIngressServer)
            kept = listener
            #expect(listener.workers.startedCount == 0)
            for number in 0..<5 {
                // Each curl is a connection of its own: the workers belong to the listener.
                let answer = try await APNsHTTP2IngressTests.curl(
                    port: port, caFile: nil, token: try key.token(), path: "/3/device/\(TestRelay.token(40 + number))",
                    body: #"{"aps":{"alert":"kept"}}"#, headers: ["apns-topic: com.example.a"])
                #expect(answer.status == 200, "\(answer)")
                // The worker parks itself after it has answered: the next request finds it waiting.
                #expect(await eventually { listener.workers.waitingCount == 1 })
            }
            #expect(listener.workers.startedCount == 1)
        }
        let listener = try #require(kept)
        #expect(listener.workers.waitingCount == 0)
    }
}
