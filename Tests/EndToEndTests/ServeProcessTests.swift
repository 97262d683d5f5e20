import APNs
import Foundation
import HTTP2
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// The real `apns-relay serve` binary: configuration file, signals, exit codes, and the audit it leaves.
@Suite("apns-relay serve as a process")
struct ServeProcessTests {
    static let databaseURL = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]

    /// A fresh database on the test cluster, so start-up migrations run from empty.
    static func freshDatabase(_ url: String) async throws -> String {
        let name = "serve_" + UUID().uuidString.prefix(8).lowercased()
        let (status, output) = try await ProcessRunner.runOffPool(["psql", url, "-q", "-c", "CREATE DATABASE \(name)"])
        guard status == 0 else { throw TestRelayError("createdb: \(output)") }
        guard let slash = url.lastIndex(of: "/") else { throw TestRelayError("odd URL \(url)") }
        return url[..<slash] + "/" + name
    }

    static func scalar(_ url: String, _ sql: String) async throws -> String {
        let (status, output) = try await ProcessRunner.runOffPool(["psql", url, "-At", "-c", sql])
        guard status == 0 else { throw TestRelayError("psql: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A configuration file for `serve`, sending to `mock`.
    /// A second mock APNs, configured as `relay`'s, that answers after
    /// `delayMilliseconds`: sends are still in flight when a signal lands.
    static func slowMock(beside relay: TestRelay, delayMilliseconds: Int) throws -> MockAPNsServer {
        var configuration = relay.mock.engine.configuration
        configuration.responseDelay = .fixed(milliseconds: delayMilliseconds)
        let directory = relay.directory + "/slow"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try MockAPNsServer(engine: MockAPNsEngine(configuration: configuration), directory: directory)
    }

    static func writeConfiguration(
        directory: String, mock: MockAPNsServer, keyPath: String, instance: String, databaseURL: String, spool: String,
        journalSync: String = "interval", logLevel: String = "info", extraYAML: String = "", backendKeyYAML: String = ""
    ) throws -> String {
        let hash = Fingerprint.sha256Hex(Array(TestRelay.keys["backend"]!.utf8))
        let yaml = """
            instance: \(instance)
            ingress:
              listen: 127.0.0.1:0
            metrics:
              listen: 127.0.0.1:0
            apns:
              origins:
                development: 127.0.0.1:\(mock.port)
              ca_file: \(mock.certificateFile)
            retry:
              base_delay_ms: 10
            apps:
              - name: app-a
                bundle_id: com.example.a
                team_id: E2ETEAM123
                key_id: E2EKEY1234
                key_path: \(keyPath)
                environments: [development]
            api_keys:
              - name: backend
                sha256: \(hash)
                apps: [app-a]\(backendKeyYAML.isEmpty ? "" : "\n    " + backendKeyYAML)
            audit:
              database_url: "\(databaseURL)"
              spool_directory: \(spool)
              flush_interval_ms: 20
              journal_sync: \(journalSync)
            shutdown:
              drain_timeout_seconds: 20
            logging:
              level: \(logLevel)
            """ + (extraYAML.isEmpty ? "" : "\n" + extraYAML)
        let path = directory + "/relay.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func batch(_ count: Int, offset: Int = 0) -> String {
        let tokens = (0..<count).map { "\"\(TestRelay.token(offset + $0))\"" }.joined(separator: ",")
        return #"{"items":[{"app":"app-a","environment":"development","operation":"alert","tokens":[\#(tokens)],"snapshot":\#(TestRelay.liveSnapshot)}]}"#
    }

    @Test("SIGTERM and SIGINT: in-flight sends finish, every one is audited, the process exits 0; migrations ran at start-up",
          arguments: [SIGTERM, SIGINT])
    func signalDrains(_ signal: Int32) async throws {
        guard let url = Self.databaseURL else { return }
        let database = try await Self.freshDatabase(url)
        // A slow APNs, so the batch is still in flight when the signal lands.
        let relay = try await TestRelay.start(configure: { _ in })
        defer { Task { await relay.stop() } }
        let slowMock = try Self.slowMock(beside: relay, delayMilliseconds: 400)
        defer { slowMock.stop() }
        let instance = "serve-sig\(signal)-\(UUID().uuidString.prefix(6))"
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: slowMock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-sig\(signal)")
        let serve = try RelayProcess(arguments: ["serve", "--config", config])
        let port = try await serve.port(after: "apns-relay ingress on")
        let base = "http://127.0.0.1:\(port)"

        let sends = 120
        let inFlight = Task { try await relay.curl("POST", "/v1/send/batch", body: Self.batch(sends), base: base) }
        #expect(await eventually { slowMock.engine.log.total > 0 }, "the batch reached APNs")
        serve.signal(signal)
        let answer = try await inFlight.value
        #expect(answer.status == 200, "\(answer)")
        #expect(answer.json?["summary"]?["succeeded"] == .integer(Int64(sends)), "\(answer.body.prefix(300))")
        #expect(await serve.waitForExit() == 0)

        #expect(try await Self.scalar(database, "SELECT count(*) FROM apns_relay_migrations") != "0", "migrations applied at start-up")
        let rows = try await Self.scalar(database, "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit WHERE relay_instance = '\(instance)'")
        #expect(rows == "\(sends)|\(sends)", "exactly one audit row per send")
    }

    @Test("SIGHUP, SIGUSR1 and SIGUSR2 (a closed terminal, logrotate, a reload by habit) do not end serve: each is logged as ignored, naming it; a send after them is answered and audited, and SIGTERM still drains with exit 0")
    func reloadSignalsIgnored() async throws {
        guard let url = Self.databaseURL else { return }
        let database = try await Self.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "serve-hup-\(UUID().uuidString.prefix(6))"
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-hup")
        let errors = relay.directory + "/serve-hup.err"
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: errors)
        let port = try await serve.port(after: "apns-relay ingress on")
        let names = ["SIGHUP": SIGHUP, "SIGUSR1": SIGUSR1, "SIGUSR2": SIGUSR2]
        for number in names.values { serve.signal(number) }
        // Each one's line, written by the log's own thread: waited for.
        var logged: Set<String> = []
        _ = await eventually(30) {
            let lines = ((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "").split(separator: "\n")
            logged = Set(names.keys.filter { name in lines.contains { $0.contains("\"\(name) ignored:") && $0.contains(#""signal":"\#(name)""#) } })
            return logged.count == names.count || serve.exitStatus != nil
        }
        #expect(logged == Set(names.keys), "logged: \(logged)")
        #expect(serve.exitStatus == nil, "serve ended on a signal it ignores: \(String(describing: serve.exitStatus))")
        let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(), base: "http://127.0.0.1:\(port)")
        #expect(answer.status == 200, "\(answer)")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        let rows = try await Self.scalar(database, "SELECT count(*) FROM apns_audit WHERE relay_instance = '\(instance)'")
        #expect(rows == "1", "the send's row: \(rows)")
    }

    @Test("SIGKILL with rows in the spool: the next relay on that spool replays them, once each")
    func sigkillSpoolReplayed() async throws {
        guard let url = Self.databaseURL else { return }
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "serve-kill-\(UUID().uuidString.prefix(6))"
        let spool = relay.directory + "/spool-kill"
        // Port 1 refuses connections: every row goes to the spool.
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance,
            databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", spool: spool)
        let serve = try RelayProcess(arguments: ["serve", "--config", config])
        let port = try await serve.port(after: "apns-relay ingress on")
        let metricsPort = try await serve.port(after: "apns-relay metrics on")
        let sends = 60
        let answer = try await relay.curl("POST", "/v1/send/batch", body: Self.batch(sends), base: "http://127.0.0.1:\(port)")
        #expect(answer.json?["summary"]?["succeeded"] == .integer(Int64(sends)))
        let spooled = await eventually {
            let scrape = try? await relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)")
            return scrape?.body.contains(#"apns_relay_audit_rows_total{result="spooled"} \#(sends)"#) == true
        }
        #expect(spooled, "every row reached the spool (fsync'd) before the kill")
        serve.signal(SIGKILL)
        #expect(await serve.waitForExit() != 0)

        // A new relay with a database, started on the same spool directory.
        try await withRelay(databaseURL: url, configure: { $0.audit.spoolDirectory = spool }) { next in
            let replayed = await eventually { next.server.audit.statistics.replayed >= sends }
            #expect(replayed, "replayed: \(next.server.audit.statistics)")
        }
        let rows = try await Self.scalar(url, "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit WHERE relay_instance = '\(instance)'")
        #expect(rows == "\(sends)|\(sends)")
    }

    /// The banner block of docs/operations.md ("What `serve` writes"), one
    /// pattern per line: HOST and PORT are the placeholders, the rest literal.
    static func documentedBanners() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let lines = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8).components(separatedBy: "\n")
        guard let marker = lines.firstIndex(of: "<!-- stdout banner -->"), marker + 1 < lines.count, lines[marker + 1].hasPrefix("```") else {
            throw TestRelayError("docs/operations.md documents no stdout banner block (<!-- stdout banner --> and a fenced block)")
        }
        return Array(lines[(marker + 2)...].prefix { !$0.hasPrefix("```") })
    }

    /// A documented banner as a pattern for a relay listening on 127.0.0.1.
    static func pattern(_ banner: String) throws -> NSRegularExpression {
        let pattern = NSRegularExpression.escapedPattern(for: banner)
            .replacingOccurrences(of: "HOST", with: #"127\.0\.0\.1"#).replacingOccurrences(of: "PORT", with: "[0-9]{1,5}")
        return try NSRegularExpression(pattern: "^" + pattern + "$")
    }

    @Test("stdout holds exactly the banner lines docs/operations.md documents (and serve --help names), naming the bound ports; stderr only JSON log lines")
    func banners() async throws {
        let banners = try Self.documentedBanners()
        #expect(banners.count == 3, "\(banners)")
        let documented = try banners.map(Self.pattern)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let stderr = relay.directory + "/banner-stderr.log"
        // Without apns_ingress: the first two lines only (read from a relay of its own, stopped at once).
        let plainConfig = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "banner-plain",
            databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", spool: relay.directory + "/spool-banner-plain")
        let plain = try RelayProcess(arguments: ["serve", "--config", plainConfig])
        _ = try await plain.port(after: "apns-relay metrics on")
        plain.signal(SIGTERM)
        #expect(await plain.waitForExit() != nil)
        #expect(plain.output.count == 2 && zip(plain.output, documented).allSatisfy { line, pattern in
            pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil
        }, "stdout without apns_ingress: \(plain.output)")

        // With the HTTP/2 APNs ingress on TLS: all three.
        // A directory of its own: the mock's certificate in relay.directory has the same file names.
        let certificateDirectory = relay.directory + "/apns-ingress-tls"
        try FileManager.default.createDirectory(atPath: certificateDirectory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(in: certificateDirectory)
        // Port 1 refuses connections: the audit goes to the spool, and the log has warnings to hold to JSON.
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "banner",
            databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", spool: relay.directory + "/spool-banner",
            extraYAML: """
                apns_ingress:
                  listen: 127.0.0.1:0
                  certificate_file: \(certificate.certificateFile)
                  private_key_file: \(certificate.privateKeyFile)
                """)
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: stderr)
        let port = try await serve.port(after: "apns-relay ingress on")
        let metricsPort = try await serve.port(after: "apns-relay metrics on")
        let apnsIngressPort = try await serve.port(after: "apns-relay apns_ingress on")
        // The port named is the APNs ingress' own: it answers HTTP/2 over TLS (APNs' 404 BadPath for /).
        let (curlStatus, probe) = try await ProcessRunner.runOffPool([
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", "--http2", "--cacert", certificate.certificateFile,
            "https://127.0.0.1:\(apnsIngressPort)/"])
        #expect(curlStatus == 0 && probe == "2 404", "curl on the apns_ingress port: \(probe)")
        let sent = try await relay.curl("POST", "/v1/send", body: TestRelay.send(), base: "http://127.0.0.1:\(port)")
        #expect(sent.status == 200, "\(sent)")
        #expect(try await relay.curl("GET", "/healthz", key: nil, base: "http://127.0.0.1:\(metricsPort)").status == 200)
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() != nil)

        let output = serve.output
        #expect(output.count == documented.count, "stdout: \(output)")
        for (line, pattern) in zip(output, documented) {
            let match = pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line))
            #expect(match != nil, "'\(line)' is not the documented '\(pattern.pattern)'")
        }
        #expect(output.count == 3 && output[0].hasSuffix(":\(port)") && output[1].hasSuffix(":\(metricsPort)/metrics") && output[2].hasSuffix(":\(apnsIngressPort)"), "\(output)")

        let logLines = try String(contentsOfFile: stderr, encoding: .utf8).split(separator: "\n")
        #expect(!logLines.isEmpty)
        for line in logLines {
            guard case .object = try? JSONParser.parse(String(line)) else {
                Issue.record("a standard error line that is not a JSON object: \(line)")
                continue
            }
        }

        // serve --help says the same: every banner, placeholders and all.
        let (status, help) = try await ProcessRunner.runOffPool([RelayProcess.binary, "serve", "--help"])
        #expect(status == 0)
        let flat = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for banner in banners {
            #expect(flat.contains(banner), "serve --help: \(help)")
        }
    }

    @Test("check-config accepts a good file and masks secrets; a bad one exits 1 naming the setting")
    func checkConfig() async throws {
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "check",
            databaseURL: "postgresql://relay:s3cretpw@db.internal/audit", spool: relay.directory + "/s")
        let good = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--config", config])
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output.contains("postgresql://relay:****@db.internal/audit"))
        #expect(!good.output.contains("s3cretpw"))
        #expect(!good.output.contains(Fingerprint.sha256Hex(Array(TestRelay.keys["backend"]!.utf8))))

        let typo = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "  listen: 127.0.0.1:0\nmetrics", with: "  lisen: 127.0.0.1:0\nmetrics")
        try typo.write(toFile: config, atomically: true, encoding: .utf8)
        let bad = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--config", config])
        #expect(bad.status == 1, "\(bad.output)")
        #expect(bad.output.contains("ingress.lisen"), "\(bad.output)")

        let missingKey = try await ProcessRunner.runOffPool(
            [RelayProcess.binary, "check-config", "--config", config.replacingOccurrences(of: "relay.yaml", with: "absent.yaml")])
        #expect(missingKey.status == 1)
    }

    @Test("the example configuration in deploy/ parses, and every command has help")
    func exampleAndHelp() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = root.appendingPathComponent("deploy/apns-relay.example.yaml").path
        // Only the key file is missing on this machine; the rest must be valid.
        let (status, output) = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--config", example])
        #expect(status == 1 && output.contains("key"), "\(output)")
        #expect(!output.contains("unknown setting"), "\(output)")
        // Every configuration shipped in deploy/ is one the relay accepts (keys live elsewhere).
        let kubernetes = try String(contentsOf: root.appendingPathComponent("deploy/kubernetes/configmap.yaml"), encoding: .utf8)
        let embedded = try #require(kubernetes.components(separatedBy: "config.yaml: |\n").last)
        let kubernetesConfig = NSTemporaryDirectory() + "apns-relay-k8s-\(UUID().uuidString).yaml"
        try embedded.split(separator: "\n", omittingEmptySubsequences: false).prefix { $0.hasPrefix("    ") || $0.isEmpty }
            .map { $0.dropFirst(min(4, $0.count)) }.joined(separator: "\n").write(toFile: kubernetesConfig, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: kubernetesConfig) }
        // No shipped configuration holds a usable API key: each has placeholders that
        // check-config refuses, saying how to make a key. With generated entries in
        // their place, every one is a configuration the relay accepts.
        let generated = try await ProcessRunner.runOffPool([RelayProcess.binary, "api-key", "new", "--name", "ci"])
        #expect(generated.status == 0, "\(generated.output)")
        let hash = try #require(generated.output.split(separator: "\n").first { $0.contains("sha256: ") }?.split(separator: " ").last.map(String.init))
        for file in [example, root.appendingPathComponent("deploy/container/config.yaml").path, kubernetesConfig] {
            let shipped = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--skip-keys", "--config", file])
            #expect(shipped.status == 1, "\(file): \(shipped.output)")
            #expect(shipped.output.contains("api_keys[0].sha256") && shipped.output.contains("apns-relay api-key new --name"), "\(file): \(shipped.output)")
            let text = try String(contentsOfFile: file, encoding: .utf8)
            #expect(text.contains("REPLACE-with-the-sha256-from-apns-relay-api-key-new"), "\(file)")
            let filled = NSTemporaryDirectory() + "apns-relay-filled-\(UUID().uuidString).yaml"
            try text.replacingOccurrences(of: "REPLACE-with-the-sha256-from-apns-relay-api-key-new", with: hash).write(toFile: filled, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: filled) }
            let checked = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--skip-keys", "--config", filled])
            #expect(checked.status == 0, "\(file) with generated keys: \(checked.output)")
        }
        for command in ["serve", "check-config", "api-key", "send", "describe", "migrate", "audit", "mock-apns", "demo", "bench"] {
            let help = try await ProcessRunner.runOffPool([RelayProcess.binary, command, "--help"])
            #expect(help.status == 0 && help.output.contains("USAGE"), "\(command): \(help.output.prefix(200))")
        }
    }

    @Test("check-config refuses well-known weak API keys, naming the entry and how to make a real one", arguments: [
        // The hash the examples used to ship (of "password"), the empty key, "changeme" with echo's newline, an old compose key.
        "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        Fingerprint.sha256Hex(Array("changeme\n".utf8)), "36d0498c3a3e7524c313c9796fa0b21b0e91b67b76f410ba3949f1b9ac7a8a57",
        Fingerprint.sha256Hex(Array("Secret".utf8)),
    ])
    func weakKeysRefused(_ hash: String) async throws {
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "weak", databaseURL: "", spool: relay.directory + "/s")
        let good = try String(contentsOfFile: config, encoding: .utf8)
        try good.replacingOccurrences(of: Fingerprint.sha256Hex(Array(TestRelay.keys["backend"]!.utf8)), with: hash)
            .write(toFile: config, atomically: true, encoding: .utf8)
        let checked = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--skip-keys", "--config", config])
        #expect(checked.status == 1, "\(checked.output)")
        #expect(checked.output.contains("api_keys[0].sha256") && checked.output.contains("anyone could guess"), "\(checked.output)")
        #expect(checked.output.contains("apns-relay api-key new --name"), "\(checked.output)")
    }

    @Test("api-key new prints a fresh 256-bit key once and an entry holding its SHA-256, which check-config accepts")
    func apiKeyNew() async throws {
        let first = try await ProcessRunner.runOffPool([RelayProcess.binary, "api-key", "new", "--name", "checkout-backend", "--app", "app-a", "--rate-per-second", "100", "--burst", "200"])
        let second = try await ProcessRunner.runOffPool([RelayProcess.binary, "api-key", "new", "--name", "checkout-backend"])
        #expect(first.status == 0 && second.status == 0, "\(first.output)\(second.output)")
        func key(_ output: String) -> String? { output.split(separator: "\n").first { $0.hasPrefix("apnsrelay_") }.map(String.init) }
        let key1 = try #require(key(first.output), "\(first.output)")
        let key2 = try #require(key(second.output))
        #expect(key1.count == "apnsrelay_".count + 64 && key1 != key2)
        #expect(key1.dropFirst("apnsrelay_".count).allSatisfy { $0.isHexDigit })
        #expect(first.output.contains("    sha256: \(Fingerprint.sha256Hex(Array(key1.utf8)))\n"), "\(first.output)")
        #expect(first.output.contains("    apps: [app-a]\n    admin: false\n    rate_per_second: 100\n    burst: 200\n"), "\(first.output)")
        #expect(second.output.contains(#"    apps: ["*"]"#), "\(second.output)")
        #expect(try await ProcessRunner.runOffPool([RelayProcess.binary, "api-key", "new", "--name", "bad name"]).status != 0)

        // The entry, pasted into a configuration, is one the relay loads.
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "keys", databaseURL: "", spool: relay.directory + "/s")
        let entry = first.output.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("  - name:") }
            .map(String.init).joined(separator: "\n")
        let text = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "api_keys:\n", with: "api_keys:\n\(entry)\n")
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let checked = try await ProcessRunner.runOffPool([RelayProcess.binary, "check-config", "--config", config])
        #expect(checked.status == 0, "\(text)\n\(checked.output)")
    }

    @Test("serve's JSON logs and spans carry trace ids and fingerprints, never a token, an API key, a JWT or the .p8")
    func logsKeepSecrets() async throws {
        let relay = try await TestRelay.start(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000))])
        defer { Task { await relay.stop() } }
        let config = try Self.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "logs",
            databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1", spool: relay.directory + "/spool-logs",
            logLevel: "debug")  // every span's line too, so their attributes are searched for secrets
        let logFile = relay.directory + "/serve.log"
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: logFile)
        let port = try await serve.port(after: "apns-relay ingress on")
        let base = "http://127.0.0.1:\(port)"
        let good = TestRelay.token(42)
        let dead = TestRelay.token(43, prefix: "dead")
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        for token in [good, dead] {
            _ = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: token), headers: ["traceparent: 00-\(traceID)-00f067aa0ba902b7-01"], base: base)
        }
        _ = try await relay.curl("POST", "/v1/send", key: "wrong-key-presented-here", body: TestRelay.send(), base: base)
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)

        let logs = try String(contentsOfFile: logFile, encoding: .utf8)
        let lines = logs.split(separator: "\n")
        #expect(lines.count > 4, "\(logs.prefix(500))")
        for line in lines { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)") }
        #expect(logs.contains(traceID), "spans continue the caller's trace")
        #expect(logs.contains(#""record":"span""#), "at debug the spans are written")
        #expect(logs.contains(Fingerprint.of(good)), "tokens appear as fingerprints")
        let key = try String(contentsOfFile: relay.keyPath, encoding: .utf8)
        let keyBody = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        for secret in [good, dead, TestRelay.keys["backend"]!, "wrong-key-presented-here", String(keyBody.prefix(24)), "eyJ"] {
            #expect(!logs.contains(secret), "a secret reached the logs: \(secret.prefix(8))…")
        }
    }

    @Test("past max_concurrent_requests the ingress answers 503 Overloaded with Retry-After, and sends nothing more")
    func overloaded() async throws {
        // A mock that never answers tokens starting "cafe" keeps one request in flight.
        try await withRelay(rules: [MockRule(.tokenPrefix("cafe"), always: .noAnswer)], configure: {
            $0.ingress.maximumConcurrentRequests = 1
            $0.apns.requestTimeoutSeconds = 20
            $0.apns.sendDeadlineSeconds = 20
            $0.drainTimeoutSeconds = 1
        }) { relay in
            let stuck = Task { try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "cafe"))) }
            #expect(await eventually { relay.apnsRequests >= 1 }, "the first send is in flight")
            let refused = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            #expect(refused.status == 503 && refused.error?["type"] == "Overloaded", "\(refused)")
            #expect(refused.headers["retry-after"] != nil)
            #expect(relay.apnsRequests == 1)
            stuck.cancel()
        }
    }

    @Test("a send still waiting on APNs when the drain times out: the caller gets 503, the audit still gets its one row")
    func drainTimeoutKeepsTheRow() async throws {
        guard let url = Self.databaseURL else { return }
        // Failed once under a loaded machine (no row, written 0) and never since: the relay's warnings say why if it does again.
        let logs = CollectedLogs()
        try await withRelay(rules: [MockRule(.tokenPrefix("cafe"), always: .noAnswer)], databaseURL: url, logs: logs, configure: {
            $0.apns.requestTimeoutSeconds = 30
            $0.apns.sendDeadlineSeconds = 30
            $0.drainTimeoutSeconds = 0.3
        }) { relay in
            let stuck = Task { try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "cafe"))) }
            #expect(await eventually { relay.apnsRequests >= 1 })
            await relay.server.drain()
            let answer = try await stuck.value
            #expect(answer.status == 503 && answer.error?["type"] == "Draining", "\(answer)")
            let statistics = relay.server.audit.statistics
            #expect(statistics.written == 1 && statistics.dropped == 0, "\(statistics); the relay logged: \(logs.all)")
            let rows = try await Self.scalar(url, "SELECT count(*), min(outcome) FROM apns_audit WHERE relay_instance = '\(relay.server.configuration.instance)'")
            #expect(rows == "1|failed", "\(rows); the relay logged: \(logs.all)")
        }
    }
}
