import APNs
import ArgumentParser
import Foundation
import HTTP2
import Logging
import Relay
import RelayJSON
import RelayServer
import Surfaces
import Tracing

/// `apns-relay send`: one push straight to APNs from the command line, every
/// mode of the SDK's smoke script, with the relay's checks and retries.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one push to APNs directly (no relay server): alert, Live Activity start/update/end, widget reload, broadcast, channels.",
        discussion: """
            Credentials come from --config and --app (the relay's YAML), or from --bundle-id, --key-id, --team-id \
            and --key-path (or APNS_BUNDLE_ID, APNS_KEY_ID, APNS_TEAM_ID, APNS_KEY_PATH). With --describe the exact \
            request is printed and nothing is sent. Prints the status, topic, push type, payload and APNs' answer; \
            on failure the reason's fix; a warning when the local clock is off from APNs' by more than 5 minutes.
            """)

    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case alert, notification, start, update, end, widget, broadcast
        case channelCreate = "channel-create", channelList = "channel-list", channelDelete = "channel-delete"
    }

    @Argument(help: "alert | notification | start | update | end | widget | broadcast | channel-create | channel-list | channel-delete")
    var mode: Mode
    @Option(name: .customLong("config"), help: "Read the app's credentials from this relay configuration.") var configFile: String?
    @Option(help: "The app's name in --config.") var app: String?
    @Option(help: "Bare bundle id (or APNS_BUNDLE_ID).") var bundleID: String?
    @Option(help: "Key id (or APNS_KEY_ID).") var keyID: String?
    @Option(help: "Team id (or APNS_TEAM_ID).") var teamID: String?
    @Option(help: "The .p8 key file (or APNS_KEY_PATH).") var keyPath: String?
    @Option(help: "development or production.") var env = "development"
    @Option(help: "Device, push-to-start, activity or widget push token (hex).") var token: String?
    @Option(help: "Channel id (broadcast, channel-delete).") var channelID: String?
    @Option(help: "A LiveSurfaceSnapshot v5 JSON file.") var snapshotFile: String?
    @Option(help: "A JSON file replacing the content-state projected from the snapshot.") var stateFile: String?
    @Option(help: "A JSON file with the ActivityKit attributes for start.") var attributesFile: String?
    @Option(help: "The ActivityKit attributes type for start.") var attributesType: String?
    @Option(help: "apns-priority: 10, 5 or 1.") var priority: Int?
    @Option(help: "stale-date, unix seconds.") var staleDate: Int64?
    @Option(help: "dismissal-date (end), unix seconds.") var dismissalDate: Int64?
    @Option(help: "Channel storage policy: no-storage or most-recent.") var storagePolicy: String?
    @Flag(help: "Print the exact request and send nothing.") var describe = false
    @Option(help: "Send to HOST:PORT instead of Apple (a mock APNs).") var origin: String?
    @Option(help: "Trust this CA for --origin (a mock's certificate).") var caFile: String?

    func run() async throws {
        guard let environment = Environment(name: env) else { throw ValidationError("--env must be development or production") }
        let appConfiguration = try resolveApp()
        let operation = try makeOperation()
        var relayConfiguration = RelayConfiguration(apps: [appConfiguration])
        if let origin {
            let parts = origin.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else { throw ValidationError("--origin must be HOST:PORT") }
            relayConfiguration.endpointOverrides[environment] = .overriding(send: Origin(host: String(parts[0]), port: port))
        }
        var transportConfiguration = HTTP2Transport.Configuration()
        transportConfiguration.caFile = caFile
        transportConfiguration.connectionsPerOrigin = 1
        let transport = HTTP2Transport(configuration: transportConfiguration)
        let logger = makeLogger(level: "warning")
        let service = try RelayService(configuration: relayConfiguration, transport: transport, tracer: NoOpTracer(), logger: logger)

        do {
            let description = try service.describe(app: appConfiguration.name, environment: environment, operation)
            print("request:   \(description.method.rawValue) \(description.origin)\(description.path)")
            print("push type: \(description.headers.first { $0.name == "apns-push-type" }?.value ?? "-")")
            print("topic:     \(description.headers.first { $0.name == "apns-topic" }?.value ?? "-")")
            print("headers:   \(description.headers.map(\.description).joined(separator: ", "))")
            print("payload:   \(description.payload?.encodedString() ?? "(none)") (\(description.byteCount) bytes)")
        } catch {
            print("refused before sending: \(error)")
            if let apnsError = error.apnsError, !apnsError.fix.isEmpty { print("fix:       \(apnsError.fix)") }
            throw ExitCode(1)
        }
        if describe { return }

        do {
            let result = try await service.send(app: appConfiguration.name, environment: environment, operation)
            print("answer:    \(result.status) apns-id \(result.apnsID)\(result.apnsUniqueID.map { " apns-unique-id \($0)" } ?? "") after \(result.attempts) attempt(s), \(String(format: "%.1f", result.latencyMilliseconds)) ms")
            if let channelID = result.channelID { print("channel:   \(channelID)") }
            if !result.body.isEmpty { print("body:      \(String(decoding: result.body, as: UTF8.self))") }
        } catch {
            print("failed:    \(error)")
            if let apnsError = error.apnsError {
                print("reason:    \(apnsError.code.rawValue) (status \(apnsError.status)\(apnsError.trapID.map { ", trap \($0.rawValue)" } ?? ""))")
                if !apnsError.fix.isEmpty { print("fix:       \(apnsError.fix)") }
            }
            warnAboutClock(service)
            await transport.close()
            throw ExitCode(1)
        }
        warnAboutClock(service)
        await transport.close()
    }

    private func warnAboutClock(_ service: RelayService) {
        if let skew = service.clockSkew.latestSkewSeconds, abs(skew) > ClockSkewMonitor.warningThresholdSeconds {
            print("warning:   this machine's clock is \(skew) s off APNs' (provider tokens are rejected when iat is far off)")
        }
    }

    private func resolveApp() throws -> AppConfiguration {
        let environment = ProcessInfo.processInfo.environment
        if let configFile {
            let configuration = try ServerConfiguration.load(file: configFile, environment: environment)
            let name = app ?? configuration.apps.first?.name
            guard let chosen = configuration.apps.first(where: { $0.name == name }) else {
                throw ValidationError("--app \(name ?? "?") is not in \(configFile) (apps: \(configuration.apps.map(\.name).joined(separator: ", ")))")
            }
            return chosen
        }
        guard let bundleID = bundleID ?? environment["APNS_BUNDLE_ID"] else { throw ValidationError("give --bundle-id (or APNS_BUNDLE_ID), or --config") }
        return AppConfiguration(
            name: app ?? "cli", bundleID: bundleID, teamID: teamID ?? environment["APNS_TEAM_ID"], keyID: keyID ?? environment["APNS_KEY_ID"],
            keyPath: keyPath ?? environment["APNS_KEY_PATH"])
    }

    private func makeOperation() throws -> RelayOperation {
        var options = DeviceSendOptions()
        if let priority {
            guard let value = Priority(rawValue: priority) else { throw ValidationError("--priority must be 10, 5 or 1") }
            options.priority = value
        }
        var live = LiveActivityOptions(staleDate: staleDate, dismissalDate: dismissalDate)
        if let stateFile { live.contentState = try Self.json(stateFile, "--state-file") }
        var policy: ChannelStoragePolicy?
        if let storagePolicy {
            guard let value = ChannelStoragePolicy(rawValue: storagePolicy) else { throw ValidationError("--storage-policy must be no-storage or most-recent") }
            policy = value
        }
        switch mode {
        case .alert: return .alert(token: try need(token, "--token"), snapshot: try snapshot(), options: options)
        case .notification: return .notification(token: try need(token, "--token"), snapshot: try snapshot(), options: options)
        case .start:
            let attributes = try attributesFile.map { try Self.json($0, "--attributes-file") }
            return .start(token: try need(token, "--token"), snapshot: try snapshot(), attributes: attributes, attributesType: attributesType, live: live, options: options)
        case .update: return .update(token: try need(token, "--token"), snapshot: try snapshot(), live: live, options: options)
        case .end: return .end(token: try need(token, "--token"), snapshot: try snapshot(), live: live, options: options)
        case .widget: return .widget(token: try need(token, "--token"), snapshot: try snapshot(), options: options)
        case .broadcast:
            return .broadcast(channelID: try need(channelID, "--channel-id"), snapshot: try snapshot(), storagePolicy: policy, live: live, options: options)
        case .channelCreate: return .createChannel(storagePolicy: policy ?? .noStorage)
        case .channelList: return .listChannels
        case .channelDelete: return .deleteChannel(channelID: try need(channelID, "--channel-id"))
        }
    }

    private func need(_ value: String?, _ flag: String) throws -> String {
        guard let value, !value.isEmpty else { throw ValidationError("\(flag) is required for \(mode.rawValue)") }
        return value
    }

    private func snapshot() throws -> LiveSurfaceSnapshot {
        let path = try need(snapshotFile, "--snapshot-file")
        do {
            return try LiveSurfaceSnapshot(json: try Self.json(path, "--snapshot-file"))
        } catch let error as SnapshotValidationError {
            throw ValidationError("--snapshot-file \(path) breaks the snapshot contract (MS008): \(error.issues.map(\.message).joined(separator: "; "))")
        }
    }

    static func json(_ path: String, _ flag: String) throws -> JSONValue {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("\(flag) \(path) cannot be read") }
        do {
            return try JSONParser.parse([UInt8](data))
        } catch {
            throw ValidationError("\(flag) \(path) is not JSON: \(error)")
        }
    }
}
