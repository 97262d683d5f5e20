import Foundation
import Logging
import RelayBasics

/// The audit journal: its segment files in the spool directory and the
/// journal thread. Each send's intent (before its first attempt) and
/// completion (before the caller is answered) are appended here, so a relay
/// killed at any point leaves every answered send's row on disk.
///
/// - `.interval` (the default): the sending thread copies its records into
///   the stage (``JournalStage``, a mapped file: no system call;
///   ``append(encoded:items:intents:)``) and the journal thread writes the
///   stage to the segment and `fdatasync`s it, every `journalSyncInterval`
///   while appends arrive (``runSyncs()``).
/// - `.always`: the journal thread takes the records, writes many sends per
///   `fdatasync` (group commit), then resumes the waiting sends
///   (``runGroups()``).
///
/// Either way completed rows go to the writer's queue and the ledger
/// (``AuditWriterState``) in the same step as the append, under the shared
/// lock, so the ledger and the segment a record went to agree, whoever
/// appends and trims. Segments are deleted, oldest first, once the ledger
/// says every row in them is in Postgres or the spool.
final class AuditJournal: @unchecked Sendable {
    /// What the sending threads hand to the journal thread, guarded by `condition`.
    struct Inbox {
        /// `.always`: records to make durable, each with the send waiting for it.
        var pending: [(AuditWriter.JournalEntry, CheckedContinuation<Bool, Never>?)] = []
        /// The journal thread is writing a group it took from `pending`.
        var busy = false
        var threadRunning = false
        /// Set by the writer thread as it exits: the journal thread may stop when idle.
        var writerExited = false
        /// `shutdown()` callers waiting for the journal thread's last trim.
        var exitContinuations: [CheckedContinuation<Void, Never>] = []
        /// `.interval`: an append found the journal synced and asks the
        /// journal thread for the next sync.
        var wakeRequested = false
        /// `.always`: when the journal thread took the group it is writing
        /// (`busy`), for the check of a stalled sync; nil while idle.
        var groupTakenAt: UInt64?
        /// `.always`: that check is scheduled (``AuditJournal/stallWatchFired(now:)``).
        var stallWatchArmed = false
    }

    /// The segment files. With `.interval` used under the shared lock by
    /// the sending threads and the journal thread; with `.always` by the
    /// journal thread alone; by `init` before either starts.
    let files: AuditSpool
    /// `.interval`: where the sending threads copy their records, written
    /// to `files` by the journal thread (``JournalStage``). Mapped with the
    /// first record of a segment and unmapped when trimming deletes the
    /// current segment, so that once every row is written nothing in the
    /// spool directory is open for writing (it can be remounted read-only).
    /// Under the shared lock.
    var stage: JournalStage?
    /// Whether records are staged: `.interval`, and the stage could be made
    /// (when it cannot, the sending threads write to `files` themselves).
    var staging: Bool
    let shared: AuditWriterShared
    let configuration: AuditWriter.Configuration
    let logger: Logger
    /// Guards `inbox`: its own, so a send handing over an entry wakes the
    /// journal thread and not the writer.
    let condition = MonotonicCondition()
    var inbox = Inbox()
    /// Journal thread only: the segment current at its last trim.
    var lastTrimmedSegment: Int?

    /// Opens (creates) the journal's directory and, with `.interval`, its
    /// stage, moving what a previous run left staged into a segment of its
    /// own (synced: the one `fdatasync` here, after a crash only); starts nothing.
    init(configuration: AuditWriter.Configuration, shared: AuditWriterShared, logger: Logger) throws {
        self.configuration = configuration
        self.shared = shared
        self.logger = logger
        let files = try AuditSpool(
            directory: configuration.spoolDirectory, segmentLimit: configuration.journalSegmentBytes, prefix: "journal-",
            suffix: ".journal")
        self.files = files
        self.staging = Self.recoverStage(configuration: configuration, files: files, logger: logger)
    }

