import RelayBasics
import Synchronization
import Telemetry
import Testing

/// The collector's host name is looked up within the export's deadline
/// (``HostLookup``): a silent resolver ends the connect at that deadline, or
/// at the drain's, never at `getaddrinfo`'s.
@Suite("OTLP connect against a resolver that does not answer", .timeLimit(.minutes(1)))
struct OTLPConnectLookupTests {
    func failure(_ result: Result<OTLPSocketStream, OTLPExportFailure>) -> OTLPExportFailure? {
        if case .failure(let failure) = result { return failure }
        return nil
    }

    @Test("the connect ends at the export's deadline, as a failure worth another try")
    func endsAtDeadline() {
        let lookup = HostLookup.pendingForTesting(host: "collector.test", port: 4318)
        let deadline = OTLPDeadline(MonotonicClock.now() + 200_000_000)
        let result = OTLPSocketStream.connect(host: "collector.test", port: 4318, deadline: deadline) { _, _ in lookup }
        let failure = failure(result)
        #expect(failure?.description == "cannot resolve collector.test: the resolver did not answer before the export's deadline")
        #expect(failure?.retryable == true)
        #expect(deadline.hasPassed)
    }

    @Test("the drain bringing the deadline forward ends a lookup the export's own deadline would still wait for")
    func endsAtDrain() async {
        let lookup = HostLookup.pendingForTesting(host: "collector.test", port: 4318)
        let deadline = OTLPDeadline(MonotonicClock.now() + 600_000_000_000)
        // The failure's text only crosses back: a stream is not Sendable.
        let connecting = Task.detached { () -> String? in
            let result = OTLPSocketStream.connect(host: "collector.test", port: 4318, deadline: deadline) { _, _ in lookup }
            if case .failure(let failure) = result { return failure.description }
            return nil
        }
        deadline.lower(to: MonotonicClock.now() + 100_000_000)
        let failure = await connecting.value
        #expect(failure?.contains("the resolver did not answer") == true)
        #expect(lookup.outcome == nil, "the lookup itself still runs; only the wait ended")
    }

    @Test("a lookup's failure is the resolver's message")
    func failedLookup() {
        let lookup = HostLookup.pendingForTesting(host: "collector.test", port: 4318)
        lookup.finishForTesting(.failed("Name or service not known"))
        let result = OTLPSocketStream.connect(
            host: "collector.test", port: 4318, deadline: OTLPDeadline(MonotonicClock.now() + 10_000_000_000)
        ) { _, _ in lookup }
        #expect(failure(result)?.description == "cannot resolve collector.test: Name or service not known")
    }
}
