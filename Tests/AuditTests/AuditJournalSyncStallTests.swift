@testable import Audit
import Foundation
import Relay
import RelayBasics
import Synchronization
import Testing
import TestSupport

/// A spool disk whose `fdatasync` does not return (a stalled device, a hung
/// network volume): sends go on, but the journal's records are in the page
/// cache only. Nothing said so; `journalUnsyncedSeconds` now does (the gauge
/// `apns_relay_audit_journal_unsynced_seconds`, `/readyz`, the alert
/// APNsRelayAuditJournalSyncStalled).
@Suite("Audit journal: a sync that does not return", .timeLimit(.minutes(1)))
struct AuditJournalSyncStallTests {
    /// Blocks the journal thread before its `fdatasync` while `stalled`.
    final class StalledDisk: Sendable {
        private let state = Mutex<(stalled: Bool, waiting: Int)>((false, 0))
        private let condition = NSCondition()

        func stall() { state.withLock { $0.stalled = true } }

        func release() {
            condition.lock()
            state.withLock { $0.stalled = false }
            condition.broadcast()
            condition.unlock()
        }

        /// Syncs waiting on the stalled disk now.
        var waiting: Int { state.withLock { $0.waiting } }

        func willSync() {
            condition.lock()
            state.withLock { $0.waiting += 1 }
            while state.withLock({ $0.stalled }) { condition.wait() }
            state.withLock { $0.waiting -= 1 }
            condition.unlock()
        }
    }

    @Test("the journal's sync held: sends are still taken and journaled, the oldest unsynced record's age grows from its append; released, it returns to 0")
    func syncHeld() async throws {
        let disk = StalledDisk()
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: temporaryDirectory(), relayInstance: "stalled-disk")
        configuration.spoolOnly = true
        configuration.journalSync = .interval
        configuration.journalSyncWillStart = { disk.willSync() }
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let events = (0..<20).map { EventFactory.event($0) }
        for event in events[..<5] {
            #expect(await writer.sendStarting(event.send, startedAt: event.startedAt))
            await writer.sendFinishedDurably(event)
        }
        #expect(await eventually { writer.statistics.journalSyncs > 0 && writer.statistics.journalUnsyncedSeconds() == 0 }, "a healthy disk syncs")

        disk.stall()
        let before = MonotonicClock.now()
        for event in events[5...] {
            #expect(await writer.sendStarting(event.send, startedAt: event.startedAt), "sends are still taken")
            await writer.sendFinishedDurably(event)
        }
        #expect(await eventually { disk.waiting == 1 }, "the journal thread waits in its sync")
        let stalled = writer.statistics
        // Measured from the first append the held sync covers: no earlier than the stall began.
        let later = MonotonicClock.now() + 7_000_000_000
        #expect(stalled.journalUnsyncedSeconds(now: later) >= 7)
        #expect(stalled.journalUnsyncedSeconds(now: later) <= Double(later - before) / 1e9)
        #expect(stalled.journalFailing == false, "a slow sync is not a failed one")

