import Foundation
import HTTP2
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// Issue 30's fault gaps on the HTTP/2 APNs ingress, with `apns-relay serve`
/// as a process and httpx sending over h2 (scripts/lib/h2_apns_load.py), the
/// harnesses of `/v1/send`'s fault tests (SpoolDiskFullProcessTests,
/// LifecycleProcessTests, AuditDurabilityProcessTests): SIGKILL mid-traffic
/// then a restart, SIGTERM with streams in flight, and a full spool disk
/// with Postgres stopped. Each verdict compares what the client was
/// answered, what the mock APNs received, and the audit rows.
@Suite("HTTP/2 APNs ingress under faults, as a process", .serialized)
struct APNsHTTP2FaultProcessTests {
    /// What one case needs: the relay's files and mock APNs, the backend's
    /// provider key, the configuration with the cleartext HTTP/2 listener on.
    struct Setup {
        let relay: TestRelay
        let mock: MockAPNsServer
        let key: APNsHTTP2IngressTests.BackendKey
        let config: String
        let errors: String
        let databaseURL: String
        /// The TLS listener's certificate, for the client to trust; nil: cleartext.
        var serverCA: String? = nil

        func serve() throws -> RelayProcess {
            try RelayProcess(arguments: ["serve", "--config", config], standardError: errors)
        }

        /// The HTTP/2 listener's port, once `serve` printed it.
        static func ports(_ serve: RelayProcess) async throws -> (h2: UInt16, metrics: UInt16) {
            (try await serve.port(after: "apns-relay apns_ingress on", timeout: 60), try await serve.port(after: "apns-relay metrics on"))
        }

        func cleanUp() async {
            key.file.remove()
            if mock !== relay.mock { mock.stop() }
            await relay.stop()
        }
    }

