import Foundation
import Logging

extension AuditWriter {
    /// Starts the journal thread unless it runs. Called with `journalCondition` held.
    func startJournalThreadIfNeeded() {
        guard !journalThreadRunning else { return }
        journalThreadRunning = true
        let thread = Thread { [self] in runJournal() }
        thread.name = "apns-relay-audit-journal"
        thread.start()
    }

    /// The journal thread: take everything pending, write it with one fsync
    /// (group commit), hand completed rows to the writer, resume the sends.
    /// It exits when the writer has stopped and nothing is pending; a late
    /// entry starts it again.
    func runJournal() {
        while true {
            journalCondition.lock()
            while journalPending.isEmpty, !writerExited {
                if !journalCondition.wait(until: Date().addingTimeInterval(1)) { break }
            }
            if journalPending.isEmpty {
                let exiting = writerExited
                journalCondition.unlock()
                trimJournal()
                guard exiting else { continue }
                journalCondition.lock()
                // A late entry arrived during the trim: handle it first.
                guard journalPending.isEmpty else {
                    journalCondition.unlock()
                    continue
                }
                journalThreadRunning = false
                let waiting = journalExitContinuations
                journalExitContinuations = []
                journalCondition.unlock()
                waiting.forEach { $0.resume() }
                return
            }
            let entries = journalPending
            journalPending = []
            journalBusy = true
            journalCondition.unlock()

            // Each entry as the journal key and the row(s) it becomes.
            var encoded: [(intent: Bool, key: String, audit: [UInt8], dead: [UInt8]?)?] = []
            encoded.reserveCapacity(entries.count)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(entries.count * 600)
            let layout = configuration.rowLayout
            for (entry, _) in entries {
                switch entry {
                case .intent(let send, let startedAt):
                    let key = AuditRecord.journalKey(apnsID: send.apnsID.value, startedAt: startedAt)
                    let line = layout.line(AuditRecord(intent: send, startedAt: startedAt, relayInstance: configuration.relayInstance))
                    AuditSpool.encode(AuditSpool.Record(kind: .intent, format: layout.format, line: Self.keyed(key, line)), into: &bytes)
                    encoded.append((true, key, line, nil))
                case .completion(let event):
                    let key = AuditRecord.journalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt)
                    let audit = layout.line(AuditRecord(event: event, relayInstance: configuration.relayInstance))
                    let dead = DeadTokenRecord(event: event)?.copyLine()
                    AuditSpool.encode(AuditSpool.Record(kind: .completion, format: layout.format, line: Self.keyed(key, audit)), into: &bytes)
                    if let dead { AuditSpool.encode(AuditSpool.Record(kind: .deadToken, format: layout.format, line: dead), into: &bytes) }
                    encoded.append((false, key, audit, dead))
                case .barrier:
                    encoded.append(nil)
                }
            }
            var segment: Int?
            do {
                // A group of barriers only has nothing to write (and must not start a segment).
                if !bytes.isEmpty { segment = try journal.append(encoded: bytes) }
            } catch {
                // The disk refused: the rows still go to the writer (Postgres
                // or the spool); only a crash before then would lose them.
                logger.critical("audit journal write failed; rows are not crash-safe until written", metadata: ["error": "\(error)"])
            }

            condition.lock()
            counters.journalCommits += 1
            if let segment { journalCurrentSegment = segment }
            for case let entry? in encoded {
                if entry.intent {
                    if let segment {
                        openIntents[entry.key] = segment
                        journalOutstanding[segment, default: 0] += 1
                    }
                    continue
                }
                queue.append(Row(kind: .audit, format: configuration.rowLayout.format, line: entry.audit, journalSegment: segment))
                if let dead = entry.dead {
                    queue.append(Row(kind: .deadToken, format: configuration.rowLayout.format, line: dead, journalSegment: segment))
                }
                if let segment { journalOutstanding[segment, default: 0] += entry.dead == nil ? 1 : 2 }
                // The intent is answered; its segment may go once this
                // completion's own segment does (deletion is oldest first).
                if let intentSegment = openIntents.removeValue(forKey: entry.key) {
                    journalOutstanding[intentSegment, default: 0] -= 1
                }
            }
            if queue.count - queueHead >= configuration.batchSize || stopping { condition.broadcast() }
            let commits = counters.journalCommits
            condition.unlock()
            // Only now: the writer exits once the journal is idle and its
            // queue empty, so the rows must be queued before this flips.
            journalCondition.lock()
            journalBusy = false
            journalCondition.unlock()
            for case (_, let continuation?) in entries { continuation.resume() }
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
        for row in rows {
            if let segment = row.journalSegment { journalOutstanding[segment, default: 0] -= 1 }
        }
    }

    /// Deletes journal segments, oldest first, while every row in them is
    /// settled. Oldest first keeps an intent's segment at least as long as
    /// its completion's, so recovery never finds an intent alone whose
    /// send was answered. The current segment goes too once it is settled
    /// (the next append starts a new one).
    func trimJournal() {
        for url in journal.segments() {
            guard let number = journal.number(of: url) else { continue }
            condition.lock()
            let outstanding = journalOutstanding[number, default: 0]
            condition.unlock()
            // Only the journal thread appends, and it is here: deleting even
            // the current segment is safe (the next append starts a new one).
            guard outstanding <= 0 else { return }
            do {
                try journal.remove(url)
                condition.lock()
                journalOutstanding[number] = nil
                condition.unlock()
            } catch {
                logger.error("could not delete a settled audit journal segment", metadata: ["segment": "\(url.lastPathComponent)", "error": "\(error)"])
                return
            }
        }
    }

    static func keyed(_ key: String, _ line: [UInt8]) -> [UInt8] {
        Array(key.utf8) + [0x09] + line
    }

    /// Moves what a previous run left in the journal to the spool: every
    /// completion as its row, every intent without a completion as an
    /// `unknown` row, every dead-token upsert. Idempotent: recovered twice,
    /// the same rows carry the same keys and replay lands them once.
    ///
    /// Runs on the writer thread before its first batch; reads only the
    /// given (leftover) segments and deletes them by path, never touching
    /// the journal's current segment, which the journal thread owns.
    func recoverJournal(_ segments: [URL]) throws -> (completed: Int, unknown: Int) {
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
                        intents[key] = (record.format, line)
                        intentOrder.append(key)
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
        if !records.isEmpty {
            try spool.append(records)
            spool.sealCurrent()
        }
        for url in segments { try FileManager.default.removeItem(at: url) }
        logger.notice(
            "recovered the audit journal of a relay that stopped without flushing it",
            metadata: ["answered_rows": "\(completed)", "unknown_rows": "\(unknown)", "segments": "\(segments.count)"])
        return (completed, unknown)
    }
}
