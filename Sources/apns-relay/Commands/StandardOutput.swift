import Telemetry

/// Standard output for the few plain lines commands print for people and
/// scripts (`serve`'s and `mock-apns`' port lines, the load generator's
/// result): each written at once, never blocking, never ending the process.
///
/// Foundation's `FileHandle.standardOutput.write(_:)` traps on a write
/// error: `apns-relay serve | head -1` (a script that reads the port line
/// and goes) crashed `serve` on its second line, with EPIPE. A reader that
/// stopped reading would have held the command in `write(2)`. So the lines
/// go through the log drain's writer (``LogOutput``: a non-blocking
/// description of our own on a pipe or terminal, `MSG_DONTWAIT` on a
/// socket, SIGPIPE ignored). A line the descriptor does not take at once is
/// not written; the caller says so on standard error.
enum StandardOutput {
    private static let output = LogOutput(fileDescriptor: 1)

    /// Writes `line` and a newline; false when standard output did not take
    /// it whole (its reader is gone, or stalled with the pipe full).
    @discardableResult
    static func writeLine(_ line: String) -> Bool {
        Array((line + "\n").utf8).withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                guard case .wrote(let count) = output.write(bytes.baseAddress! + offset, count: bytes.count - offset) else { return false }
                offset += count
            }
            return true
        }
    }
}
