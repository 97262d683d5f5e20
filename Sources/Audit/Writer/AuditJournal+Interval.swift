import Foundation
import RelayBasics

/// `.interval`: the sending thread appends, the journal thread syncs.
extension AuditJournal {
    /// Appends records already encoded into `bytes` with one `write(2)` and
    /// no sync, and enters their `items` in the ledger (a completion's rows
    /// go to the writer's queue), all under the shared lock, so the ledger
    /// and the segment the records went to agree, whoever appends and trims.
    ///
    /// The caller may be on Swift's cooperative pool, which must never block.
    /// A small buffered append is acceptable there, as a log line is: the
    /// kernel copies the bytes into the page cache and returns (~3 µs; it
    /// waits for no device), and the lock is held only for that copy and the
    /// ledger. An `fsync` is not: it waits for the disk (milliseconds on a
    /// busy one), so it never runs here; the journal thread issues it every
    /// `journalSyncInterval` (``runSyncs()``). Once `write` returned the
    /// record survives a crash of the process; a crash of the machine may
    /// lose what the next sync had not reached yet.
    ///
    /// Intents (`intents` true) are refused, nothing written, while the
    /// journal is failing or answered sends' rows wait in memory only
    /// (``AuditWriterState/intentsAccepted``). Returns whether the records are in the journal.
    @discardableResult
    func append(encoded bytes: [UInt8], items: some Collection<AuditWriter.JournalItem>, intents: Bool) -> Bool {
        var failure: (any Error)?
        var segment: Int?
        shared.condition.lock()
        if intents, !shared.state.intentsAccepted {
            shared.condition.unlock()
            return false
        }
        do {
            segment = try files.append(encoded: bytes, sync: false)
        } catch {
            failure = error
        }
        let wake = shared.state.noteAppend(segment: segment)
        let format = configuration.rowLayout.format
        for item in items { shared.state.enter(item, segment: segment, format: format) }
        if shared.state.wakesWriter(batchSize: configuration.batchSize) { shared.condition.broadcast() }
        // The disk refused: intents are refused (their sends do not leave);
        // completions' rows still go to the writer, held in memory until
        // written or spooled, and no new send is taken meanwhile.
        let change = shared.state.noteJournal(sync: false, failure: failure)
        let late = shared.state.takeLateUndurable()
        shared.condition.unlock()
        log(change)
        shared.giveUp(late, layout: configuration.rowLayout, logger: logger)
        if wake {
            // The first append since the last sync: the journal thread may be
            // idle. At most once per sync interval, so a second lock is cheap.
            condition.lock()
            inbox.wakeRequested = true
            startThreadIfNeeded()
            condition.signal()
            condition.unlock()
        }
        return segment != nil
    }

    /// The journal thread: `fdatasync` what the sending threads appended, at
    /// most once per `journalSyncInterval` and only when something was
    /// appended; trim settled segments. It exits when the writer has
    /// stopped and nothing is unsynced; a late append starts it again.
    func runSyncs() {
        var syncsSinceTrim = 0
        while true {
            condition.lock()
            if !inbox.wakeRequested, !inbox.writerExited {
                condition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(configuration.journalIdleWake))
            }
            inbox.wakeRequested = false
            let exiting = inbox.writerExited
            condition.unlock()

            probeIfFailing()
            let synced = syncAppended()
            let segment = shared.withState { state in
                state.counters.journalSyncChecks += 1
                return state.ledger.currentSegment
            }
            if synced {
                syncsSinceTrim += 1
                if syncsSinceTrim >= 64 || segment != lastTrimmedSegment {
                    syncsSinceTrim = 0
                    lastTrimmedSegment = segment
                    trim()
                }
                // One sync per interval: the appends of the next window
                // share it. A machine crash loses at most this window.
                if !exiting { Thread.sleep(forTimeInterval: configuration.journalSyncInterval) }
                continue
            }
            trim()
            // Unless an append since the sync asked for another: take it first.
            if exiting, endThread(unless: { $0.wakeRequested }) { return }
        }
    }

    /// Takes what is unsynced (under the shared lock, so an append after it
    /// waits for the next sync) and `fdatasync`s it outside the lock.
    /// Returns whether there was anything to sync.
    private func syncAppended() -> Bool {
        let (appends, work) = shared.withState { state in
            defer { state.ledger.unsynced = 0 }
            return (state.ledger.unsynced, files.takeSyncWork())
        }
        guard appends > 0 || !work.retired.isEmpty else { return false }
        var failure: (any Error)?
        // Retired segments first: they hold the older records.
        for file in work.retired {
            do { try file.syncData() } catch { failure = error }
            file.close()
        }
        if let current = work.current {
            do { try current.syncData() } catch { failure = error }
        }
        if work.directory { SegmentFile.syncDirectory(files.directory.path) }
        // A failed sync: the bytes are still in the page cache (a process
        // crash loses nothing) and the writer brings the rows to Postgres or
        // the spool, but the disk is not taking what it is given: no new
        // sends until a sync (or the probe) succeeds again.
        log(shared.withState { state in
            state.counters.journalSyncs += 1
            return state.noteJournal(sync: true, failure: failure)
        })
        return true
    }
}
