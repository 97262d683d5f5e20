import HTTPServer
import Logging
import Relay
import RelayJSON

/// The admin routes (`/v1/admin/retry`): the runtime retry kill switch of
/// this process. Its dependencies are the switch, the instance name its
/// answers carry, and the logger that records a change.
struct AdminController: Sendable {
    let killSwitch: KillSwitch
    /// This relay's instance name (``Ingress/Configuration/instance``).
    let instance: String
    let logger: Logger

    /// `GET /v1/admin/retry`: whether the retry kill switch is engaged, and by
    /// what. Any valid key may read it (a backend may want to know); only
    /// admin keys may change it.
    @Sendable func retryState(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        return .json(200, retryStateBody().encoded())
    }

    /// `PUT /v1/admin/retry {"disabled": bool}`: engages or releases the
    /// runtime switch of this process only (the answer names the instance:
    /// behind a load balancer an operator sets each one, docs/operations.md).
    /// Releasing while the environment variable holds it is a 409.
    @Sendable func setRetryState(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        try requireAdmin(call.key)
        var reader = try FieldReader(try RequestReading.parseBody(call.request), path: "")
        guard let disabled = try reader.bool("disabled") else { throw .invalid("disabled", "is required: true stops every retry, false allows them again") }
        try reader.rejectUnknown(allowed: "disabled")
        if !disabled, let variable = killSwitch.environmentVariable {
            throw IngressError(status: 409, type: .conflict, message: "retries are disabled by the environment variable \(variable); unset it and restart to enable them", field: "disabled")
        }
        killSwitch.setRuntime(engaged: disabled)
        logger.notice("retry kill switch changed at runtime (this instance only)", metadata: ["disabled": "\(disabled)", "caller": "\(call.key.name)"])
        return .json(200, retryStateBody().encoded())
    }

    private func retryStateBody() -> JSONValue {
        .object(JSONObject([
            ("retriesDisabled", .bool(killSwitch.isEngaged)),
            ("source", killSwitch.source.map { .string($0.rawValue) } ?? .null),
            ("environmentVariable", killSwitch.environmentVariable.map { .string($0) } ?? .null),
            // The switch lives in this process; saying which one lets an operator
            // who went through a load balancer see that it reached one instance.
            ("instance", .string(instance)),
        ]))
    }

    private func requireAdmin(_ key: APIKey) throws(IngressError) {
        guard key.isAdmin else {
            throw IngressError(status: 403, type: .forbidden, message: "API key \(key.name) is not an admin key")
        }
    }
}
