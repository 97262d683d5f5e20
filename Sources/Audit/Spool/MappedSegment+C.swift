/// A journal segment mapped into memory, for `audit.journal_sync: interval`:
/// an append is a copy into the mapping, not a `write(2)`.
///
/// Why it is as safe as the `write(2)` it replaces: the mapping is
/// `MAP_SHARED`, so its pages are the file's pages in the kernel's page
/// cache; a record copied there survives a crash of the process exactly as
/// a written one does, and the journal thread's `fdatasync` of the
/// descriptor writes the mapping's dirty pages to the disk as it does
/// written ones.
///
/// Why a full disk never shows as a SIGBUS: a page of a file mapping that
/// has no block behind it faults with SIGBUS when the disk has no room. So
/// no byte is copied past what `posix_fallocate` has reserved: the file
/// grows by ``growth`` at a time, and a reservation the disk refuses fails
/// the append (ENOSPC) as a `write(2)` would, before anything is copied.
/// The mapping spans the whole segment from the start (`capacity`), so
/// growing never moves it.
///
/// A segment is cut back to the bytes appended (`ftruncate`) when it is
/// closed; one a killed process left ends in reserved zeros, which a reader
/// takes as the end of its records (``AuditSpool/read(_:)``).
struct MappedSegment: @unchecked Sendable {
    // The mapping and the counters belong to whoever owns the segment (the
    // journal's AuditSpool, under the writer's lock), as a descriptor does.
    let file: SegmentFile
    private let base: UnsafeMutableRawPointer
    let capacity: Int
    /// Bytes reserved on the disk (and the file's size) so far.
    private(set) var reserved = 0
    /// Bytes appended so far.
    private(set) var size = 0

    /// How much the file grows at a time: a few hundred records per
    /// `posix_fallocate`, and at most this much reserved and unused when
    /// the disk fills.
    static let growth = 256 << 10

    /// Creates `path` (it must not exist), mode 0600, and maps `capacity`
    /// bytes of it (rounded up to whole pages); reserves nothing yet.
    static func create(_ path: String, capacity: Int) throws(SegmentFileError) -> MappedSegment {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SegmentFileError("open", path: path, code: errno) }
        let file = SegmentFile(descriptor: descriptor, path: path)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let length = (max(capacity, page) + page - 1) / page * page
        let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
        guard let mapped, mapped != MAP_FAILED else {
            let code = errno
            file.close()
            _ = unlink(path)
            throw SegmentFileError("mmap", path: path, code: code)
        }
        return MappedSegment(file: file, base: mapped, capacity: length)
    }

    /// Whether `count` more bytes fit in the mapping.
    func fits(_ count: Int) -> Bool { size + count <= capacity }

    /// Copies `bytes` after the last append, reserving room on the disk
    /// first when they pass what is reserved. Throws (nothing copied) when
    /// the disk refuses the room, or when they do not fit (the caller
    /// checks ``fits(_:)`` first and starts a new segment).
    mutating func append(_ bytes: [UInt8]) throws(SegmentFileError) {
        guard fits(bytes.count) else { throw SegmentFileError("append", path: file.path, code: EFBIG) }
        let end = size + bytes.count
        if end > reserved {
            let target = min(capacity, max(end, reserved + Self.growth))
            var result: Int32
            repeat { result = posix_fallocate(file.descriptor, off_t(reserved), off_t(target - reserved)) } while result == EINTR
            guard result == 0 else { throw SegmentFileError("posix_fallocate", path: file.path, code: result) }
            reserved = target
        }
        bytes.withUnsafeBytes { buffer in
            guard let source = buffer.baseAddress else { return }
            (base + size).copyMemory(from: source, byteCount: buffer.count)
        }
        size = end
    }

    /// Unmaps the segment and cuts the file back to the bytes appended;
    /// the descriptor stays open (the journal thread syncs, then closes it).
    /// Dirty pages stay in the page cache: unmapping loses nothing.
    func unmap() {
        _ = munmap(base, capacity)
        if reserved > size { _ = ftruncate(file.descriptor, off_t(size)) }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
