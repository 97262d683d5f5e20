public import APNs
import HTTPServer
import Relay
import RelayJSON
import Surfaces
public import RelayBasics

/// An error the ingress answers with: `{"error": {type, message, field?, …}}`
/// and a status that fits it.
///
/// Messages name the field and the rule; none carries a token, a key or a JWT.
public struct IngressError: Error, Sendable {
    public var status: Int
    /// A stable name (`InvalidRequest`, `APNsRejected`, …), see docs/api.md.
    public var type: Code
    public var message: String
    public var field: String?
    public var reason: String?
    public var apnsStatus: Int?
    public var trapID: TrapID?
    public var fix: String?
    public var apnsID: APNsID?
    public var attempts: Int?

    /// A send refused before any attempt whose audit row was recorded (it has
    /// an apns-id and no attempt): its answer waits until that row is durable.
    var isRecordedRefusal: Bool { apnsID != nil && attempts == 0 }
    /// Every trap the send hit (the audit row's `trap_ids`), when the relay got
    /// as far as a send; `trapId` is the one that decided the failure.
    public var trapHits: [TrapID]?
    /// Seconds for a `retry-after` header (429, 503).
    public var retryAfter: Int?
    public var extraHeaders: [HTTPHeader] = []
    /// For 410: when APNs learned the token was gone (unix ms).
    public var unregisteredAt: Int64?
    /// A keyed send's repeat answered from the first send's audit row,
    /// which did not end in APNs' answer (`unknown`, `failed`,
    /// `cancelled`): it may have reached the device, and is not sent again.
    var outcomeUnknown = false
    /// Set by the decoder for an invalid snapshot, so the refusal is audited.
    var refusal: SnapshotRefusal?

    public init(status: Int, type: Code, message: String, field: String? = nil) {
        self.status = status
        self.type = type
        self.message = message
        self.field = field
    }

    static func invalid(_ field: String, _ message: String) -> IngressError {
        IngressError(status: 400, type: .invalidRequest, message: "\(field): \(message)", field: field)
    }

    static let unauthorized: IngressError = {
        var error = IngressError(status: 401, type: .unauthorized, message: "send an API key as 'Authorization: Bearer <key>'")
        error.extraHeaders = [HTTPHeader("www-authenticate", #"Bearer realm="apns-relay""#)]
        return error
    }()

    /// The error object, without the outer `{"error": …}`.
    var object: JSONValue {
        var members: [(String, JSONValue)] = [("type", .string(type.rawValue)), ("message", .string(message))]
        if let field { members.append(("field", .string(field))) }
        if let reason { members.append(("reason", .string(reason))) }
        if let apnsStatus { members.append(("status", .integer(Int64(apnsStatus)))) }
        if let trapID { members.append(("trapId", .string(trapID.rawValue))) }
        if let fix, !fix.isEmpty { members.append(("fix", .string(fix))) }
        if let apnsID { members.append(("apnsId", .string(apnsID.description))) }
        if let attempts { members.append(("attempts", .integer(Int64(attempts)))) }
        if let trapHits { members.append(("trapHits", .array(trapHits.map { .string($0.rawValue) }))) }
        return .object(JSONObject(members))
    }

    /// `www-authenticate`, `retry-after` and `apns-id`, as they apply.
    var headers: [HTTPHeader] {
        var headers = extraHeaders
        if let retryAfter { headers.append(HTTPHeader("retry-after", String(retryAfter))) }
        if let apnsID { headers.append(HTTPHeader("apns-id", apnsID.description)) }
        return headers
    }

    var response: HTTPResponse {
        .json(status, JSONValue.object(JSONObject([("error", object)])).encoded(), headers: headers)
    }
}

extension IngressError {
    /// How a failed send is answered: APNs' own status for its rejections,
    /// 400/413 for what the relay refused before sending, 502/504 when APNs
    /// could not be reached in time.
    init(_ failure: SendFailure, snapshotField: String = "snapshot") {
        switch failure.cause {
        case .apns(let error):
            // A preflight 403 (a topic of another app) is an authorization failure like any other.
            let type: Code = error.stage == .apns ? .apnsRejected : error.status == 403 ? .forbidden : .preflight
            self.init(status: error.status, type: type, message: error.message, field: error.field)
            reason = error.code.rawValue
            apnsStatus = error.status
            trapID = error.trapID
            fix = error.fix
            unregisteredAt = error.unregisteredAt
            if error.stage == .apns, error.status == 429 { retryAfter = 1 }
        case .invalidSnapshot(let error):
            self = .invalidSnapshot(error, field: snapshotField)
        case .transport(let error):
            self.init(status: 502, type: .upstream, message: error.mayHaveReachedAPNs
                ? "APNs did not answer: \(error)" : "APNs could not be reached: \(error)")
        case .deadlineExceeded:
            self.init(status: 504, type: .timeout, message: "no final answer from APNs before the send deadline")
        case .cancelled:
            self.init(status: 503, type: .cancelled, message: "the send was cancelled (the relay is shutting down, the client went away, or its batch reached ingress.batch_deadline_seconds)")
            retryAfter = 1
        case .credentials(let message):
            self.init(status: 500, type: .credentials, message: "the relay could not sign for this app: \(message)")
        case .configuration(let message):
            self.init(status: 400, type: .invalidRequest, message: message)
        case .auditUnavailable(let message):
            self.init(status: 503, type: .unavailable, message: "\(message); retry later")
            retryAfter = 5
        }
        apnsID = failure.apnsID
        attempts = failure.attempts
        trapHits = failure.trapHits
    }

    /// A snapshot that broke the contract (MS008), named by its path under `field`.
    static func invalidSnapshot(_ error: SnapshotValidationError, field: String) -> IngressError {
        let first = error.issues.first
        let path = first.map { field + Self.suffix($0.path) } ?? field
        // Issue messages start with their JSON path ("$.content.progress must …");
        // the caller sees it rooted at the request field instead.
        let text = first?.message ?? "\(error)"
        var message = text.hasPrefix("$") ? field + text.dropFirst() : "\(path): \(text)"
        if error.issues.count > 1 { message += " (and \(error.issues.count - 1) more problem(s))" }
        var result = IngressError(status: 400, type: .invalidSnapshot, message: message, field: path)
        result.trapID = .invalidSnapshot
        return result
    }

    /// `$.content.headline` → `.content.headline`, `$[0]` → `[0]`.
    static func suffix(_ path: JSONPath) -> String {
        let text = path.description
        return text.hasPrefix("$") ? String(text.dropFirst()) : text
    }
}
