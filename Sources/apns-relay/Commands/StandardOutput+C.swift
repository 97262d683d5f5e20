#if canImport(Glibc)
    import Glibc
#endif

/// Standard output for the few plain lines commands print for people and
/// scripts (`serve`'s and `mock-apns`' port lines, the load generator's
/// result): each written at once, never blocking, never ending the process.
///
/// Foundation's `FileHandle.standardOutput.write(_:)` traps on a write
/// error: `apns-relay serve | head -1` (a script that reads the port line
/// and goes) crashed `serve` on its second line, with EPIPE. A reader that
/// stopped reading would have held the command in `write(2)`. So, as the
/// log drain does for standard error: a pipe or terminal is written through
/// a non-blocking description of our own (`/proc/self/fd/1`, so the flags
/// of the one the parent shares are left alone), a socket with
/// `MSG_DONTWAIT | MSG_NOSIGNAL`, anything else as it is. A line the
/// descriptor does not take at once is not written; the caller says so on
/// standard error.
enum StandardOutput {
    /// Where lines go: descriptor 1 itself, or a non-blocking one of our own on the same pipe.
    private static let target: (descriptor: Int32, socket: Bool) = {
        var status = stat()
        guard fstat(1, &status) == 0 else { return (1, false) }
        switch status.st_mode & S_IFMT {
        case S_IFSOCK:
            return (1, true)
        case S_IFIFO, S_IFCHR:
            let own = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return (own >= 0 ? own : 1, false)
        default:
            return (1, false)
        }
    }()

    /// Writes `line` and a newline; false when standard output did not take
    /// it whole (its reader is gone, or stalled with the pipe full).
    @discardableResult
    static func writeLine(_ line: String) -> Bool {
        // A signal's default must not end the process for a reader that left.
        signal(SIGPIPE, SIG_IGN)
        let bytes = Array((line + "\n").utf8)
        let (descriptor, socket) = target
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                socket
                    ? send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                    : write(descriptor, raw.baseAddress! + offset, raw.count - offset)
            }
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }
}