    /// Renames what a previous run left staged into a segment (the newest,
    /// as its records are; a rename needs no room on a full disk), in either
    /// mode, and returns whether this run stages: `.interval`, unless that
    /// rename failed (logged; the stage stays for a later start and this run
    /// writes without it) or no stage could be made.
    private static func recoverStage(configuration: AuditWriter.Configuration, files: AuditSpool, logger: Logger) -> Bool {
        // Whatever this run's mode: a relay switched to `.always` still
        // recovers what an `.interval` run left staged.
        do {
            if try JournalStage.moveLeftover(in: configuration.spoolDirectory, to: files.reserveNextSegmentPath()) {
                logger.notice("the audit journal stage a previous run left is recovered with the journal")
            }
        } catch {
            logger.critical(
                "could not move the audit journal stage a previous run left; it stays for the next start, and this run writes the journal without a stage",
                metadata: ["error": "\(error)", "spool_directory": "\(configuration.spoolDirectory)"])
            return false
        }
        guard configuration.journalSync == .interval else { return false }
        // Made (its zeros written and synced) here, not at the first record
        // on a sending thread; mapped there, and unmapped when idle.
        do {
            _ = try JournalStage(directory: configuration.spoolDirectory)
            return true
        } catch {
            logger.warning(
                "no audit journal stage; the sending threads write the journal themselves",
                metadata: ["error": "\(error)", "spool_directory": "\(configuration.spoolDirectory)"])
            return false
        }
    }

    /// Under the shared lock: the stage, mapped now if it is not; nil (and
    /// no more staging this run, logged) when it cannot be.
    func mappedStage() -> JournalStage? {
        if let stage { return stage }
        guard staging else { return nil }
        do {
            let stage = try JournalStage(directory: configuration.spoolDirectory)
            // Emptied before it was last unmapped: anything here is no record to keep.
            stage.reset()
            self.stage = stage
            return stage
        } catch {
            staging = false
            logger.warning(
                "the audit journal stage could not be mapped; the sending threads write the journal themselves",
                metadata: ["error": "\(error)", "spool_directory": "\(configuration.spoolDirectory)"])
            return nil
        }
    }

    /// The segments a previous run left, held in the ledger until recovered
    /// (new ones are numbered after them), for the writer thread to recover:
    /// disk reads and an fsync have no place on the caller, which may be on
    /// the cooperative pool.
    func holdLeftoverSegments() -> [URL] {
        let leftover = files.segments()
        shared.withState { state in
            for url in leftover {
                guard let number = files.number(of: url) else { continue }
                state.ledger.holdLeftover(number)
                files.reserveNumbers(through: number)
            }
        }
        return leftover
    }

    /// Starts the journal thread unless it runs. Called with `condition`
    /// held. Out of threads it is not marked running, and the next call
    /// tries again.
    @discardableResult
    func startThreadIfNeeded() -> DetachedThread.StartFailure? {
        guard !inbox.threadRunning else { return nil }
        do {
            try DetachedThread.start(name: "relay-journal") { [self] in
                if configuration.journalSync == .interval { runSyncs() } else { runGroups() }
            }
        } catch {
            return error
        }
        inbox.threadRunning = true
        return nil
    }

    /// Starts the journal thread unless it runs.
    func start() throws(DetachedThread.StartFailure) {
        condition.lock()
        let failure = startThreadIfNeeded()
        condition.unlock()
        if let failure { throw failure }
    }

    /// `.always`: hands `entries` to the journal thread together, the last
    /// one with `continuation`, so the thread takes them in one group and
    /// the continuation resumes once all are synced.
    func enqueue(_ entries: some Collection<AuditWriter.JournalEntry>, continuation: CheckedContinuation<Bool, Never>?) {
        condition.lock()
        var left = entries.count
        for entry in entries {
            left -= 1
            inbox.pending.append((entry, left == 0 ? continuation : nil))
        }
        guard startThreadIfNeeded() == nil else {
            // Out of threads, with the journal's ended (its writer exited):
            // the records wait for a thread a later call starts, and the
            // caller, refused, does not wait on them.
            if continuation != nil { inbox.pending[inbox.pending.count - 1].1 = nil }
            condition.unlock()
            continuation?.resume(returning: false)
            return
        }
        condition.signal()
        condition.unlock()
    }

