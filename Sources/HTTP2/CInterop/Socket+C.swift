internal import CNGHTTP2
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// Thin POSIX socket helpers for the connection threads.
enum Socket {
    /// Connects a non-blocking TCP socket to the first of `addresses` (the
    /// lookup of `host`, ``HostLookup``) that takes it. `waitUntilWritable`
    /// waits for a connect in progress and returns false when the caller's
    /// deadline (`timeout` seconds, named in the error) has passed.
    static func connect(
        to addresses: [HostLookup.Address], host: String, port: Int, timeout: Double,
        waitUntilWritable: (Int32) throws(HTTP2Error) -> Bool
    ) throws(HTTP2Error) -> Int32 {
        var lastError = "no address"
        for address in addresses {
            let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else {
                // Out of descriptors (EMFILE, ENFILE): named, not "no address".
                lastError = "socket: \(String(cString: strerror(errno)))"
                continue
            }
            setNonBlocking(fd)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let result = address.bytes.withUnsafeBytes { raw in
                Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            if result == 0 { return fd }
            if errno == EINPROGRESS {
                let writable: Bool
                do {
                    writable = try waitUntilWritable(fd)
                } catch {
                    close(fd)
                    throw error
                }
                if writable {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error == 0 { return fd }
                    lastError = String(cString: strerror(error))
                } else {
                    lastError = "timed out after \(timeout) s"
                }
            } else {
                lastError = String(cString: strerror(errno))
            }
            close(fd)
        }
        throw HTTP2Error(.connectFailed, "cannot connect to \(host):\(port): \(lastError)")
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Sends a FIN (no more writes); reads go on until the peer closes.
    static func shutdownWrite(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// Reads from a cleartext socket (HTTP/2 with prior knowledge), in TLSStream's terms.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> TLSStream.IOResult {
        let result = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if result > 0 { return .bytes(result) }
        if result == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock(wantsWrite: false) : .failed(String(cString: strerror(errno)))
    }

    /// Writes to a cleartext socket, in TLSStream's terms.
    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> TLSStream.IOResult {
        let result = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if result > 0 { return .bytes(result) }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock(wantsWrite: true) : .failed(String(cString: strerror(errno)))
    }

    /// Closes with an RST instead of a FIN (SO_LINGER 0): a connection reset for tests.
    static func reset(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        close(fd)
    }
}

/// An eventfd another thread signals to wake a poll() loop.
///
/// Making one can fail: a process out of descriptors (EMFILE at its
/// `ulimit -n`, ENFILE) gets no eventfd. That is not a reason to stop the
/// relay, so the signal is still made, with ``failure`` saying why it has no
/// descriptor, and whoever owns it refuses the work it was for (a connection
/// fails its set-up, an accepted socket is closed, a listener does not
/// start) instead of waiting on a wake-up that never comes.
final class WakeSignal: @unchecked Sendable {
    // eventfd writes and reads are atomic in the kernel; any thread may signal.
    let fd: Int32
    /// Why there is no eventfd (`strerror`), nil when there is one.
    let failure: String?

    init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        failure = fd >= 0 ? nil : String(cString: strerror(errno))
    }

    deinit { if fd >= 0 { close(fd) } }

    func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    func drain() {
        var value: UInt64 = 0
        _ = read(fd, &value, 8)
    }
}

extension Socket {
    /// OpenSSL writes with write(2), which raises SIGPIPE on a reset peer and
    /// would kill the process; a server must take EPIPE as an error instead.
    static let ignoreBrokenPipes: Void = {
        signal(SIGPIPE, SIG_IGN)
    }()
}
