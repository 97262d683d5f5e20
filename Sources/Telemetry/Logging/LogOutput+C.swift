#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The log drain's file descriptor, written without ever blocking; also
/// standard output for the commands' few plain lines (`serve`'s port lines),
/// which must neither block nor end the process when their reader is gone.
///
/// Standard error is shared with the parent (a pipe to a log collector, a
/// terminal), so its file status flags are not changed: `O_NONBLOCK` on fd 2
/// would be set on the parent's open file description too. Instead:
/// - a pipe or a terminal is opened again through `/proc/self/fd/N` with
///   `O_NONBLOCK`: a description of our own, on the same pipe;
/// - a socket is written with `send(MSG_DONTWAIT | MSG_NOSIGNAL)`;
/// - a regular file (or /dev/null) is written as it is: it never blocks for long;
/// - when the reopen fails, fd N is written at most `PIPE_BUF` bytes at a
///   time, and only after `poll` said it can take them (a pipe with room for
///   one page takes a write of up to `PIPE_BUF` without blocking).
public struct LogOutput: Sendable {
    enum Mode: Sendable {
        case nonBlocking, socket, plain, polled
    }

    public enum Result {
        case wrote(Int)
        /// The sink takes nothing now.
        case full
        /// The sink is gone (EPIPE, EBADF, EIO…).
        case failed
    }

    let fd: Int32
    let mode: Mode

    public init(fileDescriptor: Int32) {
        var status = stat()
        guard fstat(fileDescriptor, &status) == 0 else {
            fd = fileDescriptor
            mode = .polled
            return
        }
        switch status.st_mode & S_IFMT {
        case S_IFSOCK:
            fd = fileDescriptor
            mode = .socket
        case S_IFIFO, S_IFCHR:
            let own = open("/proc/self/fd/\(fileDescriptor)", O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if own >= 0 {
                fd = own
                mode = .nonBlocking
            } else {
                fd = fileDescriptor
                mode = .polled
            }
        case S_IFREG:
            fd = fileDescriptor
            mode = .plain
        default:
            fd = fileDescriptor
            mode = .polled
        }
        // A log reader that exits must not kill the relay: its write fails with EPIPE instead.
        signal(SIGPIPE, SIG_IGN)
    }

    public func write(_ bytes: UnsafeRawPointer, count: Int) -> Result {
        let result: Int
        switch mode {
        case .nonBlocking, .plain:
            result = Glibc.write(fd, bytes, count)
        case .socket:
            result = send(fd, bytes, count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        case .polled:
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&poller, 1, 0)
            if ready == 0 { return .full }
            if ready < 0 { return errno == EINTR ? .full : .failed }
            if poller.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return .failed }
            result = Glibc.write(fd, bytes, min(count, Int(PIPE_BUF)))
        }
        if result > 0 { return .wrote(result) }
        if result == 0 { return .full }
        switch errno {
        case EAGAIN, EWOULDBLOCK, EINTR: return .full
        default: return .failed
        }
    }

    /// Registers the exit handler that flushes ``LogSink/standardError``.
    static func flushStandardErrorAtExit() {
        atexit { LogSink.standardError.flush(within: LogSink.closeBound) }
    }

    /// Waits until the sink may take bytes, at most `milliseconds`.
    func waitWritable(milliseconds: Int32) {
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&poller, 1, milliseconds)
    }
}
