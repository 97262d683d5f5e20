/// The send's fields of an intent's line, already COPY text, kept until its
/// completion: a finished send's row holds the same values in the same
/// columns (``AuditRowLayout/copyRuns``), so its line copies them instead
/// of encoding every one of the send's strings a second time (each one
/// retained, scanned for escapes and appended: issue 26, the audit's share).
struct AuditIntentFields: Sendable {
    /// Each run's length (4 bytes, little-endian), then the runs' bytes: one buffer.
    private var bytes: [UInt8]
    /// How many runs `bytes` holds.
    let runs: Int

    /// The fields of `runs` (byte ranges of `line`, one per copy run, each
    /// from its first field's first byte to its last field's last byte).
    init(line: UnsafeBufferPointer<UInt8>, runs ranges: UnsafeBufferPointer<Range<Int>>) {
        var total = 4 * ranges.count
        for range in ranges { total += range.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(total)
        for range in ranges {
            let length = UInt32(range.count)
            for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
        }
        for range in ranges { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: line[range])) }
        self.bytes = bytes
        runs = ranges.count
    }

    /// Calls `body` with the bytes of run `index` (escaped COPY text, tabs between its fields).
    func withRun<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        bytes.withUnsafeBufferPointer { bytes in
            var start = 4 * runs
            var position = 0
            while true {
                let length = Int(bytes[4 * position]) | Int(bytes[4 * position + 1]) << 8
                    | Int(bytes[4 * position + 2]) << 16 | Int(bytes[4 * position + 3]) << 24
                if position == index { return body(UnsafeBufferPointer(rebasing: bytes[start..<(start + length)])) }
                start += length
                position += 1
            }
        }
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
