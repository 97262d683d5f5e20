@testable import Audit
import Foundation
import Relay
import Testing
import TestSupport

/// Issue 29, item 1: a writer is opened without starting anything, and a
/// relay whose start failed shuts down a writer that never ran.
@Suite("Audit writer: opened, then started")
struct AuditWriterStartTests {
    static func configuration(_ directory: String) -> AuditWriter.Configuration {
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: "start-test")
        configuration.spoolOnly = true
        return configuration
    }

    @Test("opened and never started: no writer thread recovers or spools, the shutdown returns, and the next writer on the spool recovers what was journaled")
    func neverStarted() async throws {
        let directory = temporaryDirectory()
        let opened = try AuditWriter(opening: Self.configuration(directory), logger: quietLogger())
        let event = EventFactory.event(0)
        #expect(await opened.sendStarting(event.send, startedAt: event.startedAt))
        #expect(opened.statistics.spooled == 0 && opened.statistics.recoveredUnknown == 0)
        await opened.shutdown()
        // After the shutdown a start starts nothing: the intent is still the next writer's to recover.
        opened.start()
        #expect(opened.statistics.recoveredUnknown == 0)
        let next = try AuditWriter.started(configuration: Self.configuration(directory), logger: quietLogger())
        #expect(await eventually(30) { next.statistics.recoveredUnknown == 1 }, "\(next.statistics)")
        await next.shutdown()
    }
}
