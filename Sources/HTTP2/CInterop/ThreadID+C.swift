#if canImport(Glibc)
    import Glibc
#endif

/// The calling thread's identity (its pthread id), so a connection can tell
/// its own thread from the others that call into it.
enum ThreadID {
    static var current: UInt { UInt(pthread_self()) }
}
