@testable import Audit
import Foundation
import Testing

/// The audit writer's decisions, driven without threads, files or Postgres:
/// what the writer takes and when, where a batch goes, when it exits, what
/// each journal segment still holds, when new sends are refused, and how a
/// refused batch is split down to its bad rows.
@Suite("Audit writer: the state machine")
struct AuditWriterStateTests {
    typealias Item = AuditWriter.JournalItem

    static func key(_ n: Int) -> AuditJournalKey { AuditJournalKey(apnsID: "id-\(n)", startedAt: UInt64(n)) }
    static func intent(_ n: Int) -> Item { Item(key: key(n), intent: true) }
    static func completion(_ n: Int, dead: Bool = false) -> Item {
        Item(
            key: key(n), intent: false, completion: AuditWriter.PendingCompletion(event: EventFactory.event(n), id: AuditRowID.nextWords()),
            dead: dead ? Array("dead \(n)\n".utf8) : nil)
    }
    static let format = AuditRowLayout.standard.format

    // MARK: The ledger

    @Test("an intent and its completion in one segment leave that segment holding the row until it is settled")
    func sameSegment() {
        var state = AuditWriterState()
        state.enter(Self.intent(1), segment: 3, format: Self.format)
        #expect(state.ledger.outstanding[3] == 1)
        #expect(!state.ledger.isSettled(3))
        state.enter(Self.completion(1), segment: 3, format: Self.format)
        // The intent is answered; the completion's row is what the segment holds now.
        #expect(state.ledger.outstanding[3] == 1)
        #expect(state.ledger.openIntents.isEmpty)
        #expect(state.depth == 1)
        let take = state.take(batchSize: 10, highWaterMark: 100, journalIdle: true)
        state.settle(take.batch)
        #expect(state.ledger.isSettled(3))
    }

    @Test("a completion in a later segment releases its intent's segment, and a dead-token upsert is held as a second row")
    func laterSegment() {
        var state = AuditWriterState()
        state.enter(Self.intent(1), segment: 3, format: Self.format)
        state.enter(Self.completion(1, dead: true), segment: 4, format: Self.format)
        #expect(state.ledger.isSettled(3))
        #expect(state.ledger.outstanding[4] == 2)
        #expect(state.queue.map(\.kind) == [.audit, .deadToken])
        #expect(state.queue.allSatisfy { $0.journalSegment == 4 })
    }

    @Test("a retry's intent supersedes the first one: the earlier segment no longer holds the send")
    func retrySupersedes() {
        var state = AuditWriterState()
        state.enter(Self.intent(1), segment: 3, format: Self.format)
        state.enter(Self.intent(1), segment: 5, format: Self.format)
        #expect(state.ledger.isSettled(3))
        #expect(state.ledger.outstanding[5] == 1)
        #expect(state.ledger.openIntents[Self.key(1)]?.segment == 5)
    }

    @Test("a completion the journal refused is held in memory, keeps its intent's segment, and refuses new intents until settled")
    func undurableCompletion() {
        var state = AuditWriterState()
        state.enter(Self.intent(1), segment: 3, format: Self.format)
        #expect(state.intentsAccepted)
        state.enter(Self.completion(1, dead: true), segment: nil, format: Self.format)
        #expect(state.counters.undurableRows == 2)
        #expect(!state.intentsAccepted)
        // The intent's hold passes to both rows: recovered as `unknown` if killed now.
        #expect(state.ledger.outstanding[3] == 2)
        #expect(state.queue.allSatisfy { $0.undurable && $0.journalSegment == 3 })
        let take = state.take(batchSize: 10, highWaterMark: 100, journalIdle: true)
        state.settle(take.batch)
        #expect(state.counters.undurableRows == 0)
        #expect(state.intentsAccepted)
        #expect(state.ledger.isSettled(3))
    }

    @Test("after the writer exited, a refused completion is handed back to be given up, once, and counted as dropped")
    func lateUndurable() {
        var state = AuditWriterState()
        state.finished = true
        state.enter(Self.completion(7), segment: nil, format: Self.format)
        #expect(state.depth == 0)
        let late = state.takeLateUndurable()
        #expect(late.count == 1)
        let r1 = state.takeLateUndurable().isEmpty
        #expect(r1)
        state.noteGivenUp(late)
        #expect(state.counters.dropped == 1)
        #expect(state.counters.undurableRows == 0)
    }

    @Test("a leftover segment is held until recovered, then forgotten")
    func leftover() {
        var ledger = AuditJournalLedger()
        ledger.holdLeftover(9)
        #expect(!ledger.isSettled(9))
        ledger.forget(9)
        #expect(ledger.isSettled(9))
        #expect(ledger.outstanding[9] == nil)
    }

