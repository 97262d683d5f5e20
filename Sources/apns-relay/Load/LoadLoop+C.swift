#if canImport(Glibc)
    import Glibc
#endif

/// The load generator's connections, all on the one thread that calls
/// `run()`: a poll(2) loop over non-blocking keep-alive sockets, one request
/// in flight on each (a closed loop, no pipelining).
///
/// One thread instead of one blocking thread per connection because the
/// generator shares the relay's two cores: a blocked `recv` per connection
/// put a thread to sleep and woke it for every answer, and those switches
/// were most of the generator's CPU per send; one loop handles every answer
/// that arrived while it was busy before it sleeps again
/// (docs/performance.md, "The load generator's CPU per send").
final class LoadLoop {
    /// What the loop counted.
    struct Counts {
        /// Per request, milliseconds, in the order they finished.
        var latencies: [Double] = []
        var sendLatencies: [Double] = []
        var succeeded = 0
        var failed = 0
    }

    /// One keep-alive connection and the request it has in flight.
    private final class Connection {
        /// Its place in `connections` and `descriptors`.
        let slot: Int
        var descriptor: Int32 = -1
        var request: LoadRequest
        /// The request's number; -1 when none is in flight.
        var index = -1
        /// Whether the request in flight is already on its second connection.
        var retried = false
        var sent = ContinuousClock.now
        var written = 0
        var waitsForWritable = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        var filled = 0
        var searched = 0

        init(slot: Int, request: LoadRequest) {
            self.slot = slot
            self.request = request
        }
    }

    private let host: String
    private let port: UInt16
    private let requests: Int
    private let firstToken: (Int) -> Int
    private let judge: (_ status: Int, _ body: ArraySlice<UInt8>, _ counts: inout Counts) -> Int?
    private var connections: [Connection]
    /// One entry per connection, in `connections`' order: a closed one's
    /// descriptor is -1, which poll(2) skips.
    private var descriptors: [pollfd]
    private var next = 0
    private var open = 0
    private var counts = Counts()

    /// - Parameters:
    ///   - firstToken: the token number before a request's first item's.
    ///   - judge: an answer's sends that succeeded, nil for a failed request;
    ///     it may note more (per-send latencies) in the counts.
    init(host: String, port: UInt16, connections: Int, requests: Int, request: LoadRequest, firstToken: @escaping (Int) -> Int,
         judge: @escaping (_ status: Int, _ body: ArraySlice<UInt8>, _ counts: inout Counts) -> Int?) {
        self.host = host
        self.port = port
        self.requests = requests
        self.firstToken = firstToken
        self.judge = judge
        descriptors = [pollfd](repeating: pollfd(fd: -1, events: Int16(POLLIN), revents: 0), count: connections)
        self.connections = (0..<connections).map { Connection(slot: $0, request: request) }
        counts.latencies.reserveCapacity(requests)
    }

    deinit {
        for connection in connections where connection.descriptor >= 0 { close(connection.descriptor) }
    }

    /// Sends every request and returns what was counted.
    func run() -> Counts {
        open = connections.count
        for connection in connections { launch(connection) }
        while open > 0 {
            let ready = poll(&descriptors, nfds_t(descriptors.count), -1)
            guard ready >= 0 else {
                precondition(errno == EINTR, "poll: \(String(cString: strerror(errno)))")
                continue
            }
            var left = Int(ready)
            for (slot, connection) in connections.enumerated() where left > 0 {
                let events = Int32(descriptors[slot].revents)
                guard events != 0 else { continue }
                left -= 1
                descriptors[slot].revents = 0
                guard connection.descriptor >= 0, descriptors[slot].fd == connection.descriptor else { continue }
                if connection.waitsForWritable, events & Int32(POLLOUT) != 0, !flush(connection) {
                    broken(connection)
                    continue
                }
                if events & Int32(POLLIN | POLLERR | POLLHUP) != 0 { receive(connection) }
            }
        }
        return counts
    }

