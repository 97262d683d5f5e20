@testable import Ingress
import Testing

/// The relay-wide lanes of batch sends: who gets a lane handed back, and a
/// waiting worker that is cancelled.
@Suite("Batch lanes")
struct BatchLanesTests {
    /// Waits (yielding) until `condition` holds; false after many tries.
    static func settle(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<100_000 {
            if condition() { return true }
            await Task.yield()
        }
        return condition()
    }

    @Test("a lane handed back goes to a waiting batch before any waiting worker, then to the workers in order")
    func startersFirst() async throws {
        let lanes = BatchLanes(capacity: 1)
        #expect(lanes.tryAcquire())
        let worker = Task { await lanes.acquireUnlessCancelled() }
        #expect(await Self.settle { lanes.waiting == 1 })
        // In one shared line the worker, first in it, would get the lane and the batch give up after 20 s.
        let batch = Task { await lanes.acquire(patience: .seconds(20)) }
        #expect(await Self.settle { lanes.waiting == 2 })
        lanes.release(1)
        #expect(await batch.value)
        #expect(lanes.waiting == 1, "the worker still waits")
        lanes.release(1)
        #expect(await worker.value)
        #expect(lanes.inUse == 1)
        lanes.release(1)
        #expect(lanes.inUse == 0)
    }

    @Test("a waiting worker whose task is cancelled leaves the line with false and takes no lane")
    func cancelledWorker() async throws {
        let lanes = BatchLanes(capacity: 1)
        #expect(lanes.tryAcquire())
        let worker = Task { await lanes.acquireUnlessCancelled() }
        #expect(await Self.settle { lanes.waiting == 1 })
        worker.cancel()
        #expect(await worker.value == false)
        #expect(lanes.waiting == 0)
        lanes.release(1)
        #expect(lanes.inUse == 0)
        #expect(lanes.tryAcquire(), "the lane given back is free, not handed to the cancelled worker")
    }
}
