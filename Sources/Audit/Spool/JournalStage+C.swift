#if canImport(Glibc)
    import Glibc
#endif

/// The system calls of ``JournalStage``, behind one fence: the file opened
/// and written out with zeros (real blocks, so a later write into the
/// mapping never needs the disk to find room), and its shared mapping.
extension JournalStage {
    /// Opens (creates) `path`, makes it `size` bytes of allocated blocks and
    /// maps it shared; nil with the failing call's name and errno.
    static func mapFile(_ path: String, size: Int) -> (UnsafeMutableRawPointer?, failure: (String, Int32)?) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return (nil, ("open", errno)) }
        defer { _ = close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return (nil, ("fstat", errno)) }
        if Int(status.st_size) < size {
            // Zeros written, not fallocate's unwritten extents: the file
            // system converts those on writeback, which can itself need
            // room. A file left by an earlier run keeps its bytes.
            let zeros = [UInt8](repeating: 0, count: 1 << 16)
            var offset = Int(status.st_size)
            while offset < size {
                let count = min(zeros.count, size - offset)
                let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress!, count, off_t(offset)) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return (nil, ("pwrite", errno))
                }
                offset += written
            }
            guard fsync(descriptor) == 0 else { return (nil, ("fsync", errno)) }
        }
        guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0), base != MAP_FAILED else {
            return (nil, ("mmap", errno))
        }
        return (base, nil)
    }

    /// `msync(MS_SYNC)`: the mapping's bytes as they stand are on disk.
    /// Best effort: a failure leaves what the kernel writes back later.
    static func sync(_ base: UnsafeMutableRawPointer, size: Int) {
        while msync(base, size, MS_SYNC) != 0, errno == EINTR {}
    }

    static func unmap(_ base: UnsafeMutableRawPointer, size: Int) {
        _ = munmap(base, size)
    }
}
