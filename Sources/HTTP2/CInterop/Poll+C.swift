#if canImport(Glibc)
    import Glibc
#endif

/// The poll() every connection thread sleeps in: one socket plus the
/// eventfd other threads signal. Kept here so libc calls stay in CInterop.
enum Poll {
    /// What the socket is ready for after a wait.
    struct Readiness {
        var readable = false
        var writable = false
        /// Hang-up or error: a read will report what happened.
        var broken = false

        var any: Bool { readable || writable || broken }
        /// Worth a read: data, or a hang-up/error the read will surface.
        var shouldRead: Bool { readable || broken }
    }

    /// Waits up to `milliseconds` for `socket` to be readable (when `read`)
    /// or writable (when `write`), or for `wake` to be signalled, whose
    /// count is drained. -1 waits without a limit.
    static func wait(socket: Int32, read: Bool, write: Bool, wake: WakeSignal, milliseconds: Int32) -> Readiness {
        let events = (read ? Int16(POLLIN) : 0) | (write ? Int16(POLLOUT) : 0)
        // A tuple on the stack, not an array: no allocation per turn of the loop.
        var descriptors = (pollfd(fd: socket, events: events, revents: 0), pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0))
        withUnsafeMutableBytes(of: &descriptors) { bytes in
            _ = poll(bytes.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, milliseconds)
        }
        if descriptors.1.revents != 0 { wake.drain() }
        let revents = descriptors.0.revents
        return Readiness(
            readable: revents & Int16(POLLIN) != 0,
            writable: revents & Int16(POLLOUT) != 0,
            broken: revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0)
    }

    /// The descriptors of one `ConnectionLoop` turn: its eventfd first, then
    /// one socket per connection. Kept by the loop and refilled each turn,
    /// so a turn allocates nothing.
    struct Set {
        private var descriptors: [pollfd] = []

        mutating func reset(wake: WakeSignal) {
            descriptors.removeAll(keepingCapacity: true)
            descriptors.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0))
        }

        mutating func add(socket: Int32, write: Bool) {
            descriptors.append(pollfd(fd: socket, events: Int16(POLLIN) | (write ? Int16(POLLOUT) : 0), revents: 0))
        }

        /// Waits up to `milliseconds` (-1: no limit); drains the eventfd when it was signalled.
        mutating func wait(wake: WakeSignal, milliseconds: Int32) {
            _ = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if descriptors[0].revents != 0 { wake.drain() }
        }

        /// The readiness of the `index`th socket added since `reset`.
        func readiness(ofSocket index: Int) -> Readiness {
            let revents = descriptors[index + 1].revents
            return Readiness(
                readable: revents & Int16(POLLIN) != 0,
                writable: revents & Int16(POLLOUT) != 0,
                broken: revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0)
        }
    }

    /// Milliseconds for poll() from nanoseconds, rounded up so a wait just
    /// short of a millisecond does not spin at 0, and capped.
    static func milliseconds(fromNanoseconds nanoseconds: UInt64, cap: Int32 = 1000) -> Int32 {
        Int32(min((nanoseconds + 999_999) / 1_000_000, UInt64(cap)))
    }
}

extension Socket {
    /// Closes a descriptor the connection thread owns.
    static func close(_ fd: Int32) { _ = Glibc.close(fd) }
}
