public import HTTPServer
import Instrumentation
import Tracing
import RelayBasics

extension Ingress {
    /// Fits the ingress' HTTP server to the API: the server's own errors
    /// (framing 400, 413, 501, drain 503) come in the same envelope as every
    /// other ingress error, and every answer carries a `traceparent`.
    ///
    /// Routes that run a request span (the guarded API routes) answer with that
    /// span's `traceparent`. Everything else, the router's 404 and 405, the
    /// server's own refusals, `/healthz` and `/readyz`, gets one here: a
    /// span of its own, child of the caller's `traceparent` when it sent a
    /// valid one (same trace id), a new trace otherwise.
    ///
    /// With `sendExecutor`, the tasks that serve `POST /v1/send` prefer it:
    /// the relay passes its HTTP/2 loop, so a single send's request and the
    /// answer that resumes it stay on that thread. Other routes stay on
    /// Swift's pool: a batch parses and fans out far more work than one
    /// thread that also carries every connection's I/O should run, and the
    /// admin routes wait on Postgres.
    public func prepare(_ server: inout HTTPServer.Configuration, sendExecutor: (any TaskExecutor)? = nil) {
        server.errorRenderer = IngressError.serverErrorRenderer
        if let sendExecutor {
            server.handlerExecutor = { request in Self.runsOnSendExecutor(request) ? sendExecutor : nil }
        }
        let tracer = tracer
        server.responseFinisher = { request, response in
            // Header names are lowercase (HTTPHeader keeps them so).
            guard !response.headers.contains(where: { $0.name == TraceParent.headerName }) else { return }
            var parent = ServiceContext.topLevel
            tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
            let span = tracer.startSpan("ingress.request", context: parent, ofKind: .server)
            if span.isRecording {
                span.attributes["http.request.method"] = request.method
                span.attributes["http.response.status_code"] = response.status
            }
            if response.status >= 500 { span.setStatus(SpanStatus(code: .error)) }
            if let traceparent = tracer.traceParentHeader(for: span.context) { response.headers.append(HTTPHeader(TraceParent.headerName, traceparent)) }
            span.end()
        }
    }
}

extension Ingress {
    /// Whether `request` is a single send (`POST /v1/send`), whose task
    /// prefers the send executor handed to ``prepare(_:sendExecutor:)``.
    static func runsOnSendExecutor(_ request: HTTPRequest) -> Bool {
        request.method == "POST" && request.path == "/v1/send"
    }
}

extension IngressError {
    /// The HTTP server's own refusals and the router's 404/405, in the
    /// ingress' envelope: the server names the type, the ingress words it.
    static let serverErrorRenderer: HTTPServer.ErrorRenderer = { status, type, message, field in
        IngressError(status: status, type: Code(rawValue: type), message: message, field: field).response
    }
}
