import Synchronization

extension OTLPExporter {
    /// What the sends and the exporter's thread share: read and written only
    /// under the exporter's `condition` lock.
    struct QueueState {
        /// The spans waiting, each as a ScopeSpans `spans` field (tag,
        /// length, Span message), one after the other: a span's bytes are
        /// copied in once, and a batch goes out as one run of them. Once the
        /// two buffers (this and the thread's) have grown, they are swapped
        /// and reused: the exporter's thread frees nothing a send made.
        var pending: [UInt8] = []
        /// Where each waiting span's bytes end in `pending`: one per span.
        var pendingEnds: [Int] = []
        var pendingCount: Int { pendingEnds.count }
        /// The thread waits for a batch or its timer (a send wakes it when a batch is ready).
        var sleeping = false
        var closing = false
        var closed = false
        /// ``OTLPExporter/start()`` has started the thread.
        var started = false
        /// `MonotonicClock` nanoseconds by which the close must be done; 0 before it.
        var closeDeadline: UInt64 = 0
        /// The deadline of the export under way, lowered by a close.
        var inFlight: OTLPDeadline?
    }

    /// The totals behind ``OTLPExporter/counts``, and the drop callback
    /// (the metric): atomics, so a send counts without the lock.
    final class Counters: Sendable {
        private let recordedTotal = Atomic<Int>(0)
        private let exportedTotal = Atomic<Int>(0)
        private let droppedQueueFull = Atomic<Int>(0)
        private let droppedExportFailed = Atomic<Int>(0)
        private let dropped: @Sendable (Drop, Int) -> Void

        init(dropped: @escaping @Sendable (Drop, Int) -> Void) {
            self.dropped = dropped
        }

        var counts: Counts {
            Counts(
                recorded: recordedTotal.load(ordering: .relaxed), exported: exportedTotal.load(ordering: .relaxed),
                droppedQueueFull: droppedQueueFull.load(ordering: .relaxed),
                droppedExportFailed: droppedExportFailed.load(ordering: .relaxed))
        }

        func recorded() { recordedTotal.add(1, ordering: .relaxed) }

        func exported(_ count: Int) { exportedTotal.add(count, ordering: .relaxed) }

        /// Counts `count` spans lost for `reason` and reports them; nothing for 0.
        func drop(_ count: Int, _ reason: Drop) {
            guard count > 0 else { return }
            if reason == .queueFull {
                droppedQueueFull.add(count, ordering: .relaxed)
            } else {
                droppedExportFailed.add(count, ordering: .relaxed)
            }
            dropped(reason, count)
        }
    }

    /// The export failures' log: one line every 10 s at most (a collector
    /// that is away fails a batch every few hundred milliseconds; the counter
    /// has every one). The exporter's thread's own.
    struct FailureLog {
        private var lastLogged: UInt64 = 0
        /// Batches failed since the last line (this one included).
        private var failedSinceLog = 0

        /// Counts one failed batch; the number to log (failed since the last
        /// line) when a line is due at `now`, nil otherwise.
        mutating func failed(now: UInt64) -> Int? {
            failedSinceLog += 1
            guard lastLogged == 0 || now - lastLogged >= 10_000_000_000 else { return nil }
            let failed = failedSinceLog
            lastLogged = now
            failedSinceLog = 0
            return failed
        }
    }
}
