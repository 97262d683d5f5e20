public import RelayJSON

extension Preflight {
    /// The `aps` of a WidgetKit reload, exactly as Apple documents it:
    /// `{"content-changed": true}`.
    public static let widgetReloadAPS: JSONValue = ["content-changed": true]

    /// A `widgets` push must carry exactly ``widgetReloadAPS`` as `aps`; keys
    /// beside `aps` are allowed (the relay's `liveSurface` sidecar rides there).
    ///
    /// APNs accepts other `aps` content and answers 200, but WidgetKit reloads
    /// nothing for it, so such a send would count as delivered and change no
    /// widget: a silent failure the relay refuses before any I/O.
    public static func checkWidgetReloadPayload(_ payload: JSONValue, field: String = "payload", apnsID: APNsID? = nil)
        throws(APNsError)
    {
        guard let aps = payload.objectValue?["aps"] else {
            throw APNsError.preflight(
                .invalidPayload, field: "\(field).aps", rule: "is required: a widgets push carries {\"content-changed\":true}",
                apnsID: apnsID)
        }
        guard aps == widgetReloadAPS else {
            throw APNsError.preflight(
                .invalidPayload, field: "\(field).aps",
                rule: "must be exactly {\"content-changed\":true} for push type widgets (got \(aps.encodedString())); "
                    + "WidgetKit reloads the timeline and reads nothing else",
                apnsID: apnsID)
        }
    }
}
