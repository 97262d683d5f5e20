/// The send's fields of an intent's line, already COPY text, kept until its
/// completion: a finished send's row holds the same values in the same
/// columns (``AuditRowLayout/copyRuns``), so its line copies them instead
/// of encoding every one of the send's strings a second time (each one
/// retained, scanned for escapes and appended: issue 26, the audit's share).
///
/// Held as the buffer the intent's record was encoded into, shared rather
/// than copied (the journal drops it after its `write(2)` otherwise), and
/// where the runs lie in it.
struct AuditIntentFields: Sendable {
    /// The buffer holding the intent's line: set once the record (or the
    /// batch of records) is complete; until then, empty, and not used.
    var record: [UInt8] = []
    /// Where each run lies in `record`; at most four.
    private var ranges: (Range<Int>, Range<Int>, Range<Int>, Range<Int>) = (0..<0, 0..<0, 0..<0, 0..<0)
    /// How many runs there are.
    let runs: Int
    /// Where the intent's journal key (``AuditJournalKey/bytes``) lies in
    /// `record`, which the completion's record starts with too (empty: not noted).
    var key: Range<Int> = 0..<0

    /// The byte ranges of the runs (one per copy run, each from its first
    /// field's first byte to its last field's last byte) in the buffer
    /// ``record`` will be; nil for more than four runs (then not kept).
    init?(runs: UnsafeBufferPointer<Range<Int>>) {
        guard runs.count <= 4 else { return nil }
        self.runs = runs.count
        if runs.count > 0 { ranges.0 = runs[0] }
        if runs.count > 1 { ranges.1 = runs[1] }
        if runs.count > 2 { ranges.2 = runs[2] }
        if runs.count > 3 { ranges.3 = runs[3] }
    }

    /// Whether ``record`` holds every run (it was set).
    var isComplete: Bool {
        let end = max(ranges.0.upperBound, ranges.1.upperBound, ranges.2.upperBound, ranges.3.upperBound, key.upperBound)
        return !record.isEmpty && record.count >= end
    }

    /// Calls `body` with the journal key's bytes (empty when not noted).
    func withKey<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        record.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[key])) }
    }

    /// Calls `body` with the bytes of run `index` (escaped COPY text, tabs between its fields).
    func withRun<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let range = switch index {
        case 0: ranges.0
        case 1: ranges.1
        case 2: ranges.2
        default: ranges.3
        }
        return record.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[range])) }
    }
}

extension AuditRowLayout {
    /// Runs of adjacent columns whose intent's row and finished row hold the
    /// same value of the send (or the relay instance), as ranges of column
    /// indices: what a completion copies from its intent's line. Empty when
    /// either plan is missing (a layout a test describes).
    static func copyRuns(intent: [AuditIntentStep]?, completion: [AuditCompletionValue]?) -> [Range<Int>] {
        guard let intent, let completion, intent.count == completion.count else { return [] }
        var runs: [Range<Int>] = []
        var start: Int?
        for index in 0...intent.count {
            let same: Bool
            if index == intent.count {
                same = false
            } else {
                switch (intent[index], completion[index]) {
                case (.value(.send(let a)), .send(let b)): same = a == b
                case (.value(.relayInstance), .relayInstance): same = true
                default: same = false
                }
            }
            if same, start == nil { start = index }
            if !same, let first = start {
                runs.append(first..<index)
                start = nil
            }
        }
        return runs
    }
}
