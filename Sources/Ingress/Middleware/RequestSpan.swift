import HTTPServer
import Instrumentation
import Relay
import RelayBasics
import Tracing

/// The request span: child of the caller's `traceparent` when it sent a valid
/// one, a new trace otherwise; the answer carries the span's own
/// `traceparent`. Sends are parented on it (``Ingress/Call/context``).
struct RequestSpan: IngressMiddleware {
    let tracer: any Tracer
    /// The tracer when it is one of the relay's own: asked once, not per request.
    private let spanStarter: (any RelaySpanStarting)?

    init(tracer: any Tracer) {
        self.tracer = tracer
        spanStarter = tracer as? any RelaySpanStarting
    }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        var parent = ServiceContext.topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
        let span: any Span
        // A span nobody will export (the log exporter below `info`, an unsampled trace) takes no attributes.
        let attributes: SpanAttributeWriter?
        // The relay's own tracer tells the span's traceparent without its context being built and injected.
        let traceParent: TraceParent?
        if let spanStarter {
            let started = spanStarter.startRelaySpan("ingress.request", context: parent, ofKind: .server)
            (span, attributes, traceParent) = (started.span, started.attributes, started.traceParent)
        } else {
            span = tracer.startSpan("ingress.request", context: parent, ofKind: .server)
            attributes = span.isRecording ? SpanAttributeWriter(span) : nil
            traceParent = nil
        }
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
        if let traceparent = traceParent?.description ?? tracer.traceParentHeader(for: span.context) {
            response.headers.append(HTTPHeader(TraceParent.headerName, traceparent))
        }
        return response
    }
}