    // MARK: Durability

    @Test("the journal's health: a failure is reported once, a sync cannot clear a failed write, the probe clears both")
    func journalHealth() {
        struct DiskFull: Error {}
        var state = AuditWriterState()
        let failed = state.noteJournal(sync: false, failure: DiskFull())
        #expect(failed == .failed(operation: "write", error: "DiskFull()"))
        #expect(!state.intentsAccepted)
        let failedAgain = state.noteJournal(sync: true, failure: DiskFull())
        #expect(failedAgain == nil)
        let r2 = state.noteJournal(sync: true, failure: nil)
        #expect(r2 == nil)
        #expect(state.counters.journalFailing)
        let r3 = state.noteJournal(sync: false, failure: nil)
        #expect(r3 == .recovered)
        #expect(state.intentsAccepted)
        _ = state.noteJournal(sync: true, failure: DiskFull())
        let r4 = state.noteProbeSucceeded()
        #expect(r4 == .recovered)
        let r5 = state.noteProbeSucceeded()
        #expect(r5 == nil)
        #expect(!state.counters.journalFailing)
    }

    @Test("only the first append since a sync wakes the journal thread; a refused append counts but wakes nothing")
    func appendWakes() {
        var state = AuditWriterState()
        let r6 = state.noteAppend(segment: 1)
        #expect(r6)
        let second = state.noteAppend(segment: 1)
        let refused = state.noteAppend(segment: nil)
        #expect(!second)
        #expect(!refused)
        #expect(state.ledger.unsynced == 2)
        #expect(state.counters.journalCommits == 3)
        #expect(state.ledger.currentSegment == 1)
        state.ledger.unsynced = 0
        let r7 = state.noteAppend(segment: 2)
        #expect(r7)
    }

    // MARK: Taking and placing rows

