public import APNs
import Synchronization

/// A send prepared, its span started and its intent recorded, that has not
/// made its first attempt yet. ``RelayService/run(_:completingWith:)`` runs it; every
/// started send must be run exactly once, since its recorded intent waits
/// for its completion (and the drain for it: it counts in
/// ``RelayService/sendsInFlight`` until it has run).
///
/// A class, so handing it to the task that runs it copies one reference,
/// not the send's request, descriptor and span field by field.
public final class StartedSend: @unchecked Sendable {
    // `run` is touched only by `RelayService.run`, once, on one task.
    fileprivate var run: SendRun
    fileprivate let activityKey: (String, Int64)?
    /// The apns-id the send carries.
    public let apnsID: APNsID

    init(run: SendRun, activityKey: (String, Int64)?) {
        self.run = run
        self.activityKey = activityKey
        apnsID = run.request.apnsID
    }
}

/// One send of a group started together: its app, environment and operation.
public struct SendOrder: Sendable {
    public var app: String
    public var environment: Environment
    public var operation: RelayOperation

    public init(app: String, environment: Environment, operation: RelayOperation) {
        (self.app, self.environment, self.operation) = (app, environment, operation)
    }
}

extension RelayService {
    /// Starts several sends at once (a batch's): each is prepared as
    /// ``send(app:environment:_:context:)`` prepares it, then the intents of
    /// all of them are recorded together (the audit journal appends them
    /// with one write) before any of them leaves. Run each returned
    /// ``StartedSend`` with ``run(_:completingWith:)``.
    ///
    /// A send refused before any I/O is reported as `send` reports it and
    /// comes back as its failure; answer it only after ``waitUntilRecorded()``.
    /// The app's builder and client are looked up once per run of orders to
    /// the same app and environment, not once per send, and a run of alerts
    /// (or notifications) of one snapshot projects and encodes its payload
    /// once (``PayloadMemo``).
    public func startSends(_ orders: [SendOrder], context: SendContext) async -> [Result<StartedSend, SendFailure>] {
        // Counted from the start: a refusal is published inside, and the
        // drain must not close the audit under it.
        inFlight.add(orders.count, ordering: .acquiringAndReleasing)
        var results: [Result<StartedSend, SendFailure>] = []
        results.reserveCapacity(orders.count)
        var intents: [SendIntent] = []
        intents.reserveCapacity(orders.count)
        var refused = 0
        var resolved: (app: String, environment: Environment, builder: RequestBuilder, client: APNsClient?)?
        let payloads = PayloadMemo()
        for order in orders {
            let operation = order.operation
            do throws(SendFailure) {
                if resolved == nil || resolved!.app != order.app || resolved!.environment != order.environment {
                    let builder = try builder(app: order.app, environment: order.environment, operation, context: context)
                    resolved = (order.app, order.environment, builder, clients[Self.key(order.app, order.environment)])
                }
                let (request, activityKey) = try prepare(
                    app: order.app, environment: order.environment, operation, builder: resolved!.builder, context: context,
                    payloads: payloads)
                guard let client = resolved!.client else {
                    throw refuseUnserved(app: order.app, environment: order.environment, operation: operation, context: context)
                }
                // Built straight into its object: a local `SendRun` was copied
                // in (a retain of each of its references) and destroyed again.
                let started = StartedSend(
                    run: SendRun(client: client, request: request, context: Self.sendContext(context, for: operation)), activityKey: activityKey)
                intents.append(SendIntent(send: started.run.descriptor, startedAt: started.run.startedAt))
                results.append(.success(started))
            } catch {
                refused += 1
                results.append(.failure(error))
            }
        }
        if refused > 0 { inFlight.subtract(refused, ordering: .acquiringAndReleasing) }
        // Every client of one relay shares the observers: the intents go in one call.
        guard await observers.recordIntents(intents) else {
            // Not durable: none of them leaves (each is refused, 503).
            var started = 0
            results = results.map { result in
                guard case .success(let send) = result else { return result }
                started += 1
                return .failure(send.run.refuseUndurable())
            }
            if started > 0 { inFlight.subtract(started, ordering: .acquiringAndReleasing) }
            return results
        }
        return results
    }

    /// Runs a send ``startSends(_:context:)`` started: its attempts, retries
    /// and result, exactly as ``send(app:environment:_:context:)`` after its
    /// intent, its completion recorded on its own. Internal: the relay's
    /// callers run started sends in chunks (``run(_:completingWith:)``);
    /// tests run one alone (`@testable`).
    func run(_ started: StartedSend) async throws(SendFailure) -> SendResult {
        defer { inFlight.subtract(1, ordering: .acquiringAndReleasing) }
        return try await execute(started)
    }

    /// Runs a send ``startSends(_:context:)`` started: its attempts, retries
    /// and result, exactly as ``send(app:environment:_:context:)`` after its
    /// intent, with the durable record of its completion left
    /// to `completions`, which the caller records with
    /// ``recordCompletions(_:)`` once every send run with it has returned,
    /// and before it answers any of them: a batch's chunk so journals its
    /// completions with one append. The plain observers (metrics) hear of
    /// the send as it ends; it counts as in flight until it is recorded.
    public func run(_ started: StartedSend, completingWith completions: SendCompletions) async throws(SendFailure) -> SendResult {
        completions.began()
        started.run.completions = completions
        return try await execute(started)
    }

    /// Records the completions of the sends run with `completions` with the
    /// durable observers, together, and returns once they are durable (the
    /// audit's `journal_sync` promise); their results may be answered then.
    public func recordCompletions(_ completions: SendCompletions) async {
        let (events, runs) = completions.take()
        await observers.recordCompletions(events)
        inFlight.subtract(runs, ordering: .acquiringAndReleasing)
    }

    private func execute(_ started: StartedSend) async throws(SendFailure) -> SendResult {
        let result = try await started.run.executeAnnounced()
        if let (key, timestamp) = started.activityKey { timestamps.record(key: key, timestamp: timestamp) }
        return result
    }
}
