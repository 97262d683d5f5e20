import Foundation
public import Logging
public import RelayBasics
import Synchronization

/// The relay's OTLP/HTTP (protobuf) trace exporter: a bounded buffer of
/// finished spans and a thread of its own that batches, encodes and POSTs them.
///
/// Why not swift-otel: its span objects, batch processor and exporter cost
/// about 70 µs of relay CPU per send, and it exposes only an opaque
/// backend, so neither the cost nor the moment a span is lost could be
/// reached from outside (issue 26, issue 28 item 6).
///
/// A send's only work here is ``record(_:)``: one append of a value under a
/// lock held for that append. The thread takes the buffer whole (a swap)
/// when a batch's worth is waiting or the schedule delay has passed, and
/// does everything else (encoding, the connection, retries) off every lock.
///
/// Every span given to ``record(_:)`` ends in exactly one of: exported (the
/// collector answered 2xx), dropped `queue_full` (the buffer was full: counted
/// in ``record(_:)`` itself, at once), or dropped `export_failed` (its batch
/// failed after the bounded retries, or the exporter stopped before it went
/// out: counted when that happens). ``counts`` holds the totals.
///
/// `@unchecked Sendable`: the mutable state is read and written only under
/// `condition`'s lock; the counters are atomics; the HTTP client and the
/// encoder belong to the thread.
public final class OTLPExporter: @unchecked Sendable {
    /// A span loss, by `apns_relay_spans_dropped_total`'s `reason` label.
    public enum Drop: String, CaseIterable, Sendable {
        case queueFull = "queue_full"
        case exportFailed = "export_failed"
    }

    public struct Configuration: Sendable {
        public var endpoint: OTLPEndpoint
        /// Sent with every request (credentials): never logged.
        public var headers: [(String, String)]
        /// Resource attributes, `service.name` first.
        public var resource: [(String, String)]
        public var maximumQueueSize: Int
        public var maximumExportBatchSize: Int
        public var scheduleDelayMilliseconds: Int
        /// The most one batch's export may take, retries included.
        public var exportTimeoutMilliseconds: Int
        /// Tries per batch at most (the first included).
        public var maximumAttempts = 3

        public init(
            endpoint: OTLPEndpoint, headers: [(String, String)], resource: [(String, String)], maximumQueueSize: Int,
            maximumExportBatchSize: Int, scheduleDelayMilliseconds: Int, exportTimeoutMilliseconds: Int
        ) {
            self.endpoint = endpoint
            self.headers = headers
            self.resource = resource
            self.maximumQueueSize = maximumQueueSize
            self.maximumExportBatchSize = maximumExportBatchSize
            self.scheduleDelayMilliseconds = scheduleDelayMilliseconds
            self.exportTimeoutMilliseconds = exportTimeoutMilliseconds
        }
    }

    /// Totals since the start.
    public struct Counts: Sendable, Equatable {
        public var recorded: Int
        public var exported: Int
        public var droppedQueueFull: Int
        public var droppedExportFailed: Int
        public var dropped: Int { droppedQueueFull + droppedExportFailed }
    }

    public let configuration: Configuration
    private let dropped: @Sendable (Drop, Int) -> Void
    private let logger: Logger
    private let condition = MonotonicCondition()
    // Guarded by `condition`'s lock:
    private var pending: [OTLPSpanRecord] = []
    private var sleeping = false
    private var closing = false
    private var closed = false
    /// ``start()`` has started the thread.
    private var started = false
    /// `MonotonicClock` nanoseconds by which the close must be done; 0 before it.
    private var closeDeadline: UInt64 = 0
    /// The deadline of the export under way, lowered by a close.
    private var inFlight: OTLPDeadline?
    private let recorded = Atomic<Int>(0)
    private let exported = Atomic<Int>(0)
    private let droppedQueueFull = Atomic<Int>(0)
    private let droppedExportFailed = Atomic<Int>(0)
    // The thread's own:
    private var lastFailureLog: UInt64 = 0
    /// Batches failed since the last failure was logged (this one included).
    private var failedSinceLog = 0
    private var client: OTLPHTTPClient
    private var encoder: OTLPRequestEncoder

    /// An exporter whose thread has not started: spans recorded before
    /// ``start()`` wait in the buffer. Starts nothing (the relay builds its
    /// parts without side effects and starts them in order, or not at all).
    /// - Parameters:
    ///   - opener: how to reach the endpoint (``OTLPPlainOpener`` for http).
    ///   - dropped: called with every loss, when it happens (the drop metric).
    ///   - logger: export failures, one line every 10 s at most, with the
    ///     count of batches failed since the last (never a header value).
    public init(
        configuration: Configuration, opener: any OTLPStreamOpener, scopeVersion: String, logger: Logger,
        dropped: @escaping @Sendable (Drop, Int) -> Void
    ) {
        self.configuration = configuration
        self.dropped = dropped
        self.logger = logger
        client = OTLPHTTPClient(endpoint: configuration.endpoint, headers: configuration.headers, opener: opener)
        encoder = OTLPRequestEncoder(resource: configuration.resource, scopeName: "apns-relay", scopeVersion: scopeVersion)
        pending.reserveCapacity(configuration.maximumQueueSize)
    }

    /// Starts the exporter's thread; nothing after the first call or a shutdown.
    public func start() {
        condition.lock()
        defer { condition.unlock() }
        guard !started, !closing else { return }
        started = true
        let thread = Thread { [self] in
            // Named from inside: on Linux a name set before the start never
            // reaches the system's (`comm`: top -H, /proc, gdb), nor does one
            // over 15 bytes.
            Thread.current.name = "relay-otlp"
            run()
        }
        thread.start()
    }

