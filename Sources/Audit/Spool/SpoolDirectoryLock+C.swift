#if canImport(Glibc)
    import Glibc
#endif

/// One relay per spool directory: an exclusive `flock` on the directory
/// itself, taken when an ``AuditWriter`` opens it and released when that
/// writer has shut down (or its process has died: the kernel drops a dead
/// process' locks, so a SIGKILLed relay never leaves the directory locked).
///
/// Why: two relays on one directory would copy their journal records into
/// the same mapped stage (``JournalStage``), each overwriting the other's,
/// number segments the other also writes, and replay and delete each
/// other's files. The documentation always said one directory per instance;
/// this makes a second relay on it fail at start, naming the directory,
/// instead of losing rows later.
///
/// The directory is locked, not a file in it: nothing needs to be created
/// (a full or read-only spool still locks), and nothing in the directory is
/// held open for writing (it can still be remounted read-only).
final class SpoolDirectoryLock: @unchecked Sendable {
    // Written by `release()` only, which the writer's shutdown calls once.
    private var descriptor: Int32
    /// Why the directory could not be locked, when its file system does not
    /// lock (`flock` fails with anything but "held"; some network file
    /// systems): the writer logs it and goes on unlocked, as before the lock.
    let notLocked: SegmentFileError?

    /// Locks `path`; throws ``SpoolDirectoryInUse`` when another writer
    /// (in this process or another) holds it.
    init(path: String) throws(SpoolDirectoryInUse) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            self.descriptor = -1
            notLocked = SegmentFileError("open", path: path, code: errno)
            return
        }
        var status: Int32 = 0
        repeat { status = flock(descriptor, LOCK_EX | LOCK_NB) } while status != 0 && errno == EINTR
        guard status == 0 else {
            let code = errno
            _ = close(descriptor)
            if code == EWOULDBLOCK { throw SpoolDirectoryInUse(path: path) }
            self.descriptor = -1
            notLocked = SegmentFileError("flock", path: path, code: code)
            return
        }
        self.descriptor = descriptor
        notLocked = nil
    }

    deinit { release() }

    /// Unlocks (closes the descriptor); nothing after the first call.
    func release() {
        guard descriptor >= 0 else { return }
        _ = close(descriptor)
        descriptor = -1
    }
}

/// Another relay (or audit writer) has the spool directory open.
public struct SpoolDirectoryInUse: Error, CustomStringConvertible {
    public let path: String

    public var description: String {
        "the audit spool directory \(path) is in use by another apns-relay: give each instance a directory of its own (audit.spool_directory)"
    }
}
