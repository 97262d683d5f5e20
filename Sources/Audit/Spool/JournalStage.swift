import Foundation

/// The journal's staging file (`audit.journal_sync: interval`): the sending
/// threads copy each send's records into a shared mapping of a file in the
/// spool directory, with no system call, and the journal thread writes what
/// is staged to the current segment with one `write(2)` before each
/// `fdatasync` (``AuditJournal``).
///
/// Why: the two `write(2)`s a send made to the segment itself were about
/// 10 µs of its CPU time on a two-core machine, two thirds of the audit's
/// share, though one costs under 1 µs in a program alone (issue 26).
///
/// What it keeps: a record copied here is in the page cache once the copy
/// returns, as a written one was, so a relay killed at any point leaves it
/// on disk; the next start moves it into a segment before anything else
/// (``moveLeftover(in:to:)``). The file's blocks are written with zeros when it is
/// made, so a copy into the mapping never needs the disk to find room (no
/// `SIGBUS` on a full disk). Unlike the mapped segments tried before it,
/// the mapping is never synced: nothing write-protects its pages every
/// interval, so a copy takes no page fault; the segment it is written to
/// is what `fdatasync` makes durable. A machine crash loses what the last
/// interval had not synced, as before; the stage is synced only before
/// trimming, so that no record of a deleted segment comes back from it.
///
/// Layout: the records as a segment holds them, from the file's start,
/// then zeros: the file reads as a journal segment, and the next start
/// renames a stage a killed run left into one (``moveLeftover(in:to:)``). A
/// copy cut short by a kill fails its record's checksum, so a reader stops
/// there; emptying the stage zeroes what it held, so no record of an
/// earlier fill is read after a later one. Used under the audit writer's
/// shared lock.
final class JournalStage: @unchecked Sendable {
    static let fileName = "journal.stage"
    /// 1 MiB: about 100 ms of records at 10,000 sends a second, ten sync intervals.
    static let defaultSize = 1 << 20

    let path: String
    let size: Int
    private let base: UnsafeMutableRawPointer
    /// The staged records' bytes, from the start.
    private(set) var used: Int

    /// Maps the stage in `directory`, made (zero-filled) if there is none;
    /// throws what failed. What a previous run left in it is ``used``.
    init(directory: String, size: Int = JournalStage.defaultSize) throws {
        let path = Self.path(in: directory)
        let (base, failure) = Self.mapFile(path, size: size)
        guard let base else {
            throw SegmentFileError(failure?.0 ?? "mmap", path: path, code: failure?.1 ?? 0)
        }
        self.path = path
        self.size = size
        self.base = base
        // Only the bytes up to where the records' lengths end are copied and
        // checked: the rest of a stage is zeros, and copying all of it (1 MiB)
        // each time the stage is mapped again cost millions of instructions.
        let raw = UnsafeRawBufferPointer(start: base, count: size)
        var end = 0
        while size - end >= 9 {
            let length = Int(raw.loadUnaligned(fromByteOffset: end, as: UInt32.self).littleEndian)
            guard length >= 1, length <= size - end - 8 else { break }
            end += 8 + length
        }
        let contents = AuditSpool.parse([UInt8](UnsafeRawBufferPointer(rebasing: raw[..<end])))
        used = end - contents.tornBytes
    }

    deinit { Self.unmap(base, size: size) }

    static func path(in directory: String) -> String {
        (directory as NSString).appendingPathComponent(fileName)
    }

    func hasRoom(_ count: Int) -> Bool { used + count <= size }

    /// Copies encoded records after those staged.
    func append(_ bytes: [UInt8]) {
        precondition(hasRoom(bytes.count), "no room in the journal stage")
        bytes.withUnsafeBytes { source in
            guard let address = source.baseAddress else { return }
            (base + used).copyMemory(from: address, byteCount: source.count)
        }
        used += bytes.count
    }

    /// The staged records' bytes, copied.
    func staged() -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(start: base, count: used))
    }

    /// Makes the stage's bytes as they stand durable (the journal thread,
    /// before trimming: see ``AuditJournal/trim()``). The pages it writes are
    /// write-protected until next copied into, a fault each, once per trim.
    func syncToDisk() { Self.sync(base, size: size) }

    /// Forgets what is staged (written to a segment, or settled): zeroed,
    /// so that a reader never takes it for records of the next fill.
    func reset() {
        (base).initializeMemory(as: UInt8.self, repeating: 0, count: used)
        used = 0
    }

    /// What a previous run left staged in `directory`, renamed to `segment`
    /// (a journal segment's path, numbered after every other): its records
    /// are the newest, and a rename needs no room on a full disk. Returns
    /// whether there was any. The caller maps a fresh stage afterwards.
    static func moveLeftover(in directory: String, to segment: String) throws -> Bool {
        let path = path(in: directory)
        guard FileManager.default.fileExists(atPath: path) else { return false }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard !AuditSpool.parse(bytes).records.isEmpty else { return false }
        try FileManager.default.moveItem(atPath: path, toPath: segment)
        SegmentFile.syncDirectory(directory)
        return true
    }

    /// The records staged in `directory`'s stage file (none without one),
    /// as a reader on another descriptor sees them: what a killed relay leaves.
    static func records(inDirectory directory: String) throws -> [AuditSpool.Record] {
        let path = path(in: directory)
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        return AuditSpool.parse([UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))).records
    }
}
