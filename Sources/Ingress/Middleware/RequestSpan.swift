import HTTPServer
import Instrumentation
import Relay
import RelayBasics
import Tracing

/// The request span: child of the caller's `traceparent` when it sent a valid
/// one, a new trace otherwise; the answer carries the span's own
/// `traceparent`. Sends are parented on it (``Ingress/Call/context``).
struct RequestSpan: IngressMiddleware {
    /// The tracer, asked once whether it is one of the relay's own.
    let spans: SpanStarter

    init(tracer: any Tracer) {
        spans = SpanStarter(tracer)
    }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        var parent = ServiceContext.topLevel
        spans.tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
        // A span nobody will export (the log exporter below `info`, an
        // unsampled trace) comes without attributes; its traceparent comes
        // with it, its context neither built nor injected.
        let started = spans.start("ingress.request", context: parent, ofKind: .server)
        let (span, attributes) = (started.span, started.attributes)
        defer { span.end() }
        attributes?.set("http.route", context.route)
        attributes?.set("http.request.method", request.method)
        var context = context
        context.span = span
        context.spanAttributes = attributes
        var response = try await next(request, context)
        attributes?.set("http.response.status_code", response.status)
        // OpenTelemetry's HTTP server conventions: only a 5xx is the server's error.
        if response.status >= 500 {
            attributes?.set("error.type", String(response.status))
            span.setStatus(SpanStatus(code: .error))
        }
        if let traceParent = started.traceParent { response.headers.append(HTTPHeader(TraceParent.headerName, traceParent.description)) }
        return response
    }
}