    public var counts: Counts {
        Counts(
            recorded: recorded.load(ordering: .relaxed), exported: exported.load(ordering: .relaxed),
            droppedQueueFull: droppedQueueFull.load(ordering: .relaxed),
            droppedExportFailed: droppedExportFailed.load(ordering: .relaxed))
    }

    /// Queues a finished span, or drops it (counted now) when the buffer is full or the exporter closed.
    public func record(_ span: OTLPSpanRecord) {
        recorded.add(1, ordering: .relaxed)
        condition.lock()
        guard !closing, pending.count < configuration.maximumQueueSize else {
            let reason: Drop = closing ? .exportFailed : .queueFull
            condition.unlock()
            drop(1, reason)
            return
        }
        pending.append(span)
        // The thread is woken when a batch is ready; otherwise its timer picks the spans up.
        let wake = sleeping && pending.count == configuration.maximumExportBatchSize
        condition.unlock()
        if wake { condition.signal() }
    }

    /// Exports what is queued within `seconds`, then stops the thread; spans
    /// still queued at the bound, and any recorded later, are dropped and
    /// counted. An export under way is cut short at the bound. Blocks the
    /// caller: call it from a thread of its own, never the cooperative pool.
    /// True when everything recorded was exported.
    @discardableResult
    public func shutdown(within seconds: Double) -> Bool {
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(seconds)
        condition.lock()
        if !closing {
            closing = true
            closeDeadline = deadline
        }
        inFlight?.lower(to: closeDeadline)
        guard started else {
            // No thread to export them: what was recorded is dropped, counted.
            let left = pending.count
            pending.removeAll()
            closed = true
            condition.unlock()
            drop(left, .exportFailed)
            return counts.dropped == 0
        }
        condition.broadcast()
        // A little past the bound: the thread counts what it gave up on.
        let waitUntil = closeDeadline + 2 * OTLPDeadline.slice
        while !closed && MonotonicClock.now() < waitUntil { _ = condition.wait(until: waitUntil) }
        condition.unlock()
        return counts.dropped == 0
    }

    private func drop(_ count: Int, _ reason: Drop) {
        guard count > 0 else { return }
        if reason == .queueFull {
            droppedQueueFull.add(count, ordering: .relaxed)
        } else {
            droppedExportFailed.add(count, ordering: .relaxed)
        }
        dropped(reason, count)
    }

    // MARK: The exporter's thread

    private func run() {
        var batch: [OTLPSpanRecord] = []
        batch.reserveCapacity(configuration.maximumQueueSize)
        var body: [UInt8] = []
        let delay = UInt64(configuration.scheduleDelayMilliseconds) * 1_000_000
        var nextExport = MonotonicClock.now() + delay
        while true {
            condition.lock()
            while !closing && pending.count < configuration.maximumExportBatchSize && MonotonicClock.now() < nextExport {
                sleeping = true
                _ = condition.wait(until: nextExport)
                sleeping = false
            }
            if closing && (pending.isEmpty || MonotonicClock.now() >= closeDeadline) {
                let left = pending.count
                pending.removeAll()
                condition.unlock()
                client.close()
                drop(left, .exportFailed)
                condition.lock()
                closed = true
                condition.broadcast()
                condition.unlock()
                return
            }
            // Everything waiting is taken at once: the buffer is free for
            // the sends while the batches go out.
            swap(&batch, &pending)
            condition.unlock()

            var start = 0
            while start < batch.count {
                let end = min(batch.count, start + configuration.maximumExportBatchSize)
                encoder.encode(batch[start..<end], into: &body)
                if export(body) {
                    exported.add(end - start, ordering: .relaxed)
                } else {
                    drop(end - start, .exportFailed)
                }
                start = end
            }
            batch.removeAll(keepingCapacity: true)
            nextExport = MonotonicClock.now() + delay
        }
    }

    /// One batch: up to ``Configuration/maximumAttempts`` tries, all within
    /// the export timeout, and within the close's deadline once closing.
    private func export(_ body: [UInt8]) -> Bool {
        let deadline = OTLPDeadline(MonotonicClock.now() + UInt64(configuration.exportTimeoutMilliseconds) * 1_000_000)
        condition.lock()
        if closing { deadline.lower(to: closeDeadline) }
        inFlight = deadline
        condition.unlock()
        defer {
            condition.lock()
            inFlight = nil
            condition.unlock()
        }
        var backoff: UInt64 = 100_000_000
        var last = OTLPExportFailure("the close's deadline passed", retryable: false)
        for attempt in 1...configuration.maximumAttempts {
            guard !deadline.hasPassed else { break }
            switch client.post(body, deadline: deadline) {
            case .success:
                return true
            case .failure(let failure):
                last = failure
            }
            guard last.retryable, attempt < configuration.maximumAttempts else { break }
            let wakeAt = MonotonicClock.now() + backoff
            guard wakeAt < deadline.nanoseconds else { break }
            // The close ends the back-off early (its deadline bounds the next try).
            condition.lock()
            while !closing && MonotonicClock.now() < wakeAt { _ = condition.wait(until: wakeAt) }
            condition.unlock()
            backoff *= 2
        }
        // One line per failure at most every 10 s: a collector that is away
        // fails a batch every few hundred milliseconds; the counter has every one.
        failedSinceLog += 1
        let now = MonotonicClock.now()
        if lastFailureLog == 0 || now - lastFailureLog >= 10_000_000_000 {
            logger.warning(
                "span export failed; the batch is dropped",
                metadata: [
                    "endpoint": "\(configuration.endpoint)", "error": "\(last.description)",
                    "batches_failed": "\(failedSinceLog)",
                ])
            lastFailureLog = now
            failedSinceLog = 0
        }
        return false
    }
}
