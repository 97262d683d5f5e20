import Foundation
public import Relay

extension AuditWriter {
    /// Journals the intents of several sends about to start together (a
    /// batch's) and returns once all of them are durable: with `.interval`
    /// one `write(2)` under one lock for all of them, on the calling thread,
    /// without suspending; with `.always` one hand-over to the journal
    /// thread, whose next group writes and `fdatasync`s them together.
    public func sendsStarting(_ sends: [SendIntent]) async {
        guard configuration.journalSync == .interval else {
            return await journalTogether(sends.lazy.map { .intent($0.send, startedAt: $0.startedAt) })
        }
        appendTogether(sends.count) { index, bytes in encodeIntent(sends[index].send, startedAt: sends[index].startedAt, into: &bytes) }
    }

    /// Journals the completions of several sends that ran together (a
    /// batch's chunk) and returns once all of them are durable, as
    /// ``sendsStarting(_:)`` journals intents: one `write(2)` under one lock
    /// (`.interval`) or one group of the journal thread (`.always`). Each is
    /// still its own record, its row queued for the writer, its intent
    /// answered in the ledger, exactly as ``sendFinishedDurably(_:)`` does one.
    public func sendsFinishedDurably(_ events: [SendEvent]) async {
        guard configuration.journalSync == .interval else {
            return await journalTogether(events.lazy.map { .completion($0) })
        }
        appendTogether(events.count) { index, bytes in encodeCompletion(events[index], into: &bytes) }
    }

    /// `.interval`: encodes `count` records (`encode` the one at an index)
    /// into one buffer and appends them with one `write(2)`. Straight from
    /// the caller's sends and events, as a single send's append is: a
    /// ``JournalEntry`` per record copied each (a retain and a release of
    /// every string of the send) and destroyed it again.
    private func appendTogether(_ count: Int, _ encode: (Int, inout [UInt8]) -> JournalItem) {
        guard count > 0 else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 1024)
        var items: [JournalItem] = []
        items.reserveCapacity(count)
        for index in 0..<count { items.append(encode(index, &bytes)) }
        appendEncodedToJournal(bytes, items: items)
    }

    /// `.always`: hands `entries` to the journal thread together and returns once all are durable.
    private func journalTogether(_ entries: some Collection<JournalEntry>) async {
        guard !entries.isEmpty else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            journalCondition.lock()
            // Handed over under one lock, so the journal thread takes them in
            // one group: the last one's continuation resumes once all are synced.
            var left = entries.count
            for entry in entries {
                left -= 1
                journalPending.append((entry, left == 0 ? continuation : nil))
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
    /// appends and trims. See ``appendIntentToJournal(_:startedAt:)`` for why a small
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
