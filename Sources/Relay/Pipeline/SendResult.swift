public import APNs
public import Surfaces

/// The outcome of one logical send that APNs accepted.
public struct SendResult: Sendable, Hashable {
    public var apnsID: APNsID
    /// APNs' status (200, or 201/204 for channel management).
    public var status: Int
    /// When the send finished, unix milliseconds.
    public var timestamp: Int64
    /// Attempts made, including the successful one.
    public var attempts: Int
    /// Wall time from accepting the send to its result, including backoff.
    public var latencyMilliseconds: Double
    public var retried: Bool { attempts > 1 }
    /// Traps hit on the way (e.g. MS015 on a 429 that a retry got past).
    public var trapHits: [TrapID]
    /// APNs' `apns-unique-id`, for its delivery log.
    public var apnsUniqueID: String?
    /// For channel create: the new channel's id.
    public var channelID: String?
    /// The response body when APNs sent one (channel list).
    public var body: [UInt8]

    public init(
        apnsID: APNsID, status: Int, timestamp: Int64, attempts: Int, latencyMilliseconds: Double, trapHits: [TrapID],
        apnsUniqueID: String? = nil, channelID: String? = nil, body: [UInt8] = []
    ) {
        self.apnsID = apnsID
        self.status = status
        self.timestamp = timestamp
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
        self.trapHits = trapHits
        self.apnsUniqueID = apnsUniqueID
        self.channelID = channelID
        self.body = body
    }
}

/// A send that did not succeed. Carries the same fields as ``SendResult``
/// plus the error, so a failure is just as traceable.
public struct SendFailure: Error, Sendable, CustomStringConvertible {
    /// The last error: an APNs rejection, a preflight error, or a transport failure.
    public enum Cause: Sendable {
        case apns(APNsError)
        case transport(TransportError)
        /// The relay could not build credentials (unreadable key, …).
        case credentials(String)
        case cancelled
        /// The per-send deadline passed before a final answer.
        case deadlineExceeded
        /// The snapshot broke the contract or does not fit the operation (MS008).
        case invalidSnapshot(SnapshotValidationError)
        /// The request names an app or environment the relay does not serve.
        case configuration(String)
        /// Nothing was sent: the send's intent could not be made durable
        /// (the audit journal's write or sync failed), so no row could
        /// prove it went out. Retry later.
        case auditUnavailable(String)
    }

    public var cause: Cause
    public var apnsID: APNsID
    public var attempts: Int
    public var latencyMilliseconds: Double
    public var trapHits: [TrapID]
    public var timestamp: Int64

    public init(cause: Cause, apnsID: APNsID, attempts: Int, latencyMilliseconds: Double, trapHits: [TrapID], timestamp: Int64) {
        self.cause = cause
        self.apnsID = apnsID
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
        self.trapHits = trapHits
        self.timestamp = timestamp
    }

    /// The APNs error, when APNs or preflight decided the outcome.
    public var apnsError: APNsError? {
        if case .apns(let error) = cause { return error }
        return nil
    }

    /// The `error_type` of a failure that is neither an APNs or preflight
    /// code nor a transport kind: the relay's own outcomes.
    public enum OwnErrorType: String, Sendable, CaseIterable {
        case credentials
        case cancelled
        case deadlineExceeded = "deadline_exceeded"
        case invalidSnapshot = "InvalidSnapshot"
        case configuration
        case auditUnavailable = "audit_unavailable"
    }

    /// Every `error_type` a failure can carry, by construction: APNs reasons
    /// in the catalog, preflight codes, `transport_<kind>`, and
    /// ``OwnErrorType``. An APNs reason not in the catalog is the one
    /// `error_type` outside it (kept verbatim in the audit).
    public static var knownErrorTypes: Set<String> {
        Set(APNsReason.catalog.map(\.name))
            .union(APNsError.Code.Preflight.allCases.map(\.rawValue))
            .union(TransportError.Kind.allCases.map { "transport_\($0.rawValue)" })
            .union(OwnErrorType.allCases.map(\.rawValue))
    }

    /// A stable label for metrics and the audit `error_type` column.
    public var errorType: String {
        switch cause {
        case .apns(let error): error.code.rawValue
        case .transport(let error): "transport_\(error.kind.rawValue)"
        case .credentials: OwnErrorType.credentials.rawValue
        case .cancelled: OwnErrorType.cancelled.rawValue
        case .deadlineExceeded: OwnErrorType.deadlineExceeded.rawValue
        case .invalidSnapshot: OwnErrorType.invalidSnapshot.rawValue
        case .configuration: OwnErrorType.configuration.rawValue
        case .auditUnavailable: OwnErrorType.auditUnavailable.rawValue
        }
    }

    public var description: String {
        switch cause {
        case .apns(let error): "\(error) after \(attempts) attempt(s)"
        case .transport(let error): "transport failure (\(error)) after \(attempts) attempt(s)"
        case .credentials(let message): "credentials: \(message)"
        case .cancelled: "cancelled after \(attempts) attempt(s)"
        case .deadlineExceeded: "deadline exceeded after \(attempts) attempt(s)"
        case .invalidSnapshot(let error): "\(error)"
        case .configuration(let message): message
        case .auditUnavailable(let message): message
        }
    }
}
