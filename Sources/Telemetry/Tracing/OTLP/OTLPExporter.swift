import Foundation
public import Logging
public import RelayBasics
import Synchronization
import Tracing

/// The relay's OTLP/HTTP (protobuf) trace exporter: a bounded buffer of
/// finished spans and a thread of its own that batches, encodes and POSTs them.
///
/// Why not swift-otel: its span objects, batch processor and exporter cost
/// about 70 µs of relay CPU per send, and it exposes only an opaque
/// backend, so neither the cost nor the moment a span is lost could be
/// reached from outside (issue 26, issue 28 item 6).
///
/// A send's only work here is recording its spans as they end: each span's
/// protobuf bytes, encoded on the sending thread, are copied into one byte
/// buffer under a lock held for that copy. The thread takes the buffer whole (a swap)
/// when a batch's worth is waiting or the schedule delay has passed, and
/// does everything else (encoding, the connection, retries) off every lock.
///
/// Every span recorded (an ``OTLPSpan`` that ends, or a value given to
/// ``record(_:)``) ends in exactly one of: exported (the collector answered
/// 2xx), dropped `queue_full` (the buffer was full: counted as it was
/// recorded, at once), or dropped `export_failed` (its batch
/// failed after the bounded retries, or the exporter stopped before it went
/// out: counted when that happens). ``counts`` holds the totals.
///
/// `@unchecked Sendable`: the mutable state shared with the sends
/// (``QueueState``) is read and written only under `condition`'s lock; the
/// counters are atomics (``Counters``); the HTTP client, the encoder and the
/// failure log belong to the thread.
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
    private let logger: Logger
    private let condition = MonotonicCondition()
    /// Guarded by `condition`'s lock.
    private var queue = QueueState()
    private let counters: Counters
    // The thread's own:
    private var failureLog = FailureLog()
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
        counters = Counters(dropped: dropped)
        self.logger = logger
        client = OTLPHTTPClient(endpoint: configuration.endpoint, headers: configuration.headers, opener: opener)
        encoder = OTLPRequestEncoder(resource: configuration.resource, scopeName: "apns-relay", scopeVersion: scopeVersion)
        queue.pendingEnds.reserveCapacity(configuration.maximumQueueSize)
        // Room for a full queue of typical spans: growing the buffer would copy
        // everything queued while the sends wait on the lock. Pages are
        // touched only as spans fill them.
        queue.pending.reserveCapacity(configuration.maximumQueueSize * Self.typicalSpanBytes)
    }

    /// Starts the exporter's thread; nothing after the first call or a
    /// shutdown. Throws when the system gives no thread (a pids limit).
    public func start() throws(DetachedThread.StartFailure) {
        condition.lock()
        defer { condition.unlock() }
        guard !queue.started, !queue.closing else { return }
        try DetachedThread.start(name: "relay-otlp") { [self] in run() }
        queue.started = true
    }

    public var counts: Counts { counters.counts }

    /// A send's span with its attributes, as encoded: 300 to 700 bytes.
    static let typicalSpanBytes = 768

    /// Queues a finished span, or drops it (counted now) when the buffer is full or the exporter closed.
    public func record(_ span: OTLPSpanRecord) {
        record(
            traceID: span.traceID, spanID: span.spanID, parentSpanID: span.parentSpanID, name: span.name, kind: span.kind,
            startNanoseconds: span.startNanoseconds, endNanoseconds: span.endNanoseconds, encodedAttributes: span.encodedAttributes,
            status: span.status, statusMessage: span.statusMessage)
    }

    /// ``record(_:)`` from a span's parts, its attributes already encoded
    /// (``OTLPSpan/end(at:)`` hands over its own): the message is finished
    /// here, on the caller's thread, and its bytes copied into the queue, so
    /// what the caller made is freed on the thread that made it.
    func record(
        traceID: String, spanID: String, parentSpanID: String?, name: String, kind: SpanKind, startNanoseconds: UInt64,
        endNanoseconds: UInt64, encodedAttributes: consuming [UInt8], status: SpanStatus.Code?, statusMessage: String?
    ) {
        // The attributes, then the status: the message's body.
        var body = encodedAttributes
        OTLPRequestEncoder.appendStatus(status, message: statusMessage, into: &body)
        OTLPRequestEncoder.withSpanHead(
            traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, name: name, kind: kind,
            startNanoseconds: startNanoseconds, endNanoseconds: endNanoseconds
        ) { head in record(spanHead: head, body: body) }
    }

    /// Queues a finished span given as its Span message in two parts (head,
    /// then body), or drops it (counted now) when the buffer is full or the exporter closed.
    private func record(spanHead head: UnsafeBufferPointer<UInt8>, body: [UInt8]) {
        counters.recorded()
        condition.lock()
        // One access to the queue for the whole append: each access to a
        // class's stored property is checked for exclusivity at run time
        // (~80 instructions), and appending field by field took three a span.
        let outcome = Self.enqueue(
            head: head, body: body, into: &queue, limit: configuration.maximumQueueSize,
            batchSize: configuration.maximumExportBatchSize)
        condition.unlock()
        switch outcome {
        case .queued: break
        case .queuedWake: condition.signal()
        case .dropped(let reason): drop(1, reason)
        }
    }

    private enum EnqueueOutcome {
        case queued
        /// Queued, and a batch is ready for the sleeping thread.
        case queuedWake
        case dropped(Drop)
    }

    /// Appends a span (tag, length, head, body) to the queue, under the caller's lock.
    private static func enqueue(
        head: UnsafeBufferPointer<UInt8>, body: [UInt8], into queue: inout QueueState, limit: Int, batchSize: Int
    ) -> EnqueueOutcome {
        guard !queue.closing, queue.pendingCount < limit else { return .dropped(queue.closing ? .exportFailed : .queueFull) }
        Protobuf.tag(2, .lengthDelimited, into: &queue.pending)
        Protobuf.varint(UInt64(head.count + body.count), into: &queue.pending)
        queue.pending.append(contentsOf: head)
        queue.pending.append(contentsOf: body)
        queue.pendingEnds.append(queue.pending.count)
        // The thread is woken when a batch is ready; otherwise its timer picks the spans up.
        return queue.sleeping && queue.pendingCount == batchSize ? .queuedWake : .queued
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
        if !queue.closing {
            queue.closing = true
            queue.closeDeadline = deadline
        }
        queue.inFlight?.lower(to: queue.closeDeadline)
        guard queue.started else {
            // No thread to export them: what was recorded is dropped, counted.
            let left = queue.pendingCount
            queue.pending.removeAll()
            queue.pendingEnds.removeAll()
            queue.closed = true
            condition.unlock()
            drop(left, .exportFailed)
            return counts.dropped == 0
        }
        condition.broadcast()
        // A little past the bound: the thread counts what it gave up on.
        let waitUntil = queue.closeDeadline + 2 * OTLPDeadline.slice
        while !queue.closed && MonotonicClock.now() < waitUntil { _ = condition.wait(until: waitUntil) }
        condition.unlock()
        return counts.dropped == 0
    }

    private func drop(_ count: Int, _ reason: Drop) { counters.drop(count, reason) }

    // MARK: The exporter's thread

    private func run() {
        var batch: [UInt8] = []
        batch.reserveCapacity(configuration.maximumQueueSize * Self.typicalSpanBytes)
        var batchEnds: [Int] = []
        batchEnds.reserveCapacity(configuration.maximumQueueSize)
        var body: [UInt8] = []
        let delay = UInt64(configuration.scheduleDelayMilliseconds) * 1_000_000
        var nextExport = MonotonicClock.now() + delay
        while true {
            condition.lock()
            while !queue.closing && queue.pendingCount < configuration.maximumExportBatchSize && MonotonicClock.now() < nextExport {
                queue.sleeping = true
                _ = condition.wait(until: nextExport)
                queue.sleeping = false
            }
            if queue.closing && (queue.pending.isEmpty || MonotonicClock.now() >= queue.closeDeadline) {
                let left = queue.pendingCount
                queue.pending.removeAll()
                queue.pendingEnds.removeAll()
                condition.unlock()
                client.close()
                drop(left, .exportFailed)
                condition.lock()
                queue.closed = true
                condition.broadcast()
                condition.unlock()
                return
            }
            // Everything waiting is taken at once: the buffer is free for
            // the sends while the batches go out.
            swap(&batch, &queue.pending)
            swap(&batchEnds, &queue.pendingEnds)
            condition.unlock()

            // Batches of spans [start, end), each the bytes [from, batchEnds[end - 1]).
            var start = 0
            var from = 0
            while start < batchEnds.count {
                let end = min(batchEnds.count, start + configuration.maximumExportBatchSize)
                let to = batchEnds[end - 1]
                batch.withUnsafeBufferPointer { encoder.encode(spanFields: UnsafeBufferPointer(rebasing: $0[from..<to]), into: &body) }
                if export(body) {
                    counters.exported(end - start)
                } else {
                    drop(end - start, .exportFailed)
                }
                (start, from) = (end, to)
            }
            batch.removeAll(keepingCapacity: true)
            batchEnds.removeAll(keepingCapacity: true)
            nextExport = MonotonicClock.now() + delay
        }
    }

    /// One batch: up to ``Configuration/maximumAttempts`` tries, all within
    /// the export timeout, and within the close's deadline once closing.
    private func export(_ body: [UInt8]) -> Bool {
        let deadline = OTLPDeadline(MonotonicClock.now() + UInt64(configuration.exportTimeoutMilliseconds) * 1_000_000)
        condition.lock()
        if queue.closing { deadline.lower(to: queue.closeDeadline) }
        queue.inFlight = deadline
        condition.unlock()
        defer {
            condition.lock()
            queue.inFlight = nil
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
            while !queue.closing && MonotonicClock.now() < wakeAt { _ = condition.wait(until: wakeAt) }
            condition.unlock()
            backoff *= 2
        }
        // One line per failure at most every 10 s: a collector that is away
        // fails a batch every few hundred milliseconds; the counter has every one.
        if let failed = failureLog.failed(now: MonotonicClock.now()) {
            logger.warning(
                "span export failed; the batch is dropped",
                metadata: [
                    "endpoint": "\(configuration.endpoint)", "error": "\(last.description)", "batches_failed": "\(failed)",
                ])
        }
        return false
    }
}
