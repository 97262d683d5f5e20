#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The kernel's constants and limits the relay reads for its `process_*`
/// metrics and benchmarks, fenced here so no other file calls libc for them.
public enum SystemInfo {
    /// Bytes per memory page (`/proc/self/statm` counts pages).
    public static var pageSize: Double { Double(sysconf(Int32(_SC_PAGESIZE))) }

    /// Clock ticks per second (`/proc/self/stat` counts CPU time in ticks).
    public static var clockTicksPerSecond: Double { Double(sysconf(Int32(_SC_CLK_TCK))) }

    /// The soft limit on open file descriptors (`RLIMIT_NOFILE`), nil when it cannot be read.
    public static var openFileSoftLimit: Double? {
        var limit = rlimit()
        #if canImport(Glibc)
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        #else
            guard getrlimit(RLIMIT_NOFILE, &limit) == 0 else { return nil }
        #endif
        return Double(limit.rlim_cur)
    }
}
