/// An observer whose record of a send must be durable before the caller
/// hears the result: the audit journal implements it, the relay awaits it,
/// and the relay still never imports the audit.
///
/// Implementations must not block the cooperative pool: a sync to disk runs
/// on a thread of their own (the caller waits for it suspended, or not at
/// all); at most a small buffered write, as a log line makes, runs on the
/// caller. What "durable" means is the implementation's setting (the
/// audit's `audit.journal_sync`).
public protocol DurableSendObserver: RelayObserver {
    /// Called once per send before its first attempt leaves. Returns once the
    /// intent is durable, so a crash after APNs answered (and before the
    /// result was recorded) still leaves a trace of the send. Returns false
    /// when it could not be made durable (the journal's disk refused, or
    /// rows of answered sends wait in memory only): the send must then not
    /// leave, since nothing would prove it did.
    func sendStarting(_ send: SendDescriptor, startedAt: UInt64) async -> Bool
    /// ``sendStarting(_:startedAt:)`` for several sends about to start
    /// together (a batch's): returns once every intent is durable. The
    /// default records them one by one; the audit journal appends them with
    /// one write. False: none of them is durable, none may leave.
    func sendsStarting(_ sends: [SendIntent]) async -> Bool
    /// Called before attempt `attempt` (2, 3, …) of a send whose intent was
    /// recorded leaves; returns once that is durable, so a send the relay
    /// never finished is recovered with every attempt that may have reached
    /// APNs (the intent stands for the first). The default records nothing.
    /// The attempt leaves either way: the send is already out.
    func sendRetrying(_ send: SendDescriptor, startedAt: UInt64, attempt: Int) async
    /// Called instead of ``RelayObserver/sendFinished(_:)`` where the send can
    /// wait; returns once the event is durable. The caller answers after it.
    func sendFinishedDurably(_ event: SendEvent) async
    /// ``sendFinishedDurably(_:)`` for the completions of several sends
    /// that ran together (a batch's chunk): returns once every one is
    /// durable. The default records them one by one; the audit journal
    /// appends them with one write.
    func sendsFinishedDurably(_ events: [SendEvent]) async
    /// Returns once every event handed over so far (including through the
    /// synchronous ``RelayObserver/sendFinished(_:)``) is durable.
    func waitUntilDurable() async
}

/// A send about to make its first attempt, as its intent is recorded.
public struct SendIntent: Sendable {
    public var send: SendDescriptor
    /// When the send started, nanoseconds since the epoch (the intent's key, with the apns-id).
    public var startedAt: UInt64

    public init(send: SendDescriptor, startedAt: UInt64) {
        self.send = send
        self.startedAt = startedAt
    }
}

extension DurableSendObserver {
    public func sendRetrying(_ send: SendDescriptor, startedAt: UInt64, attempt: Int) async {}

    public func sendsStarting(_ sends: [SendIntent]) async -> Bool {
        for intent in sends where !(await sendStarting(intent.send, startedAt: intent.startedAt)) { return false }
        return true
    }

    public func sendsFinishedDurably(_ events: [SendEvent]) async {
        for event in events { await sendFinishedDurably(event) }
    }
}
