import Relay

/// Journal records encoded straight from the sends and events, as values
/// (``JournalSendCodec``): no COPY text on the sending task.
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

    /// Appends an intent's record to `bytes`: the send's values
    /// (``JournalSendCodec``), not its `unknown` row's line, which only
    /// recovery formats, for a send whose completion never came.
    /// `attempts` above 1 is a retry's record.
    func encodeIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1, into bytes: inout [UInt8]) -> AuditWriter.JournalItem {
        let key = AuditJournalKey(apnsID: send.apnsID.value, startedAt: startedAt)
        Self.add(
            JournalSendCodec.intentRecord(
                send, startedAt: startedAt, attempts: attempts, relayInstance: configuration.relayInstance, key: key,
                format: configuration.rowLayout.format),
            to: &bytes)
        return AuditWriter.JournalItem(key: key, intent: true)
    }

    /// Appends a completion's record (and its dead-token upsert's) to
    /// `bytes`: the finished send's values and its row's id
    /// (``JournalSendCodec``). The row's line is formatted by the writer
    /// thread when it takes the row (``AuditWriter/Row/formatted(layout:relayInstance:)``).
    func encodeCompletion(_ event: SendEvent, into bytes: inout [UInt8]) -> AuditWriter.JournalItem {
        let format = configuration.rowLayout.format
        let key = AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt)
        let id = AuditRowID.nextWords()
        // Asked first: the failable init copied the whole event (a retain of
        // each of its strings) only to find no dead token, on every send.
        let dead = event.deadToken == nil ? nil : DeadTokenRecord(event: event)?.copyLine()
        Self.add(
            JournalSendCodec.completionRecord(event, id: id, relayInstance: configuration.relayInstance, key: key, format: format),
            to: &bytes)
        if let dead { AuditSpool.encode(AuditSpool.Record(kind: .deadToken, format: format, line: dead), into: &bytes) }
        return AuditWriter.JournalItem(key: key, intent: false, completion: AuditWriter.PendingCompletion(event: event, id: id), dead: dead)
    }

    /// Adds a whole record to `bytes`: the record becomes the buffer when
    /// nothing made room in it yet (a single send's append, most of them),
    /// so the record's bytes are not copied once more on the sending task.
    private static func add(_ record: [UInt8], to bytes: inout [UInt8]) {
        if bytes.capacity == 0 { bytes = record } else { bytes.append(contentsOf: record) }
    }

    /// `.interval`: encodes a send's intent (`attempts` above 1: a retry's)
    /// and appends it on the calling thread (``append(encoded:items:intents:)``).
    /// Encoded straight from the caller's descriptor, not wrapped in a
    /// ``AuditWriter/JournalEntry`` first: that copy retained and released
    /// each of its strings once more per record.
    @discardableResult
    func appendIntent(_ send: SendDescriptor, startedAt: UInt64, attempts: Int = 1) -> Bool {
        var bytes: [UInt8] = []
        let item = encodeIntent(send, startedAt: startedAt, attempts: attempts, into: &bytes)
        return append(encoded: bytes, items: CollectionOfOne(item), intents: true)
    }

    /// ``appendIntent(_:startedAt:attempts:)`` for a finished send's record.
    func appendCompletion(_ event: SendEvent) {
        var bytes: [UInt8] = []
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
        bytes.reserveCapacity(count * 640)
        var items: [AuditWriter.JournalItem] = []
        items.reserveCapacity(count)
        for index in 0..<count { items.append(encode(index, &bytes)) }
        return append(encoded: bytes, items: items, intents: intents)
    }
}
