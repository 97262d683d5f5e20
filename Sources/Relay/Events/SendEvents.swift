public import APNs

/// What every attempt and every finished send share: who sent what, where.
public struct SendDescriptor: Sendable, Hashable {
    public var app: String
    public var environment: Environment
    public var operation: Operation
    public var apnsID: APNsID
    public var pushType: PushType?
    public var priority: Priority?
    public var topic: String?
    /// The token's fingerprint, never the token.
    public var tokenFingerprint: String?
    public var channelID: String?
    public var snapshotID: String?
    public var surfaceID: String?
    public var payloadBytes: Int
    /// The API key name that asked for the send (the ingress sets it).
    public var caller: String?
    /// The W3C trace id of the send's span.
    public var traceID: String?
    /// SHA-256 hex of the caller and its `Idempotency-Key`, when the send had one (never the key).
    public var idempotencyKeyHash: String?

    public init(
        app: String, environment: Environment, operation: Operation, apnsID: APNsID, pushType: PushType? = nil,
        priority: Priority? = nil, topic: String? = nil, tokenFingerprint: String? = nil, channelID: String? = nil,
        snapshotID: String? = nil, surfaceID: String? = nil, payloadBytes: Int = 0, caller: String? = nil,
        traceID: String? = nil, idempotencyKeyHash: String? = nil
    ) {
        self.app = app
        self.environment = environment
        self.operation = operation
        self.apnsID = apnsID
        self.pushType = pushType
        self.priority = priority
        self.topic = topic
        self.tokenFingerprint = tokenFingerprint
        self.channelID = channelID
        self.snapshotID = snapshotID
        self.surfaceID = surfaceID
        self.payloadBytes = payloadBytes
        self.caller = caller
        self.traceID = traceID
        self.idempotencyKeyHash = idempotencyKeyHash
    }
}

/// One attempt of a send, as observers see it.
public struct AttemptEvent: Sendable {
    public var send: SendDescriptor
    /// 1 for the first attempt.
    public var attempt: Int
    /// True when no further attempt follows.
    public var isFinalAttempt: Bool
    /// APNs' status; nil when the transport failed.
    public var status: Int?
    public var reason: String?
    /// A stable error label (APNs reason or `transport_timeout`…); nil on success.
    public var errorType: String?
    public var trapID: TrapID?
    public var durationSeconds: Double
}

/// How a send ended, in the words the metrics and the audit use.
public enum SendOutcome: String, Sendable, Hashable {
    case success
    /// APNs rejected it (or preflight did).
    case rejected
    /// No answer from APNs after every attempt.
    case failed
    case cancelled
}

/// A finished logical send: exactly one per accepted send.
public struct SendEvent: Sendable {
    public var send: SendDescriptor
    public var outcome: SendOutcome
    public var status: Int?
    public var reason: String?
    public var errorType: String?
    public var attempts: Int
    public var retried: Bool { attempts > 1 }
    public var trapHits: [TrapID]
    public var latencySeconds: Double
    /// Unix nanoseconds when the send was accepted and when it finished.
    public var startedAt: UInt64
    public var finishedAt: UInt64
    public var apnsUniqueID: String?
    /// For 410 answers: when APNs learned the token was gone (ms).
    public var unregisteredAt: Int64?
    /// True when the token is dead or wrong and belongs on the dead-token list.
    public var dropsToken: Bool
    /// Status, reason and duration of each attempt, in order.
    public var attemptLog: [AttemptSummary]
    /// The token APNs called dead, for the dead-token store only.
    public var deadToken: DeadToken?

    public init(
        send: SendDescriptor, outcome: SendOutcome, status: Int?, reason: String?, errorType: String?, attempts: Int,
        trapHits: [TrapID], latencySeconds: Double, startedAt: UInt64, finishedAt: UInt64, apnsUniqueID: String?,
        unregisteredAt: Int64?, dropsToken: Bool, attemptLog: [AttemptSummary], deadToken: DeadToken?
    ) {
        self.send = send
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.errorType = errorType
        self.attempts = attempts
        self.trapHits = trapHits
        self.latencySeconds = latencySeconds
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.apnsUniqueID = apnsUniqueID
        self.unregisteredAt = unregisteredAt
        self.dropsToken = dropsToken
        self.attemptLog = attemptLog
        self.deadToken = deadToken
    }
}

/// A token APNs rejected for good (Unregistered, ExpiredToken, BadDeviceToken,
/// DeviceTokenNotForTopic), carried to the dead-token store so backends can
/// prune it. Prints as its fingerprint: the token itself must reach the
/// store and nothing else (no log, metric or trace).
public struct DeadToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public var token: String
    public var fingerprint: String
    public var reason: String
    /// When APNs learned of it (410 `timestamp`, ms), if it said.
    public var apnsTimestampMilliseconds: Int64?

    public init(token: String, fingerprint: String, reason: String, apnsTimestampMilliseconds: Int64?) {
        self.token = token
        self.fingerprint = fingerprint
        self.reason = reason
        self.apnsTimestampMilliseconds = apnsTimestampMilliseconds
    }

    public var description: String { "DeadToken(\(fingerprint), \(reason))" }
    public var debugDescription: String { description }
}

/// One line of a send's attempt log.
public struct AttemptSummary: Sendable, Hashable {
    public var status: Int?
    public var reason: String?
    public var durationSeconds: Double

    public init(status: Int?, reason: String?, durationSeconds: Double) {
        self.status = status
        self.reason = reason
        self.durationSeconds = durationSeconds
    }
}

/// Receives the relay's events. Metrics, the audit writer and tests plug in
/// here; the relay never imports them.
///
/// Called synchronously on the sending task: implementations must be quick
/// and must not block (queue the work, do not write to a socket).
public protocol RelayObserver: Sendable {
    func attemptFinished(_ event: AttemptEvent)
    func sendFinished(_ event: SendEvent)
}
