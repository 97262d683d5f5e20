import Logging
import RelayBasics
import ServiceLifecycle
import Synchronization

/// The relay's ServiceGroup and what its parts reported.
///
/// The part that failed is recorded here as well as thrown: once the drain's
/// bound has cancelled the group, ServiceGroup may end without the error of
/// the part it was waiting for (another part's end can arrive first and the
/// rest are discarded), and the process must still exit 1 naming it.
struct RelayPartGroup: Sendable {
    let group: ServiceGroup
    let failures: Failures

    final class Failures: Sendable {
        private let recorded = Mutex<[RelayPartFailure]>([])
        func record(_ failure: RelayPartFailure) { recorded.withLock { $0.append(failure) } }
        var first: RelayPartFailure? { recorded.withLock { $0.first } }
    }

    /// A part in the group: says when it runs, and turns whatever ends it
    /// while the relay serves into a recorded ``RelayPartFailure``.
    struct Member: Service, CustomStringConvertible {
        let part: any RelayPart
        let failures: Failures
        let started: @Sendable () -> Void
        var description: String { part.name }

        func run() async throws {
            started()
            do {
                try await part.run()
            } catch let failure as RelayPartFailure {
                throw recorded(failure)
            } catch is CancellationError {
                return
            } catch {
                part.logger.critical("a part of the relay failed", metadata: ["part": "\(part.name)", "error": "\(error)"])
                throw recorded(RelayPartFailure(part: part.name, reason: "failed: \(error)"))
            }
            guard Task.isShuttingDownGracefully || Task.isCancelled else {
                part.logger.critical("ended on its own while the relay was serving", metadata: ["part": "\(part.name)"])
                throw recorded(RelayPartFailure(part: part.name, reason: "ended on its own while the relay was serving"))
            }
        }

        private func recorded(_ failure: RelayPartFailure) -> RelayPartFailure {
            failures.record(failure)
            return failure
        }
    }

    /// Runs the group to its end; throws the first part's failure.
    func run() async throws {
        do {
            try await group.run()
        } catch {
            throw failures.first ?? error
        }
        if let failure = failures.first { throw failure }
    }

    func triggerGracefulShutdown() async {
        await group.triggerGracefulShutdown()
    }
}

/// When the drain began (the ingress listener's stop, the first), so later
/// parts know what is left of the drain timeout.
final class DrainClock: Sendable {
    private let began = Mutex<ContinuousClock.Instant?>(nil)

    func begin() {
        began.withLock { if $0 == nil { $0 = .now } }
    }

    /// When the drain began; now, if it has not (a part failed before the ingress stopped).
    var start: ContinuousClock.Instant {
        began.withLock { began in
            if began == nil { began = .now }
            return began!
        }
    }

    var elapsed: Double { (ContinuousClock.now - start).seconds }
}
