import HTTPServer
import Synchronization
import Testing

@Suite("Health probes")
struct HealthProbesTests {
    @Test("/healthz always answers ok; /readyz says ready, or 503 with the reason, as the check says at each call")
    func probes() async {
        let reason = Mutex<String?>(nil)
        let probes = HealthProbes { reason.withLock { $0 } }
        var router = Router()
        probes.install(on: &router)
        func answer(_ path: String) async -> (Int, String) {
            let response = await router.respond(to: HTTPRequest(method: "GET", path: path))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }
        #expect(await answer("/healthz") == (200, "ok\n"))
        #expect(await answer("/readyz") == (200, "ready\n"))
        reason.withLock { $0 = "draining" }
        #expect(await answer("/readyz") == (503, "not ready: draining\n"))
        #expect(await answer("/healthz") == (200, "ok\n"), "liveness does not follow readiness")
    }
}
