import Glibc
@testable import HTTP2
import Synchronization
import Testing

/// `ConnectionLoop` as a `TaskExecutor`: a task that prefers the loop runs
/// on the loop's thread, so its request is queued and its answer resumes it
/// without another thread. As in `WakeUpTests`, every deadline is an hour
/// away and the loop dawdles before it sleeps, so a lost wake-up hangs a
/// test (its time limit fails it) instead of slowing it down.
@Suite("HTTP/2 client: the connection loop as a task executor")
struct LoopExecutorTests {
    /// The threads a loop ran its turns on, recorded from its sleep hook.
    private final class LoopThreads: Sendable {
        let seen = Mutex(Set<UInt>())
        func record() { seen.withLock { _ = $0.insert(UInt(pthread_self())) } }
        var all: Set<UInt> { seen.withLock { $0 } }
    }

    private static func connection(_ local: LocalServer, loop: ConnectionLoop, threads: LoopThreads) -> HTTP2Connection {
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: local.server.port)
        configuration.tls = TLSClientConfiguration(caFile: local.certificate.certificate)
        configuration.pingInterval = 3600
        configuration.idleTimeout = 3600
        var tuning = HTTP2Connection.Tuning()
        tuning.longestSleep = 3600
        tuning.beforeSleep = {
            threads.record()
            usleep(100)
        }
        return HTTP2Connection(configuration: configuration, observer: nil, loop: loop, tuning: tuning)
    }

    private static func request(_ path: String) -> HTTP2Request {
        HTTP2Request(method: "GET", path: path, timeout: 3600)
    }

    @Test("a task that prefers the loop runs every step on the loop's thread, its requests answered", .timeLimit(.minutes(2)))
    func sendsRunOnTheLoopThread() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let loop = ConnectionLoop()
        let threads = LoopThreads()
        let connection = Self.connection(local, loop: loop, threads: threads)
        // Up, so that the loop runs (before that its jobs go elsewhere).
        _ = try await connection.send(Self.request("/warm"))

        let stepThreads = try await Task(executorPreference: loop) { () async throws -> Set<UInt> in
            var seen: Set<UInt> = [UInt(pthread_self())]
            for index in 0..<500 {
                let response = try await connection.send(Self.request("/l/\(index)"))
                #expect(response.body == Array("/l/\(index)".utf8))
                seen.insert(UInt(pthread_self()))
            }
            return seen
        }.value
        #expect(stepThreads.count == 1)
        #expect(stepThreads.isSubset(of: threads.all), "the task's steps ran on a thread the loop never ran on")
        await connection.close()
    }

    @Test("tasks started from elsewhere while the loop sleeps wake it: every one runs", .timeLimit(.minutes(2)))
    func jobsWakeASleepingLoop() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let loop = ConnectionLoop()
        let connection = Self.connection(local, loop: loop, threads: LoopThreads())
        _ = try await connection.send(Self.request("/warm"))
        // One at a time, each from the pool once the loop has marked itself
        // asleep for jobs: only the eventfd can wake it for that job.
        var ran = 0
        for index in 0..<200 {
            while !loop.sleepsWithoutJobs { try await Task.sleep(for: .microseconds(50)) }
            ran += await Task(executorPreference: loop) { index }.value == index ? 1 : 0
        }
        #expect(ran == 200)
        await connection.close()
    }

    @Test("a loop no thread runs (no connection yet, or all closed) hands its jobs to the global executor", .timeLimit(.minutes(1)))
    func jobsWithoutARunningLoop() async throws {
        let loop = ConnectionLoop()
        #expect(await Task(executorPreference: loop) { 41 + 1 }.value == 42)

        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let connection = Self.connection(local, loop: loop, threads: LoopThreads())
        _ = try await connection.send(Self.request("/once"))
        await connection.close()
        // The loop has ended with its last connection; its jobs still run.
        #expect(await Task(executorPreference: loop) { 7 }.value == 7)
    }
}
