internal import CMicroHTTPD
internal import Zlib
import Synchronization
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

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
            // Above the configured limit: RequestDeadlines sheds down to it, so
            // libmicrohttpd keeps accepting (a listener at its limit leaves new
            // clients in the kernel's backlog). The headroom covers connections
            // shed but not yet closed by libmicrohttpd's loop.
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_LIMIT, value: HTTPServer.acceptLimit(configuration.connectionLimit), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.THREAD_POOL_SIZE, value: max(1, configuration.threads), ptr_value: nil),
            // One address cannot take every connection (slowloris); 0 = no cap.
            MHD_OptionItem(option: MHD_OPTION.PER_IP_CONNECTION_LIMIT, value: max(0, configuration.connectionsPerClientLimit), ptr_value: nil),
            // 0, not 1 or -1: at 1 libmicrohttpd refuses a missing Host and at
            // -1 a space before a colon itself, with an HTML page; at 0 both
            // reach RequestFraming, which refuses them in the JSON envelope.
            MHD_OptionItem(option: MHD_OPTION.STRICT_FOR_CLIENT, value: 0, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil),
        ]
        // epoll, not select: select() cannot watch descriptors past
        // FD_SETSIZE (1024), and an attack holds thousands.
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        let context = Unmanaged.passUnretained(core).toOpaque()
        let acceptSuspended = core.acceptSuspension.flag
        let started = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                options.withUnsafeMutableBufferPointer { optionBuffer in
                    apns_relay_mhd_start_daemon_hooks(
                        flags, configuration.port, socketAddress, mhdAccessHandler, context, mhdRequestCompleted,
                        mhdConnectionNotify, mhdRequestLine, context, acceptSuspended, optionBuffer.baseAddress)
                }
            }
        }
        guard let started else {
            core.deadlines.stop()
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
            // Quiesced, the socket still listens: the kernel would complete
            // new handshakes into a backlog nobody accepts, and those clients
            // would hang until the stop resets them. Shut down, a listening
            // socket stops listening (connects are refused at once, the
            // backlog is reset), so a client retries on another instance now.
            // Not closed: libmicrohttpd's threads may still hold the number
            // until MHD_stop_daemon (microhttpd.h), and a closed number could
            // be reused by another descriptor meanwhile.
            if state.listenSocket >= 0 { _ = shutdown(state.listenSocket, Int32(SHUT_RDWR)) }
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
            core.deadlines.stop()
            MHD_stop_daemon(daemon)
            // No request comes any more: the waiting handler tasks end.
            core.workers.close()
            // After MHD_stop_daemon the quiesced listen socket is ours to close.
            if state.listenSocket >= 0 { close(state.listenSocket) }
        }
    }
}

// Swift's importer renames these closed C enums' cases; the raw values are
// the stable ABI (microhttpd.h: MHD_RESPMEM_MUST_COPY = 2, MHD_HEADER_KIND = 1,
// MHD_GET_ARGUMENT_KIND = 8).
private let responseMustCopy = MHD_ResponseMemoryMode(rawValue: 2)!

// MARK: libmicrohttpd callbacks (C calling convention, no captures)

