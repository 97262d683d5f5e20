import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// What an accept loop does when the process is out of descriptors.
///
/// accept(2) failing with EMFILE or ENFILE leaves the connection queued and
/// the listening socket readable: a loop that polls it again at once spins a
/// core until a descriptor frees (libmicrohttpd 0.9.75's own accept does, at
/// its first connection). The loop rests instead: it leaves the listening socket
/// out of its poll (`fd: -1`) for ``milliseconds``, and the connection waits
/// in the kernel's backlog meanwhile. ``Listener``'s accept loop.
struct AcceptRest: Sendable {
    /// How long a rest lasts.
    static let milliseconds: Int32 = 100
    private var until: UInt64 = 0

    init() {}

    /// Whether the loop rests now: the listening socket stays out of its poll.
    var isResting: Bool { until > MonotonicClock.now() }

    /// After accept failed with `error`: a rest begins when it failed for
    /// want of descriptors or kernel memory.
    mutating func acceptFailed(_ error: Int32) {
        if [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error) { begin() }
    }

    /// Begins a rest (an accepted connection that could not be served for
    /// want of a descriptor or a thread).
    mutating func begin() {
        until = MonotonicClock.now() &+ UInt64(Self.milliseconds) * 1_000_000
    }
}
