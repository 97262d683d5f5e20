import Foundation

/// A small tmpfs of a test's own as the relay's spool directory, so the
/// test can fill it (`dd`), make it read-only, or let the journal fill it by
/// itself. Mounting needs root (CAP_SYS_ADMIN): ``mount(megabytes:)`` is nil
/// without it, and the test says so rather than pass.
public struct SmallSpool {
    public let path: String

    /// Mounts a tmpfs of `megabytes` MiB on a new directory; nil when it cannot.
    public static func mount(megabytes: Int) async -> SmallSpool? {
        let path = "/tmp/apns-relay-smallspool-" + UUID().uuidString.prefix(8).lowercased()
        guard (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)) != nil else { return nil }
        let mounted = try? await ProcessRunner.runOffPool(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path])
        guard mounted?.status == 0 else {
            print("SmallSpool: cannot mount a tmpfs on \(path) (\(mounted?.output ?? "no mount")): needs root")
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
        return SmallSpool(path: path)
    }

    /// Fills what room is left with one file (`dd` stops at ENOSPC).
    public func fill() async throws {
        _ = try await ProcessRunner.runOffPool(["dd", "if=/dev/zero", "of=\(path)/fill", "bs=4096"])
        let (_, free) = try await ProcessRunner.runOffPool(["sh", "-c", "df --output=avail -B1 \(path) | tail -1"])
        guard Int(free.trimmingCharacters(in: .whitespacesAndNewlines)) == 0 else { throw SmallSpoolError(description: "the spool is not full: \(free)") }
    }

    /// Frees what ``fill()`` took.
    public func free() { try? FileManager.default.removeItem(atPath: path + "/fill") }

    /// Bytes the relay's journal segments hold now.
    public var journalFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasPrefix("journal-") }
    }

    /// Remounts read-only or read-write. A file open for writing makes a
    /// read-only remount fail (EBUSY): it is tried again until `timeout`.
    public func remount(readOnly: Bool, timeout: Double = 30) async -> Bool {
        await eventually(timeout) {
            let (status, _) = (try? await ProcessRunner.runOffPool(["mount", "-o", readOnly ? "remount,ro" : "remount,rw", path])) ?? (1, "")
            return status == 0
        }
    }

    public func unmount() async {
        for _ in 0..<50 {
            if (try? await ProcessRunner.runOffPool(["umount", path]))?.status == 0 { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// ``SmallSpool/fill()`` left room: the test cannot go on as written.
public struct SmallSpoolError: Error, CustomStringConvertible {
    public let description: String
}
