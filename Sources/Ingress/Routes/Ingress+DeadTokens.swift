import APNs
import Foundation
import HTTPServer
import Relay
import RelayJSON

extension Ingress {
    /// `GET /v1/dead-tokens?app=&since=&environment=&limit=`: tokens APNs
    /// called dead or wrong, for the backend to prune.
    @Sendable func listDeadTokens(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let query = call.request.query
        try rejectUnknown(query: query, allowed: ["app", "since", "environment", "limit"])
        guard let app = query["app"], !app.isEmpty else { throw .invalid("app", "query parameter is required") }
        try authorize(call.key, app: app)
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
            var error = IngressError(status: 503, type: "Unavailable", message: "the dead-token feed needs the audit database (audit.database_url)")
            error.retryAfter = 30
            throw error
        }
        let records: [DeadTokenEntry]
        do {
            records = try await deadTokens.deadTokens(app: app, environment: environment, sinceMilliseconds: since, limit: limit)
        } catch {
            var failure = IngressError(status: 503, type: "Unavailable", message: "the audit database did not answer: \(error)")
            failure.retryAfter = 5
            throw failure
        }
        let items: [JSONValue] = records.map { record in
            .object(JSONObject([
                ("token", .string(record.token)),
                ("environment", .string(record.environment)),
                ("reason", .string(record.reason)),
                ("apnsTimestamp", record.apnsTimestampMilliseconds.map { .string(Self.rfc3339($0)) } ?? .null),
                ("firstSeen", .string(Self.rfc3339(record.firstSeenMilliseconds))),
                ("lastSeen", .string(Self.rfc3339(record.lastSeenMilliseconds))),
            ]))
        }
        return .json(200, JSONValue.object(JSONObject([("deadTokens", .array(items))])).encoded())
    }

    /// `since`: an RFC 3339 time or a duration back from now (`90s`, `30m`, `1h`, `7d`); unix ms.
    static func parseSince(_ text: String, now: Date = Date()) throws(IngressError) -> Int64 {
        if let unit = text.last, let amount = Int64(text.dropLast()), amount >= 0 {
            let seconds: Int64? = switch unit {
            case "s": amount
            case "m": amount * 60
            case "h": amount * 3600
            case "d": amount * 86_400
            default: nil
            }
            if let seconds { return Int64(now.timeIntervalSince1970 * 1000) - seconds * 1000 }
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        throw .invalid("since", "must be an RFC 3339 time (2026-11-22T10:00:00Z) or a duration back from now (30m, 1h, 7d)")
    }

    static func rfc3339(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }
}
