extension LogDrain {
    /// What the loggers and the drain thread share: read and written only
    /// under the drain's `condition` lock.
    struct Buffer {
        /// Whole lines waiting for the drain thread, at most `capacity` bytes.
        var pending: [UInt8] = []
        var pendingLines = 0
        /// Lines given to ``LogDrain/append(_:)`` since the start.
        var produced = 0
        /// Lines dropped and not yet reported in a line of the sink's own.
        var droppedUnreported = 0
        /// The drain thread was started (by the first line).
        var started = false
        /// Out of threads, the next try to start it is not before this
        /// (``MonotonicClock``): not a thread start under the lock per line.
        var nextStartAttempt: UInt64 = 0
        /// The drain thread waits for a line (the next one wakes it).
        var sleeping = false
        var closing = false
        var closed = false
    }
}
