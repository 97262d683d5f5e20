import Foundation
@testable import HTTPServer
import Synchronization
import Testing
import TestSupport

/// The handler tasks the server keeps from one request to the next.
@Suite("HTTP server: handler workers")
struct HandlerWorkersTests {
    final class Marker: Sendable {}

    struct Job: Sendable {
        let number: Int
        let marker: Marker
    }

    @Test("a worker that has answered takes the next job instead of a new task starting")
    func workerIsReused() async {
        let handled = Mutex<[Int]>([])
        let workers = HandlerWorkers<Job>(maximumWaiting: 4) { job in handled.withLock { $0.append(job.number) } }
        defer { workers.close() }
        for number in 1...5 {
            workers.run(Job(number: number, marker: Marker()))
            #expect(await eventually { workers.waitingCount == 1 })
        }
        #expect(handled.withLock { $0 } == [1, 2, 3, 4, 5])
        #expect(workers.startedCount == 1)
    }

    @Test("a job that cancelled its task (a batch past its deadline does) leaves no cancelled worker for the next")
    func cancelledWorkerIsNotReused() async {
        let cancelledWhenHandled = Mutex<[Int: Bool]>([:])
        let workers = HandlerWorkers<Job>(maximumWaiting: 4) { job in
            cancelledWhenHandled.withLock { $0[job.number] = Task.isCancelled }
            // The batch route cancels the task it runs on at its deadline.
            if job.number == 1 { withUnsafeCurrentTask { $0?.cancel() } }
        }
        defer { workers.close() }
        workers.run(Job(number: 1, marker: Marker()))
        #expect(await eventually { cancelledWhenHandled.withLock { $0[1] } != nil })
        #expect(await eventually { workers.waitingCount == 0 && workers.startedCount == 1 })
        workers.run(Job(number: 2, marker: Marker()))
        #expect(await eventually { cancelledWhenHandled.withLock { $0[2] } != nil })
        #expect(cancelledWhenHandled.withLock { $0 } == [1: false, 2: false], "the second job ran in a task nobody cancelled")
        #expect(workers.startedCount == 2, "the cancelled worker ended; a new one took the next job")
    }

    @Test("a waiting worker holds no reference to the job it answered")
    func waitingWorkerLetsGoOfItsJob() async {
        let workers = HandlerWorkers<Job>(maximumWaiting: 4) { _ in }
        defer { workers.close() }
        weak var first: Marker?
        weak var second: Marker?
        do {
            let marker = Marker()
            first = marker
            workers.run(Job(number: 1, marker: marker))
        }
        #expect(await eventually { workers.waitingCount == 1 })
        #expect(await eventually { first == nil })
        do {
            let marker = Marker()
            second = marker
            workers.run(Job(number: 2, marker: marker))
        }
        #expect(await eventually { workers.waitingCount == 1 && second == nil })
    }

    @Test("concurrent jobs each get a worker; past maximumWaiting the extra workers end")
    func burstBeyondTheWaitingLimit() async {
        let gate = Mutex(false)
        let running = Atomic<Int>(0)
        let workers = HandlerWorkers<Job>(maximumWaiting: 1) { _ in
            running.add(1, ordering: .relaxed)
            while !gate.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
        }
        defer { workers.close() }
        for number in 1...3 { workers.run(Job(number: number, marker: Marker())) }
        // None was waiting: three workers, running at once.
        #expect(await eventually { running.load(ordering: .relaxed) == 3 })
        #expect(workers.startedCount == 3)
        gate.withLock { $0 = true }
        #expect(await eventually { workers.waitingCount == 1 })
        // The one that waits takes the next job.
        workers.run(Job(number: 4, marker: Marker()))
        #expect(await eventually { running.load(ordering: .relaxed) == 4 && workers.waitingCount == 1 })
        #expect(workers.startedCount == 3)
    }

    @Test("close ends the waiting workers")
    func closeEndsWaitingWorkers() async {
        weak var weakWorkers: HandlerWorkers<Job>?
        do {
            let workers = HandlerWorkers<Job>(maximumWaiting: 4) { _ in }
            weakWorkers = workers
            workers.run(Job(number: 1, marker: Marker()))
            #expect(await eventually { workers.waitingCount == 1 })
            workers.close()
            #expect(workers.waitingCount == 0)
        }
        // Its ended task no longer holds it.
        #expect(await eventually { weakWorkers == nil })
    }

    @Test("the server answers requests one after another on one handler task")
    func serverReusesItsHandlerTask() async throws {
        var router = Router()
        router.add("GET", "/ping") { _ in .text(200, "pong\n") }
        let server = try HTTPServer(router: router)
        let workers = server.daemon.core.workers
        for _ in 1...3 {
            #expect(try await Curl.request("http://127.0.0.1:\(server.port)/ping").body == "pong\n")
            // Its worker waits for the next request once it has answered.
            #expect(await eventually { workers.waitingCount == 1 })
        }
        #expect(workers.startedCount == 1)
        await server.stop()
        // Stopped, the server ends its waiting worker.
        #expect(workers.waitingCount == 0)
    }
}
