public import Tracing

/// A span that starts a child of itself without its own context being built.
///
/// `tracer.startSpan(name, context: span.context)` makes the parent's
/// context (a copy of the instrumentation context with the span's identity
/// written into it) only for the tracer to read the identity back out; the
/// send path does that once per attempt (issue 26). A span that knows its
/// identity and its tracer starts the child from them, with the same ids,
/// sampling and parent as `startSpan` would give it.
///
/// Such a span takes its attributes one at a time too: asking a span for
/// both once, and its child not at all, saves the send path a dynamic cast
/// (~800 instructions) per span.
public protocol ChildSpanStarting: SpanAttributeSetting {
    /// What `tracer.startSpan(operationName, context: self.context, ofKind: kind)` returns.
    func startChild(_ operationName: String, ofKind kind: SpanKind) -> any Span & ChildSpanStarting
}
