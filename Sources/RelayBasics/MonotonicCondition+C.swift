import Glibc

/// A lock with a condition variable whose timed waits run on the
/// monotonic clock: for threads that sleep until a deadline nobody signals
/// (the audit writer's pacing: a partial batch's linger, its idle wait,
/// the reconnect backoff; the batch deadlines' watcher).
///
/// `NSCondition` waits until a `Date`: an absolute deadline on the wall
/// clock, which the kernel measures on that clock. Stepped back (NTP, a
/// resumed virtual machine) during a wait, the wait lasts the whole step
/// longer, however short it was meant to be: the audit writer's rows of a
/// quiet relay waited out the step (minutes, hours) before their COPY, and
/// a batch ran past its deadline until its sends' own. Here deadlines are
/// ``MonotonicClock`` readings, which no step moves.
public final class MonotonicCondition: @unchecked Sendable {
    // Allocated once, never moved (pthread objects must not be copied).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits, with the lock held, until signalled or until ``MonotonicClock/now()`` reaches
    /// `deadline`; false when the deadline passed. Like every condition
    /// variable it may also return early for no reason: callers check their
    /// condition again.
    @discardableResult
    public func wait(until deadline: UInt64) -> Bool {
        var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &spec) == 0
    }
}
