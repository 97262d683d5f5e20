import Foundation
import MockAPNs
import Testing
import TestSupport

/// Durability is checked, not assumed (issue 27, first table): with the
/// spool directory on a small tmpfs that fills up or turns read-only, and
/// Postgres stopped, every send answered 200 has its row after the next
/// start, and every other send was refused (503, nothing sent): nothing in
/// between. A 2 MiB spool full of a previous run's journal still starts.
@Suite("apns-relay on a full or read-only spool disk, as a process", .serialized)
struct SpoolDiskFullProcessTests {
    /// What one case needs: Postgres of its own (stopped and started), a
    /// slow mock APNs, the relay's files, the small spool.
    struct Setup {
        let cluster: PrivateCluster
        let relay: TestRelay
        let mock: MockAPNsServer
        let spool: SmallSpool
        let config: String
        let errors: String

        func serve() throws -> RelayProcess {
            try RelayProcess(arguments: ["serve", "--config", config], standardError: errors)
        }

        func cleanUp() async {
            mock.stop()
            await relay.stop()
            await spool.unmount()
            await cluster.remove()
        }
    }

    static func setUp(megabytes: Int, journalSync: String, name: String) async throws -> Setup? {
        guard ServeProcessTests.databaseURL != nil else { return nil }
        guard let spool = await SmallSpool.mount(megabytes: megabytes) else {
            Issue.record("a tmpfs cannot be mounted here (not root?): the full-disk cases need one")
            return nil
        }
        guard let cluster = try await PrivateCluster.create() else {
            await spool.unmount()
            return nil
        }
        let relay = try await TestRelay.start()
        // APNs answers after 5 ms, so sends are in flight when the disk gives out.
        let mock = try ServeProcessTests.slowMock(beside: relay, delayMilliseconds: 5)
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: mock, keyPath: relay.keyPath, instance: "\(name)-\(UUID().uuidString.prefix(6))",
            databaseURL: cluster.url + "?connect_timeout=2", spool: spool.path, journalSync: journalSync)
        return Setup(cluster: cluster, relay: relay, mock: mock, spool: spool, config: config, errors: relay.directory + "/serve-\(name).err")
    }

    /// Sends the journal refused: 503 naming the journal.
    static func refusals(_ driver: LoadDriver) -> Int {
        driver.others.count { $0.hasPrefix("STATUS 503") && $0.contains("audit journal cannot be written") }
    }

    /// Every answer that is neither a 200 nor a refusal that sent nothing:
    /// the journal's, or `Draining` once SIGTERM landed (connections the
    /// kill cut are `ERR` lines, not answers).
    static func unexpected(_ driver: LoadDriver) -> [String] {
        driver.others.filter {
            !$0.hasPrefix("ERR")
                && !($0.hasPrefix("STATUS 503") && ($0.contains("audit journal cannot be written") || $0.contains(#""type":"Draining""#)))
        }
    }

    static func readyz(_ relay: TestRelay, metricsPort: UInt16) async -> TestRelay.Answer? {
        try? await relay.curl("GET", "/readyz", key: nil, base: "http://127.0.0.1:\(metricsPort)")
    }

    /// Restarts the relay on the same spool with Postgres up, waits for the
    /// rows of `answered`, stops it, and returns the tally.
    static func restartAndTally(_ setup: Setup, answered: Set<String>, reached: Set<String>, label: String) async throws -> (AuditTally, AuditTally, Bool) {
        let next = try setup.serve()
        _ = try await next.port(after: "apns-relay ingress on", timeout: 60)
        let landed = await AuditTally.waitForRows(of: answered.union(reached), in: setup.cluster.url)
        next.signal(SIGTERM)
        #expect(await next.waitForExit() == 0)
        let tally = try await AuditTally.of(answered, in: setup.cluster.url)
        let reachedTally = try await AuditTally.of(reached, in: setup.cluster.url)
        print("\(label): \(tally); reached APNs: \(reachedTally)")
        return (tally, reachedTally, landed)
    }

    @Test("spool filled (dd) with Postgres stopped, then SIGKILL: answered sends all have rows after the next start; the rest were refused 503 before reaching APNs; /readyz failed meanwhile")
    func filledThenKilled() async throws {
        guard let setup = try await Self.setUp(megabytes: 8, journalSync: "interval", name: "fill-kill") else { return }
        do {
            let serve = try setup.serve()
            let port = try await serve.port(after: "apns-relay ingress on")
            let metricsPort = try await serve.port(after: "apns-relay metrics on")
            try await setup.cluster.stop()
            let driver = try LoadDriver(directory: setup.relay.directory, port: port, threads: 16, until: .inputCloses)
            #expect(await eventually(60) { driver.answered.count >= 300 }, "the load got going: \(driver.lines.suffix(5))")
            try await setup.spool.fill()
            #expect(await eventually(60) { Self.refusals(driver) >= 200 }, "sends are refused once the disk is full: \(driver.lines.suffix(5))")
            let ready = await Self.readyz(setup.relay, metricsPort: metricsPort)
            #expect(ready?.status == 503 && ready?.body.contains("journal") == true, "\(String(describing: ready))")
            serve.signal(SIGKILL)
            #expect(await serve.waitForExit() != 0)
            try driver.stop()
            #expect(await eventually(60) { !driver.isRunning })
            #expect(Self.unexpected(driver).isEmpty, "only 200s and refusals: \(Self.unexpected(driver).prefix(5))")
            let answered = Set(driver.answered)
            let reached = Set(setup.mock.engine.log.entries.compactMap(\.apnsID))
            try #require(setup.mock.engine.log.entries.count == setup.mock.engine.log.total, "the mock kept every request it saw")

            setup.spool.free()
            try await setup.cluster.start()
            let (tally, reachedTally, landed) = try await Self.restartAndTally(
                setup, answered: answered, reached: reached, label: "spool filled, SIGKILL (refused \(Self.refusals(driver)))")
            #expect(landed, "\(tally)")
            #expect(tally.missing == 0, "answered sends without a row: \(tally)")
            #expect(reachedTally.missing == 0, "sends that reached APNs without a row: \(reachedTally)")
            #expect(tally.duplicated == 0, "\(tally)")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test("spool remounted read-only, Postgres stopped, then SIGKILL: sends are refused 503, /readyz fails, every answered send has its row after the next start")
    func readOnlyThenKilled() async throws {
        guard let setup = try await Self.setUp(megabytes: 8, journalSync: "interval", name: "ro-kill") else { return }
        do {
            let serve = try setup.serve()
            let port = try await serve.port(after: "apns-relay ingress on")
            let metricsPort = try await serve.port(after: "apns-relay metrics on")
            let first = try LoadDriver(directory: setup.relay.directory, port: port, threads: 16, until: .inputCloses)
            #expect(await eventually(60) { first.answered.count >= 300 }, "the load got going: \(first.lines.suffix(5))")
            try first.stop()
            #expect(await eventually(60) { !first.isRunning })
            // Read-only needs no file open for writing: once every row is in
            // Postgres the journal deletes its segments and the spool has none.
            #expect(await eventually(60) { setup.spool.journalFiles.isEmpty }, "\(setup.spool.journalFiles)")
            #expect(await setup.spool.remount(readOnly: true), "the spool could not be remounted read-only")
            try await setup.cluster.stop()

            let second = try LoadDriver(directory: setup.relay.directory, port: port, threads: 16, until: .inputCloses)
            #expect(await eventually(60) { Self.refusals(second) >= 200 }, "sends are refused on a read-only spool: \(second.lines.suffix(5))")
            let ready = await Self.readyz(setup.relay, metricsPort: metricsPort)
            #expect(ready?.status == 503 && ready?.body.contains("journal") == true, "\(String(describing: ready))")
            serve.signal(SIGKILL)
            #expect(await serve.waitForExit() != 0)
            try second.stop()
            #expect(await eventually(60) { !second.isRunning })
            #expect(Self.unexpected(first).isEmpty && Self.unexpected(second).isEmpty, "\(Self.unexpected(second).prefix(5))")
            let answered = Set(first.answered + second.answered)
            let reached = Set(setup.mock.engine.log.entries.compactMap(\.apnsID))

            #expect(await setup.spool.remount(readOnly: false))
            try await setup.cluster.start()
            let (tally, reachedTally, landed) = try await Self.restartAndTally(
                setup, answered: answered, reached: reached,
                label: "spool read-only, SIGKILL (answered after remount \(second.answered.count), refused \(Self.refusals(second)))")
            #expect(landed, "\(tally)")
            #expect(tally.missing == 0, "answered sends without a row: \(tally)")
            #expect(reachedTally.missing == 0, "sends that reached APNs without a row: \(reachedTally)")
            #expect(tally.duplicated == 0, "\(tally)")
        } catch {
            _ = await setup.spool.remount(readOnly: false, timeout: 1)
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test(
        "Postgres stopped, a 2 MiB spool fills by itself, then SIGTERM: refused 503 once full, the drain counts and logs every row it gives up; the next start on the still-full spool recovers the journal and every answered send has its row",
        arguments: ["interval", "always"])
    func fillsItselfThenTerminated(journalSync: String) async throws {
        guard let setup = try await Self.setUp(megabytes: 2, journalSync: journalSync, name: "self-fill-\(journalSync)") else { return }
        do {
            let serve = try setup.serve()
            let port = try await serve.port(after: "apns-relay ingress on")
            let metricsPort = try await serve.port(after: "apns-relay metrics on")
            try await setup.cluster.stop()
            let driver = try LoadDriver(directory: setup.relay.directory, port: port, threads: 16, until: .inputCloses)
            #expect(await eventually(120) { Self.refusals(driver) >= 200 }, "the spool filled and sends are refused: \(driver.lines.suffix(5))")
            let ready = await Self.readyz(setup.relay, metricsPort: metricsPort)
            #expect(ready?.status == 503, "\(String(describing: ready))")
            serve.signal(SIGTERM)
            #expect(await serve.waitForExit() == 0)
            try driver.stop()
            #expect(await eventually(60) { !driver.isRunning })
            #expect(Self.unexpected(driver).isEmpty, "only 200s and refusals: \(Self.unexpected(driver).prefix(5))")
            let answered = Set(driver.answered)
            let reached = Set(setup.mock.engine.log.entries.compactMap(\.apnsID))

            // What the drain gave up is counted and logged, one line per row.
            let log = try String(contentsOfFile: setup.errors, encoding: .utf8).split(separator: "\n")
            let givenUp = log.filter { $0.contains("audit row given up") }
            let drained = log.first { $0.contains("\"drained\"") || $0.contains("drained") && $0.contains("audit_dropped") }
            #expect(drained?.contains("\"audit_dropped\":\"\(givenUp.count)\"") == true, "dropped \(givenUp.count); \(String(describing: drained))")

            // Postgres back, the disk still full of the journal and the spool.
            try await setup.cluster.start()
            let (tally, reachedTally, landed) = try await Self.restartAndTally(
                setup, answered: answered, reached: reached,
                label: "2 MiB spool fills itself (\(journalSync)), SIGTERM (refused \(Self.refusals(driver)), given up \(givenUp.count))")
            #expect(landed, "\(tally)")
            #expect(tally.missing == 0, "answered sends without a row: \(tally)")
            #expect(reachedTally.missing == 0, "sends that reached APNs without a row: \(reachedTally)")
            #expect(tally.duplicated == 0, "\(tally)")
            // Only sends whose completion the full disk refused may be unknown.
            #expect(tally.answeredButUnknown <= givenUp.count, "\(tally)")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }
}
