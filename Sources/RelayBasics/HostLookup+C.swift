import Glibc
import Synchronization

/// One host name lookup (`getaddrinfo`) run on a thread of its own, so that
/// the thread that needs the addresses waits for them with a deadline.
///
/// `getaddrinfo` has no deadline. Against a resolver that does not answer it
/// blocks for `timeout × attempts` of resolv.conf for each name server
/// (10 s a server with glibc's defaults; 90 s with `timeout:30 attempts:3`).
/// Called on an APNs connection's thread, it held every send queued on that
/// connection past its request timeout and its send deadline; on the OTLP
/// exporter's, it held the drain's last export past its bound.
///
/// A numeric host (`127.0.0.1`, `::1`) asks no resolver and is looked up at
/// once on the caller. A name is looked up on a detached thread; lookups of
/// the same name and port that overlap share that thread, so a resolver that
/// hangs costs one thread per name, however often connections are retried.
/// A caller that gives up simply stops waiting: the thread ends when
/// `getaddrinfo` does, and nothing it finds is used.
public final class HostLookup: @unchecked Sendable {
    /// One address `getaddrinfo` gave, copied out of its list.
    public struct Address: Sendable {
        public let family: Int32
        /// The `sockaddr` bytes (`ai_addr`, `ai_addrlen` long).
        public let bytes: [UInt8]

        /// The address as text (`getnameinfo` with `NI_NUMERICHOST`: no
        /// lookup; an IPv6 scope stays, `fe80::1%eth0`): what libpq's
        /// `hostaddr` takes.
        public var numericHost: String {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let status = bytes.withUnsafeBytes { raw in
                getnameinfo(
                    raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count), &text, socklen_t(text.count),
                    nil, 0, NI_NUMERICHOST)
            }
            guard status == 0 else { return "" }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// What a finished lookup found.
    public enum Outcome: Sendable {
        case addresses([Address])
        /// `getaddrinfo`'s own message (`gai_strerror`).
        case failed(String)
    }

    public let host: String
    public let port: Int
    /// A pipe's read end that becomes readable once the lookup has ended,
    /// and stays so (nobody reads it): a `poll(2)` loop waits on it beside
    /// its own descriptors.
    /// -1 when the process had no descriptors for the pipe: such a lookup
    /// has ended (failed) before ``start(host:port:)`` returns it, and
    /// `poll(2)` leaves a -1 entry alone.
    public let readyDescriptor: Int32
    private let writeDescriptor: Int32
    /// Why the pipe could not be made (`strerror`: EMFILE at the process's
    /// descriptor limit), nil when it was.
    private let pipeFailure: String?
    private let state = Mutex<Outcome?>(nil)

    private init(host: String, port: Int) {
        self.host = host
        self.port = port
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            pipeFailure = String(cString: strerror(errno))
            readyDescriptor = -1
            writeDescriptor = -1
            return
        }
        pipeFailure = nil
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        readyDescriptor = ends[0]
        writeDescriptor = ends[1]
    }

    deinit {
        guard pipeFailure == nil else { return }
        close(readyDescriptor)
        close(writeDescriptor)
    }

    /// The lookup's outcome, nil while it runs.
    public var outcome: Outcome? { state.withLock { $0 } }

    /// The outcome, waited for with `wait`: given ``readyDescriptor``, it
    /// waits on it as its caller waits on its own descriptors (a setup poll,
    /// a poll with a cutoff) and returns false once the caller's deadline has
    /// passed. Nil when the lookup had not ended by then.
    public func outcome<Failure: Error>(waitingWith wait: (Int32) throws(Failure) -> Bool) throws(Failure) -> Outcome? {
        while outcome == nil {
            guard try wait(readyDescriptor) else { return outcome }
        }
        return outcome
    }

    /// Waits until the lookup ends or ``MonotonicClock/now()`` reaches
    /// `deadline`; nil at the deadline.
    public func wait(until deadline: UInt64) -> Outcome? {
        outcome { descriptor in
            let now = MonotonicClock.now()
            guard now < deadline else { return false }
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, Int32(min((deadline - now) / 1_000_000 + 1, UInt64(Int32.max))))
            return true
        }
    }

    /// Ends the lookup with `outcome`: the outcome first, then the pipe, so
    /// whoever sees the descriptor readable sees the outcome.
    private func finish(_ outcome: Outcome) {
        state.withLock { $0 = outcome }
        guard pipeFailure == nil else { return }
        var one: UInt8 = 1
        _ = Glibc.write(writeDescriptor, &one, 1)
    }

    /// Lookups of names running now, by name and port: a later start joins one.
    private static let running = Mutex<[String: HostLookup]>([:])

    /// Starts looking `host` up (the addresses for TCP to `port`), or joins
    /// the lookup of the same name and port already running. A numeric host
    /// is done when this returns.
    public static func start(host: String, port: Int) -> HostLookup {
        if let numeric = numeric(host: host, port: port) {
            let lookup = HostLookup(host: host, port: port)
            lookup.finish(numeric)
            return lookup
        }
        let key = "\(host)\u{0}\(port)"
        let (lookup, isNew) = running.withLock { running -> (HostLookup, Bool) in
            if let lookup = running[key] { return (lookup, false) }
            let lookup = HostLookup(host: host, port: port)
            // One without its pipe is never joined: it ends below, failed.
            if lookup.pipeFailure == nil { running[key] = lookup }
            return (lookup, true)
        }
        guard isNew else { return lookup }
        if let problem = lookup.pipeFailure {
            // Out of descriptors: this connect fails (and is retried), the process goes on.
            lookup.finish(.failed("no descriptor for the lookup (pipe: \(problem))"))
            return lookup
        }
        do {
            try DetachedThread.start(name: "relay-lookup") {
                let outcome = resolve(host: host, port: port, flags: 0)
                _ = running.withLock { $0.removeValue(forKey: key) }
                lookup.finish(outcome)
            }
        } catch {
            // Out of threads (or memory): this connect fails, the process goes on.
            _ = running.withLock { $0.removeValue(forKey: key) }
            lookup.finish(.failed("no thread for the lookup (\(error.reason))"))
        }
        return lookup
    }

    /// A lookup that a test ends by hand (``finishForTesting(_:)``), to
    /// play a resolver that does not answer.
    public static func pendingForTesting(host: String, port: Int) -> HostLookup {
        HostLookup(host: host, port: port)
    }

    public func finishForTesting(_ outcome: Outcome) { finish(outcome) }

    /// The outcome for a numeric host, found without a resolver
    /// (`AI_NUMERICHOST`); nil for a name.
    private static func numeric(host: String, port: Int) -> Outcome? {
        let outcome = resolve(host: host, port: port, flags: AI_NUMERICHOST)
        if case .failed = outcome { return nil }
        return outcome
    }

    private static func resolve(host: String, port: Int, flags: Int32) -> Outcome {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = flags
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failed(status == 0 ? "no address" : String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(first) }
        var addresses: [Address] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            entry = current.pointee.ai_next
            guard let address = current.pointee.ai_addr else { continue }
            let bytes = [UInt8](UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
            addresses.append(Address(family: current.pointee.ai_family, bytes: bytes))
        }
        return addresses.isEmpty ? .failed("no address") : .addresses(addresses)
    }
}
