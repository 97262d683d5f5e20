#if canImport(Glibc)
    import Glibc
#endif

/// The process's open-file limit (RLIMIT_NOFILE), raised for the ingress.
///
/// The ingress keeps up to `connectionLimit` connections and libmicrohttpd
/// accepts a little past it (HTTPServer.acceptLimit) while it sheds; every one
/// is a descriptor. A soft limit of 1024 (a common default) would make
/// accept fail before shedding could make room, so the soft limit is raised
/// towards the hard one, which an unprivileged process may do.
enum FileDescriptorLimit {
    /// Raises the soft limit to at least `needed` (capped at the hard limit);
    /// returns the soft limit in force afterwards.
    static func raise(toAtLeast needed: Int) -> Int {
        // RLIM_INFINITY is ~0 (glibc); Swift imports its macro as a signed -1.
        let infinity = rlim_t.max
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        let wanted = rlim_t(max(0, needed))
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = limit.rlim_max == infinity ? wanted : min(wanted, limit.rlim_max)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == infinity ? Int.max : Int(limit.rlim_cur)
    }
}
