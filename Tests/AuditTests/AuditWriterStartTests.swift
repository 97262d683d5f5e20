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
        try opened.start()
        #expect(opened.statistics.recoveredUnknown == 0)
        let next = try AuditWriter.started(configuration: Self.configuration(directory), logger: quietLogger())
        #expect(await eventually(30) { next.statistics.recoveredUnknown == 1 }, "\(next.statistics)")
        await next.shutdown()
    }

    @Test("one writer per spool directory: a second one, in this process or another, is refused naming the directory, and nothing it would have recovered is touched; once the first has shut down the directory opens again")
    func secondWriterOnTheDirectoryRefused() async throws {
        let directory = temporaryDirectory()
        let first = try AuditWriter.started(configuration: Self.configuration(directory), logger: quietLogger())
        let event = EventFactory.event(0)
        #expect(await first.sendStarting(event.send, startedAt: event.startedAt))
        do {
            _ = try AuditWriter(opening: Self.configuration(directory), logger: quietLogger())
            Issue.record("a second writer opened the same spool directory")
        } catch let error as SpoolDirectoryInUse {
            #expect(error.path == directory)
            #expect(error.description.contains(directory) && error.description.contains("audit.spool_directory"), "\(error)")
        }
        // Another process: flock(1), without waiting, on the directory the writer holds.
        let (held, _) = try await ProcessRunner.runOffPool(["flock", "--exclusive", "--nonblock", directory, "true"])
        #expect(held != 0, "another process could lock the directory the writer holds")
        // The refused writer recovered nothing: the send in flight is still only the first's.
        await first.sendFinishedDurably(event)
        await first.shutdown()
        let (free, _) = try await ProcessRunner.runOffPool(["flock", "--exclusive", "--nonblock", directory, "true"])
        #expect(free == 0, "the directory is still locked after the writer's shutdown")
        let next = try AuditWriter.started(configuration: Self.configuration(directory), logger: quietLogger())
        await next.shutdown()
        #expect(next.statistics.recoveredUnknown == 0 && next.statistics.recoveredCompleted == 0, "\(next.statistics)")
    }
}
