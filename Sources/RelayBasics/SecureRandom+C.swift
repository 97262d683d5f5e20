#if canImport(Glibc)
    import Glibc
#endif

extension SecureRandom {
    /// Fills `buffer` from the kernel CSPRNG: glibc's `arc4random_buf`
    /// (2.36 and later) is `getrandom(2)` for the whole length, looping over
    /// short reads and signals, with `/dev/urandom` as its fallback; it cannot
    /// fail. (Swift's Glibc module does not export `getrandom` itself.)
    static func kernelFill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        arc4random_buf(base, buffer.count)
    }
}
