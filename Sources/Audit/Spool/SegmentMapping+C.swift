/// A journal segment's bytes mapped into memory (`MAP_SHARED`), so an
/// append is a copy into the kernel's page cache without a system call.
///
/// Why: with `audit.journal_sync: interval` every send appends two records
/// on the sending thread, and a `write(2)` each (under the writer's lock)
/// was most of the journal's cost per send. A store into a shared mapping of
/// the file lands in the same page cache a `write` copies into, so it has
/// the same durability: it outlives a crash of the process at once (the
/// pages belong to the kernel), and a crash of the machine once the journal
/// thread's `fdatasync` of the descriptor has written the dirty pages back.
///
/// The segment's blocks are reserved when it is created (`posix_fallocate`),
/// so a store never needs the file system to find space: a full disk fails
/// the segment's creation (the journal then appends with `write(2)`, which
/// reports the error) instead of faulting a store. The file's size is its
/// capacity from the start; what follows the last record reads as zeros,
/// which ``AuditSpool/read(_:)`` takes for the segment's clean end.
struct SegmentMapping: @unchecked Sendable {
    // The base address is only written under the owning AuditSpool's rule
    // (one appender at a time, see there), never after `unmap()`.
    let base: UnsafeMutableRawPointer
    /// Bytes mapped: the file's preallocated size.
    let capacity: Int

    /// Reserves `capacity` bytes for `file` (which must be empty) and maps
    /// them; nil when the file system refuses either (the caller appends with
    /// `write(2)` then). The file is cut back to empty on failure.
    static func create(for file: SegmentFile, capacity: Int) -> SegmentMapping? {
        guard capacity > 0, posix_fallocate(file.descriptor, 0, off_t(capacity)) == 0 else {
            _ = ftruncate(file.descriptor, 0)
            return nil
        }
        let address = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, file.descriptor, 0)
        guard let address, address != MAP_FAILED else {
            _ = ftruncate(file.descriptor, 0)
            return nil
        }
        return SegmentMapping(base: address, capacity: capacity)
    }

    /// Copies `bytes` to `offset` (the caller checked that they fit).
    func store(_ bytes: [UInt8], at offset: Int) {
        precondition(offset >= 0 && offset + bytes.count <= capacity, "a journal append past its segment's mapping")
        bytes.withUnsafeBytes { buffer in
            guard let source = buffer.baseAddress else { return }
            (base + offset).copyMemory(from: source, byteCount: buffer.count)
        }
    }

    /// Removes the mapping. Stored bytes stay in the page cache, dirty until
    /// a sync of the file's descriptor (or the kernel's writeback) writes them.
    func unmap() {
        _ = munmap(base, capacity)
    }
}

#if canImport(Glibc)
    import Glibc
#endif
