import RelayBasics
import Synchronization

/// Where JSON log lines go: standard error through a bounded buffer that a
/// thread of the logger's own drains (``standardError``), or a closure
/// (tests capture every line to scan it for secrets).
///
/// A caller of ``write(_:)`` never waits on the sink: the line is copied into
/// the buffer, or, when the buffer is full (the sink stalled or too slow), it
/// is dropped whole and counted (``linesDropped``, the metric
/// `apns_relay_log_lines_dropped_total`). See ``LogDrain``.
public final class LogSink: Sendable {
    private enum Target: Sendable {
        case closure(@Sendable ([UInt8]) -> Void)
        case drain(LogDrain)
    }

    private let target: Target
    /// Serializes a closure sink's calls.
    private let lock = Mutex(())

    /// A sink that hands each line to `writeLine`, one line at a time (the
    /// calls are serialized, so lines from concurrent tasks never interleave).
    public init(_ writeLine: @escaping @Sendable ([UInt8]) -> Void) {
        target = .closure(writeLine)
    }

    /// A sink that buffers up to `capacity` bytes of whole lines for the
    /// file descriptor `fd` and writes them from a thread of its own.
    public convenience init(fileDescriptor fd: Int32, capacity: Int = LogSink.defaultCapacity) {
        self.init(fileDescriptor: fd, capacity: capacity, startingThreadsWith: DetachedThread.start)
    }

    /// A drain sink whose thread is started by `starter` (a test's, which may fail as at a pids limit).
    init(fileDescriptor fd: Int32, capacity: Int, startingThreadsWith starter: @escaping DetachedThread.Starter) {
        target = .drain(LogDrain(fileDescriptor: fd, capacity: capacity, startingThreadsWith: starter))
    }

    /// 1 MiB: about a thousand send lines, seconds of a busy relay's logs.
    public static let defaultCapacity = 1 << 20

    /// File descriptor 2, through the bounded buffer and its drain thread.
    /// What is buffered when the process exits is written then
    /// (``flush(within:)`` with ``closeBound``, from an `atexit` handler), so
    /// a command's last lines are not lost.
    public static let standardError: LogSink = {
        let sink = LogSink(fileDescriptor: 2)
        LogOutput.flushStandardErrorAtExit()
        return sink
    }()

    /// How long ``flush(within:)`` waits at exit for a sink that takes
    /// nothing: `serve` ends at most this long after its drain.
    public static let closeBound = 5.0

    /// Appends one whole line (ending in a newline); never blocks on the sink.
    public func write(_ line: [UInt8]) {
        switch target {
        case .closure(let writeLine): lock.withLock { _ in writeLine(line) }
        case .drain(let drain): drain.append(line)
        }
    }

    /// Lines dropped since the start: the buffer was full, or the sink failed
    /// or was given up on at ``flush(within:)``. Always 0 for a closure sink.
    public var linesDropped: Int {
        if case .drain(let drain) = target { return drain.counts.dropped }
        return 0
    }

    /// Lines written whole to the sink since the start (drop reports included).
    public var linesWritten: Int {
        if case .drain(let drain) = target { return drain.counts.written }
        return 0
    }

    /// Writes what is buffered, then a closing line with the sink's totals
    /// (`log sink closed`: lines produced, written, dropped), waiting at most
    /// `seconds`: a sink that takes nothing (a dead log collector) is given up
    /// on at the deadline and its lines counted as dropped. `serve` calls it
    /// last, after the drain. Returns whether everything was written.
    @discardableResult
    public func flush(within seconds: Double) -> Bool {
        if case .drain(let drain) = target { return drain.close(within: seconds) }
        return true
    }
}
