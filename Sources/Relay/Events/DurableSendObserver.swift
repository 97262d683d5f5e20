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
    /// result was recorded) still leaves a trace of the send.
    func sendStarting(_ send: SendDescriptor, startedAt: UInt64) async
    /// ``sendStarting(_:startedAt:)`` for several sends about to start
    /// together (a batch's): returns once every intent is durable. The
    /// default records them one by one; the audit journal appends them with
    /// one write.
    func sendsStarting(_ sends: [SendIntent]) async
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
    public func sendsStarting(_ sends: [SendIntent]) async {
        for intent in sends { await sendStarting(intent.send, startedAt: intent.startedAt) }
    }

    public func sendsFinishedDurably(_ events: [SendEvent]) async {
        for event in events { await sendFinishedDurably(event) }
    }
}

extension [any RelayObserver] {
    /// Publishes a finished send: plain observers at once, then each durable
    /// one, returning when all of them hold it durably.
    func publishDurably(_ event: SendEvent) async {
        var durable: [any DurableSendObserver] = []
        for observer in self {
            if let observer = observer as? any DurableSendObserver { durable.append(observer) } else { observer.sendFinished(event) }
        }
        for observer in durable { await observer.sendFinishedDurably(event) }
    }

    /// Hands a finished send to the plain observers only: its durable record
    /// waits for its group (``recordCompletions(_:)``).
    func publishToPlainObservers(_ event: SendEvent) {
        for observer in self where !(observer is any DurableSendObserver) { observer.sendFinished(event) }
    }

    /// Records the completions of sends that ran together with every durable
    /// observer, together; the plain observers had each one as it finished.
    func recordCompletions(_ events: [SendEvent]) async {
        guard !events.isEmpty else { return }
        for observer in self {
            if let observer = observer as? any DurableSendObserver { await observer.sendsFinishedDurably(events) }
        }
    }

    /// Records a send's intent with every durable observer.
    func recordIntent(_ send: SendDescriptor, startedAt: UInt64) async {
        for observer in self {
            if let observer = observer as? any DurableSendObserver { await observer.sendStarting(send, startedAt: startedAt) }
        }
    }

    /// Records the intents of several sends with every durable observer, together.
    func recordIntents(_ sends: [SendIntent]) async {
        guard !sends.isEmpty else { return }
        for observer in self {
            if let observer = observer as? any DurableSendObserver { await observer.sendsStarting(sends) }
        }
    }

    /// Waits until every durable observer holds what it was given.
    func waitUntilDurable() async {
        for observer in self {
            if let observer = observer as? any DurableSendObserver { await observer.waitUntilDurable() }
        }
    }
}
