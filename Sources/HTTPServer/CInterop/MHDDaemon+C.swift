internal import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// State shared by libmicrohttpd's callbacks for one server.
final class MHDServerCore: Sendable {
    let router: Router
    let configuration: HTTPServer.Configuration
    let inFlight = Atomic<Int>(0)
    /// Requests whose connection is suspended while their handler runs: a
    /// stop past the drain timeout must resume them first, since
    /// libmicrohttpd aborts the process when stopped with suspended connections.
    let suspended = Mutex<[ObjectIdentifier: PendingExchange]>([:])

    init(router: Router, configuration: HTTPServer.Configuration) {
        self.router = router
        self.configuration = configuration
    }
}

/// One request between libmicrohttpd's callbacks: read on MHD's thread,
/// answered by a Swift task.
final class PendingExchange: @unchecked Sendable {
    // The mutable fields are touched only by libmicrohttpd callbacks for this
    // connection, which MHD runs one at a time; only `response` crosses to the
    // handler task, and it is guarded by its own lock.
    var headers: [(name: String, value: String)] = []
    var query: [String: String] = [:]
    var body: [UInt8] = []
    var tooLarge = false
    var dispatched = false
    let response = Mutex<HTTPResponse?>(nil)
    /// Set once the connection has been resumed, by the handler or by a forced
    /// stop; whoever sets it answers, the other leaves the connection alone.
    private let resumed = Mutex(false)
    var connection: SuspendedConnection?
    /// The connection's socket, for ``clientHasGone()``.
    var socket: Int32 = -1

    /// Whether the client hung up while the handler runs, or the connection
    /// was already answered. A suspended connection is not polled by
    /// libmicrohttpd, so its socket is asked directly (no wait): POLLRDHUP
    /// means the client closed its side, POLLHUP/POLLERR that it is reset.
    /// Under the `resumed` lock, so the socket is still the connection's own.
    func clientHasGone() -> Bool {
        resumed.withLock { done in
            if done { return true }
            guard socket >= 0 else { return false }
            // POLLRDHUP (0x2000, Linux) is not exported by Swift's Glibc module.
            let hangUp = Int16(0x2000) | Int16(POLLHUP) | Int16(POLLERR)
            var entry = pollfd(fd: socket, events: Int16(0x2000), revents: 0)
            return poll(&entry, 1, 0) > 0 && entry.revents & hangUp != 0
        }
    }

    /// Stores `answer` and resumes the connection, unless that already happened.
    func resume(with answer: HTTPResponse) {
        let first = resumed.withLock { done in
            defer { done = true }
            return !done
        }
        guard first, let connection else { return }
        response.withLock { $0 = answer }
        MHD_resume_connection(connection.pointer)
    }
}

/// A suspended connection handle carried to the task that resumes it.
struct SuspendedConnection: @unchecked Sendable {
    // libmicrohttpd allows MHD_resume_connection from any thread
    // (MHD_ALLOW_SUSPEND_RESUME implies an inter-thread channel).
    let pointer: OpaquePointer
}

/// Owns the MHD_Daemon.
final class MHDDaemon: @unchecked Sendable {
    // `daemon` is written only in init and, under `lifecycle`, by stop();
    // libmicrohttpd itself is thread-safe for quiesce/stop.
    private var daemon: OpaquePointer?
    private let lifecycle = Mutex<(stopped: Bool, listenSocket: Int32)>((false, -1))
    let core: MHDServerCore
    let port: UInt16

