import Audit
import Glibc
import Logging
@testable import RelayServer
import ServiceLifecycle
import Synchronization
import Testing
import TestSupport

/// The relay's parts as `RelayServer` starts them and runs them in one
/// group, with stand-in parts that record what they did: the start in
/// order and its undoing, the order of the drain, a part that fails while
/// serving, a part that hangs while stopping.
@Suite("Relay parts under one ServiceGroup")
struct RelayPartTests {
    /// What the stand-in parts did, in order.
    final class Journal: Sendable {
        let entries = Mutex<[String]>([])
        func note(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    static let logger = Logger(label: "relay-part-tests") { _ in SwiftLogNoOpLogHandler() }

    /// A part that notes its start and stop; its start fails when told to.
    struct StandIn: RelayPart {
        struct CannotStart: Error {}
        let name: String
        let journal: Journal
        var failsToStart = false
        var stopping: @Sendable () async -> Void = { await Task.yield() }
        var logger: Logger { RelayPartTests.logger }

        func start() async throws {
            // A suspension inside the start: the next part must still wait for its end.
            await Task.yield()
            guard !failsToStart else {
                journal.note("\(name) could not start")
                throw CannotStart()
            }
            journal.note("\(name) started")
        }

        func stop() async {
            journal.note("\(name) stopping")
            await stopping()
            journal.note("\(name) stopped")
        }
    }

    /// A part whose work runs in `run()` and fails once running.
    struct FailingPart: RelayPart {
        struct Broken: Error {}
        let name: String
        var logger: Logger { RelayPartTests.logger }
        func run() async throws {
            await Task.yield()
            throw Broken()
        }
        func stop() async {}
    }

    static func parts(_ names: [String], _ journal: Journal) -> [any RelayPart] {
        names.map { StandIn(name: $0, journal: journal) }
    }

    @Test("the parts start one at a time in their order")
    func startOrder() async throws {
        let journal = Journal()
        let names = ["trace exporter", "metrics listener", "audit writer", "APNs pool", "ingress listener"]
        try await RelayServer.startParts(Self.parts(names, journal))
        #expect(journal.all == names.map { "\($0) started" })
    }

    @Test("a part that cannot start: the parts started before it are stopped, last first, none after it starts, and its error is thrown")
    func failedStart() async throws {
        let journal = Journal()
        var parts = Self.parts(["trace exporter", "metrics listener", "audit writer"], journal)
        parts.append(StandIn(name: "APNs pool", journal: journal, failsToStart: true))
        parts.append(StandIn(name: "ingress listener", journal: journal))
        await #expect(throws: StandIn.CannotStart.self) {
            try await RelayServer.startParts(parts)
        }
        #expect(journal.all == [
            "trace exporter started", "metrics listener started", "audit writer started", "APNs pool could not start",
            "audit writer stopping", "audit writer stopped", "metrics listener stopping", "metrics listener stopped",
            "trace exporter stopping", "trace exporter stopped",
        ])
    }

    @Test("the drain stops the parts bottom to top (intake first, exporter last), each after the one below has returned")
    func drainOrder() async throws {
        let journal = Journal()
        let names = ["trace exporter", "metrics listener", "audit writer", "APNs pool", "ingress listener"]
        let group = RelayServer.group(Self.parts(names, journal), signals: false, drainTimeout: 5, logger: Self.logger)
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(journal.all == names.reversed().flatMap { ["\($0) stopping", "\($0) stopped"] })
    }

    @Test("a part that fails while the relay serves ends the group with its name, after the other parts drained in order")
    func failingPart() async throws {
        let journal = Journal()
        let parts = [FailingPart(name: "trace exporter")] + Self.parts(["audit writer", "ingress listener"], journal)
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
        let hung = StandIn(name: "audit writer", journal: journal, stopping: {
            await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
        })
        let parts: [any RelayPart] = [StandIn(name: "trace exporter", journal: journal), hung, StandIn(name: "ingress listener", journal: journal)]
        // The bound is the whole drain's: 8 s leaves the parts before the hung
        // one time to stop on a loaded machine (0.2 s did not, once, beside
        // the process tests; nor did 3 s, once, beside twenty of them), and
        // is the test's length.
        let group = RelayServer.group(parts, signals: false, drainTimeout: 0, margin: 8, logger: Self.logger)
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

    /// A loopback socket that listens and never accepts: the kernel completes
    /// the handshakes, so the proxy in front of it has its server connection.
    static func listeningSocket() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        try #require(descriptor >= 0 && bound, "a listening loopback socket (errno \(errno))")
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("the idempotency purge waiting on a silent Postgres ends at the shutdown, not at the statement's bound", .timeLimit(.minutes(1)))
    func purgeEndsAtShutdown() async throws {
        // Takes the connection and answers nothing: the round's connect
        // waits for its 600 s bound, far past ServiceGroup's 2 s for a
        // cancelled part (which ends the process with a crash) and this
        // test's limit.
        let server = try Self.listeningSocket()
        defer { close(server.descriptor) }
        let proxy = try FreezingTCPProxy(targetPort: server.port, frozen: true)
        defer { proxy.stop() }
        let store = PostgresIdempotencyStore(
            conninfo: "postgresql://relay@127.0.0.1:\(proxy.port)/relay", windowSeconds: 60, leaseSeconds: 60,
            bound: PostgresWaitBound(seconds: 600))
        let purge = IdempotencyPurge(store: store, interval: 0.01, logger: Self.logger)
        let group = RelayServer.group([purge], signals: false, drainTimeout: 600, logger: Self.logger)
        let ended = Mutex(false)
        let running = Task {
            try await group.run()
            ended.withLock { $0 = true }
        }
        #expect(await eventually { proxy.bytesHeld > 0 }, "the purge's round reached Postgres")
        await group.triggerGracefulShutdown()
        // The verdict waits on the group's end; a purge that waits for its
        // statement fails here (the proxy's stop then ends the statement).
        #expect(await eventually(30) { ended.withLock { $0 } }, "the purge ended at the shutdown")
        #expect(proxy.bytesHeld > 0, "the statement was still held when the purge ended")
        proxy.stop()
        try await running.value
    }
}
