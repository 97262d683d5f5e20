import Foundation
public import Relay

extension AuditWriter {
    /// Journals the intents of several sends about to start together (a
    /// batch's) and returns once all of them are durable: with `.interval`
    /// one `write(2)` under one lock for all of them, on the calling thread,
    /// without suspending; with `.always` one hand-over to the journal
    /// thread, whose next group writes and `fdatasync`s them together.
    public func sendsStarting(_ sends: [SendIntent]) async {
        guard !sends.isEmpty else { return }
        if configuration.journalSync == .interval {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(sends.count * 1024)
            var items: [JournalItem] = []
            items.reserveCapacity(sends.count)
            for intent in sends {
                if let item = encodeJournal(.intent(intent.send, startedAt: intent.startedAt), into: &bytes) { items.append(item) }
            }
            return appendEncodedToJournal(bytes, items: items)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            journalCondition.lock()
            // Handed over under one lock, so the journal thread takes them in
            // one group: the last one's continuation resumes once all are synced.
            for (index, intent) in sends.enumerated() {
                journalPending.append((.intent(intent.send, startedAt: intent.startedAt), index == sends.count - 1 ? continuation : nil))
            }
            startJournalThreadIfNeeded()
            journalCondition.signal()
            journalCondition.unlock()
        }
    }

    /// `.interval`: appends records already encoded into `bytes` with one
    /// `write(2)` and no sync, and enters their `items` in the ledger (a
    /// completion's rows go to the writer's queue), all under `condition`,
    /// so the ledger and the segment the records went to agree, whoever
    /// appends and trims. See ``appendToJournal(_:)`` for why a small
    /// buffered write may run on the cooperative pool.
    func appendEncodedToJournal(_ bytes: [UInt8], items: some Collection<JournalItem>) {
        var failure: (any Error)?
        var segment: Int?
        condition.lock()
        do {
            segment = try journal.append(encoded: bytes, sync: false)
        } catch {
            failure = error
        }
        counters.journalCommits += 1
        let wake = segment != nil && journalUnsynced == 0
        if segment != nil { journalUnsynced += 1 }
        if let segment { journalCurrentSegment = segment }
        for item in items { enterInLedger(item, segment: segment) }
        if queue.count - queueHead >= configuration.batchSize || stopping { condition.broadcast() }
        condition.unlock()
        if let failure {
            // The disk refused: the rows still go to the writer (Postgres
            // or the spool); only a crash before then would lose them.
            logger.critical("audit journal write failed; rows are not crash-safe until written", metadata: ["error": "\(failure)"])
        }
        if wake {
            // The first append since the last sync: the journal thread may be
            // idle. At most once per sync interval, so a second lock is cheap.
            journalCondition.lock()
            journalWakeRequested = true
            startJournalThreadIfNeeded()
            journalCondition.signal()
            journalCondition.unlock()
        }
    }
}
