import Logging
@testable import RelayServer
import ServiceLifecycle
import Synchronization
import Testing

/// The relay's parts in the group `RelayServer` runs them in, with stand-in
/// parts that record what they did: the order of the drain, a part that
/// fails while serving, a part that hangs while stopping.
@Suite("Relay parts under one ServiceGroup")
struct RelayPartTests {
    /// What the stand-in parts did, in order.
    final class Journal: Sendable {
        let entries = Mutex<[String]>([])
        func note(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    static let logger = Logger(label: "relay-part-tests") { _ in SwiftLogNoOpLogHandler() }

    static func part(_ name: String, _ journal: Journal) -> RelayPart {
        RelayPart(name: name, body: .stoppedBy {
            journal.note("\(name) stopping")
            // A suspension inside the stop: the next part must still wait for its end.
            await Task.yield()
            journal.note("\(name) stopped")
        }, logger: logger, started: {})
    }

    /// A lifecycle service that fails once running, as swift-otel's exporter could.
    struct FailingService: Service {
        struct Broken: Error {}
        func run() async throws {
            await Task.yield()
            throw Broken()
        }
    }

    @Test("the drain stops the parts bottom to top (intake first, exporter last), each after the one below has returned")
    func drainOrder() async throws {
        let journal = Journal()
        let names = ["trace exporter", "metrics listener", "audit writer", "APNs pool", "ingress listener"]
        let group = RelayServer.group(names.map { Self.part($0, journal) }, signals: false, drainTimeout: 5, logger: Self.logger)
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(journal.all == names.reversed().flatMap { ["\($0) stopping", "\($0) stopped"] })
    }

    @Test("a part that fails while the relay serves ends the group with its name, after the other parts drained in order")
    func failingPart() async throws {
        let journal = Journal()
        let parts = [
            RelayPart(name: "trace exporter", body: .service(FailingService(), within: { 1 }), logger: Self.logger, started: {}),
            Self.part("audit writer", journal), Self.part("ingress listener", journal),
        ]
        let group = RelayServer.group(parts, signals: false, drainTimeout: 5, logger: Self.logger)
        await #expect {
            try await group.run()
        } throws: { error in
            (error as? RelayPartFailure)?.part == "trace exporter"
        }
        #expect(journal.all == ["ingress listener stopping", "ingress listener stopped", "audit writer stopping", "audit writer stopped"])
    }

    @Test("a part whose stop hangs is abandoned at the drain's bound: the group ends with its name, the parts above it are not stopped")
    func hungPart() async throws {
        let journal = Journal()
        // The hung stop is released when the test ends, so no task outlives it.
        let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let hung = RelayPart(name: "audit writer", body: .stoppedBy {
            journal.note("audit writer stopping")
            await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
        }, logger: Self.logger, started: {})
        let parts = [Self.part("trace exporter", journal), hung, Self.part("ingress listener", journal)]
        let group = RelayServer.group(parts, signals: false, drainTimeout: 0, margin: 0.2, logger: Self.logger)
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        await #expect {
            try await running.value
        } throws: { error in
            (error as? RelayPartFailure)?.part == "audit writer"
        }
        #expect(journal.all == ["ingress listener stopping", "ingress listener stopped", "audit writer stopping"])
        release.withLock { $0?.resume() }
    }
}