    /// A relay configuration with `apns_ingress` on cleartext h2 and the
    /// backend key's provider key; without `rules`, a mock answering after
    /// 5 ms. With `certificates`: TLS, and the backend key also named by the
    /// client certificate `by-fingerprint` (`serverCA` is then the listener's certificate).
    static func setUp(
        name: String, databaseURL: String, spool: String? = nil, rules: [MockRule] = [],
        certificates: APNsHTTP2ClientCertificateTests.Certificates? = nil
    ) async throws -> Setup {
        let relay = try await TestRelay.start(rules: rules)
        let mock = rules.isEmpty ? try ServeProcessTests.slowMock(beside: relay, delayMilliseconds: 5) : relay.mock
        let key = try APNsHTTP2IngressTests.BackendKey()
        let publicKey = relay.directory + "/backend-provider.pub.pem"
        try key.publicKeyPEM.write(toFile: publicKey, atomically: true, encoding: .utf8)
        var listener = "apns_ingress:\n  listen: 127.0.0.1:0\n  tls: false"
        var backend = "provider_key: {key_id: \(APNsHTTP2IngressTests.providerKeyID), team_id: \(APNsHTTP2IngressTests.teamID), public_key_file: \(publicKey)}"
        var serverCA: String?
        if let certificates {
            let server = try SelfSignedCertificate.generate(in: relay.directory)
            serverCA = server.certificateFile
            listener = """
                apns_ingress:
                  listen: 127.0.0.1:0
                  tls: true
                  certificate_file: \(server.certificateFile)
                  private_key_file: \(server.privateKeyFile)
                  client_ca_file: \(certificates.caFile)
                """
            backend += "\n    client_certificate: {sha256: \(try certificates.fingerprint("by-fingerprint").filter { $0 != ":" }.lowercased())}"
        }
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: mock, keyPath: relay.keyPath, instance: "h2-\(name)-\(UUID().uuidString.prefix(6))",
            databaseURL: databaseURL, spool: spool ?? relay.directory + "/spool-h2-\(name)",  // not the in-process relay's own spool
            extraYAML: listener, backendKeyYAML: backend)
        return Setup(
            relay: relay, mock: mock, key: key, config: config, errors: relay.directory + "/serve-\(name).err", databaseURL: databaseURL,
            serverCA: serverCA)
    }

    /// How many requests the mock APNs received for each apns-id (lowercased).
    static func receivedCounts(_ mock: MockAPNsServer) -> [String: Int] {
        var counts: [String: Int] = [:]
        for entry in mock.engine.log.entries {
            if let id = entry.request.headers.value(of: "apns-id")?.lowercased() { counts[id, default: 0] += 1 }
        }
        return counts
    }

    @Test("SIGKILL mid-traffic on the HTTP/2 listener, then a restart: every send answered 200 or reaching APNs has exactly one row; repeating every apns-id sent (and a keyed channel create's and broadcast's apns-request-id) pushes none a second time, and the answered ones get their first answer; device sends by provider token, or by client certificate over TLS",
          arguments: [false, true])
    func killedThenRepeated(byCertificate: Bool) async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let certificates = byCertificate ? try APNsHTTP2ClientCertificateTests.Certificates() : nil
        defer { certificates?.remove() }
        let setup = try await Self.setUp(name: byCertificate ? "kill-cert" : "kill", databaseURL: database, certificates: certificates)
        // Device sends: by provider token over cleartext h2, or by client certificate over TLS (no token).
        let tls = certificates.map { (ca: setup.serverCA!, certificate: $0.directory + "/by-fingerprint.pem", key: $0.directory + "/by-fingerprint.key") }
        let bearer = byCertificate ? nil : try setup.key.token()
        let caFile = setup.serverCA
        do {
            let serve = try setup.serve()
            let (port, _) = try await Setup.ports(serve)
            let driver = try H2LoadDriver(port: port, bearer: bearer, streams: 32, mode: .untilStopped, tls: tls)
            // A channel create and a broadcast on it, each keyed by its apns-request-id, answered amid the load.
            let auth = "authorization: bearer \(try setup.key.token())"
            let createID = UUID().uuidString.lowercased(), broadcastID = UUID().uuidString.lowercased()
            let createBody = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#
            let created = try await APNsHTTP2ChannelTests.httpx(
                port: Int(port), caFile: caFile, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"], body: createBody)
            let channel = try #require(created.header("apns-channel-id"), "\(created)")
            let broadcastHeaders = [auth, "apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-request-id: \(broadcastID)"]
            let update = #"{"aps":{"timestamp":1763744531,"event":"update","content-state":{"n":1}}}"#
            let broadcast = try await APNsHTTP2ChannelTests.httpx(
                port: Int(port), caFile: caFile, "POST", "/4/broadcasts/apps/com.example.a", broadcastHeaders, body: update)
            #expect(created.status == 201 && broadcast.status == 200, "\(created) \(broadcast)")
            #expect(await eventually(120) { driver.answered.count >= 300 }, "the load got going: \(driver.lines.suffix(5))")
            serve.signal(SIGKILL)
            #expect(await serve.waitForExit() != 0)
            try driver.stop()
            #expect(await driver.finished(), "the driver did not stop")
            #expect(driver.refusals.isEmpty, "only 200s and cut streams before the kill: \(driver.refusals.prefix(5))")
            let sent = driver.sent, answered = Set(driver.answered)
            let counts = Self.receivedCounts(setup.mock)
            try #require(setup.mock.engine.log.entries.count == setup.mock.engine.log.total, "the mock kept every request it saw")
            let reached = Set(counts.keys)
            #expect(answered.isSubset(of: reached), "answered 200 without reaching APNs: \(answered.subtracting(reached).prefix(5))")
            #expect(counts.values.allSatisfy { $0 == 1 }, "an apns-id reached APNs twice before the kill")

            // The next start recovers the journal: one row per answered send and per send that reached APNs.
            let next = try setup.serve()
            let (nextPort, _) = try await Setup.ports(next)
            let landed = await AuditTally.waitForRows(of: answered.union(reached), in: database, timeout: 60)
            let tally = try await AuditTally.of(answered, in: database)
            let reachedTally = try await AuditTally.of(reached, in: database)
            print("h2 SIGKILL (\(byCertificate ? "client certificate, TLS" : "provider token, cleartext")): sent \(sent.count), \(tally); reached APNs: \(reachedTally)")
            #expect(landed, "\(tally)")
            #expect(tally.missing == 0 && reachedTally.missing == 0, "sends without a row: \(tally); reached: \(reachedTally)")
            #expect(tally.duplicated == 0 && tally.answeredButUnknown == 0, "\(tally)")

            // The client library retries everything it sent, with the same apns-ids.
            let before = setup.mock.engine.log.total
            let repeats = try H2LoadDriver(port: nextPort, bearer: bearer, streams: 32, mode: .repeating(sent), tls: tls)
            #expect(await repeats.finished(), "the repeats did not finish: \(repeats.lines.suffix(5))")
            #expect(repeats.exitStatus == 0 && repeats.unanswered.isEmpty, "\(repeats.lines.suffix(5))")
            let after = Self.receivedCounts(setup.mock)
            #expect(after.values.allSatisfy { $0 == 1 }, "pushed twice: \(after.filter { $0.value > 1 }.keys.prefix(5))")
            // Answered before the kill: the first answer again, nothing sent.
            let replayed = Set(repeats.replayed)
            #expect(answered.isSubset(of: replayed), "answered sends not replayed: \(answered.subtracting(replayed).prefix(5))")
            #expect(replayed.isSubset(of: reached), "replayed without having reached APNs: \(replayed.subtracting(reached).prefix(5))")
            // Claimed before the kill and never answered: still in flight for the key's lease, 503 ServiceUnavailable; nothing sent.
            for refusal in repeats.refusals {
                #expect(refusal.status == 503 && refusal.reason == "ServiceUnavailable" && refusal.retryAfter != "-", "\(refusal)")
                #expect(!answered.contains(refusal.id), "\(refusal) was answered before the kill")
            }
            // Sent now, not replayed: only ids that never reached APNs before the kill.
            let fresh = Set(repeats.answered).subtracting(replayed)
            #expect(fresh.isDisjoint(with: reached), "sent again: \(fresh.intersection(reached).prefix(5))")
            #expect(setup.mock.engine.log.total - before == fresh.count, "new requests at APNs: \(setup.mock.engine.log.total - before), fresh answers: \(fresh.count)")
            #expect(replayed.count + fresh.count + repeats.refusals.count == sent.count, "every repeat answered once: \(repeats.lines.suffix(3))")
            // The channel requests' retries after the restart: the first answers again, APNs saw each once.
            let createdAgain = try await APNsHTTP2ChannelTests.httpx(
                port: Int(nextPort), caFile: caFile, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"], body: createBody)
            let broadcastAgain = try await APNsHTTP2ChannelTests.httpx(
                port: Int(nextPort), caFile: caFile, "POST", "/4/broadcasts/apps/com.example.a", broadcastHeaders, body: update)
            #expect(createdAgain.status == 201 && createdAgain.header("apns-channel-id") == channel && createdAgain.header("idempotency-replayed") == "true", "\(createdAgain)")
            #expect(broadcastAgain.status == 200 && broadcastAgain.header("idempotency-replayed") == "true", "\(broadcastAgain)")
            for id in [createID, broadcastID] {
                let atAPNs = setup.mock.engine.log.entries.filter { $0.request.headers.value(of: "apns-request-id") == id }.count
                #expect(atAPNs == 1, "\(id) reached APNs \(atAPNs) times")
            }
            next.signal(SIGTERM)
            #expect(await next.waitForExit() == 0)
            let all = try await AuditTally.of(Set(sent), in: database)
            #expect(all.duplicated == 0, "\(all)")
            let channelRows = try await ServeProcessTests.scalar(
                database, "SELECT string_agg(operation || ':' || outcome, ',' ORDER BY operation) FROM apns_audit WHERE apns_id IN ('\(createID)', '\(broadcastID)')")
            #expect(channelRows == "broadcast:success,channel_create:success", "\(channelRows)")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test("SIGTERM with device sends held at APNs on the HTTP/2 listener: /readyz fails; a new connection's send or channel list is 503 ServiceUnavailable and not sent; released, the held streams are answered 200, each with its row; exit 0")
    func drained() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let setup = try await Self.setUp(name: "term", databaseURL: database, rules: [MockRule(.tokenPrefix("cafe"), always: .hold)])
        do {
            let serve = try setup.serve()
            let (port, metricsPort) = try await Setup.ports(serve)
            let held = try H2LoadDriver(port: port, bearer: try setup.key.token(), streams: 8, mode: .count(8), tokenPrefix: "cafe")
            let auth = "authorization: bearer \(try setup.key.token())"
            #expect(await eventually { setup.mock.engine.heldCount == 8 }, "held: \(setup.mock.engine.heldCount) \(held.lines)")
            serve.signal(SIGTERM)
            #expect(await eventually {
                (try? await setup.relay.curl("GET", "/readyz", key: nil, base: "http://127.0.0.1:\(metricsPort)"))?.status == 503
            }, "/readyz fails")

            // Draining: a new stream, on a new connection, is refused in APNs' words and not sent.
            let late = try H2LoadDriver(port: port, bearer: try setup.key.token(), streams: 1, mode: .count(1))
            #expect(await late.finished(), "\(late.lines)")
            let refusal = try #require(late.refusals.first, "the late stream was answered: \(late.lines)")
            #expect(refusal.status == 503 && refusal.reason == "ServiceUnavailable", "\(refusal)")
            #expect(Self.receivedCounts(setup.mock)[refusal.id] == nil, "the late stream reached APNs")
            let lateList = try await APNsHTTP2ChannelTests.httpx(port: Int(port), caFile: nil, "GET", "/1/apps/com.example.a/all-channels", [auth])
            #expect(lateList.status == 503 && lateList.reason == "ServiceUnavailable", "\(lateList)")
            #expect(setup.mock.engine.log.entries.allSatisfy { !$0.request.path.hasSuffix("/all-channels") }, "the late list reached APNs")
            #expect(held.answered.isEmpty && held.isRunning, "the held streams are still running")

            // Released: each held stream is answered, the process drains and exits 0 with every row written.
            #expect(setup.mock.engine.releaseHeld() == 8)
            #expect(await held.finished(), "\(held.lines)")
            #expect(Set(held.answered).count == 8, "\(held.lines)")
            #expect(await serve.waitForExit() == 0)
            let tally = try await AuditTally.of(Set(held.answered), in: database)
            #expect(tally.missing == 0 && tally.duplicated == 0 && tally.unknown == 0, "\(tally)")
            let lateRows = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE apns_id = '\(refusal.id)'")
            #expect(lateRows == "0", "the refused stream has a row")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test("SIGTERM with a send held at APNs for a client that never reads again nor acknowledges a PING (h2_hostile.py mute): released, the drain does not wait for it: the connection is closed (FIN) and serve exits 0 well inside its 20 s drain; the send has its one success row")
    func drainWithMuteClient() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let setup = try await Self.setUp(name: "mute", databaseURL: database, rules: [MockRule(.tokenPrefix("cafe"), always: .hold)])
        do {
            let serve = try setup.serve()
            let (port, _) = try await Setup.ports(serve)
            let apnsID = UUID().uuidString.lowercased()
            let script = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/h2_hostile.py").path
            let arguments = [
                "python3", script, "--port", String(port), "--authorization", "bearer \(try setup.key.token())", "--token",
                "cafe" + String(repeating: "ab", count: 30), "--apns-id", apnsID, "--wait", "30", "mute",
            ]
            let client = Task { try await ProcessRunner.runOffPool(arguments) }
            #expect(await eventually { setup.mock.engine.heldCount == 1 }, "the mute client's send did not reach APNs")
            serve.signal(SIGTERM)
            // The answer goes into a socket nobody reads; the PING after it is never acknowledged.
            let released = ContinuousClock.now
            #expect(setup.mock.engine.releaseHeld() == 1)
            #expect(await serve.waitForExit() == 0)
            let drained = ContinuousClock.now - released
            // Waiting on the PING's acknowledgement would have held the drain to its 20 s; the
            // PING's own bound is 1 s and the lingering close's 2 s.
            #expect(drained < .seconds(10), "serve took \(drained) to exit after the held send was released")
            let (status, output) = try await client.value
            let report = try JSONParser.parse(Array((output.split(separator: "\n").last ?? "").utf8))
            #expect(status == 0 && report["fin_after_seconds"]?.numberValue != nil, "the mute client's connection was never closed: \(output)")
            let rows = try await ServeProcessTests.scalar(database, "SELECT count(*) FILTER (WHERE outcome = 'success') || '/' || count(*) FROM apns_audit WHERE apns_id = '\(apnsID)'")
            #expect(rows == "1/1", "the mute client's send: \(rows) success rows / rows")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test("SIGTERM with a broadcast held at APNs beside eight device sends on the HTTP/2 listener: released, the broadcast is answered 200 and reached APNs once, with one row; exit 0")
    func drainedBroadcast() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        // `.tokenPrefix` matches device sends only (`/3/device/<prefix>`); the broadcast needs its own rule by path.
        let setup = try await Self.setUp(
            name: "term-bcast", databaseURL: database,
            rules: [MockRule(.tokenPrefix("cafe"), always: .hold), MockRule(.pathPrefix("/4/broadcasts/"), always: .hold)])
        do {
            let serve = try setup.serve()
            let (port, _) = try await Setup.ports(serve)
            let auth = "authorization: bearer \(try setup.key.token())"
            let createID = UUID().uuidString.lowercased(), broadcastID = UUID().uuidString.lowercased()
            let created = try await APNsHTTP2ChannelTests.httpx(
                port: Int(port), caFile: nil, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"],
                body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
            let channel = try #require(created.header("apns-channel-id"), "\(created)")
            let held = try H2LoadDriver(port: port, bearer: try setup.key.token(), streams: 8, mode: .count(8), tokenPrefix: "cafe")
            let broadcast = Task {
                try await APNsHTTP2ChannelTests.httpx(
                    port: Int(port), caFile: nil, "POST", "/4/broadcasts/apps/com.example.a",
                    [auth, "apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-request-id: \(broadcastID)"],
                    body: #"{"aps":{"timestamp":1763744531,"event":"update","content-state":{"n":1}}}"#)
            }
            #expect(await eventually { setup.mock.engine.heldCount == 9 }, "held: \(setup.mock.engine.heldCount) \(held.lines)")
            serve.signal(SIGTERM)
            #expect(held.answered.isEmpty && held.isRunning, "the held streams are still running")

            #expect(setup.mock.engine.releaseHeld() == 9)
            let answer = try await broadcast.value
            #expect(answer.status == 200, "\(answer)")
            #expect(await held.finished(), "\(held.lines)")
            #expect(Set(held.answered).count == 8, "\(held.lines)")
            #expect(await serve.waitForExit() == 0)
            let atAPNs = setup.mock.engine.log.entries.filter { $0.request.headers.value(of: "apns-request-id") == broadcastID }.count
            #expect(atAPNs == 1, "the broadcast reached APNs \(atAPNs) times")
            let tally = try await AuditTally.of(Set(held.answered), in: database)
            #expect(tally.missing == 0 && tally.duplicated == 0 && tally.unknown == 0, "\(tally)")
            let rows = try await ServeProcessTests.scalar(
                database, "SELECT string_agg(operation || ':' || outcome, ',') FROM apns_audit WHERE apns_id = '\(broadcastID)'")
            #expect(rows == "broadcast:success", "\(rows)")
        } catch {
            await setup.cleanUp()
            throw error
        }
        await setup.cleanUp()
    }

    @Test("Postgres stopped and the spool disk filled under the HTTP/2 listener: sends are refused 503 ServiceUnavailable and not sent, as /v1/send refuses them; SIGKILL; after a restart every send answered 200 has its row")
    func spoolFull() async throws {
        guard ServeProcessTests.databaseURL != nil else { return }
        guard let spool = await SmallSpool.mount(megabytes: 8) else {
            Issue.record("a tmpfs cannot be mounted here (not root?): the full-disk case needs one")
            return
        }
        guard let cluster = try await PrivateCluster.create() else {
            await spool.unmount()
            return
        }
        let setup = try await Self.setUp(name: "full", databaseURL: cluster.url + "?connect_timeout=2", spool: spool.path)
        do {
            let serve = try setup.serve()
            let (port, metricsPort) = try await Setup.ports(serve)
            try await cluster.stop()
            // No apns-id on these sends: with Postgres stopped a keyed send is refused for its key (see APNsHTTP2PostgresOutageTests).
            let driver = try H2LoadDriver(port: port, bearer: try setup.key.token(), streams: 16, mode: .untilStopped, unkeyed: true)
            #expect(await eventually(60) { driver.answered.count >= 300 }, "the load got going: \(driver.lines.suffix(5))")
            try await spool.fill()
            let journalRefusals = { driver.refusals.filter { $0.status == 503 && $0.reason == "ServiceUnavailable" } }
            #expect(await eventually(60) { journalRefusals().count >= 200 }, "sends are refused once the disk is full: \(driver.lines.suffix(5))")
            let ready = await SpoolDiskFullProcessTests.readyz(setup.relay, metricsPort: metricsPort)
            #expect(ready?.status == 503 && ready?.body.contains("journal") == true, "\(String(describing: ready))")
            serve.signal(SIGKILL)
            #expect(await serve.waitForExit() != 0)
            try driver.stop()
            #expect(await driver.finished())
            let others = driver.refusals.filter { !($0.status == 503 && $0.reason == "ServiceUnavailable") }
            #expect(others.isEmpty, "only 200s and 503 ServiceUnavailable: \(others.prefix(5))")
            let answered = Set(driver.answered)
            let reached = Set(setup.mock.engine.log.entries.compactMap { $0.request.headers.value(of: "apns-id")?.lowercased() })
            // A refusal sent nothing: no request for a refused send's token reached APNs.
            let refused = Set(journalRefusals().map(\.id))
            let tokensAtAPNs = Set(setup.mock.engine.log.entries.compactMap { $0.request.path.split(separator: "/").last.map(String.init) })
            let refusedAtAPNs = refused.filter { tokensAtAPNs.contains(H2LoadDriver.token(of: $0)) }
            #expect(refusedAtAPNs.isEmpty, "refused sends reached APNs: \(refusedAtAPNs.prefix(5))")
            #expect(answered.isSubset(of: reached), "answered 200 without reaching APNs: \(answered.subtracting(reached).prefix(5))")

            spool.free()
            try await cluster.start()
            let next = try setup.serve()
            _ = try await Setup.ports(next)
            let landed = await AuditTally.waitForRows(of: answered.union(reached), in: cluster.url)
            next.signal(SIGTERM)
            #expect(await next.waitForExit() == 0)
            let tally = try await AuditTally.of(answered, in: cluster.url)
            let reachedTally = try await AuditTally.of(reached, in: cluster.url)
            print("h2 spool full, SIGKILL (refused \(refused.count)): \(tally); reached APNs: \(reachedTally)")
            #expect(landed, "\(tally)")
            #expect(tally.missing == 0 && reachedTally.missing == 0, "sends without a row: \(tally); reached: \(reachedTally)")
            #expect(tally.duplicated == 0, "\(tally)")
        } catch {
            await setup.cleanUp()
            await spool.unmount()
            await cluster.remove()
            throw error
        }
        await setup.cleanUp()
        await spool.unmount()
        await cluster.remove()
    }
}
