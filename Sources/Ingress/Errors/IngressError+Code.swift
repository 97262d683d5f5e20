import HTTPServer

extension IngressError {
    /// The stable name of an ingress error, the `type` member of the error
    /// envelope. The wire strings are part of the API: docs/api.md lists each
    /// one (its "type" table), and `IngressTests` holds this list against it.
    ///
    /// Closed: no public initializer and not expressible by a string
    /// literal, so a new name cannot slip in without a constant here (and a
    /// row in docs/api.md). The HTTP server's own refusals arrive as
    /// ``HTTPRefusalType`` and map to a constant with ``init(_:)-(HTTPRefusalType)``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The wire name.
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // The request.
        /// 400: malformed JSON, a wrong or missing field, framing, a bad request target.
        public static let invalidRequest = Code("InvalidRequest")
        /// 400: the snapshot breaks the LiveSurfaceSnapshot contract (MS008).
        public static let invalidSnapshot = Code("InvalidSnapshot")
        /// 400 or 413: a relay check that mirrors APNs refused the send.
        public static let preflight = Code("Preflight")
        /// 401: no or unknown API key.
        public static let unauthorized = Code("Unauthorized")
        /// 403: the key may not act for the app, or the route needs an admin key.
        public static let forbidden = Code("Forbidden")
        /// 404: no such route, or an unknown app.
        public static let notFound = Code("NotFound")
        /// 405: the route exists under other methods (the router's answer).
        public static let methodNotAllowed = Code("MethodNotAllowed")
        /// 409: the kill switch is held by the environment variable.
        public static let conflict = Code("Conflict")
        /// 409: a request with this `Idempotency-Key` is being sent now.
        public static let idempotencyKeyInFlight = Code("IdempotencyKeyInFlight")
        /// 422: the `Idempotency-Key` was used for a different request.
        public static let idempotencyKeyReused = Code("IdempotencyKeyReused")
        /// 413: a body over the limit, a batch with too many items or sends.
        public static let payloadTooLarge = Code("PayloadTooLarge")
        /// 415: a body that is not `application/json`.
        public static let unsupportedMediaType = Code("UnsupportedMediaType")
        /// 501: a transfer coding the server does not read (the server's answer).
        public static let notImplemented = Code("NotImplemented")

        // Admission.
        /// 429: the key's token bucket is empty.
        public static let rateLimited = Code("RateLimited")
        /// 429: a batch larger than the key's burst could never pass.
        public static let batchExceedsBurst = Code("BatchExceedsBurst")
        /// 503: too many requests or sends in flight.
        public static let overloaded = Code("Overloaded")
        /// 503: the relay is shutting down.
        public static let draining = Code("Draining")
        /// 503, batch results only: the batch stopped before this send started.
        public static let notSent = Code("NotSent")

        // The send.
        /// APNs' status: APNs refused the send.
        public static let apnsRejected = Code("APNsRejected")
        /// 502: APNs could not be reached, or answered without what it must send.
        public static let upstream = Code("Upstream")
        /// 504: no final answer before the send deadline.
        public static let timeout = Code("Timeout")
        /// 503: the send was cancelled.
        public static let cancelled = Code("Cancelled")
        /// 500: the relay could not sign for the app.
        public static let credentials = Code("Credentials")
        /// 500: a bug in the relay (a handler answered an impossible status).
        public static let `internal` = Code("Internal")
        /// 503: the dead-token feed has no answering audit database.
        public static let unavailable = Code("Unavailable")

        /// The code of one of the HTTP server's own refusals.
        init(_ refusal: HTTPRefusalType) {
            self = switch refusal {
            case .invalidRequest: .invalidRequest
            case .payloadTooLarge: .payloadTooLarge
            case .notImplemented: .notImplemented
            case .notFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .draining: .draining
            case .internal: .internal
            }
        }

        /// Every code, in docs/api.md's order.
        public static let all: [Code] = [
            invalidRequest, invalidSnapshot, preflight, unauthorized, forbidden, notFound, methodNotAllowed,
            payloadTooLarge, notImplemented, rateLimited, batchExceedsBurst, overloaded, notSent, draining,
            apnsRejected, upstream, timeout, `internal`, credentials, cancelled, unsupportedMediaType, conflict, unavailable,
            idempotencyKeyInFlight, idempotencyKeyReused,
        ]
    }
}
