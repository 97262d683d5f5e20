import Foundation
import RelayBasics
import Testing

@Suite("MonotonicCondition")
struct MonotonicConditionTests {
    @Test("seconds convert to the clock's nanoseconds; negative and NaN are none, and no setting however large traps or overflows a deadline")
    func nanoseconds() {
        #expect(MonotonicClock.nanoseconds(0.5) == 500_000_000)
        #expect(MonotonicClock.nanoseconds(0) == 0)
        #expect(MonotonicClock.nanoseconds(-3) == 0)
        #expect(MonotonicClock.nanoseconds(.nan) == 0)
        let longest = MonotonicClock.nanoseconds(.infinity)
        #expect(longest == MonotonicClock.nanoseconds(1e300))
        #expect(MonotonicClock.now().addingReportingOverflow(longest).overflow == false)
    }

    @Test("a wait nobody signals ends false once the monotonic clock reaches its deadline; a signal ends one true")
    func waits() async {
        let condition = MonotonicCondition()
        condition.lock()
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(0.02)
        var signalled = false
        while MonotonicClock.now() < deadline {
            signalled = condition.wait(until: deadline) || signalled
        }
        condition.unlock()
        #expect(!signalled)

        // Two threads of their own (never the cooperative pool): the waiter
        // says it waits, the other sets the flag and signals once it does.
        final class Box: @unchecked Sendable { var waiting = false; var go = false; var woken = false }
        let box = Box()
        let far = MonotonicClock.now() + MonotonicClock.nanoseconds(60)
        let done = DispatchSemaphore(value: 0)
        Thread {
            condition.lock()
            box.waiting = true
            condition.broadcast()
            while !box.go { box.woken = condition.wait(until: far) }
            condition.unlock()
            done.signal()
        }.start()
        Thread {
            condition.lock()
            while !box.waiting { condition.wait(until: far) }
            box.go = true
            condition.signal()
            condition.unlock()
        }.start()
        await withCheckedContinuation { continuation in
            Thread { done.wait(); continuation.resume() }.start()
        }
        #expect(box.woken, "the signal, not the minute-long deadline, ended the wait")
    }
}
