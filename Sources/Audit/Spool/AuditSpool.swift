import Foundation
internal import Zlib

/// Append-only segment files that hold audit rows while Postgres is away.
///
/// Each record is `[length: UInt32 LE][crc32: UInt32 LE][format: UInt8][kind: UInt8][COPY line]`,
/// length (and the checksum) covering format, kind and line. The journal's
/// send records (``Kind/sendIntent``, ``Kind/sendCompletion``) hold
/// `key TAB` and the send's values (``JournalSendCodec``) in place of the line. The format is
/// the row layout the line was written in (``AuditRowFormat``), so a record
/// spooled before a migration added a column is still copied with the
/// columns it holds. Records written before records carried a format are
/// `[kind][COPY line]`: a kind is an ASCII letter and a format byte is below
/// 0x20, so the first byte tells them apart, and such a record is format 1.
/// A batch is written with one `write` and
/// made durable with `fdatasync` before the writer counts it as spooled. A crash
/// mid-write leaves at most a torn last record, which replay detects by its
/// length or checksum and skips with a warning.
///
/// The journal may also append without syncing (`audit.journal_sync:
/// interval`): then a retired segment stays open until ``takeSyncWork()``
/// hands it to the journal thread, which syncs and closes it, so no
/// descriptor is closed (and its number reused) under a sync in flight.
final class AuditSpool: @unchecked Sendable {
    // The spool is used only from the audit writer's thread (and before it
    // starts). The journal: by the journal thread (`always`), or by the
    // sending threads and the journal thread under the writer's
    // `condition` (`interval`); `read` touches no shared state.

    /// What a spooled record holds.
    enum Kind: UInt8 {
        case audit = 65  // "A"
        case deadToken = 68  // "D"
        /// Journal only: a send about to make its first attempt; the line is
        /// `key TAB` and the row it becomes if no completion follows (outcome `unknown`).
        case intent = 73  // "I"
        /// Journal only: a finished send; `key TAB` and its row.
        case completion = 67  // "C"
        /// Journal only: ``intent``'s record as values, not as a line:
        /// `key TAB` and the send (``JournalSendCodec``). What this build
        /// writes; the two above are read from older journals.
        case sendIntent = 105  // "i"
        /// Journal only: ``completion``'s record as values: `key TAB`, the
        /// row's id and the finished send (``JournalSendCodec``).
        case sendCompletion = 99  // "c"
    }

    struct Record: Equatable {
        var kind: Kind
        /// The layout of `line` (of the row inside it, for journal records).
        var format: AuditRowFormat
        var line: [UInt8]

        init(kind: Kind, format: AuditRowFormat = .current, line: [UInt8]) {
            self.kind = kind
            self.format = format
            self.line = line
        }
    }

    /// Format bytes stay below this: the first byte of a record without one is its kind, a letter.
    static let formatLimit: UInt8 = 0x20

    /// A segment's records, and how many bytes at its end were unreadable.
    struct SegmentContents {
        var records: [Record]
        var tornBytes: Int
        /// Every unreadable byte is zero: the unused rest of a journal
        /// stage (``JournalStage``), not a record cut short.
        var tailIsZeros = false
    }

    let directory: URL
    let segmentLimit: Int
    /// File names are `prefix` + 16 digits + `suffix`: `segment-….spool` for
    /// the spool, `journal-….journal` for the send journal.
    let prefix: String
    let suffix: String
    private var current: (url: URL, file: SegmentFile, size: Int, number: Int)?
    private var lastNumber = 0
    /// Appends without a sync since the last ``takeSyncWork()``, and whether
    /// one of them went to the current segment.
    private var currentUnsynced = false
    /// Segments left behind by a rotation without syncing: open until the
    /// journal thread has synced and closed them.
    private var retired: [SegmentFile] = []
    /// A segment was created since the directory was last synced.
    private var directoryUnsynced = false

    init(directory: String, segmentLimit: Int = 16 << 20, prefix: String = "segment-", suffix: String = ".spool") throws {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        self.segmentLimit = segmentLimit
        self.prefix = prefix
        self.suffix = suffix
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    }

