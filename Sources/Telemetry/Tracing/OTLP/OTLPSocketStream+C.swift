#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
public import RelayBasics

/// A non-blocking TCP socket waited on with `poll`, bounded by deadlines.
public final class OTLPSocketStream: OTLPStream {
    /// The connected socket; the caller owns it (a TLS stream may wrap it).
    public let fd: Int32
    private var closed = false

    init(fd: Int32) { self.fd = fd }

    deinit { close() }

    /// Resolves `host` and connects to the first address that answers before
    /// `deadline`. `lookUp` starts the lookup (a test plays a silent resolver with it).
    public static func connect(
        host: String, port: UInt16, deadline: OTLPDeadline,
        lookUp: (_ host: String, _ port: Int) -> HostLookup = { HostLookup.start(host: $0, port: $1) }
    ) -> Result<OTLPSocketStream, OTLPExportFailure> {
        // Looked up on a thread of its own (``HostLookup``): getaddrinfo has
        // no deadline, and a resolver that does not answer held the drain's
        // last export past its bound. A numeric host (the usual collector
        // sidecar) resolves here at once, without a query.
        let lookup = lookUp(host, Int(port))
        // In the streams' slices: the drain may bring the deadline forward meanwhile.
        let addresses: [HostLookup.Address]
        switch lookup.outcome(waitingWith: { wait($0, events: Int16(POLLIN), deadline: deadline) }) {
        case .addresses(let found)?:
            addresses = found
        case .failed(let message)?:
            return .failure(OTLPExportFailure("cannot resolve \(host): \(message)", retryable: true))
        case nil:
            return .failure(OTLPExportFailure("cannot resolve \(host): the resolver did not answer before the export's deadline", retryable: true))
        }
        var lastError = "no address"
        for address in addresses {
            let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                // Out of descriptors (EMFILE): named, not "no address".
                lastError = "socket: \(String(cString: strerror(errno)))"
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connected = address.bytes.withUnsafeBytes { raw in
                Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            if connected == 0 {
                return .success(OTLPSocketStream(fd: fd))
            }
            guard errno == EINPROGRESS else {
                lastError = String(cString: strerror(errno))
                _ = Glibc.close(fd)
                continue
            }
            guard wait(fd, events: Int16(POLLOUT), deadline: deadline) else {
                lastError = "connect timed out"
                _ = Glibc.close(fd)
                continue
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error == 0 { return .success(OTLPSocketStream(fd: fd)) }
            lastError = String(cString: strerror(error))
            _ = Glibc.close(fd)
        }
        return .failure(OTLPExportFailure("cannot connect to \(host):\(port): \(lastError)", retryable: true))
    }

    /// Waits until `fd` is ready for `events`; false at the deadline or on an error.
    public static func wait(_ fd: Int32, events: Int16, deadline: OTLPDeadline) -> Bool {
        while true {
            guard let milliseconds = deadline.pollMilliseconds else { return false }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
    }

    public func write(_ bytes: UnsafeRawBufferPointer, deadline: OTLPDeadline) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent > 0 {
                offset += sent
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                guard Self.wait(fd, events: Int16(POLLOUT), deadline: deadline) else { return false }
            } else {
                return false
            }
        }
        return true
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, deadline: OTLPDeadline) -> Int? {
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count >= 0 { return count }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return nil }
            guard Self.wait(fd, events: Int16(POLLIN), deadline: deadline) else { return nil }
        }
    }

    public func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(fd)
    }
}
