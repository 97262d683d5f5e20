public import APNs
import Instrumentation
import Logging
import RelayJSON
import Surfaces
import Tracing
import RelayBasics

extension RelayService {
    /// Turns an operation into its APNs request, running every check that
    /// needs no I/O. A refusal is reported (zero attempts) unless `context` is nil (describe).
    func prepare(
        app: String, environment: Environment, _ operation: RelayOperation, apnsID: APNsID?, context: SendContext? = nil
    ) throws(SendFailure) -> (APNsRequest, (String, Int64)?) {
        let builder = try builder(app: app, environment: environment, operation, context: context)
        return try prepare(app: app, environment: environment, operation, builder: builder, context: context)
    }

    /// The request builder of `app`, refused when the app is unknown or not
    /// configured for `environment` (a batch looks it up once for many sends).
    func builder(app: String, environment: Environment, _ operation: RelayOperation, context: SendContext?) throws(SendFailure) -> RequestBuilder {
        // App names are unique (checked when the service is built): one entry per app.
        guard let entry = builders[app] else {
            throw refusal(.configuration("no app named \(app) (configured: \(appNames.joined(separator: ", ")))"), app, environment, operation, context)
        }
        guard entry.environments.contains(environment) else {
            throw refusal(.configuration("app \(app) is not configured for \(environment.rawValue)"), app, environment, operation, context)
        }
        return entry.builder
    }

    /// ``prepare(app:environment:_:apnsID:context:)`` with the app's builder
    /// already looked up; `payloads` (a batch's) reuses the last snapshot's
    /// encoded alert or notification payload.
    func prepare(
        app: String, environment: Environment, _ operation: RelayOperation, builder: RequestBuilder, context: SendContext?,
        payloads: PayloadMemo? = nil
    ) throws(SendFailure) -> (APNsRequest, (String, Int64)?) {
        do {
            return try build(operation, builder: builder, app: app, environment: environment, payloads: payloads)
        } catch let error as APNsError {
            throw refusal(.apns(error), app, environment, operation, context)
        } catch let error as SnapshotValidationError {
            throw refusal(.invalidSnapshot(error), app, environment, operation, context)
        } catch {
            throw refusal(.configuration("\(error)"), app, environment, operation, context)
        }
    }

    /// A send refused before any I/O: reported (zero attempts) unless `context` is nil (describe).
    private func refusal(
        _ cause: SendFailure.Cause, _ app: String, _ environment: Environment, _ operation: RelayOperation, _ context: SendContext?
    ) -> SendFailure {
        guard let context else {
            return SendFailure(cause: cause, apnsID: APNsID.random(), attempts: 0, latencyMilliseconds: 0, trapHits: [], timestamp: UnixTime.nowSeconds() * 1000)
        }
        return refuse(cause, app: app, environment: environment, operation: operation, context: context)
    }

    private func build(
        _ operation: RelayOperation, builder: RequestBuilder, app: String, environment: Environment, payloads: PayloadMemo?
    ) throws -> (APNsRequest, (String, Int64)?) {
        switch operation {
        case .alert(let token, let snapshot, let options):
            if let payload = payloads?.payload(.alert, of: snapshot) { return (try builder.alert(token: token, payload: payload, options: options), nil) }
            return (try builder.alert(token: token, payload: snapshot.alertPayload(), options: options), nil)
        case .notification(let token, let snapshot, let options):
            if let payload = payloads?.payload(.notification, of: snapshot) {
                return (try builder.notification(token: token, payload: payload, options: options), nil)
            }
            return (try builder.notification(token: token, payload: snapshot.notificationPayload(), options: options), nil)
        case .background(let token, let customData, let options):
            return (try builder.background(token: token, customData: customData, options: options), nil)
        case .start(let token, let snapshot, let attributes, let attributesType, let live, let options):
            var content = try liveContent(snapshot, live)
            content.attributesType = attributesType ?? RelayOperation.defaultAttributesType
            content.attributes = try attributes ?? snapshot.liveActivityAttributes()
            content.alert = try snapshot.alertPayload()["aps"]?["alert"]
            return (try builder.liveActivity(.start, token: token, content: content, options: options), nil)
        case .update(let token, let snapshot, let live, let options), .end(let token, let snapshot, let live, let options):
            let event: LiveActivityEvent = operation.operation == .update ? .update : .end
            var content = try liveContent(snapshot, live)
            let timestamp = content.timestamp ?? configuration.now()
            content.timestamp = timestamp
            let request = try builder.liveActivity(event, token: token, content: content, options: options)
            let key = "\(app)|\(environment.rawValue)|\(request.tokenFingerprint ?? "")"
            try checkTimestamp(key: key, timestamp: timestamp, apnsID: request.apnsID)
            return (request, (key, timestamp))
        case .widget(let token, let snapshot, let options):
            return (try builder.widgetReload(token: token, sidecar: snapshot.widgetReloadSidecar(), options: options), nil)
        case .broadcast(let channelID, let snapshot, let storagePolicy, let live, let options):
            return (try builder.broadcast(channelID: channelID, content: liveContent(snapshot, live), storagePolicy: storagePolicy, options: options), nil)
        case .createChannel(let storagePolicy):
            return (builder.createChannel(storagePolicy: storagePolicy), nil)
        case .listChannels:
            return (builder.listChannels(), nil)
        case .deleteChannel(let channelID):
            return (try builder.deleteChannel(channelID: channelID), nil)
        case .readChannel(let channelID):
            return (try builder.readChannel(channelID: channelID), nil)
        case .raw(let token, let payload, let headers, let bytes):
            return (try builder.raw(token: token, payload: payload, headers: headers, bytes: bytes), nil)
        case .rawChannel(let request):
            return (try builder.rawChannel(request), nil)
        }
    }