    /// Segment files, oldest first.
    func segments() -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }.sorted()
            .map { directory.appendingPathComponent($0) }
    }

    /// The number in a segment's file name.
    func number(of url: URL) -> Int? {
        Int(url.lastPathComponent.dropFirst(prefix.count).dropLast(suffix.count))
    }

    /// New segments get numbers above `number` (files another thread may still delete).
    func reserveNumbers(through number: Int) {
        lastNumber = max(lastNumber, number)
    }

    /// The number of the segment appends go to, if one is open.
    var currentNumber: Int? { current?.number }

    /// Bytes held across all segments.
    func totalBytes() -> Int {
        segments().reduce(0) { total, url in
            total + ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0)
        }
    }

    /// Appends `records` durably (write + fdatasync) to the current segment and
    /// returns that segment's number.
    @discardableResult
    func append(_ records: [Record]) throws -> Int {
        var bytes: [UInt8] = []
        for record in records { Self.encode(record, into: &bytes) }
        return try append(encoded: bytes)
    }

    /// Appends already encoded records; returns the segment's number.
    /// `sync` false: written (in the page cache, safe from a crash of the
    /// process) but not synced; ``takeSyncWork()`` names what to sync.
    @discardableResult
    func append(encoded bytes: [UInt8], sync: Bool = true) throws -> Int {
        if current == nil || (current!.size > 0 && current!.size + bytes.count > segmentLimit) { try rotate(sync: sync) }
        guard var segment = current else { throw SegmentFileError("append", path: directory.path, code: 0) }
        guard !bytes.isEmpty else { return segment.number }
        do {
            try segment.file.append(bytes)
            if sync { try segment.file.syncData() } else { currentUnsynced = true }
        } catch {
            // A write that failed part way (ENOSPC) must not leave a broken
            // record mid-file: a reader stops at the first bad checksum, so
            // every record appended after it would be lost. Cut the file back
            // to its last whole record; if even that fails, seal the segment
            // so the next append starts a new one and the broken record is
            // that file's torn tail.
            do {
                try segment.file.truncate(to: segment.size)
            } catch {
                sealCurrent()
            }
            throw error
        }
        segment.size += bytes.count
        current = segment
        return segment.number
    }

    /// Closes the current segment so replay may read and delete it.
    /// Not with appends unsynced in it (see ``takeSyncWork()``).
    func sealCurrent() {
        if let segment = current { segment.file.close() }
        current = nil
        currentUnsynced = false
    }

    /// What `append(encoded:sync: false)` left unsynced, handed over and
    /// forgotten: the files to `fdatasync` (the caller then closes the
    /// retired ones) and whether the directory needs a sync for new names.
    /// An append after this call is in the next hand-over.
    func takeSyncWork() -> (current: SegmentFile?, retired: [SegmentFile], directory: Bool) {
        let work = (currentUnsynced ? current?.file : nil, retired, directoryUnsynced)
        currentUnsynced = false
        retired = []
        directoryUnsynced = false
        return work
    }

    /// Reads a segment; a torn tail is reported, not thrown.
    func read(_ url: URL) throws -> SegmentContents {
        Self.parse([UInt8](try Data(contentsOf: url)))
    }

    /// The records in a segment's bytes, and how many bytes at its end were unreadable.
    static func parse(_ bytes: [UInt8]) -> SegmentContents {
        var records: [Record] = []
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= 9 else { break }
            let length = Int(Self.uint32(bytes, at: offset))
            let checksum = Self.uint32(bytes, at: offset + 4)
            guard length >= 1, offset + 8 + length <= bytes.count else { break }
            let body = bytes[(offset + 8)..<(offset + 8 + length)]
            guard Self.crc(body) == checksum, let record = Self.decode(body) else { break }
            records.append(record)
            offset += 8 + length
        }
        return SegmentContents(records: records, tornBytes: bytes.count - offset, tailIsZeros: !bytes[offset...].contains { $0 != 0 })
    }

    /// A path for a segment numbered after every other, its number taken
    /// (the file is not made): for a journal stage a previous run left.
    func reserveNextSegmentPath() -> String {
        let next = max(lastNumber, segments().last.flatMap { number(of: $0) } ?? 0) + 1
        lastNumber = next
        return directory.appendingPathComponent(prefix + String(format: "%016d", next) + suffix).path
    }

    /// The current segment's number, the first one made if there is none
    /// (nothing written): where records staged now are written next
    /// (``JournalStage``), or a newer segment, never an older one.
    func currentSegmentNumber() throws -> Int {
        if current == nil { try rotate(sync: false) }
        guard let current else { throw SegmentFileError("append", path: directory.path, code: 0) }
        return current.number
    }

    func remove(_ url: URL) throws {
        if current?.url == url { sealCurrent() }
        try FileManager.default.removeItem(at: url)
    }

    private func rotate(sync: Bool) throws {
        if !sync, let segment = current {
            // Synced and closed by the journal thread, never here: it may be
            // syncing this very descriptor right now.
            retired.append(segment.file)
            current = nil
            currentUnsynced = false
        }
        sealCurrent()
        // Numbers only grow within a run, even after every segment was removed,
        // so a number never names two files (the journal's ledger keys on it).
        let next = max(lastNumber, segments().last.flatMap { number(of: $0) } ?? 0) + 1
        let name = prefix + String(format: "%016d", next) + suffix
        let url = directory.appendingPathComponent(name)
        current = (url, try SegmentFile.create(url.path), 0, next)
        // Taken once the file exists: a create that failed (a full disk, no
        // descriptor) named no file, and the retry uses the same number.
        lastNumber = next
        // The new name must survive a power cut too: now, or with the next
        // sync of the journal thread.
        if sync { SegmentFile.syncDirectory(directory.path) } else { directoryUnsynced = true }
    }

    static func encode(_ record: Record, into bytes: inout [UInt8]) {
        encode(kind: record.kind, format: record.format, into: &bytes) { $0.append(contentsOf: record.line) }
    }

    /// Appends one record whose line `writeLine` appends in place: no
    /// buffer of its own for the line or the body (the length and checksum
    /// are filled in after it).
    static func encode(kind: Kind, format: AuditRowFormat, into bytes: inout [UInt8], writeLine: (inout [UInt8]) -> Void) {
        let start = startRecord(kind: kind, format: format, into: &bytes)
        writeLine(&bytes)
        finishRecord(startingAt: start, in: &bytes)
    }

    /// Appends a record's head (its length and checksum to come, its format
    /// and kind) and returns where the record starts: the caller appends the
    /// line, then calls ``finishRecord(startingAt:in:)``. For the journal's
    /// own records, whose lines a closure would capture the send to write
    /// (a copy of its descriptor, a retain of each of its strings).
    static func startRecord(kind: Kind, format: AuditRowFormat, into bytes: inout [UInt8]) -> Int {
        let start = bytes.count
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: recordHeadSize) { head in
            head.initialize(repeating: 0)
            head[8] = formatByte(format)
            head[9] = kind.rawValue
            bytes.append(contentsOf: UnsafeBufferPointer(head))
        }
        return start
    }

    /// Bytes of a record's head: its length and checksum (4 each, little
    /// endian), its format and its kind.
    static let recordHeadSize = 10

    /// Frames a record written in place: `record` is the whole record, its
    /// body (line) already after its first ``recordHeadSize`` bytes; fills
    /// in the head as ``startRecord(kind:format:into:)`` and
    /// ``finishRecord(startingAt:in:)`` do. For a writer that sizes the
    /// record first and writes it into one buffer (``JournalSendCodec``).
    static func frameRecord(kind: Kind, format: AuditRowFormat, in record: UnsafeMutableBufferPointer<UInt8>) {
        precondition(record.count >= recordHeadSize, "a record is at least its head")
        record[8] = formatByte(format)
        record[9] = kind.rawValue
        fillLengthAndChecksum(of: record)
    }

    /// Fills in the length and checksum of the record that starts at `start`
    /// and runs to the end of `bytes`.
    static func finishRecord(startingAt start: Int, in bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBufferPointer { buffer in
            fillLengthAndChecksum(of: UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// The format's byte in a record's head: below ``formatLimit``, so it
    /// never reads as a kind (a record written before records carried one).
    private static func formatByte(_ format: AuditRowFormat) -> UInt8 {
        precondition(format.rawValue > 0 && format.rawValue < formatLimit, "a format byte must not read as a kind")
        return format.rawValue
    }

    /// Writes a whole record's first 8 bytes: the length of what follows
    /// them, and its CRC-32, each 4 bytes little endian.
    private static func fillLengthAndChecksum(of record: UnsafeMutableBufferPointer<UInt8>) {
        let length = UInt32(record.count - 8)
        let checksum = crc(UnsafeBufferPointer(rebasing: record[(record.startIndex + 8)...]))
        for index in 0..<4 {
            record[record.startIndex + index] = UInt8(truncatingIfNeeded: length >> UInt32(index * 8))
            record[record.startIndex + 4 + index] = UInt8(truncatingIfNeeded: checksum >> UInt32(index * 8))
        }
    }

    /// A record's body, with its format byte or (written before records
    /// carried one) without: nil if it is neither.
    static func decode(_ body: ArraySlice<UInt8>) -> Record? {
        guard let first = body.first else { return nil }
        if first >= formatLimit {
            guard let kind = Kind(rawValue: first) else { return nil }
            return Record(kind: kind, format: .v1, line: Array(body.dropFirst()))
        }
        guard first > 0, body.count >= 2, let kind = Kind(rawValue: body[body.startIndex + 1]) else { return nil }
        return Record(kind: kind, format: AuditRowFormat(rawValue: first), line: Array(body.dropFirst(2)))
    }

    static func crc(_ bytes: some Collection<UInt8>) -> UInt32 { Zlib.crc32(bytes) }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { value, index in value | UInt32(bytes[offset + index]) << UInt32(index * 8) }
    }
}