    init(configuration: HTTPServer.Configuration, router: Router) throws(HTTPServerError) {
        core = MHDServerCore(router: router, configuration: configuration)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = configuration.port.bigEndian
        guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
            throw HTTPServerError(description: "listen address \(configuration.host) is not an IPv4 address")
        }
        var options = [
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_TIMEOUT, value: configuration.connectionTimeoutSeconds, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_LIMIT, value: configuration.connectionLimit, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.THREAD_POOL_SIZE, value: max(1, configuration.threads), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil),
        ]
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        let context = Unmanaged.passUnretained(core).toOpaque()
        let started = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                options.withUnsafeMutableBufferPointer { optionBuffer in
                    apns_relay_mhd_start_daemon_full(
                        flags, configuration.port, socketAddress, mhdAccessHandler, context, mhdRequestCompleted, context,
                        optionBuffer.baseAddress)
                }
            }
        }
        guard let started else {
            throw HTTPServerError(description: "could not listen on \(configuration.host):\(configuration.port) (address in use?)")
        }
        daemon = started
        port = apns_relay_mhd_bound_port(started)
    }

    deinit { stop() }

    /// Stops accepting new connections; running requests continue.
    func quiesce() {
        lifecycle.withLock { state in
            guard !state.stopped, state.listenSocket < 0, let daemon else { return }
            state.listenSocket = Int32(MHD_quiesce_daemon(daemon))
        }
    }

    /// Answers every request still waiting on its handler with `answer`, so
    /// the daemon can stop; their handlers' later answers are dropped.
    func resumeSuspended(with answer: HTTPResponse) {
        for exchange in core.suspended.withLock({ Array($0.values) }) { exchange.resume(with: answer) }
    }

    func stop() {
        lifecycle.withLock { state in
            guard !state.stopped, let daemon else { return }
            state.stopped = true
            MHD_stop_daemon(daemon)
            // After MHD_stop_daemon the quiesced listen socket is ours to close.
            if state.listenSocket >= 0 { close(state.listenSocket) }
        }
    }
}

// Swift's importer renames these closed C enums' cases; the raw values are
// the stable ABI (microhttpd.h: MHD_RESPMEM_MUST_COPY = 2, MHD_HEADER_KIND = 1,
// MHD_GET_ARGUMENT_KIND = 8).
private let responseMustCopy = MHD_ResponseMemoryMode(rawValue: 2)!
private let headerKind = MHD_ValueKind(rawValue: 1)!
private let queryArgumentKind = MHD_ValueKind(rawValue: 8)!

// MARK: libmicrohttpd callbacks (C calling convention, no captures)

private let mhdAccessHandler: MHD_AccessHandlerCallback = { context, connection, url, method, _, uploadData, uploadSize, slot in
    guard let context, let connection, let uploadSize, let slot else { return MHD_Result.NO }
    let core = Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue()

    guard let stored = slot.pointee else {
        // First call for this request: headers are complete, the body is not.
        let exchange = PendingExchange()
        exchange.headers = collectValues(connection, kind: headerKind).map { ($0.name.lowercased(), $0.value) }
        for argument in collectValues(connection, kind: queryArgumentKind) { exchange.query[argument.name] = argument.value }
        slot.pointee = Unmanaged.passRetained(exchange).toOpaque()
        return MHD_Result.YES
    }
    let exchange = Unmanaged<PendingExchange>.fromOpaque(stored).takeUnretainedValue()

    if uploadSize.pointee > 0 {
        let size = uploadSize.pointee
        if !exchange.tooLarge, let uploadData {
            if exchange.body.count + size > core.configuration.maximumBodyBytes {
                exchange.tooLarge = true
                exchange.body = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: size) { bytes in
                    exchange.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: size))
                }
            }
        }
        uploadSize.pointee = 0
        return MHD_Result.YES
    }

    if let response = exchange.response.withLock({ $0.take() }) {
        return queue(response, on: connection, acceptsGzip: acceptsGzip(exchange), core: core)
    }
    if exchange.tooLarge {
        let limit = core.configuration.maximumBodyBytes
        let body = #"{"error":{"type":"PayloadTooLarge","message":"request body is over the \#(limit)-byte limit"}}"#
        return queue(.json(413, Array(body.utf8)), on: connection, acceptsGzip: false, core: core)
    }
    if exchange.dispatched { return MHD_Result.YES }
    exchange.dispatched = true

    var request = HTTPRequest(
        method: String(cString: method!), path: String(cString: url!), query: exchange.query, headers: exchange.headers,
        body: exchange.body)
    let (handler, parameters) = core.router.handler(for: request)
    request.pathParameters = parameters
    exchange.body = []
    exchange.socket = apns_relay_mhd_connection_fd(connection)
    request.clientProbe = { [exchange] in exchange.clientHasGone() }

    core.inFlight.add(1, ordering: .relaxed)
    MHD_suspend_connection(connection)
    exchange.connection = SuspendedConnection(pointer: connection)
    core.suspended.withLock { $0[ObjectIdentifier(exchange)] = exchange }
    Task {
        let response = await handler(request)
        // In flight until libmicrohttpd reports the response written (see
        // mhdRequestCompleted): a drain that stopped the daemon as soon as the
        // handler returned would cut off answers still in the socket buffer.
        exchange.resume(with: response)
    }
    return MHD_Result.YES
}

