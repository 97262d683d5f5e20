import RelayBasics
import Synchronization

/// When an export must be over (`MonotonicClock` nanoseconds). A class, so
/// the drain can bring an export under way forward to its own deadline: the
/// streams read it again at least every ``OTLPDeadline/slice`` nanoseconds.
public final class OTLPDeadline: Sendable {
    private let value: Atomic<UInt64>
    /// The longest a stream waits without reading the deadline again.
    public static let slice: UInt64 = 50_000_000

    public init(_ nanoseconds: UInt64) { value = Atomic(nanoseconds) }

    public var nanoseconds: UInt64 { value.load(ordering: .relaxed) }
    public var hasPassed: Bool { MonotonicClock.now() >= nanoseconds }

    /// Brings the deadline forward to `nanoseconds` (never back).
    public func lower(to nanoseconds: UInt64) {
        _ = value.min(nanoseconds, ordering: .relaxed)
    }

    /// Milliseconds for the next `poll`: to the deadline, at most a slice; nil once it passed.
    public var pollMilliseconds: Int32? {
        let now = MonotonicClock.now()
        let end = nanoseconds
        guard now < end else { return nil }
        return Int32(min(Self.slice, end - now) / 1_000_000 + 1)
    }
}

/// A byte stream to the collector that never blocks past its deadline
/// (``OTLPDeadline``): the exporter's thread must get back to its buffer
/// however the collector behaves (down, slow, never reading).
public protocol OTLPStream: AnyObject {
    /// Writes all of `bytes`; false when the stream failed or the deadline passed first.
    func write(_ bytes: UnsafeRawBufferPointer, deadline: OTLPDeadline) -> Bool
    /// Reads what is there (waiting for something until the deadline):
    /// the byte count, 0 at the peer's end of stream, nil on a failure or the deadline.
    func read(into buffer: UnsafeMutableRawBufferPointer, deadline: OTLPDeadline) -> Int?
    func close()
}

/// Opens streams to the collector: ``OTLPSocketStream`` for `http://`; a
/// TLS stream for `https://` comes from outside (RelayServer: HTTP2's TLS).
public protocol OTLPStreamOpener: Sendable {
    /// A connected stream, or why not (no secret in it).
    func open(_ endpoint: OTLPEndpoint, deadline: OTLPDeadline) -> Result<any OTLPStream, OTLPExportFailure>
}

/// Why an export did not reach the collector, for the log; never holds a header value.
public struct OTLPExportFailure: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// Worth another try (the collector may take it later): connection
    /// failures, timeouts, 429 and 502/503/504, as the OTLP specification lists.
    public var retryable: Bool

    public init(_ description: String, retryable: Bool) {
        self.description = description
        self.retryable = retryable
    }
}

/// Plain TCP (`http://` endpoints).
public struct OTLPPlainOpener: OTLPStreamOpener {
    public init() {}

    public func open(_ endpoint: OTLPEndpoint, deadline: OTLPDeadline) -> Result<any OTLPStream, OTLPExportFailure> {
        OTLPSocketStream.connect(host: endpoint.host, port: endpoint.port, deadline: deadline).map { $0 }
    }
}
