public import Tracing

/// A span that takes one attribute at a time: the OTLP exporter's span
/// encodes each into its protobuf bytes as it is set.
///
/// `span.attributes[key] = value` on `any Span` reads the span's whole
/// `SpanAttributes` dictionary out and writes it back for every attribute,
/// and an exporter then walks that dictionary again to encode it; a send
/// sets about twenty (issue 26).
public protocol SpanAttributeSetting: AnyObject, Sendable {
    /// Sets `key` to `value`, replacing an earlier value of `key`.
    func setAttribute(_ key: String, _ value: SpanAttribute)

    /// Sets the send span's starting attributes, as ``setAttribute(_:_:)``
    /// for each would (the default does just that); a span may take them
    /// at once, under one lock and into one write.
    func setAttributes(_ attributes: SendSpanAttributes)

    /// `setAttribute(key, .int64(Int64(value)))`, without a `SpanAttribute`
    /// in between (the default does just that): most of a send's
    /// attributes are integers and strings, and a `SpanAttribute` passed
    /// through a protocol is copied through its value witnesses.
    func setAttribute(_ key: String, int value: Int)

    /// `setAttribute(key, .string(value))`, as ``setAttribute(_:int:)``.
    func setAttribute(_ key: String, string value: String)
}

extension SpanAttributeSetting {
    public func setAttributes(_ attributes: SendSpanAttributes) {
        attributes.forEach { key, value in setAttribute(key, value) }
    }

    public func setAttribute(_ key: String, int value: Int) { setAttribute(key, .int64(Int64(value))) }

    public func setAttribute(_ key: String, string value: String) { setAttribute(key, .string(value)) }
}

/// Sets a span's attributes one at a time: through ``SpanAttributeSetting``
/// when the span takes them so (asked once, when the writer is made), else
/// through its `attributes`, as `span.attributes[key] = value` would.
///
/// One class-bound reference, so a copy is one retain: the writer rides in
/// the ingress' request context, which every middleware passes on, and
/// with a span and a setter (two existentials) its copies and destroys cost
/// about 4,000 instructions a send under OTLP (issue 26).
public struct SpanAttributeWriter: Sendable {
    private let target: any SpanAttributeSetting

    public init(_ span: any Span) {
        target = span as? any SpanAttributeSetting ?? SpanAttributesAssignment(span)
    }

    /// A writer for a span already known to take attributes one at a time (no cast).
    public init(setter: any SpanAttributeSetting) {
        target = setter
    }

    /// `span.attributes[key] = value`.
    public func set(_ key: String, _ value: some SpanAttributeConvertible) {
        target.setAttribute(key, value.toSpanAttribute())
    }

    /// `span.attributes[key] = value` for an integer (``SpanAttributeSetting/setAttribute(_:int:)``).
    public func set(_ key: String, _ value: Int) {
        target.setAttribute(key, int: value)
    }

    /// `span.attributes[key] = value` for a string (``SpanAttributeSetting/setAttribute(_:string:)``).
    public func set(_ key: String, _ value: String) {
        target.setAttribute(key, string: value)
    }

    /// Each of the send span's starting attributes, as ``set(_:_:)`` would set them, in one call.
    public func set(_ attributes: SendSpanAttributes) {
        target.setAttributes(attributes)
    }
}

/// A span that does not take attributes one at a time (another tracer's,
/// the log exporter's at `debug`), set through its `attributes` as
/// `span.attributes[key] = value` would.
final class SpanAttributesAssignment: SpanAttributeSetting {
    let span: any Span

    init(_ span: any Span) { self.span = span }

    func setAttribute(_ key: String, _ value: SpanAttribute) {
        span.attributes[key] = value
    }
}
