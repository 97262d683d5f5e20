/// Why a send did not succeed: either APNs rejected it, or a preflight check
/// caught it before anything was sent.
///
/// One type for both, so every caller (the retry engine, the ingress, the audit
/// writer, alert rules) reads the same fields: a stable ``code``, APNs' status
/// and reason, the trap, whether to drop the token, and a one-line fix.
///
/// Whether to retry is not a field: the send loop asks `RetryPolicy.decide`
/// (Relay), which reads the reason catalog's ``APNsReason/RetryRule`` and the
/// status, so one function owns that answer.
public struct APNsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where the error was decided.
    public enum Stage: String, Sendable, Hashable {
        /// Caught locally before any I/O; nothing was sent.
        case preflight
        /// APNs answered with a non-2xx status.
        case apns
    }

    public var stage: Stage
    /// Stable identifier: the APNs reason (`BadDeviceToken`, or an unknown
    /// reason verbatim) or a relay preflight code (`MissingEventField`).
    public var code: Code
    /// APNs' HTTP status, or for preflight errors the status APNs would have
    /// answered (so callers can map both the same way).
    public var status: Int
    /// The request field at fault (`token`, `aps.timestamp`, `apns-collapse-id`…).
    public var field: String?
    /// The rule the field broke, in words.
    public var rule: String?
    /// The apns-id of the send, when there was one.
    public var apnsID: APNsID?
    /// For 410 answers: when APNs learned the token was gone, in milliseconds since 1970.
    public var unregisteredAt: Int64?
    public var dropsToken: Bool
    public var trapID: TrapID?
    /// One line telling the operator or producer what to do.
    public var fix: String

    public init(
        stage: Stage, code: Code, status: Int, field: String? = nil, rule: String? = nil, apnsID: APNsID? = nil,
        unregisteredAt: Int64? = nil, dropsToken: Bool, trapID: TrapID?, fix: String
    ) {
        self.stage = stage
        self.code = code
        self.status = status
        self.field = field
        self.rule = rule
        self.apnsID = apnsID
        self.unregisteredAt = unregisteredAt
        self.dropsToken = dropsToken
        self.trapID = trapID
        self.fix = fix
    }

    /// The APNs reason, for errors APNs returned.
    public var reason: String? { stage == .apns ? code.rawValue : nil }

    /// A message naming the field and the rule for preflight errors, and the
    /// reason and status for APNs answers. Never contains a token or a key.
    public var message: String {
        switch stage {
        case .preflight:
            if let field, let rule { return "\(field) \(rule)" }
            return rule ?? code.rawValue
        case .apns:
            let meaning = APNsReason.named(code.rawValue)?.meaning ?? "reason not in the catalog"
            return "APNs answered \(status) \(code.rawValue): \(meaning)"
        }
    }

    public var description: String {
        var text = "\(code.rawValue) (\(stage.rawValue), status \(status)): \(message)"
        if let trapID { text += " [\(trapID)]" }
        return text
    }
}

extension APNsError {
    /// A stable error code. Known APNs reasons and relay preflight codes have
    /// constants; an unknown APNs reason is kept verbatim.
    ///
    /// Every code the relay's preflight can answer is a case of ``Preflight``
    /// and its constant here is made from that case, so the set of codes the
    /// relay answers is `Preflight.allCases`: the metrics' `reason` label set
    /// is derived from it (a new code gets its own label, not `other`).
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { rawValue = value }
        public init(_ preflight: Preflight) { rawValue = preflight.rawValue }
        public var description: String { rawValue }

        /// Every code the relay's preflight answers. Add a code here, never as
        /// a bare string constant: this list is what labels it in the metrics.
        public enum Preflight: String, Sendable, CaseIterable {
            // Codes that match the APNs reason they prevent.
            case badDeviceToken = "BadDeviceToken"
            case badCollapseID = "BadCollapseId"
            case badPriority = "BadPriority"
            case badExpirationDate = "BadExpirationDate"
            case badMessageID = "BadMessageId"
            case badChannelID = "BadChannelId"
            case missingChannelID = "MissingChannelId"
            case missingTopic = "MissingTopic"
            case invalidPushType = "InvalidPushType"
            case payloadTooLarge = "PayloadTooLarge"
            case payloadEmpty = "PayloadEmpty"
            case badTopic = "BadTopic"
            // Codes of the relay's own.
            case badDate = "BadDate"
            case malformedApnsConfig = "MalformedApnsConfig"
            case missingEventField = "MissingEventField"
            case invalidPayload = "InvalidPayload"
            case forbiddenHeader = "ForbiddenHeader"
            case invalidHeader = "InvalidHeader"
            case topicNotForApp = "TopicNotForApp"
            case notForBroadcast = "NotForBroadcast"
        }

        // Preflight codes that match the APNs reason they prevent.
        public static let badDeviceToken = Code(.badDeviceToken)
        public static let badCollapseID = Code(.badCollapseID)
        public static let badPriority = Code(.badPriority)
        public static let badExpirationDate = Code(.badExpirationDate)
        public static let badMessageID = Code(.badMessageID)
        public static let badChannelID = Code(.badChannelID)
        public static let missingChannelID = Code(.missingChannelID)
        public static let missingTopic = Code(.missingTopic)
        public static let invalidPushType = Code(.invalidPushType)
        public static let payloadTooLarge = Code(.payloadTooLarge)
        public static let payloadEmpty = Code(.payloadEmpty)

        // Preflight codes of the relay's own.
        /// A stale, dismissal or event date that is not positive unix seconds.
        public static let badDate = Code(.badDate)
        /// The bundle id carries a push-type suffix the relay adds itself (MS018).
        public static let malformedApnsConfig = Code(.malformedApnsConfig)
        /// A field the Live Activity event requires is absent.
        public static let missingEventField = Code(.missingEventField)
        /// The payload is not a JSON object with an `aps` dictionary, or a field has the wrong type.
        public static let invalidPayload = Code(.invalidPayload)
        /// A header the relay owns (authorization, :path…) was supplied by the caller.
        public static let forbiddenHeader = Code(.forbiddenHeader)
        /// A header name that is not a lowercase token, or a value with control
        /// or non-ASCII bytes: HTTP/2 forbids them, APNs resets the stream.
        public static let invalidHeader = Code(.invalidHeader)
        /// `apns-topic` names a bundle id other than the app's own (403).
        public static let topicNotForApp = Code(.topicNotForApp)
        /// `apns-topic` is not shaped like a bundle id (APNs' BadTopic).
        public static let badTopic = Code(.badTopic)
        /// An option a broadcast cannot carry (`collapseId`: APNs' broadcast
        /// request has no `apns-collapse-id`; a channel keeps its own latest message).
        public static let notForBroadcast = Code(.notForBroadcast)
    }
}
