public import RelayJSON

extension RequestBuilder {
    /// A WidgetKit push (iOS 26 and later) that asks the device to reload the
    /// app's push-enabled widgets: `POST /3/device/<widget push token>` with push
    /// type `widgets`, topic `<bundle>.push-type.widgets` and `aps` exactly
    /// `{"content-changed": true}`, as Apple's "Updating widgets with WidgetKit
    /// push notifications" shows it.
    ///
    /// Apple's request carries neither `apns-priority` nor `apns-expiration`,
    /// and neither does this one unless the options name them: WidgetKit
    /// budgets reloads on the device whatever the priority, and an expiration
    /// has been reported to keep reloads from arriving. `sidecar` members ride
    /// beside `aps` at the top level (the widget never sees them; WidgetKit
    /// reads the timeline); `aps` among them is refused.
    public func widgetReload(token: String, sidecar: JSONObject = JSONObject(), options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        let token = try DeviceToken(token)
        if sidecar["aps"] != nil {
            throw APNsError.preflight(
                .invalidPayload, field: "sidecar.aps",
                rule: "is set by the relay: a widget reload's aps is exactly {\"content-changed\":true}", apnsID: options.apnsID)
        }
        var payload = JSONObject()
        payload["aps"] = Preflight.widgetReloadAPS
        for member in sidecar.members { payload[member.key] = member.value }
        return try deviceRequest(
            operation: .widget, token: token, pushType: .widgets, payload: .object(payload), options: options,
            defaultExpiration: nil)
    }
}
