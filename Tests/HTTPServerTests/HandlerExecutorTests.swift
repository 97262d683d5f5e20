import Foundation
import HTTPServer
import Synchronization
import Testing

/// `HTTPServer.Configuration.handlerExecutor`: the executor a request's
/// handler task prefers, chosen per request.
@Suite("HTTP server: a handler's executor chosen per request")
struct HandlerExecutorTests {
    /// Counts the jobs it is given and runs them on the global executor.
    final class CountingExecutor: TaskExecutor, Sendable {
        let jobs = Atomic<Int>(0)
        func enqueue(_ job: consuming ExecutorJob) {
            jobs.add(1, ordering: .relaxed)
            globalConcurrentExecutor.enqueue(job)
        }
    }

    @Test("the picked request's handler runs on the executor, with its body; another request does not")
    func pickedPerRequest() async throws {
        let executor = CountingExecutor()
        let bodies = Mutex<[String]>([])
        let server = try makeServer { configuration in
            configuration.handlerExecutor = { request in
                guard request.path == "/echo" else { return nil }
                bodies.withLock { $0.append(String(decoding: request.body, as: UTF8.self)) }
                return executor
            }
        }
        let other = try await Curl.request("http://127.0.0.1:\(server.port)/hello/x")
        #expect(other.status == 200)
        #expect(executor.jobs.load(ordering: .relaxed) == 0)

        let picked = try await Curl.request(
            "http://127.0.0.1:\(server.port)/echo", ["-X", "POST", "-H", "content-type: application/json", "--data-binary", #"{"a":1}"#])
        #expect(picked.status == 201)
        #expect(executor.jobs.load(ordering: .relaxed) >= 1)
        #expect(bodies.withLock { $0 } == [#"{"a":1}"#])
        await server.stop()
    }
}