        disk.release()
        #expect(await eventually { writer.statistics.journalUnsyncedSeconds() == 0 }, "\(writer.statistics)")
        await writer.shutdown()
        #expect(writer.statistics.spooled == 20)
    }

    /// A `journal_sync: always` writer, spool only, whose group syncs wait on `disk`.
    static func alwaysWriter(
        _ disk: StalledDisk, stallLimit: Double, instance: String, directory: String = temporaryDirectory()
    ) throws -> AuditWriter {
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: instance)
        configuration.spoolOnly = true
        configuration.journalSync = .always
        configuration.journalStallLimit = stallLimit
        configuration.journalSyncWillStart = { disk.willSync() }
        return try AuditWriter.started(configuration: configuration, logger: quietLogger())
    }

    @Test("journal_sync always, the group's sync held: past the stall limit new sends are refused at once, nothing journaled; the waiting send is released with the sync")
    func alwaysRefusesBehindStalledSync() async throws {
        let disk = StalledDisk()
        let writer = try Self.alwaysWriter(disk, stallLimit: 0.2, instance: "stalled-disk-always")
        let events = (0..<4).map { EventFactory.event($0) }
        #expect(await writer.sendStarting(events[0].send, startedAt: events[0].startedAt), "a healthy disk takes the send")
        await writer.sendFinishedDurably(events[0])

        disk.stall()
        let waiting = Task { await writer.sendStarting(events[1].send, startedAt: events[1].startedAt) }
        #expect(await eventually { disk.waiting == 1 }, "the journal thread waits in the group's sync")
        // The limit passes on the monotonic clock; the verdict is the writer's own reading of it.
        #expect(await eventually { writer.syncStalled(now: MonotonicClock.now()) })
        let syncsBefore = writer.statistics.journalSyncs
        #expect(await writer.sendStarting(events[2].send, startedAt: events[2].startedAt) == false, "refused at once, not queued behind the sync")
        #expect(await writer.sendsStarting([SendIntent(send: events[3].send, startedAt: events[3].startedAt)]) == false, "a batch's sends too")
        #expect(writer.journal.pendingCount == 0, "nothing of the refused sends was handed over")

        disk.release()
        #expect(await waiting.value, "the send waiting in the held group is durable once the sync returns")
        await writer.sendFinishedDurably(events[1])
        #expect(writer.syncStalled(now: MonotonicClock.now()) == false)
        #expect(await writer.sendStarting(events[3].send, startedAt: events[3].startedAt), "taken again once the sync returned")
        await writer.sendFinishedDurably(events[3])
        #expect(writer.statistics.journalSyncs > syncsBefore)
        await writer.shutdown()
        #expect(writer.statistics.spooled == 3, "events 0, 1 and 3 have rows; the refused send none")
    }

    /// The task's value once it has one, waiting at most `seconds`; nil: it
    /// still waits (a send held for ever fails the test, not hangs it).
    static func value(of task: Task<Bool, Never>, within seconds: Double = 30) async -> Bool? {
        let result = Mutex<Bool?>(nil)
        Task { let value = await task.value; result.withLock { $0 = value } }
        _ = await eventually(seconds) { result.withLock { $0 } != nil }
        return result.withLock { $0 }
    }

    @Test("journal_sync always, the group's sync held past the stall limit: sends already waiting for their intents are refused with nothing journaled, a batch's too, without a new send to notice; a waiting completion and the held group's send wait for the sync")
    func alwaysTakesBackWaitingIntents() async throws {
        let disk = StalledDisk()
        let directory = temporaryDirectory()
        // A limit never reached on the clock here: the check is run with its time given.
        let writer = try Self.alwaysWriter(disk, stallLimit: 3600, instance: "stalled-disk-waiting", directory: directory)
        let events = (0..<6).map { EventFactory.event($0) }
        #expect(await writer.sendStarting(events[0].send, startedAt: events[0].startedAt))

        disk.stall()
        let held = Task { await writer.sendStarting(events[1].send, startedAt: events[1].startedAt) }
        #expect(await eventually { disk.waiting == 1 }, "the journal thread waits in the group's sync")
        let single = Task { await writer.sendStarting(events[2].send, startedAt: events[2].startedAt) }
        let batch = Task {
            await writer.sendsStarting([events[3], events[4]].map { SendIntent(send: $0.send, startedAt: $0.startedAt) })
        }
        let finishing = Task { await writer.sendFinishedDurably(events[0]) }
        #expect(await eventually { writer.journal.pendingCount == 4 }, "two intents, a batch's two, and a completion wait behind the sync")

        // Not yet past the limit: nothing is taken back.
        writer.journal.stallWatchFired()
        #expect(writer.journal.pendingCount == 4)
        // Past it.
        writer.journal.stallWatchFired(now: MonotonicClock.now() + MonotonicClock.nanoseconds(3601))
        #expect(await Self.value(of: single) == false, "the waiting send is refused: nothing was sent")
        #expect(await Self.value(of: batch) == false, "the waiting batch is refused whole")
        #expect(writer.journal.pendingCount == 1, "the completion still waits: its send went out")

        disk.release()
        #expect(await Self.value(of: held) == true, "the held group's send is durable once the sync returns")
        await finishing.value
        await writer.sendFinishedDurably(events[1])
        #expect(await writer.sendStarting(events[5].send, startedAt: events[5].startedAt), "taken again once the sync returned")
        await writer.sendFinishedDurably(events[5])
        await writer.shutdown()
        #expect(writer.statistics.spooled == 3, "events 0, 1 and 5 have rows; the refused sends none")
        // The next start finds no intent of theirs left open: no `unknown` row for a send never made.
        var next = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: "stalled-disk-waiting")
        next.spoolOnly = true
        let restarted = try AuditWriter.started(configuration: next, logger: quietLogger())
        await restarted.shutdown()
        #expect(restarted.statistics.recoveredUnknown == 0 && restarted.statistics.recoveredCompleted == 0, "\(restarted.statistics)")
    }

    @Test("journal_sync always, the group's sync held: a send handed over just before the stall limit does not wait for the sync, it is refused once the limit passes")
    func alwaysWaitingSendEndsAtTheLimit() async throws {
        let disk = StalledDisk()
        let writer = try Self.alwaysWriter(disk, stallLimit: 0.3, instance: "stalled-disk-limit")
        let events = (0..<2).map { EventFactory.event($0) }
        disk.stall()
        let held = Task { await writer.sendStarting(events[0].send, startedAt: events[0].startedAt) }
        #expect(await eventually { disk.waiting == 1 })
        // Handed over behind the held sync (or, on a slow machine, refused at
        // once past the limit): either way it ends, with the sync still held.
        let waiting = Task { await writer.sendStarting(events[1].send, startedAt: events[1].startedAt) }
        #expect(await Self.value(of: waiting) == false)
        #expect(writer.journal.pendingCount == 0)
        #expect(disk.waiting == 1, "the sync is still held")
        disk.release()
        #expect(await Self.value(of: held) == true)
        await writer.sendFinishedDurably(events[0])
        await writer.shutdown()
        #expect(writer.statistics.spooled == 1)
    }
}
