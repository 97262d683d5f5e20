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
}

extension SpanAttributeSetting {
    public func setAttributes(_ attributes: SendSpanAttributes) {
        attributes.forEach { key, value in setAttribute(key, value) }
    }
}

/// Sets a span's attributes one at a time: through ``SpanAttributeSetting``
/// when the span takes them so (asked once, when the writer is made), else
/// through its `attributes`, as `span.attributes[key] = value` would.
public struct SpanAttributeWriter: Sendable {
    public let span: any Span
    private let setter: (any SpanAttributeSetting)?

    public init(_ span: any Span) {
        self.span = span
        setter = span as? any SpanAttributeSetting
    }

    /// A writer for a span already known to take attributes one at a time (no cast).
    public init(_ span: any Span, setter: any SpanAttributeSetting) {
        self.span = span
        self.setter = setter
    }

    /// `span.attributes[key] = value`.
    public func set(_ key: String, _ value: some SpanAttributeConvertible) {
        if let setter {
            setter.setAttribute(key, value.toSpanAttribute())
        } else {
            span.attributes[key] = value
        }
    }

    /// Each of the send span's starting attributes, as ``set(_:_:)`` would set them, in one call.
    public func set(_ attributes: SendSpanAttributes) {
        if let setter {
            setter.setAttributes(attributes)
        } else {
            attributes.forEach { key, value in span.attributes[key] = value }
        }
    }
}
