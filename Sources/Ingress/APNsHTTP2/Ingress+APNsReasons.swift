import APNs

extension Ingress {
    /// The APNs reason a refusal is answered with on the HTTP/2 APNs
    /// ingress, whose callers are APNs client libraries: they act on APNs'
    /// reasons (drop the token on Unregistered, back off on TooManyRequests)
    /// and know no other. APNs' own reason (from APNs or the relay's
    /// preflight, which speaks APNs' codes) passes unchanged; the relay's own
    /// refusals are worded as APNs would word the same condition.
    static func apnsReason(for error: IngressError) -> String {
        if let reason = error.reason { return reason }
        switch error.type {
        case .unauthorized: return "InvalidProviderToken"
        case .forbidden: return "TopicDisallowed"
        case .rateLimited: return "TooManyRequests"
        case .payloadTooLarge: return "PayloadTooLarge"
        case .draining, .overloaded, .unavailable, .cancelled, .upstream, .timeout: return "ServiceUnavailable"
        case .notFound: return error.field == "apns-topic" || error.field == "app" ? "TopicDisallowed" : "BadPath"
        case .methodNotAllowed: return "MethodNotAllowed"
        case .invalidRequest where error.field == "token": return "BadDeviceToken"
        case .invalidRequest where error.field == "apns-topic" || error.field == "apns-relay-app": return "MissingTopic"
        case .idempotencyKeyInFlight, .idempotencyKeyReused, .conflict: return "BadMessageId"
        default: return error.status >= 500 ? "InternalServerError" : "BadRequest"
        }
    }
}