private let mhdAccessHandler: MHD_AccessHandlerCallback = { context, connection, url, method, version, uploadData, uploadSize, slot in
    guard let context, let connection, let uploadSize, let slot else { return MHD_Result.NO }
    let core = Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue()

    guard let stored = slot.pointee else {
        // First call for this request: headers are complete, the body is not.
        let exchange = PendingExchange()
        let undecodable = exchange.head.read(connection, method: method, url: url)
        slot.pointee = Unmanaged.passRetained(exchange).toOpaque()
        if let undecodable {
            exchange.refused = true
            // Answered from the head: the request deadline no longer applies,
            // so a slow reader's error answer is not cut (the idle timeout still is).
            core.deadlines.requestReceived(connection)
            let message = "the request target has a malformed percent-escape, bytes that are not UTF-8, or an encoded control character"
            return queue(core.refusal(400, .invalidRequest, message, field: undecodable), for: exchange, on: connection, core: core)
        }
        // Refused before any body byte is read: libmicrohttpd sends the
        // answer and closes the connection without reading the body.
        if let refused = RequestFraming.check(
            version: version.map { String(cString: $0) } ?? "", headers: exchange.head.headers,
            maximumBodyBytes: core.configuration.maximumBodyBytes,
            foldedHeaders: Int(apns_relay_mhd_folded_header_count(connection)))
        {
            exchange.refused = true
            core.deadlines.requestReceived(connection)
            return queue(core.refusal(refused.status, refused.type, refused.message, field: refused.field), for: exchange, on: connection, core: core)
        }
        return MHD_Result.YES
    }
    let exchange = Unmanaged<PendingExchange>.fromOpaque(stored).takeUnretainedValue()
    if exchange.refused {
        uploadSize.pointee = 0
        return MHD_Result.YES
    }

    if uploadSize.pointee > 0 {
        let size = uploadSize.pointee
        if !exchange.tooLarge, let uploadData {
            // Compared without adding, so no size can overflow.
            if size > core.configuration.maximumBodyBytes - exchange.body.count {
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
        return queue(response, for: exchange, on: connection, core: core)
    }
    core.deadlines.requestReceived(connection)
    if exchange.tooLarge {
        // A chunked body has no declared length to refuse up front.
        let limit = core.configuration.maximumBodyBytes
        let response = core.refusal(413, .payloadTooLarge, "request body is over the \(limit)-byte limit")
        return queue(response, for: exchange, on: connection, core: core)
    }
    if exchange.dispatched { return MHD_Result.YES }
    exchange.dispatched = true

    let head = exchange.head
    var request = HTTPRequest(method: head.method, path: head.path, query: head.query, headers: head.headers, body: exchange.body)
    request.undecodedHeaderValues = head.undecodedHeaderValues
    exchange.body = []
    exchange.socket = apns_relay_mhd_connection_fd(connection)
    request.clientProbe = { [exchange] in exchange.clientHasGone() }

    // Suspended under the lock `closeIntake` takes: a request either is in
    // `suspended` before the intake closes (and stop resumes it) or is
    // answered here, never suspended behind stop's back.
    let accepted = core.suspended.withLock { suspended -> Bool in
        guard !core.intakeClosed.load(ordering: .relaxed) else { return false }
        core.inFlight.add(1, ordering: .relaxed)
        MHD_suspend_connection(connection)
        exchange.connection = SuspendedConnection(pointer: connection)
        suspended[ObjectIdentifier(exchange)] = exchange
        return true
    }
    guard accepted else {
        exchange.dispatched = false
        var refusal = core.refusal(503, .draining, "this relay instance is shutting down; retry on another")
        refusal.headers.append(HTTPHeader("retry-after", "1"))
        return queue(refusal, for: exchange, on: connection, core: core)
    }
    // Routed and handled on Swift's pool (the only step of a request that is
    // not libmicrohttpd's bookkeeping), by a worker task kept between requests.
    core.workers.run(MHDServerCore.HandlerJob(request: request, exchange: exchange))
    return MHD_Result.YES
}

private let mhdRequestCompleted: MHD_RequestCompletedCallback = { context, connection, slot, _ in
    if let context, let connection {
        Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue().deadlines.answered(connection)
    }
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

/// Connection started or closed: the request deadline's bookkeeping.
private let mhdConnectionNotify: MHD_NotifyConnectionCallback = { context, connection, _, event in
    guard let context, let connection else { return }
    let deadlines = Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue().deadlines
    switch event.rawValue {
    case 0: deadlines.opened(connection)  // MHD_CONNECTION_NOTIFY_STARTED
    default: deadlines.closed(connection)  // MHD_CONNECTION_NOTIFY_CLOSED, before the socket is closed
    }
}

/// A request line arrived (MHD_OPTION_URI_LOG_CALLBACK). Returns nil: the
/// access handler's first call must still see an empty request slot.
private let mhdRequestLine: apns_relay_mhd_uri_log_callback = { context, _, connection in
    guard let context, let connection else { return nil }
    Unmanaged<MHDServerCore>.fromOpaque(context).takeUnretainedValue().deadlines.requestLineArrived(connection)
    return nil
}

/// Queues `response` for the request `exchange` read: the configured
/// finisher sees it first (every answer, the router's and the server's own
/// included, passes here), then it is gzipped if the client accepts that.
private func queue(_ response: HTTPResponse, for exchange: PendingExchange, on connection: OpaquePointer, core: MHDServerCore)
    -> MHD_Result
{
    var response = response
    if !(100...599).contains(response.status) {
        response = core.configuration.errorRenderer(500, .internal, "the handler answered with status \(response.status)", nil)
    }
    if let finish = core.configuration.responseFinisher {
        let head = exchange.head
        finish(HTTPRequest(method: head.method, path: head.path, query: head.query, headers: head.headers), &response)
    }
    var body = response.body
    var headers = response.headers
    // libmicrohttpd stopped accepting at the open-file limit and only a
    // connection's close makes it accept again: this one closes after its answer.
    if core.acceptSuspension.closesConnectionNow(), !headers.contains(where: { $0.name == "connection" }) {
        headers.append(HTTPHeader("connection", "close"))
    }
    let acceptsGzip = exchange.head.headers.first { $0.name == "accept-encoding" }.map { AcceptEncoding.acceptsGzip($0.value) } ?? false
    if acceptsGzip, response.compressible, body.count >= core.configuration.gzipMinimumBytes,
       !headers.contains(where: { $0.name == "content-encoding" }), let compressed = Zlib.gzip(body)
    {
        body = compressed
        headers.append(HTTPHeader("content-encoding", "gzip"))
        headers.append(HTTPHeader("vary", "accept-encoding"))
    }
    // Read-only: libmicrohttpd copies the bytes (MUST_COPY) and never
    // writes them, and a mutable view would first copy the shared array.
    let mhdResponse = body.withUnsafeBytes { bytes in
        MHD_create_response_from_buffer(bytes.count, bytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }, responseMustCopy)
    }
    guard let mhdResponse else { return MHD_Result.NO }
    defer { MHD_destroy_response(mhdResponse) }
    for header in headers {
        // withCString: a native string lends its own bytes (passing the
        // String itself made a C copy of each name and value).
        _ = header.name.withCString { name in header.value.withCString { value in MHD_add_response_header(mhdResponse, name, value) } }
    }
    return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
}