private let mhdRequestCompleted: MHD_RequestCompletedCallback = { context, _, slot, _ in
    guard let slot, let stored = slot.pointee else { return }
    let exchange = Unmanaged<PendingExchange>.fromOpaque(stored)
    if exchange.takeUnretainedValue().dispatched, let context {
        let core = Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue()
        core.suspended.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(exchange.takeUnretainedValue())) }
        core.inFlight.subtract(1, ordering: .relaxed)
    }
    exchange.release()
    slot.pointee = nil
}

private func acceptsGzip(_ exchange: PendingExchange) -> Bool {
    guard let header = exchange.headers.first(where: { $0.name == "accept-encoding" })?.value else { return false }
    return header.split(separator: ",").contains { part in
        let token = part.split(separator: ";")[0].trimmingCharacters(in: " ")
        let quality = part.split(separator: ";").dropFirst().first { $0.trimmingCharacters(in: " ").hasPrefix("q=") }
        return token.lowercased() == "gzip" && quality.map { $0.trimmingCharacters(in: " ") != "q=0" } ?? true
    }
}

private func queue(_ response: HTTPResponse, on connection: OpaquePointer, acceptsGzip: Bool, core: MHDServerCore)
    -> MHD_Result
{
    var body = response.body
    var headers = response.headers
    if acceptsGzip, response.compressible, body.count >= core.configuration.gzipMinimumBytes,
       !headers.contains(where: { $0.name.lowercased() == "content-encoding" }), let compressed = Gzip.compress(body)
    {
        body = compressed
        headers.append(("content-encoding", "gzip"))
        headers.append(("vary", "accept-encoding"))
    }
    let mhdResponse = body.withUnsafeMutableBytes { bytes in
        MHD_create_response_from_buffer(bytes.count, bytes.baseAddress, responseMustCopy)
    }
    guard let mhdResponse else { return MHD_Result.NO }
    defer { MHD_destroy_response(mhdResponse) }
    for header in headers {
        _ = MHD_add_response_header(mhdResponse, header.name, header.value)
    }
    return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
}

/// Collects one kind of connection value (headers, query arguments).
private func collectValues(_ connection: OpaquePointer, kind: MHD_ValueKind) -> [(name: String, value: String)] {
    final class Box { var values: [(name: String, value: String)] = [] }
    let box = Box()
    let iterator: MHD_KeyValueIterator = { context, _, key, value in
        guard let context, let key else { return MHD_Result.YES }
        let box = Unmanaged<Box>.fromOpaque(context).takeUnretainedValue()
        box.values.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
        return MHD_Result.YES
    }
    _ = withExtendedLifetime(box) {
        MHD_get_connection_values(connection, kind, iterator, Unmanaged.passUnretained(box).toOpaque())
    }
    return box.values
}

extension Substring {
    func trimmingCharacters(in set: Character) -> Substring {
        var slice = self
        while slice.first == set { slice = slice.dropFirst() }
        while slice.last == set { slice = slice.dropLast() }
        return slice
    }
}