    /// Sends `connection`'s next request (or its request in flight again, on
    /// a new connection); closes it when none is left.
    private func launch(_ connection: Connection) {
        while true {
            if connection.index < 0 {
                guard next < requests else {
                    disconnect(connection)
                    open -= 1
                    return
                }
                connection.index = next
                next += 1
                connection.retried = false
                connection.request.address(first: firstToken(connection.index))
                connection.sent = ContinuousClock.now
            }
            if transmit(connection) { return }
            giveUpAttempt(connection)
        }
    }

    /// Starts writing the request; false when the connection failed.
    private func transmit(_ connection: Connection) -> Bool {
        if connection.descriptor < 0 {
            guard let descriptor = try? BlockingHTTPClient.connect(host: host, port: port, nonBlocking: true) else { return false }
            connection.descriptor = descriptor
            descriptors[connection.slot] = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            connection.filled = 0
        }
        connection.written = 0
        connection.searched = 0
        return flush(connection)
    }

    /// Writes what the socket takes of the request; false when it failed.
    private func flush(_ connection: Connection) -> Bool {
        let descriptor = connection.descriptor
        let total = connection.request.bytes.count
        while connection.written < total {
            let written = connection.request.bytes.withUnsafeBytes { bytes in
                send(descriptor, bytes.baseAddress! + connection.written, total - connection.written, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                connection.written += written
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                if errno != EINTR {
                    watchWritable(connection, true)
                    return true
                }
            } else {
                return false
            }
        }
        if connection.waitsForWritable { watchWritable(connection, false) }
        return true
    }

    /// Whether poll(2) also waits for room to write the rest of the request.
    private func watchWritable(_ connection: Connection, _ watch: Bool) {
        connection.waitsForWritable = watch
        descriptors[connection.slot].events = Int16(watch ? POLLIN | POLLOUT : POLLIN)
    }

    /// Reads what arrived; finishes the request once its answer is whole.
    private func receive(_ connection: Connection) {
        if connection.filled == connection.buffer.count { connection.buffer.append(contentsOf: repeatElement(0, count: connection.buffer.count)) }
        let descriptor = connection.descriptor
        let filled = connection.filled
        let count = connection.buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + filled, $0.count - filled, 0) }
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
        guard count > 0, connection.index >= 0 else {
            // Closed or failed before the whole answer (or with nothing in flight).
            broken(connection)
            return
        }
        connection.filled += count
        let parsed: HTTPAnswerHead?
        do {
            parsed = try connection.buffer.withUnsafeBufferPointer {
                try HTTPAnswerHead.parse(UnsafeBufferPointer(rebasing: $0[0..<connection.filled]), searchedUpTo: &connection.searched)
            }
        } catch {
            broken(connection)
            return
        }
        guard let head = parsed else { return }
        let end = head.length + head.contentLength
        guard connection.filled >= end else { return }
        // An answer that came before the whole request went out (an early
        // error): the connection's state is unknown, so it is not reused.
        let reusable = !head.closes && connection.written == connection.request.bytes.count && connection.filled == end
        finish(connection, judge(head.status, connection.buffer[head.length..<end], &counts))
        connection.filled = 0
        connection.searched = 0
        if !reusable { disconnect(connection) }
        launch(connection)
    }

    /// The connection failed with a request in flight: the request goes out
    /// once more on a new connection, or counts as failed if it already did.
    private func broken(_ connection: Connection) {
        giveUpAttempt(connection)
        launch(connection)
    }

    private func giveUpAttempt(_ connection: Connection) {
        disconnect(connection)
        if connection.retried || connection.index < 0 {
            if connection.index >= 0 { finish(connection, nil) }
        } else {
            connection.retried = true
        }
    }

    private func finish(_ connection: Connection, _ succeeded: Int?) {
        counts.latencies.append(connection.sent.duration(to: .now).milliseconds)
        if let succeeded { counts.succeeded += succeeded } else { counts.failed += 1 }
        connection.index = -1
    }

    private func disconnect(_ connection: Connection) {
        guard connection.descriptor >= 0 else { return }
        close(connection.descriptor)
        connection.descriptor = -1
        descriptors[connection.slot].fd = -1
        connection.waitsForWritable = false
        connection.filled = 0
    }
}
