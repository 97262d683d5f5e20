import APNs

extension Ingress {
    /// The APNs reason a refusal is answered with on the HTTP/2 APNs
    /// ingress, whose callers are APNs client libraries: they act on APNs'
    /// reasons (drop the token on Unregistered, back off on TooManyRequests)
    /// and know no other. APNs' own reason (from APNs or the relay's
    /// preflight, which speaks APNs' codes) passes unchanged; the relay's own
    /// refusals are worded as APNs would word the same condition.
    static func apnsReason(for error: IngressError) -> String {
        if error.outcomeUnknown {
            // APNs' own 5xx answer to the first send, else the relay's word (docs/api.md).
            guard let status = error.apnsStatus, status >= 500, let reason = error.reason else { return "SendOutcomeUnknown" }
            return reason
        }
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
        // The first request with this apns-id is still being sent: retry later (and get its answer).
        case .idempotencyKeyInFlight: return "ServiceUnavailable"
        case .idempotencyKeyReused, .conflict: return "BadMessageId"
        default: return error.status >= 500 ? "InternalServerError" : "BadRequest"
        }
    }

    /// The status a refusal is answered with on the HTTP/2 APNs ingress:
    /// one APNs answers with, so a client's handling of APNs' statuses
    /// applies. The relay's idempotency answers have no status of APNs'
    /// own: a request with an apns-id still being sent is 503 (retry
    /// later), an apns-id reused for another notification 400
    /// (`BadMessageId`), a first send whose outcome is unknown 500 (or
    /// APNs' own 5xx when it gave one). Any other status is the relay's.
    static func apnsStatus(for error: IngressError) -> Int {
        if error.outcomeUnknown {
            guard let status = error.apnsStatus, (500..<600).contains(status), error.reason != nil else { return 500 }
            return status
        }
        switch error.type {
        case .idempotencyKeyInFlight: return 503
        case .idempotencyKeyReused: return 400
        default: return error.status
        }
    }
}
