import Foundation
import Logging
import Relay
import RelayBasics

extension AuditWriter {
    /// Starts the journal thread unless it runs. Called with `journalCondition` held.
    func startJournalThreadIfNeeded() {
        guard !journalThreadRunning else { return }
        journalThreadRunning = true
        let thread = Thread { [self] in
            // Named from inside, in 15 bytes at most, as the writer's.
            Thread.current.name = "relay-journal"
            if configuration.journalSync == .interval { runJournalSyncs() } else { runJournal() }
        }
        thread.start()
    }

    /// A journal record as the writer's ledger needs it: the key tying an
    /// intent to its completion, and a completion's row(s) for the queue.
    struct JournalItem {
        var key: AuditJournalKey
        var intent: Bool
        var audit: [UInt8] = []
        var dead: [UInt8]?
        /// An intent's: the send's fields of its line, for its completion's.
        var fields: AuditIntentFields?
    }

    /// Appends the entry's record(s) to `bytes`, each line built once,
    /// straight into the record (a barrier has none: nil).
    func encodeJournal(_ entry: JournalEntry, into bytes: inout [UInt8]) -> JournalItem? {
        switch entry {
        case .intent(let send, let startedAt): return encodeIntent(send, startedAt: startedAt, into: &bytes)
        case .retry(let send, let startedAt, let attempt): return encodeIntent(send, startedAt: startedAt, attempts: attempt, into: &bytes)
        case .completion(let event): return encodeCompletion(event, into: &bytes)
        case .barrier: return nil
        }
    }

