/// An append-only segment file (spool or journal) by its descriptor: every
/// system call the audit makes on one, behind one fence.
///
/// Plain `write(2)` and `fdatasync(2)` rather than Foundation's `FileHandle`,
/// which wraps each write in `Data` and each sync in `fsync` (a journal
/// append is on a send's path: ~3 µs for the write alone, where
/// `FileHandle.write` plus `fsync` cost ~75 µs of CPU). `fdatasync` commits
/// what reading the data back needs (the bytes and the file's size) and
/// skips the timestamps, which nothing here reads.
struct SegmentFile: @unchecked Sendable {
    // A descriptor is an integer; who may write, sync and close it is the
    // owning AuditSpool's rule (see there), not this type's.
    let descriptor: Int32
    let path: String

    /// Creates `path` (it must not exist), mode 0600, opened for appending.
    static func create(_ path: String) throws(SegmentFileError) -> SegmentFile {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SegmentFileError("open", path: path, code: errno) }
        return SegmentFile(descriptor: descriptor, path: path)
    }

    /// Writes all of `bytes` at the end of the file (retrying partial writes
    /// and interruptions). On failure part of them may have been written.
    func append(_ bytes: [UInt8]) throws(SegmentFileError) {
        let failure: Int32? = bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
        if let failure { throw SegmentFileError("write", path: path, code: failure) }
    }

    /// `fdatasync`: the bytes written so far survive a power cut.
    func syncData() throws(SegmentFileError) {
        while fdatasync(descriptor) != 0 {
            guard errno == EINTR else { throw SegmentFileError("fdatasync", path: path, code: errno) }
        }
    }

    /// Cuts the file back to `size` bytes (appends go on from there: `O_APPEND`).
    func truncate(to size: Int) throws(SegmentFileError) {
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw SegmentFileError("ftruncate", path: path, code: errno) }
    }

    func close() {
        _ = Glibc.close(descriptor)
    }

    /// Whether the file system takes a small write and its sync now: writes
    /// 4 KiB to `path` (created or truncated), `fdatasync`s it and removes it.
    static func probe(_ path: String) throws(SegmentFileError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SegmentFileError("open", path: path, code: errno) }
        let file = SegmentFile(descriptor: descriptor, path: path)
        defer {
            file.close()
            _ = unlink(path)
        }
        try file.append([UInt8](repeating: 0, count: 4096))
        try file.syncData()
    }

    /// Makes the directory's entries (a new segment's name) survive a power
    /// cut. Best effort: not every file system lets a directory be synced.
    static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = Glibc.close(descriptor)
    }
}

/// A segment file's system call failed: which one, on which file, and why.
struct SegmentFileError: Error, CustomStringConvertible {
    var operation: String
    var path: String
    var code: Int32

    init(_ operation: String, path: String, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

#if canImport(Glibc)
    import Glibc
#endif
