import APNs
import Relay
import Surfaces
@testable import Telemetry
import Testing

/// A metric's `reason` label takes a bounded set of values, whatever APNs answers.
@Suite("Metric reason labels")
struct ReasonLabelTests {
    @Test("the relay's transport kinds, catalog reasons and its own error types pass; APNs text shaped like a transport reason is other")
    func bounded() {
        for kind in TransportError.Kind.allCases {
            #expect(RelayMetrics.reasonLabel("transport_\(kind.rawValue)") == "transport_\(kind.rawValue)")
        }
        #expect(RelayMetrics.reasonLabel("BadDeviceToken") == "BadDeviceToken")
        #expect(RelayMetrics.reasonLabel("deadline_exceeded") == "deadline_exceeded")
        #expect(RelayMetrics.reasonLabel(nil) == "none")
        // An APNs (or a proxy in front of it) answering {"reason":"transport_…"}:
        // its text is kept verbatim as the send's reason, and each distinct
        // one was a new series.
        for hostile in ["transport_", "transport_timeout2", "transport_\u{0}x", "transport_" + String(repeating: "z", count: 300)] {
            #expect(RelayMetrics.reasonLabel(hostile) == "other", "\(hostile.prefix(20))")
        }
    }

    /// Issue 26: `InvalidHeader` and `TopicNotForApp` counted as `other`
    /// because the label set was a hand-kept list. Now it is derived from the
    /// error types, and every `error_type` a failure can carry is its own label.
    @Test("every error type a send can fail with is its own reason label, InvalidHeader and TopicNotForApp among them")
    func everyRefusalHasItsOwnLabel() {
        var failures: [SendFailure.Cause] = APNsError.Code.Preflight.allCases.map {
            .apns(APNsError(stage: .preflight, code: APNsError.Code($0), status: 400, dropsToken: false, trapID: nil, fix: ""))
        }
        failures += APNsReason.catalog.map { .apns(APNsError(stage: .apns, code: APNsError.Code(rawValue: $0.name), status: $0.status, dropsToken: false, trapID: nil, fix: "")) }
        failures += TransportError.Kind.allCases.map { .transport(TransportError($0, "test")) }
        // One of each of the relay's own causes; the switch fails to compile when a cause is added.
        for own in SendFailure.OwnErrorType.allCases {
            switch own {
            case .credentials: failures.append(.credentials("key unreadable"))
            case .cancelled: failures.append(.cancelled)
            case .deadlineExceeded: failures.append(.deadlineExceeded)
            case .invalidSnapshot: failures.append(.invalidSnapshot(SnapshotValidationError(issues: [])))
            case .configuration: failures.append(.configuration("no such app"))
            case .auditUnavailable: failures.append(.auditUnavailable("the journal cannot be written"))
            }
        }
        var labels = Set<String>()
        for cause in failures {
            let failure = SendFailure(cause: cause, apnsID: .random(), attempts: 1, latencyMilliseconds: 1, trapHits: [], timestamp: 0)
            #expect(RelayMetrics.reasonLabel(failure.errorType) == failure.errorType, "\(failure.errorType)")
            labels.insert(failure.errorType)
        }
        #expect(labels == SendFailure.knownErrorTypes)
        #expect(RelayMetrics.reasonLabel(APNsError.Code.invalidHeader.rawValue) == "InvalidHeader")
        #expect(RelayMetrics.reasonLabel(APNsError.Code.topicNotForApp.rawValue) == "TopicNotForApp")
        #expect(SendFailure.OwnErrorType.invalidSnapshot.rawValue == SnapshotValidationError.code)
        // A reason APNs added after the catalog is the one thing still `other`.
        #expect(RelayMetrics.reasonLabel("SomeReasonFrom2030") == "other")
    }
}
