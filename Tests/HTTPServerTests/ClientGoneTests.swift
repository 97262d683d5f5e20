import Foundation
import HTTPServer
import Synchronization
import Testing
import TestSupport

/// `HTTPRequest.isClientGone` while a handler runs on a suspended connection.
@Suite("HTTP server: clients that hang up")
struct ClientGoneTests {
    final class Observed: Sendable {
        let connectedAtStart = Mutex<Bool?>(nil)
        let noticedGone = Mutex(false)
        let release = Mutex(false)
    }

    @Test("isClientGone is false while the client waits and turns true once it closes the connection")
    func hangUpIsNoticed() async throws {
        let observed = Observed()
        var router = Router()
        router.add("POST", "/wait") { request in
            observed.connectedAtStart.withLock { $0 = !request.isClientGone }
            // Waits for the client to leave (or the test to give up).
            while !request.isClientGone, !observed.release.withLock({ $0 }) {
                try? await Task.sleep(for: .milliseconds(10))
            }
            observed.noticedGone.withLock { $0 = request.isClientGone }
            return .text(200, "nobody reads this\n")
        }
        let server = try HTTPServer(router: router)
        defer { observed.release.withLock { $0 = true } }

        let curl = try ChildProcess(
            ["curl", "-s", "-o", "/dev/null", "--max-time", "120", "-X", "POST", "--data-binary", "{}", "http://127.0.0.1:\(server.port)/wait"])

        #expect(await eventually(30, every: .milliseconds(10)) { observed.connectedAtStart.withLock { $0 } != nil })
        // Still there: a waiting client is not mistaken for a gone one.
        #expect(observed.connectedAtStart.withLock { $0 } == true)
        #expect(!observed.noticedGone.withLock { $0 })

        curl.kill()
        #expect(await eventually(30, every: .milliseconds(10)) { observed.noticedGone.withLock { $0 } }, "the handler saw the hang-up")
        #expect(await eventually(30, every: .milliseconds(10)) { server.inFlight == 0 })
        await server.stop(drainTimeout: 1)
    }
}
