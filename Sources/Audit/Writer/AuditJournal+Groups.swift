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
            inbox.groupTakenAt = MonotonicClock.now()
            let arm = !inbox.stallWatchArmed
            inbox.stallWatchArmed = true
            condition.unlock()
            if arm { scheduleStallWatch(after: configuration.journalStallLimit) }
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
        inbox.groupTakenAt = nil
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

    private func scheduleStallWatch(after seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in stallWatchFired() }
    }

    /// A group's write and sync that has not returned within the stall
    /// limit (a stalled device, a hung network volume) holds every send
    /// handed over after it, and new sends are refused from then on
    /// (``AuditWriter/syncStalled(now:)``). The sends already waiting for
    /// their intents, not yet taken into a group, are refused now as well:
    /// their intents are taken back unwritten, so they end `503` with
    /// nothing sent and nothing journaled, rather than waiting for a sync
    /// that may never return. The group being written cannot be taken back
    /// (its intents are written), and completions (their sends went out)
    /// keep waiting: their callers are answered when the sync returns.
    ///
    /// One check is scheduled at a time: when a group is taken and none is,
    /// then again for as long as groups are being written, so its cost does
    /// not grow with the rate of groups. What it reads is the inbox's, under
    /// its lock: a group that returned meanwhile is not taken for a stalled one.
    func stallWatchFired(now: UInt64 = MonotonicClock.now()) {
        let limit = MonotonicClock.nanoseconds(configuration.journalStallLimit)
        var refused: [CheckedContinuation<Bool, Never>] = []
        var next: Double?
        condition.lock()
        if let taken = inbox.groupTakenAt {
            let deadline = taken &+ limit
            if now >= deadline { refused = takeBackPendingIntents() }
            // Still being written: look again when it would pass the limit, or, past it, every second.
            next = now >= deadline ? 1 : max(0.01, Double(deadline &- now) / 1e9)
        }
        inbox.stallWatchArmed = next != nil
        condition.unlock()
        for continuation in refused { continuation.resume(returning: false) }
        if !refused.isEmpty {
            logger.error(
                "audit journal sync has not returned: sends waiting for it refused, nothing sent",
                metadata: ["refused_waiting": "\(refused.count)", "stall_limit_seconds": "\(configuration.journalStallLimit)"])
        }
        if let next { scheduleStallWatch(after: next) }
    }

    /// Under `condition`: removes from `pending` every hand-over made of
    /// intents only (one send's, or a batch's, whose waiter is on its last
    /// entry) and returns their waiters. Other entries keep their order.
    private func takeBackPendingIntents() -> [CheckedContinuation<Bool, Never>] {
        var kept: [(AuditWriter.JournalEntry, CheckedContinuation<Bool, Never>?)] = []
        kept.reserveCapacity(inbox.pending.count)
        var run: [(AuditWriter.JournalEntry, CheckedContinuation<Bool, Never>?)] = []
        var refused: [CheckedContinuation<Bool, Never>] = []
        for element in inbox.pending {
            let isIntent = if case .intent = element.0 { true } else { false }
            // A hand-over is intents only or none (a batch's intents, its
            // completions): an entry that is not an intent and has no
            // waiter (a completion nobody waits on) stands alone.
            guard isIntent || element.1 != nil else {
                kept.append(contentsOf: run)
                kept.append(element)
                run = []
                continue
            }
            run.append(element)
            guard let continuation = element.1 else { continue }
            // Every entry before the waiter's is an intent (anything else
            // without a waiter ended the run above): the waiter's own says
            // whether the hand-over is intents only.
            if isIntent { refused.append(continuation) } else { kept.append(contentsOf: run) }
            run = []
        }
        kept.append(contentsOf: run)
        inbox.pending = kept
        return refused
    }
}
