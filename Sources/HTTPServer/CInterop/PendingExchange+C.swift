internal import CMicroHTTPD
import Synchronization
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// One request between libmicrohttpd's callbacks: read on MHD's thread,
/// answered by a Swift task.
final class PendingExchange: @unchecked Sendable {
    // The mutable fields are touched only by libmicrohttpd callbacks for this
    // connection, which MHD runs one at a time; only `response` crosses to the
    // handler task, and it is guarded by its own lock.
    /// What the first callback read: the request's head, final once set.
    var head = ReceivedHead()
    var body: [UInt8] = []
    var tooLarge = false
    /// Answered from its head alone (RequestFraming); the body is never read.
    var refused = false
    var dispatched = false
    let response = Mutex<HTTPResponse?>(nil)
    /// Set once the connection has been resumed, by the handler or by a forced
    /// stop; whoever sets it answers, the other leaves the connection alone.
    private let resumed = Mutex(false)
    var connection: SuspendedConnection?
    /// The connection's socket, for ``clientHasGone()``.
    var socket: Int32 = -1

    /// Whether the client hung up while the handler runs, or the connection
    /// was already answered. A suspended connection is not polled by
    /// libmicrohttpd, so its socket is asked directly (no wait): POLLRDHUP
    /// means the client closed its side, POLLHUP/POLLERR that it is reset.
    /// Under the `resumed` lock, so the socket is still the connection's own.
    func clientHasGone() -> Bool {
        resumed.withLock { done in
            if done { return true }
            guard socket >= 0 else { return false }
            // POLLRDHUP (0x2000, Linux) is not exported by Swift's Glibc module.
            let hangUp = Int16(0x2000) | Int16(POLLHUP) | Int16(POLLERR)
            var entry = pollfd(fd: socket, events: Int16(0x2000), revents: 0)
            return poll(&entry, 1, 0) > 0 && entry.revents & hangUp != 0
        }
    }

    /// Stores `answer` and resumes the connection, unless that already happened.
    func resume(with answer: HTTPResponse) {
        let first = resumed.withLock { done in
            defer { done = true }
            return !done
        }
        guard first, let connection else { return }
        response.withLock { $0 = answer }
        MHD_resume_connection(connection.pointer)
    }
}

/// A suspended connection handle carried to the task that resumes it.
struct SuspendedConnection: @unchecked Sendable {
    // libmicrohttpd allows MHD_resume_connection from any thread
    // (MHD_ALLOW_SUSPEND_RESUME implies an inter-thread channel).
    let pointer: OpaquePointer
}
