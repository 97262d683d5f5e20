import APNs
import Foundation
import HTTPServer
import Logging
import Relay
import RelayBasics
import RelayJSON

/// `GET /v1/dead-tokens`: the dead-token feed. Its dependencies are the
/// feed (nil without an audit database), the relay service (which apps it
/// serves, for the key's authorization) and the logger for failed queries.
struct DeadTokenController: Sendable {
    let deadTokens: (any DeadTokenSource)?
    let service: RelayService
    let logger: Logger

    /// `GET /v1/dead-tokens?app=&since=&environment=&limit=`: tokens APNs
    /// called dead or wrong, for the backend to prune.
    @Sendable func listDeadTokens(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let query = call.request.query
        try RequestReading.rejectUnknownParameters(query, allowed: ["app", "since", "environment", "limit"])
        guard let app = query["app"], !app.isEmpty else { throw .invalid("app", "query parameter is required") }
        try service.authorize(call.key, app: app)
        var environment: Environment?
        if let name = query["environment"] {
            guard let parsed = Environment(name: name) else { throw .invalid("environment", "must be development or production") }
            environment = parsed
        }
        let since = try Self.parseSince(query["since"] ?? "24h")
        var limit = 1000
        if let text = query["limit"] {
            guard let value = Int(text), (1...10_000).contains(value) else { throw .invalid("limit", "must be a whole number from 1 to 10000") }
            limit = value
        }
        guard let deadTokens else {
            var error = IngressError(status: 503, type: .unavailable, message: "the dead-token feed needs the audit database (audit.database_url)")
            error.retryAfter = 30
            throw error
        }
        let records: [DeadTokenEntry]
        do {
            records = try await deadTokens.deadTokens(app: app, environment: environment, sinceMilliseconds: since, limit: limit)
        } catch {
            // libpq's message names the host and port; it belongs in the log, not in a
            // caller's answer. (Connection strings are never part of it: no secrets logged.)
            logger.error("dead-token query failed", metadata: ["app": "\(app)", "error": "\(error)"])
            var failure = IngressError(status: 503, type: .unavailable, message: "the audit database is unavailable; retry later")
            failure.retryAfter = 5
            throw failure
        }
        let items: [JSONValue] = records.map { record in
            .object(JSONObject([
                ("token", .string(record.token)),
                ("environment", .string(record.environment)),
                ("reason", .string(record.reason)),
                ("apnsTimestamp", record.apnsTimestampMilliseconds.map { .string(RFC3339.format(milliseconds: $0)) } ?? .null),
                ("firstSeen", .string(RFC3339.format(milliseconds: record.firstSeenMilliseconds))),
                ("lastSeen", .string(RFC3339.format(milliseconds: record.lastSeenMilliseconds))),
            ]))
        }
        return .json(200, JSONValue.object(JSONObject([("deadTokens", .array(items))])).encoded())
    }

    /// The longest duration `since` may reach back (100 years): a bound well
    /// past any retention, so every value within it converts without overflow.
    static let maximumSinceDays: Int64 = 36_500

    /// `since`: an RFC 3339 time (1970 to 9999) or a duration back from `now`
    /// (`90s`, `30m`, `1h`, `7d`, at most 100 years); unix ms. Anything else,
    /// however large, is a 400 naming `since`, never an arithmetic trap.
    static func parseSince(_ text: String, now: Date = Date()) throws(IngressError) -> Int64 {
        let nowMilliseconds = Self.milliseconds(now) ?? 0
        if let unit = text.last, "smhd".contains(unit) {
            let digits = text.dropLast()
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw .invalid("since", "a duration must be a whole number of s, m, h or d (30m, 1h, 7d)")
            }
            let multiplier: Int64 = switch unit {
            case "s": 1
            case "m": 60
            case "h": 3600
            default: 86_400
            }
            let maximum = maximumSinceDays * 86_400
            // Int64(...) is nil beyond Int64.max and the product is checked, so
            // 99999999999999999d is refused like any other too-long duration.
            guard let amount = Int64(digits), case let (seconds, overflow) = amount.multipliedReportingOverflow(by: multiplier),
                  !overflow, seconds <= maximum
            else {
                throw .invalid("since", "a duration may reach back at most \(maximumSinceDays) days (100 years)")
            }
            return nowMilliseconds - seconds * 1000
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime]
            date = formatter.date(from: text)
        }
        guard let date else {
            throw .invalid("since", "must be an RFC 3339 time (2026-11-22T10:00:00Z) or a duration back from now (30m, 1h, 7d)")
        }
        guard let milliseconds = Self.milliseconds(date), milliseconds >= 0, milliseconds <= latestSinceMilliseconds else {
            throw .invalid("since", "must be a time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        }
        return milliseconds
    }

    /// 9999-12-31T23:59:59.999Z in unix ms.
    static let latestSinceMilliseconds: Int64 = 253_402_300_799_999

    /// Unix ms of `date`, or nil when it is not finite or beyond Int64.
    static func milliseconds(_ date: Date) -> Int64? {
        let value = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard value.isFinite, value >= -9.0e18, value <= 9.0e18 else { return nil }
        return Int64(value)
    }
}
