import Foundation
import Testing
import RelayServer
import TestSupport

/// Issue 29, item 1: nothing starts in an initializer. A relay whose start
/// failed (its ingress port taken) used to leave its idempotency purge
/// running, deleting keys for a relay that never served. Now the purge is
/// one of the relay's parts and runs only once the relay has started.
@Suite("A relay whose start failed leaves nothing running")
struct FailedStartTests {
    /// An expired key of a caller no other test uses: what a running purge deletes.
    static func insertExpiredKey(_ url: String, caller: String) async throws {
        _ = try await OutcomeAgreementTests.psql(url, """
            INSERT INTO apns_idempotency_keys (caller, key_hash, request_hash, state, owner, lease_until, created_at, expires_at)
            VALUES ('\(caller)', 'k', 'r', 'done', 'o', '2000-01-01', '2000-01-01', '2000-01-02')
            """)
    }

    static func keys(_ url: String, caller: String) async throws -> Int {
        let rows = try await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_idempotency_keys WHERE caller = '\(caller)'")
        return Int(rows.first?.first ?? "") ?? -1
    }

    @Test("ingress port in use: the start throws naming ingress.listen, and no purge runs afterwards; a relay that starts purges with the same interval")
    func portInUse() async throws {
        guard let url = IdempotencyTests.databaseURL else { return }
        let caller = "failed-start-\(UUID().uuidString.prefix(8))"
        // Migrations first (a relay on the database applies them), so the key can be inserted.
        try await withRelay(databaseURL: url) { _ in }
        try await Self.insertExpiredKey(url, caller: caller)
        let interval = 0.05
        try await withRelay { holder in
            // The holder has no database, so no purge of its own.
            let taken = holder.server.ingressAddress.port
            let error = await #expect(throws: (any Error).self) {
                _ = try await TestRelay.start(databaseURL: url, configure: { configuration in
                    configuration.ingress.listen = .init(host: "127.0.0.1", port: taken)
                    configuration.ingress.idempotencyPurgeIntervalSeconds = interval
                })
            }
            #expect(String(describing: error).contains("ingress.listen"), "\(String(describing: error))")
        }
        // Forty purge intervals: a purge left running would have deleted the key by now.
        try await Task.sleep(for: .seconds(interval * 40))
        #expect(try await Self.keys(url, caller: caller) == 1, "a relay that never started purged keys")
        // The control: a relay that starts, with the same interval, does purge it.
        try await withRelay(databaseURL: url, configure: { $0.ingress.idempotencyPurgeIntervalSeconds = interval }) { _ in
            #expect(await eventually(30) { (try? await Self.keys(url, caller: caller)) == 0 })
        }
    }
}

/// Issue 29, item 1: a start that fails part-way (a port taken, a
/// certificate that cannot be read) stops what it had started, so the
/// process is as it was: none of the relay's threads (the audit writer's and
/// journal's, the trace exporter's, libmicrohttpd's) and none of its sockets
/// (the listeners', the HTTP/2 APNs ingress's among them) are left. It used to leave the OTLP exporter's
/// thread running for a relay that never served.
@Suite("A failed start leaves no thread or socket of the relay's", .serialized)
struct FailedStartLeftoversTests {
    enum Failure: String, CaseIterable, Sendable {
        case metricsPortTaken, ingressPortTaken, apnsIngressPortTaken, apnsIngressCertificateUnreadable

        /// The setting the start's error names.
        var field: String {
            switch self {
            case .metricsPortTaken: "metrics.listen"
            case .ingressPortTaken: "ingress.listen"
            case .apnsIngressPortTaken, .apnsIngressCertificateUnreadable: "apns_ingress.listen"
            }
        }

        func configure(_ configuration: inout ServerConfiguration, taken: UInt16, directory: String) {
            // The trace exporter and the audit writer start first: their
            // threads are what a failed start must stop.
            configuration.tracing.exporter = .otlp
            configuration.tracing.endpoint = "http://127.0.0.1:1"
            switch self {
            case .metricsPortTaken:
                configuration.metrics.listen = .init(host: "127.0.0.1", port: taken)
            case .ingressPortTaken:
                configuration.ingress.listen = .init(host: "127.0.0.1", port: taken)
            case .apnsIngressPortTaken:
                configuration.apnsIngress.listen = .init(host: "127.0.0.1", port: taken)
                configuration.apnsIngress.tls = false
            case .apnsIngressCertificateUnreadable:
                configuration.apnsIngress.listen = .init(host: "127.0.0.1", port: 0)
                configuration.apnsIngress.certificateFile = directory + "/missing-certificate.pem"
                configuration.apnsIngress.privateKeyFile = directory + "/missing-key.pem"
            }
        }
    }

    /// This process's threads by thread id, with their names (15 bytes at
    /// most, `comm`).
    static func threads() -> [String: String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        var threads: [String: String] = [:]
        for id in tasks {
            guard let comm = try? String(contentsOfFile: "/proc/self/task/\(id)/comm", encoding: .utf8) else { continue }
            let name = comm.trimmingCharacters(in: .whitespacesAndNewlines)
            threads[id] = name
        }
        return threads
    }

    /// A thread of a relay's part, by the name it gives itself: the audit
    /// writer's and journal's, the trace exporter's (`relay-…`),
    /// libmicrohttpd's (`MHD-…`). Compared only for threads that are new
    /// since the start began: a thread takes its name once it runs, and
    /// until then has its creator's.
    static func isRelayThread(_ name: String) -> Bool {
        name.hasPrefix("relay-") || name.hasPrefix("MHD")
    }

    /// The sockets this process has open (`socket:[inode]`).
    static func sockets() -> Set<String> {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(descriptors.compactMap { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")).flatMap { $0.hasPrefix("socket:") ? $0 : nil }
        })
    }

    @Test("the start throws naming the setting, and every thread and socket it opened is gone", arguments: Failure.allCases)
    func nothingLeft(_ failure: Failure) async throws {
        let directory = NSTemporaryDirectory() + "apns-relay-failed-start-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withRelay { holder in
            let taken = holder.server.ingressAddress.port
            let threadsBefore = Self.threads()
            let socketsBefore = Self.sockets()
            let error = await #expect(throws: (any Error).self) {
                _ = try await TestRelay.start(configure: { failure.configure(&$0, taken: taken, directory: directory) })
            }
            #expect(String(describing: error).contains(failure.field), "\(String(describing: error))")
            // Stopped threads leave /proc a moment after they said they were done.
            // A thread left running is seen once it has named itself (its
            // first line); one started just before the failing part may not
            // have yet, so a leak of the last part started can pass unseen,
            // never the other way round. The exporter's, started first, has
            // had the whole start to do it.
            var leftThreads: [String: String] = [:]
            var leftSockets: Set<String> = []
            let settled = await eventually(10) {
                leftThreads = Self.threads().filter { threadsBefore[$0.key] == nil && Self.isRelayThread($0.value) }
                leftSockets = Self.sockets().subtracting(socketsBefore)
                return leftThreads.isEmpty && leftSockets.isEmpty
            }
            #expect(settled, "left running after a failed start: threads \(leftThreads.values.sorted()), sockets \(leftSockets.sorted())")
        }
    }
}