    /// Nothing pending for the journal and nothing being written by it.
    func isIdle() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return inbox.pending.isEmpty && !inbox.busy
    }

    /// Records handed over and not yet taken (`.always`), for the queue depth.
    var pendingCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return inbox.pending.count
    }

    /// The writer thread has exited (or never will start): the journal
    /// thread ends once it has nothing left.
    func writerDidExit() {
        condition.lock()
        inbox.writerExited = true
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once the journal thread has made its last trim and exited
    /// (at once when it does not run), so a writer opened next on the same
    /// directory never races this one's deletions.
    func waitForExit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            guard inbox.threadRunning else {
                condition.unlock()
                continuation.resume()
                return
            }
            inbox.exitContinuations.append(continuation)
            condition.signal()
            condition.unlock()
        }
    }

    /// Marks the journal thread stopped and resumes `waitForExit()`, unless
    /// `more` (read under `condition`) says work arrived: then false.
    func endThread(unless more: (Inbox) -> Bool) -> Bool {
        condition.lock()
        guard !more(inbox) else {
            condition.unlock()
            return false
        }
        inbox.threadRunning = false
        let waiting = inbox.exitContinuations
        inbox.exitContinuations = []
        condition.unlock()
        waiting.forEach { $0.resume() }
        return true
    }

    /// The journal thread, now and then: while the journal is failing, tries
    /// a small write and `fdatasync` in the spool directory. With no sends
    /// (a relay out of rotation gets none) nothing else would find out that
    /// the disk has room again.
    ///
    /// With a stage, the records it holds must reach a segment too before
    /// the journal takes sends again: 4 KiB finding room says nothing about
    /// the room they need, and a send copied into the stage never asks the
    /// disk (``append(encoded:items:intents:)``). Otherwise a disk with a
    /// page free now and then would let a stage's worth of sends be answered
    /// after each probe, on a disk that cannot hold their records.
    func probeIfFailing() {
        guard shared.withState({ $0.counters.journalFailing }) else { return }
        do {
            try SegmentFile.probe(files.directory.appendingPathComponent(".journal-probe").path)
        } catch {
            return
        }
        log(shared.withState { state in
            do {
                try writeStaged()
            } catch {
                return nil
            }
            return state.noteProbeSucceeded()
        })
    }

    func log(_ change: AuditWriterState.JournalHealthChange?) {
        shared.log(change, logger: logger, spoolDirectory: configuration.spoolDirectory)
    }

    /// Deletes journal segments, oldest first, while every row in them is
    /// settled. Oldest first keeps an intent's segment at least as long as
    /// its completion's, so recovery never finds an intent alone whose
    /// send was answered. The current segment goes too once it is settled
    /// (the next append starts a new one).
    func trim() {
        // The stage is never synced as it fills, so after a machine crash its
        // file may hold any earlier fill the kernel wrote back. None of those
        // records may belong to a segment deleted here (its unfinished
        // intents would come back as `unknown` rows): before the first
        // deletion the stage is synced as it stands, holding only records of
        // the current segment, and before the current segment goes it is
        // emptied and synced again.
        var stageSynced = false
        for url in files.segments() {
            guard let number = files.number(of: url) else { continue }
            shared.condition.lock()
            guard shared.state.ledger.isSettled(number) else {
                shared.condition.unlock()
                return
            }
            let current = files.currentNumber == number
            if current { stage?.reset() }
            let unsynced = (!stageSynced || current) ? stage : nil
            shared.condition.unlock()
            if let unsynced {
                // Outside the lock: it waits for the disk.
                unsynced.syncToDisk()
                stageSynced = true
            }
            // The check and the deletion under one lock: with `.interval` a
            // sending thread may append to the current segment at any time,
            // and a record must never land in a segment being deleted (the
            // next append after the deletion starts a new one).
            shared.condition.lock()
            defer { shared.condition.unlock() }
            // Settled still, and nothing staged since the stage was emptied and synced.
            guard shared.state.ledger.isSettled(number), !(current && (stage?.used ?? 0) > 0) else { return }
            do {
                try files.remove(url)
                // Unmapped until the next segment's first record.
                if current { stage = nil }
                shared.state.ledger.forget(number)
            } catch {
                logger.error("could not delete a settled audit journal segment", metadata: ["segment": "\(url.lastPathComponent)", "error": "\(error)"])
                return
            }
        }
    }
}
