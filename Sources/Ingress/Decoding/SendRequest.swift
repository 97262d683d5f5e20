public import APNs
public import Relay
import RelayJSON
import Surfaces
import RelayBasics

/// One decoded send: the app and environment it is for, and the operation
/// (several when a batch item fans out to `tokens`).
public struct SendRequest: Sendable {
    public var app: String
    public var environment: Environment
    public var operations: [RelayOperation]
}

/// Turns a send body (`/v1/send`, `/v1/describe`, a batch item) into
/// operations, checking every field's type and whether the operation uses it.
enum SendRequestDecoder {
    static let operations = ["alert", "notification", "background", "start", "update", "end", "broadcast", "widget", "raw"]

    private static let common = ["app", "environment", "operation"]
    private static let device = ["priority", "expiration", "collapseId", "apnsId"]
    private static let live = ["timestamp", "staleDate", "dismissalDate", "relevanceScore", "contentState"]

    /// The fields each operation reads (besides `token`/`tokens`).
    private static func fields(_ operation: String) -> [String] {
        switch operation {
        case "alert", "notification", "widget": common + device + ["token", "snapshot"]
        case "background": common + device + ["token", "payload"]
        case "start": common + device + live + ["token", "snapshot", "attributes", "attributesType"]
        case "update", "end": common + device + live + ["token", "snapshot"]
        case "broadcast": common + device + live + ["channelId", "snapshot", "storagePolicy"]
        // `apnsId` too: it becomes the raw send's `apns-id` header (``build``).
        case "raw": common + ["token", "payload", "headers", "apnsId"]
        default: common
        }
    }

    private static let known: Set<String> = Set(operations.flatMap(fields)).union(["tokens"])

    /// ``fields(_:)`` of every operation as a set, made once: a body is checked against it on every send.
    private static let fieldSets: [String: Set<String>] = Dictionary(uniqueKeysWithValues: operations.map { ($0, Set(fields($0))) })

    /// The last snapshot a batch decoded, by its JSON: the items of a batch
    /// often carry the same snapshot, validated once then instead of once per item.
    final class SnapshotMemo {
        private var last: (json: JSONValue, snapshot: LiveSurfaceSnapshot)?

        func snapshot(for json: JSONValue, _ decode: (JSONValue) throws(SnapshotValidationError) -> LiveSurfaceSnapshot) throws(SnapshotValidationError) -> LiveSurfaceSnapshot {
            if let last, last.json == json { return last.snapshot }
            let snapshot = try decode(json)
            last = (json, snapshot)
            return snapshot
        }
    }

    static func decode(_ value: JSONValue, path: String = "", allowFanOut: Bool = false, snapshots: SnapshotMemo? = nil) throws(IngressError) -> SendRequest {
        var reader = try FieldReader(value, path: path)
        let app = try reader.requiredString("app")
        try FieldLimits.check(app, FieldLimits.app, field: reader.name("app"))
        let environment = try environment(&reader)
        let operation = try reader.requiredString("operation", rule: "is required (one of \(operations.joined(separator: ", ")))")
        guard operations.contains(operation) else {
            throw .invalid(reader.name("operation"), "must be one of \(operations.joined(separator: ", ")) (channels have their own routes under /v1/channels)")
        }
        var used = fieldSets[operation] ?? Set(fields(operation))
        if allowFanOut, operation != "broadcast" { used.insert("tokens") }
        for (key, _) in reader.object.members where !used.contains(key) {
            if known.contains(key) {
                throw .invalid(reader.name(key), "is not used by operation \(operation)\(key == "tokens" ? " outside a batch" : "")")
            }
            throw .invalid(reader.name(key), "unknown field")
        }

        let tokens: [String]
        if operation == "broadcast" {
            tokens = [""]
        } else if allowFanOut, reader.has("tokens") {
            if reader.has("token") { throw .invalid(reader.name("tokens"), "give either token or tokens, not both") }
            let items = try reader.array("tokens") ?? []
            guard !items.isEmpty else { throw .invalid(reader.name("tokens"), "must hold at least one token") }
            tokens = try items.enumerated().map { (index, item) throws(IngressError) -> String in
                guard case .string(let token) = item, !token.isEmpty else { throw .invalid(reader.name("tokens[\(index)]"), "must be a non-empty string") }
                return token
            }
        } else {
            tokens = [try reader.requiredString("token", rule: "is required for operation \(operation)")]
        }
        let options = try deviceOptions(&reader)
        if options.apnsID != nil, tokens.count > 1 {
            // One apns-id names one notification; APNs and the audit would see the
            // fan-out's sends as one, and every retry would collide.
            throw .invalid(reader.name("apnsId"), "may only be given with a single token (this item has \(tokens.count)); leave it out and the relay makes one per send")
        }
        // An operation without the Live Activity fields cannot carry them (any
        // of them was refused above as not used): nothing to read.
        let liveOptions = used.contains("timestamp") ? try liveActivityOptions(&reader) : LiveActivityOptions()
        var snapshot: LiveSurfaceSnapshot?
        if used.contains("snapshot") {
            guard let json = reader.value("snapshot") else { throw .invalid(reader.name("snapshot"), "is required for operation \(operation)") }
            // Measured before validation: a refused snapshot is audited, and
            // its identifiers must be bounded by then.
            try FieldLimits.check(member: "id", of: json, FieldLimits.snapshotIdentifier, field: reader.name("snapshot") + ".id")
            try FieldLimits.check(member: "surfaceId", of: json, FieldLimits.snapshotIdentifier, field: reader.name("snapshot") + ".surfaceId")
            do {
                // Validation is a pure function of the JSON: an equal one decodes alike.
                if let snapshots {
                    snapshot = try snapshots.snapshot(for: json) { json throws(SnapshotValidationError) in try LiveSurfaceSnapshot(json: json) }
                } else {
                    snapshot = try LiveSurfaceSnapshot(json: json)
                }
            } catch {
                var failure = IngressError.invalidSnapshot(error, field: reader.name("snapshot"))
                failure.refusal = SnapshotRefusal(app: app, environment: environment, operation: Operation(rawValue: operation) ?? .raw, error: error)
                throw failure
            }
            try checkIdentifiers(snapshot!, field: reader.name("snapshot"))
        }
        let operationsOut = try tokens.map { (token) throws(IngressError) -> RelayOperation in
            try build(operation, token: token, snapshot: snapshot, options: options, live: liveOptions, reader: &reader)
        }
        return SendRequest(app: app, environment: environment, operations: operationsOut)
    }

