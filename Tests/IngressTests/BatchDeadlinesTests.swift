@testable import Ingress
import RelayBasics
import Synchronization
import TestSupport
import Testing

/// The one thread that watches every running batch's deadline.
@Suite("Batch deadlines")
struct BatchDeadlinesTests {
    @Test("a deadline's action runs once it passes, in deadline order; a deregistered one never runs")
    func firesInOrderUnlessDeregistered() async throws {
        let deadlines = BatchDeadlines(idleLinger: 0.05)
        let fired = Mutex<[String]>([])
        let now = ContinuousClock.now
        // 200 ms apart, so the deregistration two calls later never races
        // the first deadline, however slowly this runs.
        let late = deadlines.register(now + .milliseconds(600)) { fired.withLock { $0.append("late") } }
        let gone = deadlines.register(now + .milliseconds(200)) { fired.withLock { $0.append("gone") } }
        _ = deadlines.register(now + .milliseconds(400)) { fired.withLock { $0.append("early") } }
        deadlines.deregister(gone)
        #expect(await eventually { fired.withLock { $0.count } == 2 })
        // "gone" would have run before both: its deadline came first.
        #expect(fired.withLock { $0 } == ["early", "late"])
        deadlines.deregister(late)
        #expect(fired.withLock { $0 } == ["early", "late"], "deregistering after the action ran changes nothing")
    }

    @Test("a deadline earlier than the one the thread sleeps towards wakes it; the thread comes back after an idle exit")
    func earlierDeadlineWakes() async throws {
        let deadlines = BatchDeadlines(idleLinger: 0.01)
        let fired = Mutex(0)
        let far = deadlines.register(ContinuousClock.now + .seconds(3_600)) { fired.withLock { $0 += 100 } }
        // Let the thread start sleeping towards the far deadline.
        try await Task.sleep(for: .milliseconds(20))
        _ = deadlines.register(ContinuousClock.now + .milliseconds(10)) { fired.withLock { $0 += 1 } }
        #expect(await eventually { fired.withLock { $0 } == 1 }, "the near deadline waited behind the far one")
        deadlines.deregister(far)
        // Idle now: the thread exits; a later batch starts it again.
        try await Task.sleep(for: .milliseconds(50))
        _ = deadlines.register(ContinuousClock.now) { fired.withLock { $0 += 1 } }
        #expect(await eventually { fired.withLock { $0 } == 2 })
    }

    @Test("out of threads (a pids limit), the watcher is not left marked running: the next registration, once threads are back, starts it, and both actions run once")
    func watcherStartsOnALaterRegistration() async throws {
        let threads = RefusingThreadStarter()
        let deadlines = BatchDeadlines(idleLinger: 0.05, startingThreadsWith: threads.starter)
        let fired = Mutex<[String]>([])
        // Already passed: a running watcher would run it at once.
        _ = deadlines.register(ContinuousClock.now) { fired.withLock { $0.append("first") } }
        #expect(threads.refused == 1 && threads.started == 0)
        threads.allow()
        // Not marked running after the refusal: this registration starts the thread.
        _ = deadlines.register(ContinuousClock.now) { fired.withLock { $0.append("second") } }
        #expect(threads.started == 1, "the watcher was left marked running, and never started again")
        // "first" is run by the watcher or by the task that kept it meanwhile, once either way.
        #expect(await eventually { fired.withLock { $0.count } == 2 })
        #expect(fired.withLock { $0 }.sorted() == ["first", "second"])
    }

    @Test("with no thread to be had at all, a deadline's action still runs once it passes (from a sleeping task), and a deregistered one never does")
    func deadlineKeptWithoutAThread() async throws {
        let threads = RefusingThreadStarter()
        let deadlines = BatchDeadlines(idleLinger: 0.05, startingThreadsWith: threads.starter)
        let fired = Mutex<[String]>([])
        let now = ContinuousClock.now
        // 300 ms apart, so the deregistration right after never races the first.
        let gone = deadlines.register(now + .milliseconds(300)) { fired.withLock { $0.append("gone") } }
        deadlines.deregister(gone)
        _ = deadlines.register(now + .milliseconds(600)) { fired.withLock { $0.append("kept") } }
        #expect(await eventually { fired.withLock { $0.count } == 1 }, "the deadline passed with nobody to keep it")
        #expect(fired.withLock { $0 } == ["kept"])
        #expect(threads.started == 0 && threads.refused == 2)
    }

    @Test("many batches that end before their deadline leave nothing behind that fires")
    func endedBatchesNeverFire() async throws {
        let deadlines = BatchDeadlines()
        let fired = Mutex(0)
        // Far off: the loop may take any time without a deadline passing
        // between a register and its deregister (the ended entries still
        // fill the heap, which is what is tested).
        let far = ContinuousClock.now + .seconds(3_600)
        for index in 0..<5_000 {
            let id = deadlines.register(far + .milliseconds(index % 7)) { fired.withLock { $0 += 1 } }
            deadlines.deregister(id)
        }
        let last = deadlines.register(ContinuousClock.now + .milliseconds(30)) { fired.withLock { $0 += 1 } }
        #expect(await eventually { fired.withLock { $0 } == 1 })
        deadlines.deregister(last)
        #expect(fired.withLock { $0 } == 1)
    }
}
