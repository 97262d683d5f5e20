import Relay

/// A column that holds a value of the send itself: the same in its intent's
/// `unknown` row and in its finished row, written by both from the
/// ``SendDescriptor`` (``AuditIntentValue/send(_:)``, ``AuditCompletionValue/send(_:)``).
enum AuditSendField: Sendable {
    case apnsID, traceID, app, environment, operation, pushType, priority, topic, tokenFingerprint
    case channelID, snapshotID, surfaceID, payloadBytes, caller, idempotencyKeyHash

    /// Writes the send's value as the next field of `writer`'s line.
    func write(_ send: SendDescriptor, to writer: inout CopyLineWriter) {
        switch self {
        // A parsed apns-id (hex and dashes) and enums' raw values hold no
        // byte COPY escapes: appended without the scan.
        case .apnsID: writer.plain(send.apnsID.value)
        case .traceID: writer.text(send.traceID)
        case .app: writer.text(send.app)
        case .environment: writer.plain(send.environment.rawValue)
        case .operation: writer.plain(send.operation.rawValue)
        case .pushType: writer.plain(send.pushType?.rawValue)
        case .priority: writer.integer(send.priority?.rawValue)
        case .topic: writer.text(send.topic)
        case .tokenFingerprint: writer.text(send.tokenFingerprint)
        case .channelID: writer.text(send.channelID)
        case .snapshotID: writer.text(send.snapshotID)
        case .surfaceID: writer.text(send.surfaceID)
        case .payloadBytes: writer.integer(send.payloadBytes)
        case .caller: writer.text(send.caller)
        case .idempotencyKeyHash: writer.text(send.idempotencyKeyHash)
        }
    }
}
