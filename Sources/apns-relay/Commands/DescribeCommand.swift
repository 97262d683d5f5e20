import APNs
import ArgumentParser
import Foundation
import RelayJSON
import Surfaces

/// `apns-relay describe`: the exact APNs request a send would issue, with no I/O.
struct DescribeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "describe",
        abstract: "Print the exact APNs request a send would issue (method, origin, path, headers, payload, bytes). Nothing is sent.")

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case alert, notification, start, update, end, widget, broadcast
    }

    @Option(help: "alert | notification | start | update | end | widget | broadcast") var operation: Kind
    @Option(help: "The app's bare bundle id.") var bundleID: String
    @Option(help: "Device, push-to-start, activity or widget push token (hex).") var token: String?
    @Option(help: "Channel id, for broadcast.") var channelID: String?
    @Option(help: "A LiveSurfaceSnapshot v5 JSON file.") var snapshotFile: String
    @Option(help: "development or production.") var env = "development"
    @Option(help: "apns-priority: 1, 5 or 10.") var priority: Int?
    @Option(help: "ActivityKit attributes-type for start.") var attributesType = "MobileSurfacesActivityAttributes"
    @Option(help: "stale-date, unix seconds.") var staleDate: Int64?
    @Option(help: "dismissal-date for end, unix seconds.") var dismissalDate: Int64?

    func run() throws {
        guard let environment = Environment(name: env) else { throw ValidationError("--env must be development or production") }
        let snapshot = try LiveSurfaceSnapshot(parsing: [UInt8](try Data(contentsOf: URL(fileURLWithPath: snapshotFile))))
        let builder = try RequestBuilder(bundleID: bundleID)
        let options = DeviceSendOptions(priority: try priority.map { try Preflight.parsePriority(Int64($0)) })
        let request: APNsRequest
        switch operation {
        case .alert:
            request = try builder.alert(token: try requireToken(), payload: snapshot.alertPayload(), options: options)
        case .notification:
            request = try builder.notification(token: try requireToken(), payload: snapshot.notificationPayload(), options: options)
        case .start, .update, .end:
            let event = LiveActivityEvent(rawValue: operation.rawValue)!
            var content = LiveActivityContent(contentState: try snapshot.liveActivityContentState(), staleDate: staleDate, dismissalDate: dismissalDate)
            if event == .start {
                content.attributesType = attributesType
                content.attributes = try snapshot.liveActivityAttributes()
                content.alert = try snapshot.alertPayload()["aps"]?["alert"]
            }
            request = try builder.liveActivity(event, token: try requireToken(), content: content, options: options)
        case .widget:
            request = try builder.widgetReload(token: try requireToken(), sidecar: snapshot.widgetReloadSidecar(), options: options)
        case .broadcast:
            guard let channelID else { throw ValidationError("--channel-id is required for broadcast") }
            request = try builder.broadcast(channelID: channelID, content: .init(contentState: try snapshot.liveActivityContentState(), staleDate: staleDate), options: options)
        }
        print(request.describe(endpoints: APNsEndpoints(environment: environment)).json.encodedString())
    }

    private func requireToken() throws -> String {
        guard let token else { throw ValidationError("--token is required for \(operation.rawValue)") }
        return token
    }
}
