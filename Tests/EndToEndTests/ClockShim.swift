import Foundation
import TestSupport

/// A shared library, preloaded into a child process, that shifts what the
/// child reads from the wall clock (`CLOCK_REALTIME` through
/// `clock_gettime`, `gettimeofday` and `time`) by a number of seconds the
/// test writes to a file while the child runs: a clock stepped by NTP or
/// a virtual machine resumed, without touching the machine's own clock.
/// The monotonic clocks are untouched, as in a real step; a wait on a
/// condition variable until a wall-clock deadline ends when the shifted
/// clock reaches it, as the kernel's wait does when the clock is stepped.
///
/// Built at test time with the toolchain's `clang` (beside `swift`).
struct ClockShim {
    let library: String
    let shiftFile: String

    /// The child's environment: the library preloaded, the file it reads.
    var environment: [String: String] { ["LD_PRELOAD": library, "APNS_RELAY_TEST_CLOCK_SHIFT_FILE": shiftFile] }

    static func build(in directory: String) async throws -> ClockShim {
        let source = directory + "/clock-shift.c"
        let shim = ClockShim(library: directory + "/clock-shift.so", shiftFile: directory + "/clock-shift")
        try Self.source.write(toFile: source, atomically: true, encoding: .utf8)
        try shim.shift(seconds: 0)
        let (status, output) = try await ProcessRunner.runOffPool(["clang", "-shared", "-fPIC", "-O1", "-o", shim.library, source, "-ldl"])
        guard status == 0 else { throw TestRelayError("clang: \(output)") }
        return shim
    }

    /// Sets the shift. The file is rewritten in place (same length), since
    /// the child reads it through a shared mapping.
    func shift(seconds: Int) throws {
        let text = String("\(seconds)".padding(toLength: 31, withPad: " ", startingAt: 0)) + "\n"
        if !FileManager.default.fileExists(atPath: shiftFile) {
            _ = FileManager.default.createFile(atPath: shiftFile, contents: Data(text.utf8))
            return
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: shiftFile))
        defer { try? handle.close() }
        try handle.write(contentsOf: Data(text.utf8))
    }

    private static let source = #"""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <errno.h>
        #include <pthread.h>
        #include <fcntl.h>
        #include <stdlib.h>
        #include <sys/mman.h>
        #include <sys/time.h>
        #include <time.h>
        #include <unistd.h>

        static const volatile char *mapped;

        static long long shift(void) {
            if (!mapped) {
                const char *path = getenv("APNS_RELAY_TEST_CLOCK_SHIFT_FILE");
                if (!path) return 0;
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) return 0;
                void *map = mmap(0, 32, PROT_READ, MAP_SHARED, fd, 0);
                close(fd);
                if (map == MAP_FAILED) return 0;
                mapped = map;
            }
            char text[33];
            for (int i = 0; i < 32; i++) text[i] = mapped[i];
            text[32] = 0;
            return atoll(text);
        }

        static int real_clock_gettime(clockid_t clock, struct timespec *spec) {
            static int (*real)(clockid_t, struct timespec *);
            if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");
            return real(clock, spec);
        }

        int clock_gettime(clockid_t clock, struct timespec *spec) {
            int result = real_clock_gettime(clock, spec);
            if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) spec->tv_sec += shift();
            return result;
        }

        int gettimeofday(struct timeval *value, void *zone) {
            static int (*real)(struct timeval *, void *);
            if (!real) real = dlsym(RTLD_NEXT, "gettimeofday");
            int result = real(value, zone);
            if (result == 0) value->tv_sec += shift();
            return result;
        }

        /* A wait until a CLOCK_REALTIME deadline ends when the stepped clock
           reaches it, as the kernel's does: waited in slices of at most
           10 ms, each against the real clock. A condition variable on
           CLOCK_MONOTONIC (glibc keeps the clock in bit 1 of __wrefs)
           waits as it is. */
        int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
            static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
            if (!real) real = dlsym(RTLD_NEXT, "pthread_cond_timedwait");
            if (cond->__data.__wrefs & 2) return real(cond, mutex, deadline);
            for (;;) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                long long left = (long long)(deadline->tv_sec - now.tv_sec) * 1000000000LL + (deadline->tv_nsec - now.tv_nsec);
                if (left <= 0) return ETIMEDOUT;
                if (left > 10000000LL) left = 10000000LL;
                struct timespec slice;
                real_clock_gettime(CLOCK_REALTIME, &slice);
                long long nanoseconds = slice.tv_nsec + left;
                slice.tv_sec += nanoseconds / 1000000000LL;
                slice.tv_nsec = nanoseconds % 1000000000LL;
                int result = real(cond, mutex, &slice);
                if (result != ETIMEDOUT) return result;
            }
        }

        time_t time(time_t *out) {
            struct timespec spec;
            clock_gettime(CLOCK_REALTIME, &spec);
            if (out) *out = spec.tv_sec;
            return spec.tv_sec;
        }
        """#
}
