import Foundation
import HTTP2
import HTTPServer
import Ingress
import RelayBasics
import RelayJSON

extension RelayServer {
    /// Starts the APNs-compatible HTTP/2 listener, or returns nil when
    /// `apns_ingress.listen` is not set.
    ///
    /// The server's accept loop and its connections' loop run on threads of
    /// their own (``HTTP2Server``: one thread serves every connection); each
    /// request is handed to a task, so the send's awaits never hold that
    /// thread and it never blocks the cooperative pool. The tasks are kept from one request to
    /// the next (``HandlerWorkers``, as the HTTP/1.1 listener's): a task per
    /// request cost its creation and its stack allocator's slabs, malloc'ed
    /// for the handler's deep call chain and freed with the task, every
    /// time. The answer goes back through the responder from whichever
    /// thread the task ends on.
    static func startAPNsIngress(_ settings: ServerConfiguration.APNsIngressSettings, ingress: Ingress) throws -> APNsIngressListener? {
        guard let listen = settings.listen else { return nil }
        let handler = try ingress.apnsHTTP2Handler(environment: settings.environment?.rawValue, now: { UnixTime.nowSeconds() })
        var tls: TLSServerConfiguration?
        if settings.tls, let certificate = settings.certificateFile, let key = settings.privateKeyFile {
            tls = TLSServerConfiguration(certificateChainFile: certificate, privateKeyFile: key)
            tls?.clientCAFile = settings.clientCAFile
        }
        var configuration = HTTP2Server.Configuration(tls: tls)
        configuration.host = listen.host
        configuration.port = Int(listen.port)
        configuration.maxConcurrentStreams = UInt32(settings.maximumConcurrentStreams)
        configuration.maxHeaderListBytes = settings.maximumHeaderListBytes
        configuration.maxRequestBodyBytes = settings.maximumBodyBytes
        configuration.maxConnectionsPerAddress = settings.maximumConnectionsPerClient
        configuration.maxConnections = settings.maximumConnections
        configuration.requestTimeLimitSeconds = settings.requestTimeoutSeconds
        configuration.limitResponse = { status in
            // APNs' words: 413 PayloadTooLarge; a header block past the limit has no APNs reason of its own.
            let reason = status == 413 ? "PayloadTooLarge" : "BadRequest"
            let body = JSONValue.object(JSONObject([("reason", .string(reason))])).encoded()
            return HTTP2Response(status: status, headers: [HTTPHeader("content-type", "application/json")], body: body)
        }
        // Two clients' worth of streams at the shipped limit (100 each) keep
        // their tasks; past that a burst's extra workers end when done.
        let workers = HandlerWorkers<APNsIngressListener.Job>(maximumWaiting: 128) { job in
            let response = await handler(job.request)
            job.responder.respond(HTTP2Response(status: response.status, headers: response.headers, body: response.body))
        }
        let server = try HTTP2Server(configuration: configuration) { request, responder in
            // The path without its query, sliced without Foundation (no bridging to NSString per request).
            // Checked as a buffer first: APNs paths have no query, and the
            // UTF8View's generic firstIndex(of:) cost 2,200 instructions per request.
            let path = request.path.allUTF8Bytes(satisfy: { $0 != UInt8(ascii: "?") })
                ? request.path
                : request.path.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(request.path[..<$0]) } ?? request.path
            var httpRequest = HTTPRequest(method: request.method, path: path, headers: request.headers, body: request.body)
            httpRequest.clientCertificate = request.clientCertificate
            workers.run(.init(request: httpRequest, responder: responder))
        }
        return APNsIngressListener(server: server, workers: workers)
    }
}
