import Relay

extension RelayService {
    /// Checks that `key` may act for `app` and that the relay serves it.
    ///
    /// An app the key may not name is refused alike whether it exists or
    /// not (403, the same message), so a key cannot learn other tenants' app
    /// names; only an app the key itself names (an admin key, or a scope
    /// listing an app the relay does not serve) gets 404.
    func authorize(_ key: APIKey, app: String, field: String = "app") throws(IngressError) {
        try FieldLimits.check(app, FieldLimits.app, field: field)
        guard key.allows(app: app) else {
            throw IngressError(status: 403, type: .forbidden, message: "API key \(key.name) may not send for app \(app)", field: field)
        }
        guard serves(app: app) else {
            throw IngressError(status: 404, type: .notFound, message: "\(field): no app named \(app) on this relay", field: field)
        }
    }
}
