import Foundation
import RelayJSON
import Synchronization
import RelayBasics

/// The demo's mixed workload, sent through the ingress like a backend would:
/// successes, Unregistered, TooManyRequests with retries, PayloadTooLarge,
/// an invalid snapshot, Live Activity start/update/end, a batch, and a
/// broadcast with channel create/list/delete.
final class DemoWorkload: Sendable {
    struct Outcome: Sendable {
        var label: String
        var status: Int
        var body: JSONValue?
    }

    let port: UInt16
    let apiKey: String
    private let outcomes = Mutex<[Outcome]>([])
    private let errors = Mutex<[String]>([])

    init(port: UInt16, apiKey: String) {
        self.port = port
        self.apiKey = apiKey
    }

    private func record(_ label: String, _ response: BlockingHTTPClient.Response) {
        let body = response.body.isEmpty ? nil : try? JSONParser.parse(response.body)
        outcomes.withLock { $0.append(Outcome(label: label, status: response.status, body: body)) }
    }

    private func send(_ client: BlockingHTTPClient, _ label: String, _ path: String, _ body: String, method: String = "POST") throws {
        let headers = [HTTPHeader("authorization", "Bearer \(apiKey)"), HTTPHeader("content-type", "application/json")]
        record(label, try client.request(method, path, headers: headers, body: Array(body.utf8)))
    }

    private func alert(_ token: String) -> String {
        #"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"alert","token":"\#(token)","snapshot":\#(Self.liveSnapshot)}"#
    }

    static let liveSnapshot = """
        {"schemaVersion":"5","kind":"liveActivity","id":"demo-order-1","surfaceId":"order-1","updatedAt":"2026-11-22T10:00:00Z",
         "state":"active","liveActivity":{"title":"Order #1 is on its way","body":"Courier is 4 stops away","progress":0.4,
         "deepLink":"demo://orders/1","modeLabel":"active","contextLabel":"delivery","statusLine":"active · 40%",
         "actionLabel":"Track","stage":"inProgress","estimatedSeconds":900,"morePartsCount":0}}
        """
    static let notificationSnapshot = """
        {"schemaVersion":"5","kind":"notification","id":"demo-note-1","surfaceId":"order-1","updatedAt":"2026-11-22T10:00:00Z",
         "state":"attention","notification":{"title":"Your order has shipped","body":"Track it in the app",
         "deepLink":"demo://orders/1","category":"surface-update","threadId":"order-1"}}
        """

    /// 64 hex digits: the prefix (which scripts the mock's answer), "a1b2",
    /// then the index, so tokens with the same prefix stay distinct.
    static func token(_ prefix: String = "", _ index: Int) -> String {
        let hex = String(format: "%0\(60 - prefix.count)x", index)
        return prefix + "a1b2" + hex
    }

    /// Runs everything; returns one outcome per request.
    func run(plainSends: Int = 200) throws -> [Outcome] {
        // Plain alerts, Unregistered and TooManyRequests from four threads at once.
        let workers = 4
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let client = BlockingHTTPClient(host: "127.0.0.1", port: port)
            do {
                for index in stride(from: worker, to: plainSends, by: workers) {
                    try send(client, "alert", "/v1/send", alert(Self.token("", index)))
                }
                for index in stride(from: worker, to: 20, by: workers) {
                    try send(client, "unregistered", "/v1/send", alert(Self.token(DemoEnvironment.deadTokenPrefix, index)))
                    try send(client, "too-many-requests", "/v1/send", alert(Self.token(DemoEnvironment.busyTokenPrefix, index)))
                }
            } catch {
                errors.withLock { $0.append("\(error)") }
            }
        }
        if let error = errors.withLock({ $0.first }) { throw DemoFailure(error) }

        let client = BlockingHTTPClient(host: "127.0.0.1", port: port)
        // A notification, and a raw payload over APNs' 4 KB limit (refused before sending).
        try send(client, "notification", "/v1/send",
                 #"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"notification","token":"\#(Self.token("", 9001))","snapshot":\#(Self.notificationSnapshot)}"#)
        let big = String(repeating: "x", count: 5000)
        try send(client, "payload-too-large", "/v1/send",
                 #"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"raw","token":"\#(Self.token("", 9002))","headers":{"apns-push-type":"alert"},"payload":{"aps":{"alert":"\#(big)"}}}"#)
        // A snapshot that breaks the contract (progress above 1): 400, trap MS008.
        try send(client, "invalid-snapshot", "/v1/send",
                 alert(Self.token("", 9003)).replacingOccurrences(of: #""progress":0.4"#, with: #""progress":1.4"#))

        // A Live Activity's life: start, update, end.
        let activity = Self.token("", 9100)
        let now = Int(UnixTime.nowSeconds())
        for (index, operation) in ["start", "update", "end"].enumerated() {
            try send(client, "live-activity-\(operation)", "/v1/send",
                     #"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"\#(operation)","token":"\#(activity)","timestamp":\#(now + index),"snapshot":\#(Self.liveSnapshot)}"#)
        }

        // A batch fanning one alert out to 25 tokens, two of them dead.
        let tokens = (0..<23).map { "\"\(Self.token("", 9200 + $0))\"" } + (0..<2).map { "\"\(Self.token(DemoEnvironment.deadTokenPrefix, 9300 + $0))\"" }
        try send(client, "batch", "/v1/send/batch",
                 #"{"items":[{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"alert","tokens":[\#(tokens.joined(separator: ","))],"snapshot":\#(Self.liveSnapshot)}]}"#)

        // iOS 18 broadcast: create a channel, broadcast on it, list, delete.
        try send(client, "channel-create", "/v1/channels", #"{"app":"\#(DemoEnvironment.app)","environment":"development","storagePolicy":"no-storage"}"#)
        if let channelID = outcomes.withLock({ $0.last?.body?["channelId"]?.stringValue }) {
            try send(client, "broadcast", "/v1/send",
                     #"{"app":"\#(DemoEnvironment.app)","environment":"development","operation":"broadcast","channelId":"\#(channelID)","expiration":0,"snapshot":\#(Self.liveSnapshot)}"#)
            try send(client, "channel-list", "/v1/channels?app=\(DemoEnvironment.app)&environment=development", "", method: "GET")
            try send(client, "channel-delete", "/v1/channels/\(channelID)?app=\(DemoEnvironment.app)&environment=development", "", method: "DELETE")
        }
        return outcomes.withLock { $0 }
    }
}
