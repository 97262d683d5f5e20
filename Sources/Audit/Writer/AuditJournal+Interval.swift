import Foundation
import RelayBasics

/// `.interval`: the sending thread appends, the journal thread syncs.
extension AuditJournal {
    /// Appends records already encoded into `bytes` (copied into the stage,
    /// ``appendOrStage(_:)``; written to the segment without a stage) and
    /// enters their `items` in the ledger (a completion's rows go to the
    /// writer's queue), all under the shared lock, so the ledger and the
    /// segment a record counts against agree, whoever appends and trims.
    ///
    /// The caller may be on Swift's cooperative pool, which must never block:
    /// a copy into the mapped stage is a copy into the page cache (no system
    /// call), and the lock is held only for it and the ledger; the journal
    /// thread writes the stage out and issues the `fsync` (it waits for the
    /// disk, milliseconds on a busy one) every `journalSyncInterval`
    /// (``runSyncs()``). Once this returns the record survives a crash of
    /// the process; a crash of the machine may lose what the next sync had
    /// not reached yet.
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
        // Whether the disk was asked to take bytes (a `write(2)`): only that
        // says anything about it. A copy into the stage succeeds on a full
        // disk too, so it must not clear a failure the journal thread found
        // writing the stage out: the journal recovers when the disk takes
        // what is staged (``probeIfFailing()``), not when a send is copied.
        var wrote = true
        do {
            (segment, wrote) = try appendOrStage(bytes)
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
        let change = wrote ? shared.state.noteJournal(sync: false, failure: failure) : nil
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

    /// Under the shared lock: copies `bytes` into the stage (no system
    /// call; in the page cache once copied) and returns the segment they
    /// count against, the current one: the stage is written to it, or to a
    /// newer one if it fills meanwhile, which trimming (oldest first) makes
    /// safe. A full stage is written out here first; without a stage, or for
    /// records larger than it, `bytes` are written straight to the segment.
    /// `wrote`: whether a `write(2)` to the segment succeeded on the way (a
    /// throw says one failed); false for a copy into the stage alone.
    func appendOrStage(_ bytes: [UInt8]) throws -> (segment: Int, wrote: Bool) {
        guard let stage = mappedStage() else { return (try files.append(encoded: bytes, sync: false), true) }
        var wrote = false
        if !stage.hasRoom(bytes.count) { wrote = try writeStaged() }
        guard stage.hasRoom(bytes.count) else { return (try files.append(encoded: bytes, sync: false), true) }
        let segment = try files.currentSegmentNumber()
        stage.append(bytes)
        return (segment, wrote)
    }

    /// Under the shared lock: writes what is staged to the current segment
    /// with one `write(2)` and empties the stage. On failure the stage keeps
    /// it (still on disk for a killed process' next start) and the error is thrown.
    /// Returns whether there was anything to write.
    @discardableResult
    func writeStaged() throws -> Bool {
        guard let stage, stage.used > 0 else { return false }
        try files.append(encoded: stage.staged(), sync: false)
        stage.reset()
        return true
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
            let pass = syncAppended()
            let synced = pass != .nothing
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
                // The writer is gone and the disk refuses what is staged: it
                // stays in the stage file, which the next start recovers.
                if !(exiting && pass == .stageRefused) { continue }
            }
            trim()
            // Unless an append since the sync asked for another: take it first.
            if exiting, endThread(unless: { $0.wakeRequested }) { return }
        }
    }

    /// What one pass of ``syncAppended()`` did.
    enum SyncPass {
        case nothing
        case synced
        /// The staged records could not be written to the segment.
        case stageRefused
    }

    /// Writes what is staged to the segment and takes what is unsynced
    /// (under the shared lock, so an append after it waits for the next
    /// sync), then `fdatasync`s it outside the lock.
    private func syncAppended() -> SyncPass {
        var stageFailure: (any Error)?
        let (appends, work) = shared.withState { state in
            // What the sending threads staged goes to the segment first.
            do { try writeStaged() } catch { stageFailure = error }
            guard stageFailure == nil else { return (state.ledger.unsynced, (current: SegmentFile?.none, retired: [SegmentFile](), directory: false)) }
            defer {
                state.ledger.unsynced = 0
                // Those records wait on this sync now: until it returns, they count as unsynced.
                if let since = state.ledger.unsyncedSince { state.counters.journalSyncingSince = since }
                state.ledger.unsyncedSince = nil
            }
            return (state.ledger.unsynced, files.takeSyncWork())
        }
        if let stageFailure {
            // The disk refused the staged records: they stay staged (a killed
            // process still leaves them), no new sends until it takes them;
            // the next interval tries again.
            log(shared.withState { $0.noteJournal(sync: false, failure: stageFailure) })
            return .stageRefused
        }
        guard appends > 0 || !work.retired.isEmpty else { return .nothing }
        var failure: (any Error)?
        configuration.journalSyncWillStart?()
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
            // The sync returned (a failure is the journal's health, reported apart).
            state.counters.journalSyncingSince = nil
            return state.noteJournal(sync: true, failure: failure)
        })
        return .synced
    }
}
