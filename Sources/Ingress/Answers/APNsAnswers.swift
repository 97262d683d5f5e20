import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// Answers in APNs' shape, for the APNs-compatible routes: a status and
/// `apns-id` on success, `{"reason": …}` on failure, in APNs' vocabulary on
/// the HTTP/2 listener (whose callers are APNs client libraries).
enum APNsAnswers {
    /// Whose words a refusal is answered in.
    enum RefusalVocabulary {
        /// APNs' reason where APNs gave one, else the relay's error type
        /// (the HTTP/1.1 route: its callers read the relay's `error` object too).
        case relay
        /// APNs' reasons only (the HTTP/2 APNs ingress: its callers are APNs
        /// client libraries, which know nothing else). See ``apnsReason(for:)``.
        case apns
    }

    /// APNs' answer shape: its status and `apns-id` (`apns-unique-id`) on
    /// success; on failure `{"reason": …}` (and `"timestamp"` on 410), which
    /// APNs clients read, with the relay's own error object for people
    /// reading the body.
    static func compatibleResponse(_ result: Result<SendResult, IngressError>, _ vocabulary: RefusalVocabulary = .relay) -> HTTPResponse {
        switch result {
        case .success(let result):
            var responseHeaders = [HTTPHeader("apns-id", result.apnsID.description)]
            if let unique = result.apnsUniqueID { responseHeaders.append(HTTPHeader("apns-unique-id", unique)) }
            return HTTPResponse(status: result.status, headers: responseHeaders, body: [])
        case .failure(let error):
            let reason = switch vocabulary {
            case .relay: error.reason ?? error.type.rawValue
            case .apns: apnsReason(for: error)
            }
            let status = switch vocabulary {
            case .relay: error.status
            case .apns: apnsStatus(for: error)
            }
            var members: [(String, JSONValue)] = [("reason", .string(reason))]
            if let unregisteredAt = error.unregisteredAt { members.append(("timestamp", .integer(unregisteredAt))) }
            members.append(("error", error.object))
            return .json(status, JSONValue.object(JSONObject(members)).encoded(), headers: error.headers)
        }
    }

    /// APNs' answer: its status, `apns-request-id`, `apns-channel-id`,
    /// `apns-unique-id` and body; a refusal `{"reason": …}` with the send's `apns-request-id`.
    static func apnsChannelResponse(_ result: Result<SendResult, IngressError>) -> HTTPResponse {
        switch result {
        case .success(let result):
            var headers = [HTTPHeader("apns-request-id", result.apnsID.description)]
            if let channel = result.channelID { headers.append(HTTPHeader("apns-channel-id", channel)) }
            if let unique = result.apnsUniqueID { headers.append(HTTPHeader("apns-unique-id", unique)) }
            // APNs' bodies here are JSON (the channel list, a channel read); 201 and 204 carry none.
            if !result.body.isEmpty { headers.append(HTTPHeader("content-type", "application/json")) }
            return HTTPResponse(status: result.status, headers: headers, body: result.body)
        case .failure(let error):
            var response = compatibleResponse(.failure(error), .apns)
            // These requests are named by apns-request-id, as APNs names them in its answers.
            response.headers = response.headers.map { $0.name == "apns-id" ? HTTPHeader("apns-request-id", $0.value) : $0 }
            return response
        }
    }

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
