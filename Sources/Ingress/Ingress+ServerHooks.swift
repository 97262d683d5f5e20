public import HTTPServer
import Instrumentation
import Relay
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
    public func prepare(_ server: inout HTTPServer.Configuration) {
        server.errorRenderer = IngressError.serverErrorRenderer
        let spans = SpanStarter(tracer)
        server.responseFinisher = { request, response in
            // Header names are lowercase (HTTPHeader keeps them so).
            guard !response.headers.contains(where: { $0.name == TraceParent.headerName }) else { return }
            var parent = ServiceContext.topLevel
            spans.tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
            let started = spans.start("ingress.request", context: parent, ofKind: .server)
            started.attributes?.set("http.request.method", request.method)
            started.attributes?.set("http.response.status_code", response.status)
            if response.status >= 500 { started.span.setStatus(SpanStatus(code: .error)) }
            if let traceParent = started.traceParent { response.headers.append(HTTPHeader(TraceParent.headerName, traceParent.description)) }
            started.span.end()
        }
    }
}

extension IngressError {
    /// The HTTP server's own refusals and the router's 404/405, in the
    /// ingress' envelope: the server names the type, the ingress words it.
    ///
    /// The server names a header in lowercase, as it holds them; a header the
    /// API documents in another spelling (`Idempotency-Key`) is named as
    /// documented, in `field` and in the message, so a control character in
    /// it reads like every other check of that header.
    static let serverErrorRenderer: HTTPServer.ErrorRenderer = { status, type, message, field in
        var field = field
        var message = message
        if let named = field, let documented = documentedHeaderSpellings[named] {
            field = documented
            message = message.replacing("'\(named)'", with: "'\(documented)'")
        }
        return IngressError(status: status, type: Code(type), message: message, field: field).response
    }

    /// Request headers docs/api.md spells other than in lowercase, by their lowercase name.
    static let documentedHeaderSpellings = [IdempotencyKeys.idempotencyHeader.lowercased(): IdempotencyKeys.idempotencyHeader]
}