    private func liveContent(_ snapshot: LiveSurfaceSnapshot, _ live: LiveActivityOptions) throws -> LiveActivityContent {
        LiveActivityContent(
            contentState: try live.contentState ?? snapshot.liveActivityContentState(), timestamp: live.timestamp,
            staleDate: live.staleDate, dismissalDate: live.dismissalDate, relevanceScore: live.relevanceScore)
    }

    private func checkTimestamp(key: String, timestamp: Int64, apnsID: APNsID) throws(APNsError) {
        guard configuration.timestampPolicy != .allow, let last = timestamps.staleness(key: key, timestamp: timestamp) else { return }
        let rule = "must be newer than \(last), the last timestamp sent to this activity (iOS silently drops older or equal ones)"
        if configuration.timestampPolicy == .reject {
            throw APNsError.preflight("StaleTimestamp", field: "aps.timestamp", rule: rule, apnsID: apnsID)
        }
        logger.warning("Live Activity timestamp not increasing; iOS will drop this update", metadata: ["apns_id": "\(apnsID)", "timestamp": "\(timestamp)", "last": "\(last)"])
    }

    /// Reports a send refused before any I/O and returns its failure.
    func refuse(_ cause: SendFailure.Cause, app: String, environment: Environment, operation: RelayOperation, context: SendContext) -> SendFailure {
        var context = context
        // A refused send's row keeps at most a bounded prefix of what it
        // carried: the ingress bounds these already (FieldLimits), this
        // holds for every other caller of the service.
        if context.snapshotID == nil { context.snapshotID = operation.snapshot.map { Self.auditPrefix($0.id) } }
        if context.surfaceID == nil { context.surfaceID = operation.snapshot.map { Self.auditPrefix($0.surfaceID) } }
        return recordRefusal(cause, app: app, environment: environment, operation: operation.operation, context: context)
    }

    /// Bytes of a caller's identifier a refused send's audit row keeps at most.
    public static let auditPrefixBytes = 256

    /// `text`, cut to at most ``auditPrefixBytes`` UTF-8 bytes on a character boundary.
    static func auditPrefix(_ text: String) -> String {
        guard text.utf8.count > auditPrefixBytes else { return text }
        // Whole scalars only, counted from the front: never the whole string again.
        var bytes = 0
        var end = text.unicodeScalars.startIndex
        for scalar in text.unicodeScalars {
            let size = UTF8.width(scalar)
            guard bytes + size <= auditPrefixBytes else { break }
            bytes += size
            end = text.unicodeScalars.index(after: end)
        }
        return String(text.unicodeScalars[..<end])
    }

    /// Reports a send that a front end refused before it could become an
    /// operation (a snapshot that breaks the contract, MS008), so it is
    /// counted, traced by its trap and audited like every other refusal.
    public func recordRefusal(_ cause: SendFailure.Cause, app: String, environment: Environment, operation: Operation, context: SendContext) -> SendFailure {
        let now = UnixTime.nowNanoseconds()
        var trapHits: [TrapID] = []
        if case .apns(let error) = cause, let trap = error.trapID { trapHits.append(trap) }
        if case .invalidSnapshot = cause { trapHits.append(.invalidSnapshot) }
        let apnsID = APNsID.random()
        let failure = SendFailure(cause: cause, apnsID: apnsID, attempts: 0, latencyMilliseconds: 0, trapHits: trapHits, timestamp: Int64(now / 1_000_000))
        // The refusal gets its send span like any send, so its row, its logs and
        // the caller's trace meet on one trace id.
        let parent = context.instrumentation ?? InstrumentationContext.current ?? .topLevel
        let span = tracer.startSpan("apns.send", context: parent, ofKind: .client)
        if span.isRecording {
            span.updateAttributes { attributes in
                attributes["apns.operation"] = operation.rawValue
                attributes["apns.app"] = app
                attributes["apns.environment"] = environment.rawValue
                attributes["apns.id"] = apnsID.value
                attributes["apns.attempts"] = 0
                if let trap = trapHits.first { attributes["apns.trap"] = trap.rawValue }
                if !trapHits.isEmpty { attributes["apns.trap_ids"] = trapHits.map(\.rawValue) }
                attributes["error.type"] = failure.errorType
            }
        }
        span.setStatus(SpanStatus(code: .error, message: failure.errorType))
        span.end()
        let event = SendEvent(
            send: SendDescriptor(
                app: app, environment: environment, operation: operation, apnsID: apnsID,
                snapshotID: context.snapshotID, surfaceID: context.surfaceID, caller: context.caller,
                traceID: tracer.traceParent(ofSpan: span, context: span.context)?.traceID,
                idempotencyKeyHash: context.idempotencyKeyHash),
            outcome: .rejected, status: nil, reason: nil, errorType: failure.errorType, attempts: 0, trapHits: trapHits,
            latencySeconds: 0, startedAt: now, finishedAt: now, apnsUniqueID: nil, unregisteredAt: nil, dropsToken: false,
            attemptLog: [], deadToken: nil)
        for observer in observers.all { observer.sendFinished(event) }
        return failure
    }
}
