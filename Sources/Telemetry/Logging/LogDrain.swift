import Foundation
import RelayBasics
import Synchronization

/// The bounded buffer behind ``LogSink/standardError`` and the thread that
/// drains it.
///
/// Why a thread of its own: a `write(2)` to a pipe whose reader stopped (a
/// stalled log collector) blocks for ever, and the relay used to make it on
/// the thread that logged, under a lock every other logger waited on: after a
/// pipe's worth of lines every send, probe and the drain hung. Now a line is
/// appended to `pending` (one copy, under a lock held for that copy only) and
/// this thread writes everything pending with one `write` per batch. The sink
/// is written without blocking (see ``LogOutput``): while it takes nothing the
/// thread waits in `poll` with a timeout, `pending` fills, and lines that do
/// not fit are dropped whole at once, counted, and reported in one line when
/// the sink takes lines again. A batch is written from its first byte to its
/// last before the next, so a line partly written is completed before any
/// other: lines are never torn or interleaved. Only ``close(within:)`` gives
/// up on a batch (at its deadline); its lines not written whole are counted
/// as dropped.
///
/// `@unchecked Sendable`: it owns the output's file descriptor; the state
/// it shares with the loggers (``Buffer``) is read and written only under
/// `condition`'s lock, the counters are atomics, and `leftPartialLine` is the
/// drain thread's own.
final class LogDrain: @unchecked Sendable {
    /// Totals since the start, in lines of the relay (drop reports and the
    /// closing line are the sink's own and not counted).
    struct Counts {
        var produced: Int
        var written: Int
        var dropped: Int
    }

    let capacity: Int
    private let output: LogOutput
    private let condition = MonotonicCondition()
    /// Guarded by `condition`'s lock.
    private var buffer = Buffer()
    // Written by the drain thread (and `append` for drops), read by scrapes.
    private let written = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    /// Set (by the drain thread only) when a write stopped in the middle of
    /// a line (a disk that filled mid-write, a close's deadline): the next
    /// write ends that line with a newline first, so it is one cut line and
    /// the lines after it are whole.
    private var leftPartialLine = false
    /// `MonotonicClock` nanoseconds past which a batch the sink does not take is given up; 0: never.
    private let giveUpAt = Atomic<UInt64>(0)

    /// How the drain thread is started (``DetachedThread/start(name:_:)``; a test's may fail).
    private let startThreadWith: DetachedThread.Starter

    init(fileDescriptor fd: Int32, capacity: Int, startingThreadsWith starter: @escaping DetachedThread.Starter = DetachedThread.start) {
        self.capacity = capacity
        output = LogOutput(fileDescriptor: fd)
        startThreadWith = starter
    }

    var counts: Counts {
        condition.lock()
        defer { condition.unlock() }
        return Counts(
            produced: buffer.produced, written: written.load(ordering: .relaxed), dropped: dropped.load(ordering: .relaxed))
    }

    /// Copies the line into the buffer, or drops it whole when it does not fit.
    func append(_ line: [UInt8]) {
        condition.lock()
        buffer.produced += 1
        if buffer.closed || buffer.pending.count + line.count > capacity {
            buffer.droppedUnreported += 1
            dropped.add(1, ordering: .relaxed)
            condition.unlock()
            return
        }
        if !buffer.started {
            let now = MonotonicClock.now()
            if now >= buffer.nextStartAttempt {
                buffer.pending.reserveCapacity(capacity)
                // Out of threads (a pids limit): the lines wait in the
                // buffer, and a line 100 ms on tries again.
                buffer.started = startThread()
                if !buffer.started { buffer.nextStartAttempt = now + 100_000_000 }
            }
        }
        buffer.pending.append(contentsOf: line)
        buffer.pendingLines += 1
        // The thread is woken for the first line after a quiet spell, or
        // when half the buffer is taken; otherwise it picks the lines up at
        // the end of its linger (see `run`), without a wake-up per line.
        if buffer.sleeping || buffer.pending.count >= capacity / 2 { condition.signal() }
        condition.unlock()
    }

    /// Writes what is pending and the closing line within `seconds`; see ``LogSink/flush(within:)``.
    func close(within seconds: Double) -> Bool {
        let start = MonotonicClock.now()
        let deadline = start + MonotonicClock.nanoseconds(seconds)
        condition.lock()
        defer { condition.unlock() }
        if !buffer.started {
            if buffer.pendingLines == 0 {
                // Nothing was ever logged: no thread to write the closing line either.
                buffer.closed = true
                return true
            }
            // Lines that waited for a thread that could not start: one more try, else they are lost, and counted.
            buffer.started = startThread()
            if !buffer.started {
                dropped.add(buffer.pendingLines, ordering: .relaxed)
                buffer.pending.removeAll()
                buffer.pendingLines = 0
                buffer.closed = true
                return false
            }
        }
        // The thread gives up on the sink a little before the deadline, so
        // that it has counted what it dropped when the caller reads the totals.
        giveUpAt.store(start + MonotonicClock.nanoseconds(seconds * 0.9), ordering: .relaxed)
        buffer.closing = true
        condition.broadcast()
        while !buffer.closed && MonotonicClock.now() < deadline { condition.wait(until: deadline) }
        return buffer.closed && dropped.load(ordering: .relaxed) == 0
    }

    // MARK: The drain thread

    /// Starts the drain thread; false when no thread could be started.
    private func startThread() -> Bool {
        (try? startThreadWith("relay-log") { [self] in run() }) != nil
    }

