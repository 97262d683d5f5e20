public import Logging

/// One field of a log line: a key fixed when the program is built and a
/// string value. A line of such fields needs no `Logger.Metadata`
/// dictionary (its keys hashed, its entries allocated) and no sort.
public struct LogField: Sendable {
    public let key: StaticString
    public let value: String

    public init(_ key: StaticString, _ value: String) {
        self.key = key
        self.value = value
    }

    /// The key's UTF-8 bytes, in the binary's constant data.
    @inline(__always)
    public var keyBytes: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    }
}

/// A log handler that writes a line from fields already in key order,
/// without the `Logger.Metadata` dictionary swift-log's API takes: the path
/// of the one line a send writes at the default level (issue 26: a send's
/// line is written straight into bytes, with no dictionary built and sorted
/// for it).
///
/// The line is the one `logger.log(level:_:metadata:)` writes with the
/// fields as `.string` metadata: same keys, values and order. A send asks its
/// logger's handler for this once, when its client is built
/// (``APNsClient``); a handler without it gets the dictionary.
public protocol SortedFieldsLogging: Sendable {
    /// Writes `message` with `fields` at `level`, if the handler takes that
    /// level. `fields`' keys are unique, sorted by their UTF-8 bytes, and none
    /// is one of the line's own (`ts`, `level`, `logger`, `msg`).
    func log(level: Logger.Level, message: StaticString, sortedFields fields: UnsafeBufferPointer<LogField>)
}

extension Logger.Metadata {
    /// The fields as metadata (each value `.string`): for a handler without
    /// ``SortedFieldsLogging``.
    public init(_ fields: UnsafeBufferPointer<LogField>) {
        self.init(minimumCapacity: fields.count)
        for field in fields { self[field.key.description] = .string(field.value) }
    }
}
