public import Relay
import Synchronization

/// Keeps every event the relay reports, for assertions.
public final class RecordingObserver: RelayObserver {
    private let attempts = Mutex<[AttemptEvent]>([])
    private let sends = Mutex<[SendEvent]>([])
    private let onAttempt: (@Sendable (AttemptEvent) -> Void)?

    public init(onAttempt: (@Sendable (AttemptEvent) -> Void)? = nil) { self.onAttempt = onAttempt }

    public func attemptFinished(_ event: AttemptEvent) {
        attempts.withLock { $0.append(event) }
        onAttempt?(event)
    }

    public func sendFinished(_ event: SendEvent) { sends.withLock { $0.append(event) } }

    public var attemptEvents: [AttemptEvent] { attempts.withLock { $0 } }
    public var sendEvents: [SendEvent] { sends.withLock { $0 } }
}

/// Records backoff waits instead of sleeping.
public final class SleepRecorder: Sendable {
    private let waits = Mutex<[Double]>([])
    public init() {}
    public var recorded: [Double] { waits.withLock { $0 } }
    public var sleep: @Sendable (Double) async throws -> Void {
        { seconds in self.waits.withLock { $0.append(seconds) } }
    }
}
