import Audit
import Ingress
import Logging
import Relay
import RelayBasics

/// The audit writer's two threads (the writer with its libpq connection,
/// the journal's syncs): started before any listener takes a send, stopped
/// once the sends have published their events.
struct AuditWriterPart: RelayPart {
    let name = "audit writer"
    let audit: AuditWriter
    let service: RelayService
    let ingress: Ingress
    let drain: DrainClock
    let drainTimeout: Double
    let sendDeadline: Double
    let logger: Logger

    /// Seconds of the drain's margin kept for what stops after the writer.
    static let marginAfterWriter = 4.0

    func start() async throws {
        do {
            try audit.start()
        } catch {
            // Out of threads: what did start (the journal's) stops again.
            await audit.shutdown()
            throw error
        }
    }

    /// A later part could not start: no send was taken, nothing to wait for.
    func undoStart() async {
        await audit.shutdown()
    }

    func stop() async {
        // Sends cut off by the pool's close finish with a failure and
        // journal their row; the writer stays open until each one has. A
        // send still stuck past its own deadline (or past the drain's
        // bound) loses nothing either: its intent is in the journal and
        // the next start records it (outcome `unknown`), or its
        // completion is journaled whenever it ends.
        let clock = ContinuousClock()
        let deadline = min(clock.now + .seconds(sendDeadline + 5), drain.start + .seconds(drainTimeout + 5))
        while service.sendsInFlight > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if service.sendsInFlight > 0 {
            logger.error("sends still running when the audit writer stopped; their rows stay in the journal for the next start", metadata: ["sends": "\(service.sendsInFlight)"])
        }
        let unsettled = ingress.stopSettlingKeys()
        if unsettled > 0 {
            logger.warning("idempotency answers the store never took; repeats of their keys are answered from the audit rows", metadata: ["keys": "\(unsettled)"])
        }
        // What the writer may still spend on Postgres: until the drain's
        // bound less the margin the parts after it need (the spool write,
        // the last export, the metrics listener).
        let postgresEnd = drain.start + .seconds(drainTimeout + RelayServer.drainMargin - Self.marginAfterWriter)
        await audit.shutdown(postgresWithin: max(0, clock.now.duration(to: postgresEnd).seconds))
        let statistics = audit.statistics
        logger.notice("drained", metadata: [
            "audit_written": "\(statistics.written)", "audit_spooled": "\(statistics.spooled)",
            "audit_quarantined": "\(statistics.quarantined)", "audit_dropped": "\(statistics.dropped)",
        ])
    }
}
