/// A relay's observers, split once into the durable ones (the audit
/// journal) and the plain ones (metrics) when the service and its clients
/// are built, so a send does not look for the durable ones among them.
///
/// Splitting per send (an array of the durable observers built and every
/// observer cast to ``DurableSendObserver`` on each send) cost about 0.8% of
/// the relay's CPU. The order within each list is the configured order, so
/// observers hear events in the same order as before.
struct RelayObservers: Sendable {
    /// Every observer, in the configured order.
    let all: [any RelayObserver]
    /// The observers that are not ``DurableSendObserver``s, in order.
    let plain: [any RelayObserver]
    /// The ``DurableSendObserver``s, in order.
    let durable: [any DurableSendObserver]

    init(_ observers: [any RelayObserver]) {
        var plain: [any RelayObserver] = []
        var durable: [any DurableSendObserver] = []
        for observer in observers {
            if let observer = observer as? any DurableSendObserver { durable.append(observer) } else { plain.append(observer) }
        }
        all = observers
        self.plain = plain
        self.durable = durable
    }

    /// Publishes a finished send: plain observers at once, then each durable
    /// one, returning when all of them hold it durably.
    func publishDurably(_ event: SendEvent) async {
        for observer in plain { observer.sendFinished(event) }
        for observer in durable { await observer.sendFinishedDurably(event) }
    }

    /// Hands a finished send to the plain observers only: its durable record
    /// waits for its group (``recordCompletions(_:)``).
    func publishToPlainObservers(_ event: SendEvent) {
        for observer in plain { observer.sendFinished(event) }
    }

    /// Records the completions of sends that ran together with every durable
    /// observer, together; the plain observers had each one as it finished.
    func recordCompletions(_ events: [SendEvent]) async {
        guard !events.isEmpty else { return }
        for observer in durable { await observer.sendsFinishedDurably(events) }
    }

    /// Records a send's intent with every durable observer; false when one
    /// of them could not make it durable (the send must not leave).
    func recordIntent(_ send: SendDescriptor, startedAt: UInt64) async -> Bool {
        for observer in durable where !(await observer.sendStarting(send, startedAt: startedAt)) { return false }
        return true
    }

    /// Records that a send's attempt `attempt` (2, 3, …) is about to leave, with every durable observer.
    func recordRetry(_ send: SendDescriptor, startedAt: UInt64, attempt: Int) async {
        for observer in durable { await observer.sendRetrying(send, startedAt: startedAt, attempt: attempt) }
    }

    /// Records the intents of several sends with every durable observer,
    /// together; false when they could not be made durable (none may leave).
    func recordIntents(_ sends: [SendIntent]) async -> Bool {
        guard !sends.isEmpty else { return true }
        for observer in durable where !(await observer.sendsStarting(sends)) { return false }
        return true
    }

    /// Waits until every durable observer holds what it was given.
    func waitUntilDurable() async {
        for observer in durable { await observer.waitUntilDurable() }
    }
}
