import Foundation
import RelayBasics

/// `.always`: the journal thread writes what the sends hand over in groups,
/// one `fdatasync` each.
extension AuditJournal {
    /// The journal thread: take everything pending, write it with one
    /// `fdatasync` (group commit), hand completed rows to the writer, resume
    /// the sends. It exits when the writer has stopped and nothing is
    /// pending; a late entry starts it again.
    func runGroups() {
        while true {
            condition.lock()
            while inbox.pending.isEmpty, !inbox.writerExited {
                if !condition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(1)) { break }
            }
            if inbox.pending.isEmpty {
                let exiting = inbox.writerExited
                condition.unlock()
                probeIfFailing()
                trim()
                // Unless a late entry arrived during the trim: handle it first.
                if exiting, endThread(unless: { !$0.pending.isEmpty }) { return }
                continue
            }
            let entries = inbox.pending
            inbox.pending = []
            inbox.busy = true
            condition.unlock()
            writeGroup(entries)
        }
    }

    /// Writes one group and resumes its sends.
    private func writeGroup(_ entries: [(AuditWriter.JournalEntry, CheckedContinuation<Bool, Never>?)]) {
        // Intents are refused, nothing written, while the journal is
        // failing or answered sends' rows wait in memory only.
        let intentsRefused = !shared.withState { $0.intentsAccepted }
        var items: [AuditWriter.JournalItem] = []
        items.reserveCapacity(entries.count)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * 1024)
        for (entry, _) in entries {
            if intentsRefused, case .intent = entry { continue }
            if let item = encode(entry, into: &bytes) { items.append(item) }
        }
        var segment: Int?
        var failure: (any Error)?
        // The group's sends wait on this write and sync: until it returns they count as unsynced.
        if !bytes.isEmpty {
            shared.withState { $0.counters.journalSyncingSince = MonotonicClock.now() }
            configuration.journalSyncWillStart?()
        }
        do {
            // A group of barriers only has nothing to write (and must not start a segment).
            if !bytes.isEmpty { segment = try files.append(encoded: bytes) }
        } catch {
            // The disk refused: intents are refused (their sends do not
            // leave); completions' rows still go to the writer, held in
            // memory until written or spooled.
            failure = error
        }

        shared.condition.lock()
        shared.state.counters.journalCommits += 1
        if segment != nil { shared.state.counters.journalSyncs += 1 }
        // The write and sync returned (a failure is the journal's health, reported apart).
        shared.state.counters.journalSyncingSince = nil
        if let segment { shared.state.ledger.currentSegment = segment }
        let format = configuration.rowLayout.format
        for item in items { shared.state.enter(item, segment: segment, format: format) }
        if shared.state.wakesWriter(batchSize: configuration.batchSize) { shared.condition.broadcast() }
        let commits = shared.state.counters.journalCommits
        let change = bytes.isEmpty ? nil : shared.state.noteJournal(sync: false, failure: failure)
        let late = shared.state.takeLateUndurable()
        shared.condition.unlock()
        log(change)
        shared.giveUp(late, layout: configuration.rowLayout, logger: logger)
        // Only now: the writer exits once the journal is idle and its
        // queue empty, so the rows must be queued before this flips.
        condition.lock()
        inbox.busy = false
        condition.unlock()
        for case (let entry, let continuation?) in entries {
            if case .intent = entry {
                continuation.resume(returning: !intentsRefused && segment != nil)
            } else {
                continuation.resume(returning: true)
            }
        }
        // Under steady load the idle branch never runs: trim now and then,
        // and whenever a new segment was started.
        if commits % 256 == 0 || (segment != nil && segment != lastTrimmedSegment) {
            lastTrimmedSegment = segment
            trim()
        }
    }
}
