import Foundation
public import Relay

extension AuditWriter {
    /// Journals the intents of several sends about to start together (a
    /// batch's) and returns once all of them are durable: with `.interval`
    /// one `write(2)` under one lock for all of them, on the calling thread,
    /// without suspending; with `.always` one hand-over to the journal
    /// thread, whose next group writes and `fdatasync`s them together.
    /// False when they could not be made durable (see ``sendStarting(_:startedAt:)``).
    public func sendsStarting(_ sends: [SendIntent]) async -> Bool {
        guard configuration.journalSync == .interval else {
            return await journalTogether(sends.lazy.map { .intent($0.send, startedAt: $0.startedAt) })
        }
        return appendTogether(sends.count, intents: true) { index, bytes in
            encodeIntent(sends[index].send, startedAt: sends[index].startedAt, into: &bytes)
        }
    }

    /// Journals the completions of several sends that ran together (a
    /// batch's chunk) and returns once all of them are durable, as
    /// ``sendsStarting(_:)`` journals intents: one `write(2)` under one lock
    /// (`.interval`) or one group of the journal thread (`.always`). Each is
    /// still its own record, its row queued for the writer, its intent
    /// answered in the ledger, exactly as ``sendFinishedDurably(_:)`` does one.
    public func sendsFinishedDurably(_ events: [SendEvent]) async {
        guard configuration.journalSync == .interval else {
            _ = await journalTogether(events.lazy.map { .completion($0) })
            return
        }
        appendTogether(events.count, intents: false) { index, bytes in encodeCompletion(events[index], into: &bytes) }
    }

    /// `.interval`: encodes `count` records (`encode` the one at an index)
    /// into one buffer and appends them with one `write(2)`. Straight from
    /// the caller's sends and events, as a single send's append is: a
    /// ``JournalEntry`` per record copied each (a retain and a release of
    /// every string of the send) and destroyed it again.
    @discardableResult
    private func appendTogether(_ count: Int, intents: Bool, _ encode: (Int, inout [UInt8]) -> JournalItem) -> Bool {
        guard count > 0 else { return true }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 1024)
        var items: [JournalItem] = []
        items.reserveCapacity(count)
        for index in 0..<count { items.append(encode(index, &bytes)) }
        // The intents' lines stay in this buffer, shared, for their completions.
        for index in items.indices where items[index].fields != nil { items[index].fields!.record = bytes }
        return appendEncodedToJournal(bytes, items: items, intents: intents)
    }

    /// `.always`: hands `entries` to the journal thread together and returns
    /// once all are durable (true) or were refused (false).
    private func journalTogether(_ entries: some Collection<JournalEntry>) async -> Bool {
        guard !entries.isEmpty else { return true }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
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
    ///
    /// Intents (`intents` true) are refused, nothing written, while the
    /// journal is failing or answered sends' rows wait in memory only
    /// (``intentsAccepted``). Returns whether the records are in the journal.
    @discardableResult
    func appendEncodedToJournal(_ bytes: [UInt8], items: some Collection<JournalItem>, intents: Bool) -> Bool {
        var failure: (any Error)?
        var segment: Int?
        condition.lock()
        if intents, !intentsAccepted {
            condition.unlock()
            return false
        }
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
        // The disk refused: intents are refused (their sends do not leave);
        // completions' rows still go to the writer, held in memory until
        // written or spooled, and no new send is taken meanwhile.
        let change = noteJournal(sync: false, failure: failure)
        let late = lateUndurable
        lateUndurable = []
        condition.unlock()
        log(change)
        giveUp(late)
        if wake {
            // The first append since the last sync: the journal thread may be
            // idle. At most once per sync interval, so a second lock is cheap.
            journalCondition.lock()
            journalWakeRequested = true
            startJournalThreadIfNeeded()
            journalCondition.signal()
            journalCondition.unlock()
        }
        return segment != nil
    }
}