    private func run() {
        var batch: [UInt8] = []
        batch.reserveCapacity(capacity)
        while true {
            condition.lock()
            while buffer.pending.isEmpty && !buffer.closing {
                buffer.sleeping = true
                condition.wait(until: MonotonicClock.now() + 1_000_000_000)
                buffer.sleeping = false
            }
            if buffer.pending.isEmpty {
                // Closing, and everything was written or given up on.
                let unreported = buffer.droppedUnreported
                buffer.droppedUnreported = 0
                let totals = Counts(
                    produced: buffer.produced, written: written.load(ordering: .relaxed), dropped: dropped.load(ordering: .relaxed))
                condition.unlock()
                var tail: [UInt8] = []
                if unreported > 0 { tail += Self.reportLine(dropped: unreported, total: totals.dropped) }
                tail += Self.closingLine(totals)
                _ = put(tail)
                condition.lock()
                buffer.closed = true
                condition.broadcast()
                condition.unlock()
                return
            }
            swap(&batch, &buffer.pending)
            let lines = buffer.pendingLines
            buffer.pendingLines = 0
            condition.unlock()

            let lost = put(batch)
            batch.removeAll(keepingCapacity: true)
            written.add(lines - lost, ordering: .relaxed)
            if lost > 0 { dropped.add(lost, ordering: .relaxed) }

            condition.lock()
            if lost > 0 { buffer.droppedUnreported += lost }
            // The sink took a whole batch: it works again; say what it missed.
            let unreported = lost == 0 ? buffer.droppedUnreported : 0
            if lost == 0 { buffer.droppedUnreported = 0 }
            let total = dropped.load(ordering: .relaxed)
            condition.unlock()
            if unreported > 0 {
                let report = Self.reportLine(dropped: unreported, total: total)
                if put(report) > 0 {
                    condition.lock()
                    buffer.droppedUnreported += unreported
                    condition.unlock()
                }
            }
            // Linger before the next batch: lines logged meanwhile gather
            // without waking this thread (a busy relay logs a line per send;
            // a futex wake and two context switches per line cost more than
            // the line). A close, or half the buffer taken, ends it early.
            condition.lock()
            if !buffer.closing && buffer.pending.count < capacity / 2 {
                condition.wait(until: MonotonicClock.now() + Self.lingerNanoseconds)
            }
            condition.unlock()
        }
    }

    /// How long the thread gathers lines after writing a batch: the most a
    /// line waits behind a busy log, far below what a log reader notices.
    static let lingerNanoseconds: UInt64 = 5_000_000

    /// Writes `bytes` from first to last; returns how many lines were not
    /// written whole (0, unless the sink failed or the close's deadline passed).
    ///
    /// A sink that failed inside a line (a log file whose disk filled in the
    /// middle of a write) gets a newline first: the cut line ends there and
    /// the lines after it are whole. Until it takes that newline, nothing
    /// else is written. Without it, a disk that filled once would have
    /// silenced the log for good: every later line would have continued the
    /// cut one, so none was written.
    private func put(_ bytes: [UInt8]) -> Int {
        if leftPartialLine {
            let newline = [UInt8(ascii: "\n")]
            guard newline.withUnsafeBytes({ write($0) }) == 1 else { return Self.lineCount(bytes[...]) }
            leftPartialLine = false
        }
        let offset = bytes.withUnsafeBytes { write($0) }
        guard offset < bytes.count else { return 0 }
        if offset > 0 && bytes[offset - 1] != UInt8(ascii: "\n") { leftPartialLine = true }
        return Self.lineCount(bytes[offset...])
    }

    /// Writes `bytes` from first to last, waiting while the sink is full
    /// (until the close's deadline, if one was set); returns how many were
    /// written: fewer than all when the sink failed or the deadline passed.
    private func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        while offset < bytes.count {
            switch output.write(bytes.baseAddress! + offset, count: bytes.count - offset) {
            case .wrote(let count):
                offset += count
            case .full:
                let deadline = giveUpAt.load(ordering: .relaxed)
                var wait: Int32 = 200
                if deadline != 0 {
                    let now = MonotonicClock.now()
                    if now >= deadline { return offset }
                    wait = Int32(min(200, (deadline - now) / 1_000_000 + 1))
                }
                output.waitWritable(milliseconds: wait)
            case .failed:
                return offset
            }
        }
        return offset
    }

    /// Every line ends in the one newline it holds (JSON escapes the rest).
    private static func lineCount(_ bytes: ArraySlice<UInt8>) -> Int {
        var lines = 0
        for byte in bytes where byte == UInt8(ascii: "\n") { lines += 1 }
        return lines
    }

    static func reportLine(dropped: Int, total: Int) -> [UInt8] {
        Array(
            (#"{"ts":"\#(RFC3339.format(nanoseconds: UnixTime.nowNanoseconds()))","level":"warning","logger":"apns-relay.log","#
                + #""msg":"log lines dropped: the log sink took nothing while the buffer was full","dropped":\#(dropped),"dropped_total":\#(total)}"#
                + "\n").utf8)
    }

    static func closingLine(_ counts: Counts) -> [UInt8] {
        Array(
            (#"{"ts":"\#(RFC3339.format(nanoseconds: UnixTime.nowNanoseconds()))","level":"info","logger":"apns-relay.log","#
                + #""msg":"log sink closed","lines_produced":\#(counts.produced),"lines_written":\#(counts.written),"lines_dropped":\#(counts.dropped)}"#
                + "\n").utf8)
    }
}