    /// Appends an intent's record to `bytes`, its line built in place.
    /// `attempts` above 1 is a retry's record (rare: built through an ``AuditRecord``).
    func encodeIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1, into bytes: inout [UInt8]) -> JournalItem {
        let layout = configuration.rowLayout
        let key = AuditJournalKey(apnsID: send.apnsID.value, startedAt: startedAt)
        let relayInstance = configuration.relayInstance
        var fields: AuditIntentFields?
        // The line written in place, not by a closure (which copied the send).
        let start = AuditSpool.startRecord(kind: .intent, format: layout.format, into: &bytes)
        // The key straight into the record, and the row id's hashes
        // taken from it there: no array of its own for the key's text.
        let keyStart = bytes.count
        key.append(to: &bytes)
        let keyEnd = bytes.count
        let derivedID = bytes.withUnsafeBufferPointer { AuditRecord.derivedIDWords(of: UnsafeBufferPointer(rebasing: $0[keyStart...])) }
        bytes.append(0x09)
        if attempts > 1 {
            layout.appendLine(AuditRecord(intent: send, startedAt: startedAt, relayInstance: relayInstance, attempts: attempts), to: &bytes)
        } else {
            layout.appendIntentLine(
                send, startedAt: startedAt, derivedID: derivedID, relayInstance: relayInstance, to: &bytes, fields: &fields)
            // The completion's record starts with the same key.
            fields?.key = keyStart..<keyEnd
        }
        AuditSpool.finishRecord(startingAt: start, in: &bytes)
        return JournalItem(key: key, intent: true, fields: fields)
    }

    /// Appends a completion's record (and its dead-token upsert's) to `bytes`.
    func encodeCompletion(_ event: SendEvent, into bytes: inout [UInt8]) -> JournalItem {
        let layout = configuration.rowLayout
        let key = AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt)
        // The row goes to the writer's queue too: built once, straight
        // from the event (no AuditRecord), copied once into the record.
        var audit: [UInt8] = []
        audit.reserveCapacity(512)
        let intent = intentFields(key)
        layout.appendCompletionLine(event, relayInstance: configuration.relayInstance, intent: intent, to: &audit)
        // Asked first: the failable init copied the whole event (a retain of
        // each of its strings) only to find no dead token, on every send.
        let dead = event.deadToken == nil ? nil : DeadTokenRecord(event: event)?.copyLine()
        let start = AuditSpool.startRecord(kind: .completion, format: layout.format, into: &bytes)
        // The key's text as its intent's record holds it (the same
        // apns-id and start: the ledger matched them), not formatted again.
        if let intent, intent.isComplete, !intent.key.isEmpty {
            intent.withKey { bytes.append(contentsOf: $0) }
        } else {
            key.append(to: &bytes)
        }
        bytes.append(0x09)
        bytes.append(contentsOf: audit)
        AuditSpool.finishRecord(startingAt: start, in: &bytes)
        if let dead { AuditSpool.encode(AuditSpool.Record(kind: .deadToken, format: layout.format, line: dead), into: &bytes) }
        return JournalItem(key: key, intent: false, audit: audit, dead: dead)
    }

    /// The fields the intent of the send `key` names left in the ledger for
    /// its completion (nil when the ledger holds no intent of it: a layout
    /// without one, a send whose intent was not journaled).
    private func intentFields(_ key: AuditJournalKey) -> AuditIntentFields? {
        condition.lock()
        defer { condition.unlock() }
        return openIntents[key]?.fields
    }

    /// Enters a journaled record in the ledger (an intent's segment; a
    /// completion's rows queued for the writer, its intent answered).
    /// Called with `condition` held.
    func enterInLedger(_ item: JournalItem, segment: Int?) {
        if item.intent {
            if let segment {
                // A retry's record supersedes the send's earlier intent:
                // that one's segment no longer needs to hold it.
                // A retry's record (built without fields) keeps the first one's.
                let fields = item.fields ?? openIntents[item.key]?.fields
                if let earlier = openIntents.updateValue(OpenIntent(segment: segment, fields: fields), forKey: item.key) {
                    journalOutstanding[earlier.segment, default: 0] -= 1
                }
                journalOutstanding[segment, default: 0] += 1
            }
            return
        }
        guard segment != nil else { return enterUndurable(item) }
        let format = configuration.rowLayout.format
        queue.append(Row(kind: .audit, format: format, line: item.audit, journalSegment: segment))
        if let dead = item.dead {
            queue.append(Row(kind: .deadToken, format: format, line: dead, journalSegment: segment))
        }
        // The intent is answered; its segment may go once this
        // completion's own segment does (deletion is oldest first). Mostly
        // both are the current segment: its count then changes once.
        let intentSegment = openIntents.removeValue(forKey: item.key)?.segment
        if let segment {
            let added = item.dead == nil ? 1 : 2
            journalOutstanding[segment, default: 0] += intentSegment == segment ? added - 1 : added
        }
        if let intentSegment, intentSegment != segment {
            journalOutstanding[intentSegment, default: 0] -= 1
        }
    }

    /// Queues a completion's rows the journal refused (see ``Row/undurable``):
    /// held in memory until written or spooled, and held in the ledger by
    /// their intent's segment, so a crash meanwhile still recovers the send
    /// (as outcome `unknown`) rather than nothing. Called with `condition` held.
    private func enterUndurable(_ item: JournalItem) {
        let format = configuration.rowLayout.format
        // The intent's hold on its segment passes to the rows.
        let hold = openIntents.removeValue(forKey: item.key)?.segment
        var rows = [Row(kind: .audit, format: format, line: item.audit, journalSegment: hold, undurable: true)]
        if let dead = item.dead { rows.append(Row(kind: .deadToken, format: format, line: dead, journalSegment: hold, undurable: true)) }
        if let hold { journalOutstanding[hold, default: 0] += rows.count - 1 }
        counters.undurableRows += rows.count
        if finished {
            // No writer left to write them: given up (counted, logged) by
            // the caller once the lock is released.
            lateUndurable.append(contentsOf: rows)
        } else {
            queue.append(contentsOf: rows)
        }
    }

    /// `.interval`: appends the entry's record on the calling thread, with
    /// one `write(2)` and no sync, and enters it in the ledger (a completion's
    /// rows go to the writer's queue), all under `condition`, so the ledger
    /// and the segment the record went to agree, whoever appends and trims.
    ///
    /// The caller may be on Swift's cooperative pool, which must never block.
    /// A small buffered append is acceptable there, as a log line is: the
    /// kernel copies the bytes into the page cache and returns (~3 µs; it
    /// waits for no device), and the lock is held only for that copy and the
    /// ledger. An `fsync` is not: it waits for the disk (milliseconds on a
    /// busy one), so it never runs here; the journal thread issues it every
    /// `journalSyncInterval` (``runJournalSyncs()``). Once `write` returned
    /// the record survives a crash of the process; a crash of the machine
    /// may lose what the next sync had not reached yet.
    ///
    /// The send is encoded straight from the caller's descriptor, not
    /// wrapped in a ``JournalEntry`` first: that copy retained and released
    /// each of its strings once more per record.
    @discardableResult
    func appendIntentToJournal(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1) -> Bool {
        // Not through `appendOne`'s closure, which copied the send's descriptor.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1024)
        var item = encodeIntent(send, startedAt: startedAt, attempts: attempts, into: &bytes)
        // The intent's line stays in this buffer, shared, for its completion.
        item.fields?.record = bytes
        return appendEncodedToJournal(bytes, items: CollectionOfOne(item), intents: true)
    }

    /// ``appendIntentToJournal(_:startedAt:)`` for a finished send's record.
    func appendCompletionToJournal(_ event: SendEvent) {
        appendOne(intent: false) { encodeCompletion(event, into: &$0) }
    }

    /// One record, encoded by `encode`, appended with one `write(2)`.
    @discardableResult
    private func appendOne(intent: Bool, _ encode: (inout [UInt8]) -> JournalItem) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1024)
        var item = encode(&bytes)
        // The intent's line stays in this buffer, shared, for its completion.
        item.fields?.record = bytes
        return appendEncodedToJournal(bytes, items: CollectionOfOne(item), intents: intent)
    }

    /// The journal thread with `.interval`: `fdatasync` what the sending
    /// threads appended, at most once per `journalSyncInterval` and only when
    /// something was appended; trim settled segments. It exits when the
    /// writer has stopped and nothing is unsynced; a late append starts it again.
    func runJournalSyncs() {
        var syncsSinceTrim = 0
        while true {
            journalCondition.lock()
            if !journalWakeRequested, !writerExited {
                journalCondition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(configuration.journalIdleWake))
            }
            journalWakeRequested = false
            let exiting = writerExited
            journalCondition.unlock()

            probeJournalIfFailing()
            let synced = syncJournal()
            condition.lock()
            counters.journalSyncChecks += 1
            let segment = journalCurrentSegment
            condition.unlock()
            if synced {
                syncsSinceTrim += 1
                if syncsSinceTrim >= 64 || segment != lastTrimmedSegment {
                    syncsSinceTrim = 0
                    lastTrimmedSegment = segment
                    trimJournal()
                }
                // One sync per interval: the appends of the next window
                // share it. A machine crash loses at most this window.
                if !exiting { Thread.sleep(forTimeInterval: configuration.journalSyncInterval) }
                continue
            }
            trimJournal()
            // Unless an append since the sync asked for another: take it first.
            if exiting, endJournalThread(unless: { journalWakeRequested }) { return }
        }
    }

    /// Marks the journal thread stopped and resumes `shutdown()`, unless
    /// `more` (read under `journalCondition`) says work arrived: then false.
    private func endJournalThread(unless more: () -> Bool) -> Bool {
        journalCondition.lock()
        guard !more() else {
            journalCondition.unlock()
            return false
        }
        journalThreadRunning = false
        let waiting = journalExitContinuations
        journalExitContinuations = []
        journalCondition.unlock()
        waiting.forEach { $0.resume() }
        return true
    }

    /// `.interval`: takes what is unsynced (under `condition`, so an append
    /// after it waits for the next sync) and `fdatasync`s it outside the lock.
    /// Returns whether there was anything to sync.
    private func syncJournal() -> Bool {
        condition.lock()
        let appends = journalUnsynced
        journalUnsynced = 0
        let work = journal.takeSyncWork()
        condition.unlock()
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
        if work.directory { SegmentFile.syncDirectory(journal.directory.path) }
        // A failed sync: the bytes are still in the page cache (a process
        // crash loses nothing) and the writer brings the rows to Postgres or
        // the spool, but the disk is not taking what it is given: no new
        // sends until a sync (or the probe) succeeds again.
        condition.lock()
        counters.journalSyncs += 1
        let change = noteJournal(sync: true, failure: failure)
        condition.unlock()
        log(change)
        return true
    }

    /// The journal thread with `.always`: take everything pending, write it
    /// with one `fdatasync` (group commit), hand completed rows to the writer,
    /// resume the sends. It exits when the writer has stopped and nothing is
    /// pending; a late entry starts it again.
    func runJournal() {
        while true {
            journalCondition.lock()
            while journalPending.isEmpty, !writerExited {
                if !journalCondition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(1)) { break }
            }
            if journalPending.isEmpty {
                let exiting = writerExited
                journalCondition.unlock()
                probeJournalIfFailing()
                trimJournal()
                // Unless a late entry arrived during the trim: handle it first.
                if exiting, endJournalThread(unless: { !journalPending.isEmpty }) { return }
                continue
            }
            let entries = journalPending
            journalPending = []
            journalBusy = true
            journalCondition.unlock()

            // Intents are refused, nothing written, while the journal is
            // failing or answered sends' rows wait in memory only.
            condition.lock()
            let intentsRefused = !intentsAccepted
            condition.unlock()
            var items: [JournalItem] = []
            items.reserveCapacity(entries.count)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(entries.count * 1024)
            for (entry, _) in entries {
                if intentsRefused, case .intent = entry { continue }
                if let item = encodeJournal(entry, into: &bytes) { items.append(item) }
            }
            // The intents' lines stay in this buffer, shared, for their completions.
            for index in items.indices where items[index].fields != nil { items[index].fields!.record = bytes }
            var segment: Int?
            var synced = false
            var failure: (any Error)?
            do {
                // A group of barriers only has nothing to write (and must not start a segment).
                if !bytes.isEmpty {
                    segment = try journal.append(encoded: bytes)
                    synced = true
                }
            } catch {
                // The disk refused: intents are refused (their sends do not
                // leave); completions' rows still go to the writer, held in
                // memory until written or spooled.
                failure = error
            }

            condition.lock()
            counters.journalCommits += 1
            if synced { counters.journalSyncs += 1 }
            if let segment { journalCurrentSegment = segment }
            for item in items { enterInLedger(item, segment: segment) }
            if queue.count - queueHead >= configuration.batchSize || stopping { condition.broadcast() }
            let commits = counters.journalCommits
            let change = bytes.isEmpty ? nil : noteJournal(sync: false, failure: failure)
            let late = lateUndurable
            lateUndurable = []
            condition.unlock()
            log(change)
            giveUp(late)
            // Only now: the writer exits once the journal is idle and its
            // queue empty, so the rows must be queued before this flips.
            journalCondition.lock()
            journalBusy = false
            journalCondition.unlock()
            for case (let entry, let continuation?) in entries {
                if case .intent = entry {
                    continuation.resume(returning: !intentsRefused && segment != nil)
                } else {
                    continuation.resume(returning: true)
                }
            }
            // Under steady load the idle branch above never runs: trim now
            // and then, and whenever a new segment was started.
            if commits % 256 == 0 || (segment != nil && segment != lastTrimmedSegment) {
                lastTrimmedSegment = segment
                trimJournal()
            }
        }
    }

    /// Settles rows the writer wrote or spooled: their journal segments no
    /// longer need to hold them. Called with `condition` held.
    func settleInJournal(_ rows: some Collection<Row>) {
        // A batch's rows mostly come from one or two segments: one update
        // of the ledger per run of rows of a segment, not one per row.
        var run: (segment: Int, rows: Int)?
        for row in rows {
            if row.undurable { counters.undurableRows -= 1 }
            guard let segment = row.journalSegment else { continue }
            if run?.segment == segment {
                run!.rows += 1
            } else {
                if let run { journalOutstanding[run.segment, default: 0] -= run.rows }
                run = (segment, 1)
            }
        }
        if let run { journalOutstanding[run.segment, default: 0] -= run.rows }
    }

    /// Deletes journal segments, oldest first, while every row in them is
    /// settled. Oldest first keeps an intent's segment at least as long as
    /// its completion's, so recovery never finds an intent alone whose
    /// send was answered. The current segment goes too once it is settled
    /// (the next append starts a new one).
    func trimJournal() {
        for url in journal.segments() {
            guard let number = journal.number(of: url) else { continue }
            // The check and the deletion under one lock: with `.interval` a
            // sending thread may append to the current segment at any time,
            // and a record must never land in a segment being deleted (the
            // next append after the deletion starts a new one).
            condition.lock()
            defer { condition.unlock() }
            guard journalOutstanding[number, default: 0] <= 0 else { return }
            do {
                try journal.remove(url)
                journalOutstanding[number] = nil
            } catch {
                logger.error("could not delete a settled audit journal segment", metadata: ["segment": "\(url.lastPathComponent)", "error": "\(error)"])
                return
            }
        }
    }

    /// `key TAB`, the prefix of an intent's or a completion's line.
    static func appendKey(_ key: String, to line: inout [UInt8]) {
        appendKey(key.utf8, to: &line)
    }

    /// `key TAB`, from the key's text (``AuditJournalKey/bytes``).
    static func appendKey(_ key: some Sequence<UInt8>, to line: inout [UInt8]) {
        line.append(contentsOf: key)
        line.append(0x09)
    }

    static func keyed(_ key: String, _ line: [UInt8]) -> [UInt8] {
        var keyed: [UInt8] = []
        keyed.reserveCapacity(key.utf8.count + 1 + line.count)
        appendKey(key, to: &keyed)
        keyed.append(contentsOf: line)
        return keyed
    }

    /// Moves what a previous run left in the journal to the spool: every
    /// completion as its row, every intent without a completion as an
    /// `unknown` row, every dead-token upsert. Idempotent: recovered twice,
    /// the same rows carry the same keys and replay lands them once.
    ///
    /// Runs on the writer thread before its first batch; reads only the
    /// given (leftover) segments and deletes them by path, never touching
    /// the journal's current segment, which the journal thread owns.
    func recoverJournal(_ segments: [URL], store: ([AuditSpool.Record]) throws -> Void) throws -> (completed: Int, unknown: Int) {
        guard !segments.isEmpty else { return (0, 0) }
        var intents: [String: (format: AuditRowFormat, line: [UInt8])] = [:]
        var intentOrder: [String] = []
        var records: [AuditSpool.Record] = []
        var completed = 0
        for url in segments {
            let contents = try journal.read(url)
            if contents.tornBytes > 0 {
                // Never acknowledged: a crash during its write.
                logger.warning("audit journal segment has a torn tail; skipping it", metadata: ["segment": "\(url.lastPathComponent)", "bytes": "\(contents.tornBytes)"])
            }
            for record in contents.records {
                switch record.kind {
                case .intent, .completion:
                    guard let tab = record.line.firstIndex(of: 0x09) else { continue }
                    let key = String(decoding: record.line[..<tab], as: UTF8.self)
                    let line = Array(record.line[(tab + 1)...])
                    if record.kind == .intent {
                        // A retry's intent comes after the send's first and
                        // replaces it (same key, more attempts).
                        if intents.updateValue((record.format, line), forKey: key) == nil { intentOrder.append(key) }
                    } else {
                        intents[key] = nil
                        records.append(AuditSpool.Record(kind: .audit, format: record.format, line: line))
                        completed += 1
                    }
                case .deadToken, .audit:
                    records.append(AuditSpool.Record(kind: record.kind == .audit ? .audit : .deadToken, format: record.format, line: record.line))
                }
            }
        }
        var unknown = 0
        for key in intentOrder {
            guard let intent = intents.removeValue(forKey: key) else { continue }
            records.append(AuditSpool.Record(kind: .audit, format: intent.format, line: intent.line))
            unknown += 1
        }
        if !records.isEmpty { try store(records) }
        for url in segments { try FileManager.default.removeItem(at: url) }
        logger.notice(
            "recovered the audit journal of a relay that stopped without flushing it",
            metadata: ["answered_rows": "\(completed)", "unknown_rows": "\(unknown)", "segments": "\(segments.count)"])
        return (completed, unknown)
    }
}
