import Relay

/// Journal records encoded straight from the sends and events: each line
/// built once, in place.
extension AuditJournal {
    /// Appends the entry's record(s) to `bytes`, each line built once,
    /// straight into the record (a barrier has none: nil).
    func encode(_ entry: AuditWriter.JournalEntry, into bytes: inout [UInt8]) -> AuditWriter.JournalItem? {
        switch entry {
        case .intent(let send, let startedAt): return encodeIntent(send, startedAt: startedAt, into: &bytes)
        case .retry(let send, let startedAt, let attempt): return encodeIntent(send, startedAt: startedAt, attempts: attempt, into: &bytes)
        case .completion(let event): return encodeCompletion(event, into: &bytes)
        case .barrier: return nil
        }
    }

    /// Appends an intent's record to `bytes`, its line built in place.
    /// `attempts` above 1 is a retry's record (rare: built through an ``AuditRecord``).
    func encodeIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1, into bytes: inout [UInt8]) -> AuditWriter.JournalItem {
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
        return AuditWriter.JournalItem(key: key, intent: true, fields: fields)
    }

    /// Appends a completion's record (and its dead-token upsert's) to `bytes`.
    func encodeCompletion(_ event: SendEvent, into bytes: inout [UInt8]) -> AuditWriter.JournalItem {
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
        return AuditWriter.JournalItem(key: key, intent: false, audit: audit, dead: dead)
    }

    /// The fields the intent of the send `key` names left in the ledger for
    /// its completion (nil when the ledger holds no intent of it: a layout
    /// without one, a send whose intent was not journaled).
    private func intentFields(_ key: AuditJournalKey) -> AuditIntentFields? {
        shared.withState { $0.ledger.openIntents[key]?.fields }
    }

    /// `.interval`: encodes a send's intent (`attempts` above 1: a retry's)
    /// and appends it on the calling thread (``append(encoded:items:intents:)``).
    /// Encoded straight from the caller's descriptor, not wrapped in a
    /// ``AuditWriter/JournalEntry`` first: that copy retained and released
    /// each of its strings once more per record.
    @discardableResult
    func appendIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1024)
        var item = encodeIntent(send, startedAt: startedAt, attempts: attempts, into: &bytes)
        // The intent's line stays in this buffer, shared, for its completion.
        item.fields?.record = bytes
        return append(encoded: bytes, items: CollectionOfOne(item), intents: true)
    }

    /// ``appendIntent(_:startedAt:attempts:)`` for a finished send's record.
    func appendCompletion(_ event: SendEvent) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1024)
        let item = encodeCompletion(event, into: &bytes)
        append(encoded: bytes, items: CollectionOfOne(item), intents: false)
    }

    /// `.interval`: encodes `count` records (`encode` the one at an index)
    /// into one buffer and appends them with one `write(2)`. Straight from
    /// the caller's sends and events, as a single send's append is.
    @discardableResult
    func appendTogether(_ count: Int, intents: Bool, _ encode: (Int, inout [UInt8]) -> AuditWriter.JournalItem) -> Bool {
        guard count > 0 else { return true }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 1024)
        var items: [AuditWriter.JournalItem] = []
        items.reserveCapacity(count)
        for index in 0..<count { items.append(encode(index, &bytes)) }
        // The intents' lines stay in this buffer, shared, for their completions.
        for index in items.indices where items[index].fields != nil { items[index].fields!.record = bytes }
        return append(encoded: bytes, items: items, intents: intents)
    }
}