    @Test("the writer waits once when idle, waits for a full batch until the flush is due, and takes at once when stopping")
    func pause() {
        var state = AuditWriterState()
        let idle = { true }
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: idle) == .idle(until: 150))
        state.enter(Self.intent(1), segment: 1, format: Self.format)
        state.enter(Self.completion(1), segment: 1, format: Self.format)
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: idle) == .filling(until: 140))
        #expect(state.pause(now: 140, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: idle) == .none)
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 1, journalIdle: idle) == .none)
        state.stopping = true
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: idle) == .none)
        _ = state.take(batchSize: 3, highWaterMark: 100, journalIdle: true)
        // Stopping with nothing queued: waits only while the journal still hands over.
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: { false }) == .idle(until: 150))
        #expect(state.pause(now: 100, lastTake: 90, flushInterval: 50, batchSize: 3, journalIdle: idle) == .none)
    }

    @Test("a take holds at most a batch, everything past the high-water mark, and exits only when stopping, drained and the journal idle")
    func take() {
        var state = AuditWriterState()
        for n in 0..<7 { state.enter(Self.completion(n), segment: 1, format: Self.format) }
        var take = state.take(batchSize: 3, highWaterMark: 100, journalIdle: true)
        #expect(take.batch.count == 3)
        #expect(!take.catchingUp)
        take = state.take(batchSize: 3, highWaterMark: 2, journalIdle: true)
        #expect(take.batch.count == 4)
        #expect(take.catchingUp)
        #expect(!take.exiting)
        state.stopping = true
        #expect(!state.take(batchSize: 3, highWaterMark: 100, journalIdle: false).exiting)
        let r8 = state.take(batchSize: 3, highWaterMark: 100, journalIdle: true).exiting
        #expect(r8)
    }

    @Test("a batch goes to Postgres only when connected, not catching up and with nothing older in the spool")
    func destination() {
        typealias S = AuditWriterState
        #expect(S.destination(batchIsEmpty: false, connected: true, catchingUp: false, spoolHoldsRows: false) == .postgres)
        #expect(S.destination(batchIsEmpty: false, connected: false, catchingUp: false, spoolHoldsRows: false) == .spool)
        #expect(S.destination(batchIsEmpty: false, connected: true, catchingUp: true, spoolHoldsRows: false) == .spool)
        #expect(S.destination(batchIsEmpty: false, connected: true, catchingUp: false, spoolHoldsRows: true) == .spool)
        #expect(S.destination(batchIsEmpty: true, connected: true, catchingUp: false, spoolHoldsRows: false) == .nowhere)
    }

    @Test("behind since the first pass that was not caught up; reachable from a connection made while behind; both cleared when caught up")
    func behind() {
        var state = AuditWriterState()
        let t0 = Date(timeIntervalSinceReferenceDate: 1000)
        state.markBehind(caughtUp: false, connected: false, now: t0)
        state.markBehind(caughtUp: false, connected: false, now: t0 + 5)
        #expect(state.counters.behindSince == t0)
        #expect(state.counters.reachableSince == nil)
        state.noteConnection(true, now: t0 + 7)
        #expect(state.counters.reachableSince == t0 + 7)
        #expect(state.counters.lastConnectedAt == t0 + 7)
        state.noteConnection(false, now: t0 + 8)
        #expect(!state.counters.connected)
        state.markBehind(caughtUp: true, connected: true, now: t0 + 9)
        #expect(state.counters.behindSince == nil)
        #expect(state.counters.reachableSince == nil)
    }

    // MARK: The split

    @Test("a batch refused for its data is split down to its bad rows; every other row is written once, in order")
    func bisect() {
        let bad: Set<Int> = [2, 5]
        var written: [Int] = []
        var refused: [Int] = []
        var inserts = 0
        let outcome = AuditPostgresSink.bisect(
            Array(0..<8)[...],
            insert: { part in
                inserts += 1
                if part.contains(where: bad.contains) { throw PostgresError(message: "bad", sqlState: "22P02") }
            },
            refusedForData: { $0 as? PostgresError },
            written: { written.append(contentsOf: $0) },
            refused: { row, error in
                #expect(error.sqlState == "22P02")
                refused.append(row)
            })
        #expect(outcome.unwritten.isEmpty)
        #expect(outcome.failure == nil)
        #expect(written == [0, 1, 3, 4, 6, 7])
        #expect(refused == [2, 5])
        // 8 → 4+4 → 2+2+2+2 → the two pairs with a bad row split again.
        #expect(inserts == 11)
    }

    @Test("a failure that is not the data's stops the split and hands back every row not yet written")
    func bisectStopsOnConnectionFailure() {
        struct ConnectionLost: Error {}
        var written: [Int] = []
        var calls = 0
        let outcome = AuditPostgresSink.bisect(
            Array(0..<8)[...],
            insert: { part in
                calls += 1
                if part.contains(3) { throw PostgresError(message: "bad", sqlState: "23505") }
                if calls > 2 { throw ConnectionLost() }
            },
            refusedForData: { $0 as? PostgresError },
            written: { written.append(contentsOf: $0) },
            refused: { _, _ in Issue.record("nothing may be quarantined after the connection is lost") })
        // 0..<8 refused, 0..<4 refused, then 0..<2 meets the lost connection.
        #expect(written.isEmpty)
        #expect(outcome.unwritten == [0, 1, 2, 3, 4, 5, 6, 7])
        #expect(outcome.failure is ConnectionLost)
    }

    @Test("Postgres that does not answer in time (a locked table, a frozen server) never counts as reachable: stuck only once it answered for the whole limit since; a write in progress counts as behind")
    func unansweredIsNotReachable() {
        let start = Date(timeIntervalSince1970: 1_795_341_600)
        var state = AuditWriterState()
        state.counters.databaseConfigured = true
        state.noteConnection(true, now: start)
        // A live write Postgres holds: behind from its start, before any bound ends it.
        state.counters.writingSince = start.addingTimeInterval(1)
        #expect(state.counters.behindSeconds(now: start.addingTimeInterval(11)) == 10)
        // Its bound passed: the connection is dropped, the batch spooled.
        state.notePostgresUnanswered()
        state.noteConnection(false, now: start.addingTimeInterval(11))
        state.counters.writingSince = nil
        state.markBehind(caughtUp: false, connected: false, now: start.addingTimeInterval(11))
        #expect(state.counters.postgresTimeouts == 1)
        #expect(state.counters.behindSeconds(now: start.addingTimeInterval(20)) == 9)
        // The writer connects again (a locked table still takes connections) and the replay is cancelled again.
        state.noteConnection(true, now: start.addingTimeInterval(12))
        #expect(state.counters.stuckWhileReachable(limit: 60, now: start.addingTimeInterval(73)), "answered for 61 s with rows behind")
        state.notePostgresUnanswered()
        #expect(!state.counters.stuckWhileReachable(limit: 60, now: start.addingTimeInterval(73)), "a statement it did not answer: a shared fault")
        #expect(!state.counters.stuckWhileReachable(limit: 60, now: start.addingTimeInterval(1000)))
        state.noteConnection(true, now: start.addingTimeInterval(80))
        #expect(!state.counters.stuckWhileReachable(limit: 60, now: start.addingTimeInterval(140)))
        #expect(state.counters.stuckWhileReachable(limit: 60, now: start.addingTimeInterval(141)))
        #expect(state.counters.postgresTimeouts == 2)
    }
}
