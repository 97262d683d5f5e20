@testable import Audit
import Foundation
import Testing

/// The `interval` journal's segments are mapped into memory (``MappedSegment``):
/// an append is a copy into the file's pages. What it must keep of the
/// `write(2)` journal: every record reads back, in order; a segment a killed
/// process left (mapped, never cut back) reads back whole and is not taken
/// for torn; a torn record is still reported; a segment closed in order is
/// no larger than its records.
@Suite("Audit journal: mapped segments")
struct AuditMappedJournalTests {
    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "apns-relay-mapped-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func journal(_ path: String, limit: Int) throws -> AuditSpool {
        try AuditSpool(directory: path, segmentLimit: limit, prefix: "journal-", suffix: ".journal", mapped: true)
    }

    /// Record `index`, of a size that varies with it (a few hundred bytes to ~3 KB).
    static func record(_ index: Int) -> AuditSpool.Record {
        let line = "row \(index)\t" + String(repeating: Character(UnicodeScalar(UInt8(97 + index % 26))), count: 200 + (index * 37) % 2800) + "\n"
        return AuditSpool.Record(kind: index % 3 == 0 ? .intent : .completion, line: Array(line.utf8))
    }

    static func encoded(_ index: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        AuditSpool.encode(record(index), into: &bytes)
        return bytes
    }

    static func size(_ url: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int)
    }

    @Test("records appended across many reservations and segments read back in order, and each closed segment is cut to its records")
    func roundTrip() throws {
        let path = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let journal = try Self.journal(path, limit: 1 << 20)
        var appendedPerSegment: [Int: Int] = [:]
        for index in 0..<2_000 {
            let bytes = Self.encoded(index)
            let segment = try journal.append(encoded: bytes, sync: false)
            appendedPerSegment[segment, default: 0] += bytes.count
        }
        journal.sealCurrent()
        _ = journal.takeSyncWork().retired.map { $0.close() }
        let segments = journal.segments()
        #expect(segments.count == appendedPerSegment.count)
        #expect(segments.count >= 3, "2,000 records of ~1.6 KB fill several 1 MiB segments")
        var read: [AuditSpool.Record] = []
        for url in segments {
            let contents = try journal.read(url)
            #expect(contents.tornBytes == 0)
            read += contents.records
            #expect(try Self.size(url) == appendedPerSegment[try #require(journal.number(of: url))])
        }
        #expect(read == (0..<2_000).map(Self.record))
    }

    @Test("a segment left mapped by a killed relay reads back whole: its reserved zeros are its end, not a torn record")
    func killedMidSegment() throws {
        let path = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let journal = try Self.journal(path, limit: 4 << 20)
        var appended = 0
        for index in 0..<100 {
            let bytes = Self.encoded(index)
            try journal.append(encoded: bytes, sync: false)
            appended += bytes.count
        }
        // As a SIGKILL leaves it: never unmapped, never cut back.
        let url = try #require(journal.segments().first)
        let size = try Self.size(url)
        #expect(size > appended, "the file holds the reserved room beyond the records")
        #expect(size % MappedSegment.growth == 0)
        let contents = try Self.journal(path, limit: 4 << 20).read(url)
        #expect(contents.tornBytes == 0)
        #expect(contents.records == (0..<100).map(Self.record))
    }

    @Test("a torn record before the reserved zeros is still reported as torn, and the records before it kept")
    func tornBeforeZeros() throws {
        let path = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let journal = try Self.journal(path, limit: 4 << 20)
        try journal.append(encoded: Self.encoded(1) + Self.encoded(2), sync: false)
        let url = try #require(journal.segments().first)
        // A copy cut short: the third record's header and half its line.
        let third = Self.encoded(3)
        var bytes = [UInt8](try Data(contentsOf: url))
        let start = Self.encoded(1).count + Self.encoded(2).count
        bytes.replaceSubrange(start..<(start + third.count / 2), with: third.prefix(third.count / 2))
        let copy = URL(fileURLWithPath: path + "/journal-9999999999999999.journal")
        try Data(bytes).write(to: copy)
        let contents = try journal.read(copy)
        #expect(contents.records == [Self.record(1), Self.record(2)])
        #expect(contents.tornBytes == bytes.count - start)
    }

    @Test("a record longer than a segment gets a segment of its own, as with write(2)")
    func oversizedRecord() throws {
        let path = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let journal = try Self.journal(path, limit: 64 << 10)
        let small = try journal.append(encoded: Self.encoded(1), sync: false)
        var big: [UInt8] = []
        for index in 0..<100 { big += Self.encoded(index) }
        #expect(big.count > 64 << 10)
        let bigSegment = try journal.append(encoded: big, sync: false)
        let after = try journal.append(encoded: Self.encoded(2), sync: false)
        #expect(bigSegment != small)
        #expect(after != bigSegment)
        journal.sealCurrent()
        _ = journal.takeSyncWork().retired.map { $0.close() }
        let all = try journal.segments().flatMap { try journal.read($0).records }
        #expect(all == [Self.record(1)] + (0..<100).map(Self.record) + [Self.record(2)])
    }
}