    /// The snapshot's `id` and `surfaceId` become audit columns, log fields and
    /// span attributes: a control character (a NUL above all, which Postgres
    /// text cannot hold) is refused here, before the send is recorded anywhere.
    /// The contract allows any string; the relay narrows it for what it stores.
    static func checkIdentifiers(_ snapshot: LiveSurfaceSnapshot, field: String) throws(IngressError) {
        // Two checks written out: a list of the pairs was an array built per send.
        if let rule = controlCharacterRule(snapshot.id) { throw .invalid("\(field).id", rule) }
        if let rule = controlCharacterRule(snapshot.surfaceID) { throw .invalid("\(field).surfaceId", rule) }
    }

    /// Why `text` cannot be stored as an identifier, or nil: no C0 control
    /// characters (0x00-0x1F) and no DEL (0x7F).
    static func controlCharacterRule(_ text: String) -> String? {
        guard let index = text.utf8.firstIndex(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        let byte = text.utf8[index]
        let offset = text.utf8.distance(from: text.utf8.startIndex, to: index)
        return "must not contain control characters (found byte 0x\(byte < 16 ? "0" : "")\(String(byte, radix: 16)) at byte \(offset))"
    }

    static func environment(_ reader: inout FieldReader) throws(IngressError) -> Environment {
        let name = try reader.requiredString("environment", rule: "is required (development or production)")
        guard let environment = Environment(name: name) else {
            throw .invalid(reader.name("environment"), "must be development or production (sandbox, dev and prod are accepted too)")
        }
        return environment
    }

    private static func build(
        _ operation: String, token: String, snapshot: LiveSurfaceSnapshot?, options: DeviceSendOptions, live: LiveActivityOptions,
        reader: inout FieldReader
    ) throws(IngressError) -> RelayOperation {
        switch operation {
        case "alert": return .alert(token: token, snapshot: snapshot!, options: options)
        case "notification": return .notification(token: token, snapshot: snapshot!, options: options)
        case "widget": return .widget(token: token, snapshot: snapshot!, options: options)
        case "background":
            var custom = JSONObject()
            if let payload = try reader.object("payload"), case .object(let object) = payload { custom = object }
            return .background(token: token, customData: custom, options: options)
        case "start":
            let attributes = try reader.object("attributes")
            let attributesType = try reader.string("attributesType")
            if let attributesType, attributesType.isEmpty { throw .invalid(reader.name("attributesType"), "must not be empty") }
            if let attributesType { try FieldLimits.check(attributesType, FieldLimits.attributesType, field: reader.name("attributesType")) }
            return .start(token: token, snapshot: snapshot!, attributes: attributes, attributesType: attributesType, live: live, options: options)
        case "update": return .update(token: token, snapshot: snapshot!, live: live, options: options)
        case "end": return .end(token: token, snapshot: snapshot!, live: live, options: options)
        case "broadcast":
            let channelID = try reader.requiredString("channelId", rule: "is required for operation broadcast")
            try FieldLimits.check(channelID, FieldLimits.channelID, field: reader.name("channelId"))
            let policy = try storagePolicy(&reader)
            return .broadcast(channelID: channelID, snapshot: snapshot!, storagePolicy: policy, live: live, options: options)
        default:
            guard let payload = try reader.object("payload") else { throw .invalid(reader.name("payload"), "is required for operation raw (the whole APNs payload)") }
            var headers: [HTTPHeader] = []
            if let object = try reader.object("headers"), case .object(let members) = object {
                if members.members.count > FieldLimits.rawHeaders {
                    throw .invalid(reader.name("headers"), "must hold at most \(FieldLimits.rawHeaders) headers (has \(members.members.count))")
                }
                for (name, value) in members.members {
                    if name.utf8.count > FieldLimits.headerName {
                        throw .invalid(reader.name("headers"), "a header name must be at most \(FieldLimits.headerName) bytes (one is \(name.utf8.count))")
                    }
                    if case .string(let text) = value { try FieldLimits.check(text, FieldLimits.headerValue, field: reader.name("headers.\(name)")) }
                    guard case .string(let text) = value else { throw .invalid(reader.name("headers.\(name)"), "must be a string, not \(value.typeName)") }
                    headers.append(HTTPHeader(name, text))
                }
            }
            // `apnsId` is sent as the `apns-id` header, checked by the builder
            // like one given in `headers`; both at once is refused: one send, one id.
            if let apnsID = options.apnsID {
                if headers.contains(where: { $0.name == "apns-id" }) {
                    throw .invalid(reader.name("apnsId"), "give the send's id once: apnsId or headers.apns-id, not both")
                }
                headers.append(HTTPHeader("apns-id", apnsID.value))
            }
            return .raw(token: token, payload: payload, headers: headers)
        }
    }

    static func storagePolicy(_ reader: inout FieldReader) throws(IngressError) -> ChannelStoragePolicy? {
        guard let text = try reader.string("storagePolicy") else { return nil }
        // "most-recent" is accepted as a short spelling of APNs' most-recent-message.
        guard let policy = ChannelStoragePolicy(rawValue: text == "most-recent" ? "most-recent-message" : text) else {
            throw .invalid(reader.name("storagePolicy"), "must be no-storage or most-recent-message (most-recent is accepted too)")
        }
        return policy
    }

    private static func deviceOptions(_ reader: inout FieldReader) throws(IngressError) -> DeviceSendOptions {
        var options = DeviceSendOptions()
        if let priority = try reader.integer("priority") {
            guard let value = Priority(rawValue: Int(truncatingIfNeeded: priority)) else {
                throw .invalid(reader.name("priority"), "must be 10 (immediate), 5 (conserve power) or 1 (low)")
            }
            options.priority = value
        }
        if let expiration = try reader.integer("expiration") {
            guard expiration >= 0 else { throw .invalid(reader.name("expiration"), "must be unix seconds ≥ 0 (0: deliver once or not at all)") }
            options.expiration = expiration
        }
        if let collapseID = try reader.string("collapseId") {
            guard !collapseID.isEmpty, collapseID.utf8.count <= 64 else { throw .invalid(reader.name("collapseId"), "must be 1 to 64 bytes") }
            options.collapseID = collapseID
        }
        if let text = try reader.string("apnsId") {
            // Lowercase only: APNs' canonical form, the form the relay answers
            // and audits with, so the id a caller keeps is the one it finds.
            guard let apnsID = APNsID(text), apnsID.value == text else {
                throw .invalid(reader.name("apnsId"), "must be a lowercase UUID in canonical 8-4-4-4-12 form (APNs' canonical form)")
            }
            options.apnsID = apnsID
        }
        return options
    }

    private static func liveActivityOptions(_ reader: inout FieldReader) throws(IngressError) -> LiveActivityOptions {
        var live = LiveActivityOptions()
        for (key, path) in [("timestamp", \LiveActivityOptions.timestamp), ("staleDate", \.staleDate), ("dismissalDate", \.dismissalDate)] {
            if let value = try reader.integer(key) {
                guard value >= 0 else { throw .invalid(reader.name(key), "must be unix seconds ≥ 0") }
                live[keyPath: path] = value
            }
        }
        live.relevanceScore = try reader.number("relevanceScore")
        live.contentState = try reader.object("contentState")
        return live
    }
}

extension IngressError {
    /// A validation error that happened before any send was made: no apns-id, no attempts.
    func withoutSendDetails() -> IngressError {
        var copy = self
        copy.apnsID = nil
        copy.attempts = nil
        copy.trapHits = nil
        return copy
    }
}

/// A send refused because its snapshot broke the contract: still reported to
/// the relay's observers (metrics, audit) once the caller is known to be allowed.
struct SnapshotRefusal: Sendable {
    var app: String
    var environment: Environment
    var operation: Operation
    var error: SnapshotValidationError
}
