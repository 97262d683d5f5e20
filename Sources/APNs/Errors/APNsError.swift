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
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { rawValue = value }
        public var description: String { rawValue }

        // Preflight codes that match the APNs reason they prevent.
        public static let badDeviceToken: Code = "BadDeviceToken"
        public static let badCollapseID: Code = "BadCollapseId"
        public static let badPriority: Code = "BadPriority"
        public static let badExpirationDate: Code = "BadExpirationDate"
        public static let badMessageID: Code = "BadMessageId"
        public static let badChannelID: Code = "BadChannelId"
        public static let missingChannelID: Code = "MissingChannelId"
        public static let missingTopic: Code = "MissingTopic"
        public static let invalidPushType: Code = "InvalidPushType"
        public static let payloadTooLarge: Code = "PayloadTooLarge"
        public static let payloadEmpty: Code = "PayloadEmpty"

        // Preflight codes of the relay's own.
        /// A stale, dismissal or event date that is not positive unix seconds.
        public static let badDate: Code = "BadDate"
        /// The bundle id carries a push-type suffix the relay adds itself (MS018).
        public static let malformedApnsConfig: Code = "MalformedApnsConfig"
        /// A field the Live Activity event requires is absent.
        public static let missingEventField: Code = "MissingEventField"
        /// The payload is not a JSON object with an `aps` dictionary, or a field has the wrong type.
        public static let invalidPayload: Code = "InvalidPayload"
        /// A header the relay owns (authorization, :path…) was supplied by the caller.
        public static let forbiddenHeader: Code = "ForbiddenHeader"
        /// A header name that is not a lowercase token, or a value with control
        /// or non-ASCII bytes: HTTP/2 forbids them, APNs resets the stream.
        public static let invalidHeader: Code = "InvalidHeader"
        /// `apns-topic` names a bundle id other than the app's own (403).
        public static let topicNotForApp: Code = "TopicNotForApp"
        /// `apns-topic` is not shaped like a bundle id (APNs' BadTopic).
        public static let badTopic: Code = "BadTopic"
        /// An option a broadcast cannot carry (`collapseId`: APNs' broadcast
        /// request has no `apns-collapse-id`; a channel keeps its own latest message).
        public static let notForBroadcast: Code = "NotForBroadcast"
    }
}
