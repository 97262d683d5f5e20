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

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        var parent = ServiceContext.topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
        let span = tracer.startSpan("ingress.request", context: parent, ofKind: .server)
        defer { span.end() }
        // A span nobody will export (the log exporter below `info`, an unsampled trace) takes no attributes.
        let attributes = span.isRecording ? SpanAttributeWriter(span) : nil
        attributes?.set("http.route", context.route)
        attributes?.set("http.request.method", request.method)
        var context = context
        context.span = span
        var response = try await next(request, context)
        attributes?.set("http.response.status_code", response.status)
        // OpenTelemetry's HTTP server conventions: only a 5xx is the server's error.
        if response.status >= 500 {
            attributes?.set("error.type", String(response.status))
            span.setStatus(SpanStatus(code: .error))
        }
        if let traceparent = tracer.traceParentHeader(for: span.context) { response.headers.append(HTTPHeader(TraceParent.headerName, traceparent)) }
        return response
    }
}
