import ProviderTokens
public import APNs
import RelayJSON
import Synchronization
public import RelayBasics

/// Decides how a mock APNs answers each request: route, validate like APNs,
/// then apply scripted rules and connection-level faults.
///
/// Transport-free, so every rule is testable without sockets; the mock server
/// feeds it requests and carries out the ``MockAction`` it returns.
public final class MockAPNsEngine: Sendable {
    public let configuration: MockAPNsConfiguration
    public let log: MockAPNsLog
    let verifier: ProviderTokenVerifier

    struct State {
        /// Attempts seen per (rule index, send key).
        var attempts: [String: Int] = [:]
        /// Streams seen per connection, for GOAWAY-after-N.
        var streamsPerConnection: [Int: Int] = [:]
        /// Channels by bundle id: channel id → storage policy (0 or 1).
        var channels: [String: [String: Int]] = [:]
        /// Rules set by ``replaceRules(_:)`` in place of the configuration's.
        var rules: [MockRule]?
    }

    /// Answers by `rules` from now on instead of the configuration's: a
    /// fault injected into, or removed from, a running mock (the alert
    /// delivery test pages on a fault and resolves when it is gone).
    /// Sequences start afresh.
    public func replaceRules(_ rules: [MockRule]) {
        state.withLock { state in
            state.rules = rules
            state.attempts.removeAll()
        }
    }

    let state = Mutex(State())
    /// Answers held by ``MockOutcome/hold``, each a closure that sends it.
    let held = Mutex<[@Sendable () -> Void]>([])

    /// Parks a held answer (the transport's way to send it) until ``releaseHeld()``.
    public func park(_ answer: @escaping @Sendable () -> Void) {
        held.withLock { $0.append(answer) }
    }

    /// Answers held now.
    public var heldCount: Int { held.withLock { $0.count } }

    /// Sends every held answer; returns how many.
    @discardableResult
    public func releaseHeld() -> Int {
        let answers = held.withLock { held in
            defer { held.removeAll() }
            return held
        }
        for answer in answers { answer() }
        return answers.count
    }

    /// - Parameter now: unix seconds, injectable for JWT-age tests.
    public init(configuration: MockAPNsConfiguration, now: @escaping @Sendable () -> Int64 = { UnixTime.nowSeconds() }) throws {
        self.configuration = configuration
        self.log = MockAPNsLog(capacity: configuration.logCapacity)
        self.verifier = try ProviderTokenVerifier(keys: configuration.keys, now: now)
    }

    /// Distinct provider tokens whose signatures were verified.
    public var signatureVerifications: Int { verifier.signatureVerifications }

    /// The action for one request. Also logs it.
    public func handle(_ request: MockRequest) -> MockAction {
        let action = decide(request)
        let response: MockResponse? = switch action {
        case .respond(let response, _): response
        case .goAway(_, let response): response
        case .hold(let response): response
        case .noAnswer, .resetConnection: nil
        }
        let entry = MockAPNsLog.Entry(
            request: request, status: response?.status, reason: response?.reason,
            apnsID: request.header("apns-id") ?? request.header("apns-request-id"))
        log.record(entry)
        configuration.requestObserver?(entry)
        return action
    }

    private func decide(_ request: MockRequest) -> MockAction {
        let action = answer(request)
        guard let limit = configuration.goAwayAfterStreams else { return action }
        let count = state.withLock { state in
            state.streamsPerConnection[request.connectionID, default: 0] += 1
            return state.streamsPerConnection[request.connectionID]!
        }
        guard count == limit.count else { return action }
        // The Nth stream carries the GOAWAY. Gracefully, it is still answered
        // exactly as it would have been; abruptly, it is refused unprocessed.
        guard limit.graceful else { return .goAway(graceful: false, response: nil) }
        if case .respond(let response, _) = action { return .goAway(graceful: true, response: response) }
        return action
    }

    /// The answer before connection-level faults: validation, then rules.
    private func answer(_ request: MockRequest) -> MockAction {
        var response = validate(request)
        if response.status < 300, let scripted = scriptedOutcome(for: request) {
            switch scripted {
            case .succeed: break
            case .reject(let reason, let status, let retryAfter, let timestamp):
                response = error(reason, status: status, request: request, retryAfter: retryAfter, timestamp: timestamp)
            case .bareStatus(let status):
                response = MockResponse(status: status)
            case .noAnswer: return .noAnswer
            case .hold: return .hold(response)
            case .resetConnection: return .resetConnection
            case .goAway(let graceful): return .goAway(graceful: graceful, response: graceful ? response : nil)
            }
        }
        return .respond(response, delayMilliseconds: configuration.responseDelay.draw())
    }

    /// The scripted outcome for this attempt, if a rule matches.
    private func scriptedOutcome(for request: MockRequest) -> MockOutcome? {
        let rules = state.withLock { $0.rules } ?? configuration.rules
        for (index, rule) in rules.enumerated() where matches(rule.match, request) {
            let sendKey = request.header("apns-id") ?? request.header("apns-request-id") ?? request.path
            let attempt = state.withLock { state in
                let key = "\(index)|\(sendKey)"
                let attempt = state.attempts[key, default: 0]
                // A long-running mock must not grow without bound: sends older
                // than the last 100,000 start their sequences afresh.
                if state.attempts.count >= 100_000, state.attempts[key] == nil { state.attempts.removeAll(keepingCapacity: true) }
                state.attempts[key] = attempt + 1
                return attempt
            }
            return rule.outcomes[min(attempt, rule.outcomes.count - 1)]
        }
        return nil
    }

    private func matches(_ match: MockRule.Match, _ request: MockRequest) -> Bool {
        switch match {
        case .any: true
        case .pathPrefix(let prefix): request.path.hasPrefix(prefix)
        case .tokenPrefix(let prefix): request.path.hasPrefix("/3/device/" + prefix)
        }
    }

    /// An APNs error answer: status (the catalog's unless given), apns-id, `{"reason": …}`.
    func error(
        _ reason: String, status: Int? = nil, request: MockRequest, retryAfter: Int? = nil, timestamp: Int64? = nil
    ) -> MockResponse {
        var headers = [HTTPHeader("apns-id", request.header("apns-id")?.lowercasedHeaderName ?? APNsID.random().value)]
        if let retryAfter { headers.append(HTTPHeader("retry-after", String(retryAfter))) }
        var body = JSONObject()
        body["reason"] = .string(reason)
        if let timestamp { body["timestamp"] = .integer(timestamp) }
        return MockResponse(
            status: status ?? APNsReason.named(reason)?.status ?? 400, headers: headers,
            body: JSONValue.object(body).encoded())
    }
}
