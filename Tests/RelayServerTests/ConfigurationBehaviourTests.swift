import Foundation
import RelayServer
import Testing

/// What `ServerConfiguration.parse` makes of whole files, pinned byte for
/// byte: check-config's output for a file at its defaults and for one that
/// sets every setting (some from the environment), and the exact error for
/// each kind of mistake in each block. Written against the hand-written
/// parser so that the settings table which replaced it provably reads,
/// overrides, refuses and shows the same.
@Suite("Relay server configuration: whole files, pinned")
struct ConfigurationBehaviourTests {
    /// A directory with the files the settings name (a CA, a public key).
    final class Directory {
        let path = NSTemporaryDirectory() + "config-behaviour-" + UUID().uuidString
        init() throws {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            FileManager.default.createFile(atPath: path + "/ca.pem", contents: Data("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".utf8))
            FileManager.default.createFile(atPath: path + "/backend.pub.pem", contents: Data("-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n".utf8))
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        /// Parses `yaml` as `relay.yaml` in this directory; the directory reads as `$DIR`.
        func outcome(_ yaml: String, environment: [String: String] = [:]) -> String {
            do {
                let configuration = try ServerConfiguration.parse(yaml: yaml, file: path + "/relay.yaml", environment: environment)
                return configuration.maskedDescription.replacingOccurrences(of: path, with: "$DIR")
            } catch {
                return "error: \(error)".replacingOccurrences(of: path, with: "$DIR")
            }
        }
    }

    static let apps = """
        instance: pinned
        apps:
          - {name: a, bundle_id: com.example.a, team_id: ABCDE12345, key_id: KEY1234567, key_path: a.p8, environments: [development]}
        api_keys:
          - {name: b, sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc37, apps: [a]}

        """

    @Test("a file at its defaults: check-config's description")
    func defaults() throws {
        let directory = try Directory()
        #expect(directory.outcome(Self.apps) == Self.defaultsDescription)
    }

    static let defaultsDescription = """
        # resolved from $DIR/relay.yaml and the environment
        instance: pinned
        ingress:
          listen: 127.0.0.1:8080
          max_body_bytes: 1048576
          max_batch_items: 1000
          max_concurrent_requests: 1024
          max_sends_in_flight: 100000
          max_batch_sends_running: 512
          batch_concurrency: max_batch_sends_running / 8
          batch_deadline_seconds: 30.0
          idempotency_window_seconds: 86400.0
          connection_timeout_seconds: 30
          request_timeout_seconds: 15
          max_connections_per_client: 256
          threads: 1
        metrics:
          listen: 127.0.0.1:9464
        apns_ingress:
          listen: ""  # off
        apns:
          connections_per_origin: 2
          request_timeout_seconds: 10.0
          send_deadline_seconds: 30.0
          timestamp_policy: reject
          timestamp_max_lead_seconds: 3600
        retry:
          max_retries: 3
          base_delay_ms: 100
          max_delay_ms: 5000
        apps:
          - name: a
            bundle_id: com.example.a
            team_id: ABCDE12345
            key_id: KEY1234567
            key_path: $DIR/a.p8
            environments: [development]
        api_keys:
          - name: b
            sha256: f8f4bf70…  # masked
            apps: [a]
            admin: false
        audit:
          database_url: ""  # none: rows stay in the spool
          spool_directory: /var/lib/apns-relay/spool
          migrate_on_start: true
          retention_days: 30
          batch_size: 500
          flush_interval_ms: 50
          journal_sync: interval
          journal_sync_interval_ms: 10
          postgres_timeout_ms: 10000
        tracing:
          exporter: log
          endpoint: (OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)
          sampling: {ratio: 1.0, parent_based: true}
          max_queue_size: 2048
          max_export_batch_size: 512
          schedule_delay_ms: 1000
          export_timeout_ms: 10000
        shutdown:
          drain_timeout_seconds: 25.0
        logging:
          level: info

        """

    /// Every setting away from its default; the environment overrides some.
    static let everything = """
        instance: file-instance
        ingress:
          listen: "*:8181"
          max_body_bytes: 2048
          max_batch_items: 7
          max_concurrent_requests: 9
          max_sends_in_flight: 11
          max_batch_sends_running: 13
          batch_concurrency: 3
          batch_deadline_seconds: 2.5
          idempotency_window_seconds: 60
          connection_timeout_seconds: 17
          request_timeout_seconds: 19
          max_connections_per_client: 0
          threads: 2
        metrics:
          listen: "[::1]:9999"
        apns_ingress:
          listen: 0.0.0.0:8443
          tls: true
          certificate_file: cert.pem
          private_key_file: /abs/key.pem
          client_ca_file: ca.pem
          environment: development
          max_concurrent_streams: 10
          max_header_list_bytes: 2048
          max_body_bytes: 6000
          max_connections_per_client: 3
          max_connections: 5
          request_timeout_seconds: 0.5
        apns:
          connections_per_origin: 4
          request_timeout_seconds: 1.5
          send_deadline_seconds: 12
          timestamp_policy: warn
          timestamp_max_lead_seconds: 0
          origins:
            production: 127.0.0.1:2197
            development: "[::1]:2198"
          ca_file: mock-ca.pem
        retry:
          max_retries: 0
          base_delay_ms: 250
          max_delay_ms: 1500
        apps:
          - name: checkout-ios
            bundle_id: com.example.checkout
            team_id: FILETEAM00
            key_id: FILEKEY000
            key_path: keys/a.p8
          - {name: b.app, bundle_id: com.example.b, environments: [production, production]}
        api_keys:
          - name: plain
            sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc37
          - name: full
            sha256: F8F4BF7056494C85A232414DBF744875D3457A9A1E995C37510506ACBCCFFC38
            apps: [checkout-ios, b.app]
            admin: true
            rate_per_second: 2.5
            provider_key: {key_id: BKEND12345, team_id: BTEAM12345, public_key_file: backend.pub.pem}
            client_certificate: {subject: "/O=Example/CN=backend"}
          - {name: rated, sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc39, rate_per_second: 0.5, burst: 3, client_certificate: {sha256: "AB:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89"}}
        audit:
          database_url: "host=db user=relay password=filesecret dbname=audit"
          spool_directory: /file/spool
          migrate_on_start: false
          retention_days: 7
          batch_size: 9
          flush_interval_ms: 5
          journal_sync: always
          journal_sync_interval_ms: 20
          postgres_timeout_ms: 2500
        shutdown:
          drain_timeout_seconds: 0
        tracing:
          exporter: otlp
          endpoint: https://user:tracepass@collector.example:4318
          sampling:
            ratio: 0.125
            parent_based: false
          max_queue_size: 100
          max_export_batch_size: 100
          schedule_delay_ms: 7
          export_timeout_ms: 9
        logging:
          level: debug

        """

    @Test("every setting set: check-config's description, file and environment")
    func everything() throws {
        let directory = try Directory()
        #expect(directory.outcome(Self.everything) == Self.everythingDescription)
        let environment = [
            "APNS_RELAY_INSTANCE": "env-instance", "APNS_RELAY_INGRESS_LISTEN": "127.0.0.2:1", "APNS_RELAY_METRICS_LISTEN": "127.0.0.2:2",
            "APNS_RELAY_DATABASE_URL": "postgres://relay:envsecret@db/audit", "APNS_RELAY_SPOOL_DIRECTORY": "/env/spool",
            "APNS_RELAY_AUDIT_JOURNAL_SYNC": "interval", "APNS_RELAY_LOG_LEVEL": "warning",
            "APNS_RELAY_APP_CHECKOUT_IOS_TEAM_ID": "ENVTEAM000", "APNS_RELAY_APP_B_APP_KEY_PATH": "/env/b.p8", "APNS_RELAY_APP_B_APP_KEY_ID": "ENVKEY0000",
            "OTEL_TRACES_EXPORTER": "console,otlp,zipkin",
        ]
        #expect(directory.outcome(Self.everything, environment: environment) == Self.everythingFromEnvironmentDescription)
        // Empty variables are unset, except the database URL's, which empties it.
        let empty = Dictionary(uniqueKeysWithValues: environment.keys.filter { !$0.hasPrefix("APNS_RELAY_APP_") }.map { ($0, "") })
        #expect(directory.outcome(Self.everything, environment: empty) == Self.everythingDescription.replacingOccurrences(
            of: "  database_url: host=db user=relay password=**** dbname=audit\n", with: "  database_url: \"\"  # none: rows stay in the spool\n"))
        // Cleartext: no certificate lines; OTEL_SDK_DISABLED wins.
        let cleartext = Self.everything.replacingOccurrences(of: "  tls: true\n", with: "  tls: false\n")
            .replacingOccurrences(of: "  client_ca_file: ca.pem\n", with: "")
        #expect(directory.outcome(cleartext, environment: ["OTEL_SDK_DISABLED": "TRUE"]) == Self.cleartextDescription)
    }

    static let everythingDescription = """
        # resolved from $DIR/relay.yaml and the environment
        instance: file-instance
        ingress:
          listen: 0.0.0.0:8181
          max_body_bytes: 2048
          max_batch_items: 7
          max_concurrent_requests: 9
          max_sends_in_flight: 11
          max_batch_sends_running: 13
          batch_concurrency: 3
          batch_deadline_seconds: 2.5
          idempotency_window_seconds: 60.0
          connection_timeout_seconds: 17
          request_timeout_seconds: 19
          max_connections_per_client: 0
          threads: 2
        metrics:
          listen: [::1]:9999
        apns_ingress:
          listen: 0.0.0.0:8443
          tls: true
          certificate_file: $DIR/cert.pem
          private_key_file: /abs/key.pem
          client_ca_file: $DIR/ca.pem
          environment: development
          max_concurrent_streams: 10
          max_header_list_bytes: 2048
          max_body_bytes: 6000
          max_connections_per_client: 3
          max_connections: 5
          request_timeout_seconds: 0.5
        apns:
          connections_per_origin: 4
          request_timeout_seconds: 1.5
          send_deadline_seconds: 12.0
          timestamp_policy: warn
          timestamp_max_lead_seconds: 0
          origins:
            development: ::1:2198
            production: 127.0.0.1:2197
          ca_file: $DIR/mock-ca.pem
        retry:
          max_retries: 0
          base_delay_ms: 250
          max_delay_ms: 1500
        apps:
          - name: checkout-ios
            bundle_id: com.example.checkout
            team_id: FILETEAM00
            key_id: FILEKEY000
            key_path: $DIR/keys/a.p8
            environments: [development, production]
          - name: b.app
            bundle_id: com.example.b
            team_id: (missing)
            key_id: (missing)
            key_path: (missing)
            environments: [production]
        api_keys:
          - name: plain
            sha256: f8f4bf70…  # masked
            apps: ["*"]
            admin: false
          - name: full
            sha256: f8f4bf70…  # masked
            apps: [b.app, checkout-ios]
            admin: true
            rate_per_second: 2.5
            burst: 2.5
            provider_key:
              key_id: BKEND12345
              team_id: BTEAM12345
              public_key_file: $DIR/backend.pub.pem
            client_certificate: {subject: "/O=Example/CN=backend"}
          - name: rated
            sha256: f8f4bf70…  # masked
            apps: ["*"]
            admin: false
            rate_per_second: 0.5
            burst: 3.0
            client_certificate: {sha256: abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789}
        audit:
          database_url: host=db user=relay password=**** dbname=audit
          spool_directory: /file/spool
          migrate_on_start: false
          retention_days: 7
          batch_size: 9
          flush_interval_ms: 5
          journal_sync: always
          journal_sync_interval_ms: 20  # unused: always syncs before the send goes on
          postgres_timeout_ms: 2500
        tracing:
          exporter: otlp
          endpoint: https://user:****@collector.example:4318
          sampling: {ratio: 0.125, parent_based: false}
          max_queue_size: 100
          max_export_batch_size: 100
          schedule_delay_ms: 7
          export_timeout_ms: 9
        shutdown:
          drain_timeout_seconds: 0.0
        logging:
          level: debug

        """

    static let everythingFromEnvironmentDescription = """
        # resolved from $DIR/relay.yaml and the environment
        instance: env-instance
        ingress:
          listen: 127.0.0.2:1
          max_body_bytes: 2048
          max_batch_items: 7
          max_concurrent_requests: 9
          max_sends_in_flight: 11
          max_batch_sends_running: 13
          batch_concurrency: 3
          batch_deadline_seconds: 2.5
          idempotency_window_seconds: 60.0
          connection_timeout_seconds: 17
          request_timeout_seconds: 19
          max_connections_per_client: 0
          threads: 2
        metrics:
          listen: 127.0.0.2:2
        apns_ingress:
          listen: 0.0.0.0:8443
          tls: true
          certificate_file: $DIR/cert.pem
          private_key_file: /abs/key.pem
          client_ca_file: $DIR/ca.pem
          environment: development
          max_concurrent_streams: 10
          max_header_list_bytes: 2048
          max_body_bytes: 6000
          max_connections_per_client: 3
          max_connections: 5
          request_timeout_seconds: 0.5
        apns:
          connections_per_origin: 4
          request_timeout_seconds: 1.5
          send_deadline_seconds: 12.0
          timestamp_policy: warn
          timestamp_max_lead_seconds: 0
          origins:
            development: ::1:2198
            production: 127.0.0.1:2197
          ca_file: $DIR/mock-ca.pem
        retry:
          max_retries: 0
          base_delay_ms: 250
          max_delay_ms: 1500
        apps:
          - name: checkout-ios
            bundle_id: com.example.checkout
            team_id: ENVTEAM000
            key_id: FILEKEY000
            key_path: $DIR/keys/a.p8
            environments: [development, production]
          - name: b.app
            bundle_id: com.example.b
            team_id: (missing)
            key_id: ENVKEY0000
            key_path: /env/b.p8
            environments: [production]
        api_keys:
          - name: plain
            sha256: f8f4bf70…  # masked
            apps: ["*"]
            admin: false
          - name: full
            sha256: f8f4bf70…  # masked
            apps: [b.app, checkout-ios]
            admin: true
            rate_per_second: 2.5
            burst: 2.5
            provider_key:
              key_id: BKEND12345
              team_id: BTEAM12345
              public_key_file: $DIR/backend.pub.pem
            client_certificate: {subject: "/O=Example/CN=backend"}
          - name: rated
            sha256: f8f4bf70…  # masked
            apps: ["*"]
            admin: false
            rate_per_second: 0.5
            burst: 3.0
            client_certificate: {sha256: abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789}
        audit:
          database_url: postgres://relay:****@db/audit
          spool_directory: /env/spool
          migrate_on_start: false
          retention_days: 7
          batch_size: 9
          flush_interval_ms: 5
          journal_sync: interval
          journal_sync_interval_ms: 20
          postgres_timeout_ms: 2500
        tracing:
          exporter: log  # from OTEL_TRACES_EXPORTER
          # warning: OTEL_TRACES_EXPORTER: zipkin is not an exporter apns-relay has (otlp, console, none): ignored
          # warning: OTEL_TRACES_EXPORTER=console,otlp,zipkin: apns-relay exports to one place; console is used, otlp ignored
          endpoint: https://user:****@collector.example:4318
          sampling: {ratio: 0.125, parent_based: false}
          max_queue_size: 100
          max_export_batch_size: 100
          schedule_delay_ms: 7
          export_timeout_ms: 9
        shutdown:
          drain_timeout_seconds: 0.0
        logging:
          level: warning

        """

    /// The same file with `tls: false` under OTEL_SDK_DISABLED: no certificate lines, no exporter.
    static let cleartextDescription = everythingDescription
        .replacingOccurrences(
            of: "  tls: true\n  certificate_file: $DIR/cert.pem\n  private_key_file: /abs/key.pem\n  client_ca_file: $DIR/ca.pem\n",
            with: "  tls: false  # cleartext HTTP/2 with prior knowledge\n")
        .replacingOccurrences(of: "  exporter: otlp\n", with: "  exporter: none  # from OTEL_SDK_DISABLED\n")

    /// A mistake in each block and of each kind, with the error it gets
    /// (one at a time: which of two mistakes in different blocks is named
    /// first is not pinned).
    static let refusals: [(yaml: String, environment: [String: String])] = [
        ("# whole\ninstance: [1]\n", [:]),
        ("# whole\ninstance: x\napps: 5\n", [:]),
        ("# whole\napps:\n  - {bundle_id: com.example.a}\n", [:]),
        ("# whole\napps:\n  - {name: a, bundle_id: com.example.a, environments: [staging]}\n", [:]),
        ("# whole\napps:\n  - {name: a, bundle_id: com.example.a, colour: red}\n", [:]),
        ("# whole\napps:\n  - {name: a, bundle_id: com.example.a}\napi_keys: {a: 1}\n", [:]),
        ("# whole\napps:\n  - {name: a, bundle_id: com.example.a}\napi_keys:\n  - {name: k, sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8}\n", [:]),
        ("# whole\napps:\n  - {name: a, bundle_id: com.example.a}\n", [:]),
        ("nonsense: 1\n", [:]),
        ("ingress: 5\n", [:]),
        ("ingress:\n  listen: nope\n", [:]),
        ("ingress:\n  listen: host:99999\n", [:]),
        ("ingress:\n  listen: \":80\"\n", [:]),
        ("ingress:\n  max_body_bytes: 10\n", [:]),
        ("ingress:\n  max_batch_items: 0\n", [:]),
        ("ingress:\n  max_concurrent_requests: 100001\n", [:]),
        ("ingress:\n  max_sends_in_flight: 0\n", [:]),
        ("ingress:\n  max_batch_sends_running: 0\n", [:]),
        ("ingress:\n  batch_concurrency: 1.5\n", [:]),
        ("ingress:\n  batch_deadline_seconds: 0\n", [:]),
        ("ingress:\n  idempotency_window_seconds: x\n", [:]),
        ("ingress:\n  connection_timeout_seconds: 3601\n", [:]),
        ("ingress:\n  request_timeout_seconds: 0\n", [:]),
        ("ingress:\n  max_connections_per_client: -1\n", [:]),
        ("ingress:\n  threads: 65\n", [:]),
        ("ingress:\n  lisen: 127.0.0.1:1\n", [:]),
        ("ingress:\n  threads: 0\n  lisen: 1\n", [:]),
        ("metrics:\n  listen: 127.0.0.1:8080\n", [:]),
        ("metrics:\n  listen: [1]\n", [:]),
        ("metrics:\n  port: 1\n", [:]),
        ("apns_ingress:\n  listen: nope\n", [:]),
        ("apns_ingress:\n  listen: 127.0.0.1:1\n", [:]),
        ("apns_ingress:\n  listen: 127.0.0.1:1\n  certificate_file: c.pem\n", [:]),
        ("apns_ingress:\n  listen: 127.0.0.1:1\n  tls: maybe\n", [:]),
        ("apns_ingress:\n  listen: 127.0.0.1:1\n  tls: false\n  client_ca_file: ca.pem\n", [:]),
        ("apns_ingress:\n  client_ca_file: missing.pem\n", [:]),
        ("apns_ingress:\n  environment: staging\n", [:]),
        ("apns_ingress:\n  max_concurrent_streams: 0\n", [:]),
        ("apns_ingress:\n  max_header_list_bytes: 100\n", [:]),
        ("apns_ingress:\n  max_body_bytes: 100\n", [:]),
        ("apns_ingress:\n  max_connections_per_client: 0\n", [:]),
        ("apns_ingress:\n  max_connections: 0\n", [:]),
        ("apns_ingress:\n  request_timeout_seconds: 0.01\n", [:]),
        ("apns_ingress:\n  streams: 1\n", [:]),
        ("apns:\n  connections_per_origin: 0\n", [:]),
        ("apns:\n  request_timeout_seconds: 301\n", [:]),
        ("apns:\n  send_deadline_seconds: 0\n", [:]),
        ("apns:\n  timestamp_policy: sometimes\n", [:]),
        ("apns:\n  timestamp_max_lead_seconds: 86401\n", [:]),
        ("apns:\n  origins: 5\n", [:]),
        ("apns:\n  origins: {development: nope}\n", [:]),
        ("apns:\n  origins: {staging: 127.0.0.1:1}\n", [:]),
        ("apns:\n  ca_file: [x]\n", [:]),
        ("apns:\n  hosts: 1\n", [:]),
        ("retry:\n  max_retries: 11\n", [:]),
        ("retry:\n  base_delay_ms: 0\n", [:]),
        ("retry:\n  max_delay_ms: 1.5\n", [:]),
        ("retry:\n  jitter: 1\n", [:]),
        ("audit:\n  database_url: [1]\n", [:]),
        ("audit:\n  spool_directory: {a: 1}\n", [:]),
        ("audit:\n  migrate_on_start: 1\n", [:]),
        ("audit:\n  retention_days: 0\n", [:]),
        ("audit:\n  batch_size: 0\n", [:]),
        ("audit:\n  flush_interval_ms: 60001\n", [:]),
        ("audit:\n  journal_sync: sometimes\n", [:]),
        ("audit:\n  journal_sync_interval_ms: 0\n", [:]),
        ("audit:\n  postgres_timeout_ms: 99\n", [:]),
        ("audit:\n  spool: /x\n", [:]),
        ("shutdown:\n  drain_timeout_seconds: -1\n", [:]),
        ("shutdown:\n  grace: 1\n", [:]),
        ("tracing:\n  exporter: jaeger\n", [:]),
        ("tracing:\n  endpoint: collector:4317\n", [:]),
        ("tracing:\n  sampling: 3\n", [:]),
        ("tracing:\n  sampling: {ratio: 2}\n", [:]),
        ("tracing:\n  sampling: {parent_based: 1}\n", [:]),
        ("tracing:\n  sampling: {rate: 1}\n", [:]),
        ("tracing:\n  max_queue_size: 0\n", [:]),
        ("tracing:\n  max_queue_size: 10\n  max_export_batch_size: 20\n", [:]),
        ("tracing:\n  max_export_batch_size: 100001\n", [:]),
        ("tracing:\n  schedule_delay_ms: 0\n", [:]),
        ("tracing:\n  export_timeout_ms: 0\n", [:]),
        ("tracing:\n  sample_rate: 1\n", [:]),
        ("logging:\n  level: loud\n", [:]),
        ("logging:\n  format: json\n", [:]),
        ("", ["APNS_RELAY_INGRESS_LISTEN": "nope"]),
        ("", ["APNS_RELAY_METRICS_LISTEN": "127.0.0.1:99999"]),
        ("", ["APNS_RELAY_METRICS_LISTEN": "127.0.0.1:8080"]),
        ("", ["APNS_RELAY_AUDIT_JOURNAL_SYNC": "fsync"]),
        ("", ["APNS_RELAY_LOG_LEVEL": "loud"]),
        ("logging:\n  level: loud\n", ["APNS_RELAY_LOG_LEVEL": "info"]),
    ]

    @Test("each kind of mistake in each block: the field and the message")
    func refused() throws {
        let directory = try Directory()
        // An accepted file shows as its description's first line.
        let outcomes = Self.refusals.map { refusal in
            // "# whole" files stand alone; the others follow the one app and key.
            let yaml = refusal.yaml.hasPrefix("# whole\n") ? refusal.yaml : Self.apps + refusal.yaml
            return directory.outcome(yaml, environment: refusal.environment).prefix { $0 != "\n" }
        }
        #expect(outcomes.joined(separator: "\n") == Self.refusalMessages)
    }

    static let refusalMessages = """
        error: instance: must be a string, not array
        error: apps: must be a list
        error: apps[0].name: is required
        error: apps[0].environments[0]: must be development or production
        error: apps[0].colour: unknown setting (known here: bundle_id, environments, key_id, key_path, name, team_id)
        error: api_keys: must be a list
        error: api_keys[0].sha256: is the SHA-256 of "password", a key anyone could guess; generate a key and its entry with: apns-relay api-key new --name k
        error: api_keys: at least one key is required: the ingress refuses every request without one
        error: nonsense: unknown setting (known here: api_keys, apns, apns_ingress, apps, audit, ingress, instance, logging, metrics, retry, shutdown, tracing)
        error: ingress: must be a mapping, not integer
        error: ingress.listen: must be host:port (e.g. 127.0.0.1:8080), got nope
        error: ingress.listen: must be host:port with a port from 0 to 65535, got host:99999
        error: ingress.listen: must be host:port with a port from 0 to 65535, got :80
        error: ingress.max_body_bytes: must be a whole number from 1024 to 67108864
        error: ingress.max_batch_items: must be a whole number from 1 to 10000
        error: ingress.max_concurrent_requests: must be a whole number from 1 to 100000
        error: ingress.max_sends_in_flight: must be a whole number from 1 to 10000000
        error: ingress.max_batch_sends_running: must be a whole number from 1 to 100000
        error: ingress.batch_concurrency: must be a whole number from 1 to 100000
        error: ingress.batch_deadline_seconds: must be a number from 1.0 to 3600.0
        error: ingress.idempotency_window_seconds: must be a number from 1.0 to 2592000.0
        error: ingress.connection_timeout_seconds: must be a whole number from 1 to 3600
        error: ingress.request_timeout_seconds: must be a whole number from 1 to 300
        error: ingress.max_connections_per_client: must be a whole number from 0 to 100000
        error: ingress.threads: must be a whole number from 1 to 64
        error: ingress.lisen: unknown setting (known here: batch_concurrency, batch_deadline_seconds, connection_timeout_seconds, idempotency_window_seconds, listen, max_batch_items, max_batch_sends_running, max_body_bytes, max_concurrent_requests, max_connections_per_client, max_sends_in_flight, request_timeout_seconds, threads)
        error: ingress.threads: must be a whole number from 1 to 64
        error: metrics.listen: must differ from ingress.listen (127.0.0.1:8080)
        error: metrics.listen: must be a string, not array
        error: metrics.port: unknown setting (known here: listen)
        error: apns_ingress.listen: must be host:port (e.g. 127.0.0.1:8080), got nope
        error: apns_ingress.certificate_file: is required with tls: true (PEM files; or tls: false for cleartext HTTP/2 on loopback or a mesh)
        error: apns_ingress.private_key_file: is required with tls: true (PEM files; or tls: false for cleartext HTTP/2 on loopback or a mesh)
        error: apns_ingress.tls: must be true or false
        error: apns_ingress.client_ca_file: needs tls: true (client certificates are a TLS feature)
        error: apns_ingress.client_ca_file: cannot read a PEM certificate from $DIR/missing.pem
        error: apns_ingress.environment: must be development or production, not staging
        error: apns_ingress.max_concurrent_streams: must be a whole number from 1 to 10000
        error: apns_ingress.max_header_list_bytes: must be a whole number from 1024 to 1048576
        error: apns_ingress.max_body_bytes: must be a whole number from 5120 to 1048576
        error: apns_ingress.max_connections_per_client: must be a whole number from 1 to 100000
        error: apns_ingress.max_connections: must be a whole number from 1 to 100000
        error: apns_ingress.request_timeout_seconds: must be a number from 0.1 to 300.0
        error: apns_ingress.streams: unknown setting (known here: certificate_file, client_ca_file, environment, listen, max_body_bytes, max_concurrent_streams, max_connections, max_connections_per_client, max_header_list_bytes, private_key_file, request_timeout_seconds, tls)
        error: apns.connections_per_origin: must be a whole number from 1 to 64
        error: apns.request_timeout_seconds: must be a number from 0.1 to 300.0
        error: apns.send_deadline_seconds: must be a number from 0.1 to 3600.0
        error: apns.timestamp_policy: must be reject, warn or allow
        error: apns.timestamp_max_lead_seconds: must be a whole number from 0 to 86400
        error: apns.origins: must be a mapping, not integer
        error: apns.origins.development: must be host:port (e.g. 127.0.0.1:8080), got nope
        error: apns.origins.staging: unknown setting (known here: development, production)
        error: apns.ca_file: must be a string, not array
        error: apns.hosts: unknown setting (known here: ca_file, connections_per_origin, origins, request_timeout_seconds, send_deadline_seconds, timestamp_max_lead_seconds, timestamp_policy)
        error: retry.max_retries: must be a whole number from 0 to 10
        error: retry.base_delay_ms: must be a whole number from 1 to 60000
        error: retry.max_delay_ms: must be a whole number from 1 to 600000
        error: retry.jitter: unknown setting (known here: base_delay_ms, max_delay_ms, max_retries)
        error: audit.database_url: must be a string, not array
        error: audit.spool_directory: must be a string, not object
        error: audit.migrate_on_start: must be true or false
        error: audit.retention_days: must be a whole number from 1 to 3650
        error: audit.batch_size: must be a whole number from 1 to 100000
        error: audit.flush_interval_ms: must be a whole number from 1 to 60000
        error: audit.journal_sync: must be interval or always, got sometimes
        error: audit.journal_sync_interval_ms: must be a whole number from 1 to 10000
        error: audit.postgres_timeout_ms: must be a whole number from 100 to 600000
        error: audit.spool: unknown setting (known here: batch_size, database_url, flush_interval_ms, journal_sync, journal_sync_interval_ms, migrate_on_start, postgres_timeout_ms, retention_days, spool_directory)
        error: shutdown.drain_timeout_seconds: must be a number from 0.0 to 3600.0
        error: shutdown.grace: unknown setting (known here: drain_timeout_seconds)
        error: tracing.exporter: must be otlp, log or none, got jaeger
        error: tracing.endpoint: must be an http:// or https:// URL (OTLP/HTTP), got collector:4317
        error: tracing.sampling: must be a mapping, not integer
        error: tracing.sampling.ratio: must be a number from 0.0 to 1.0
        error: tracing.sampling.parent_based: must be true or false
        error: tracing.sampling.rate: unknown setting (known here: parent_based, ratio)
        error: tracing.max_queue_size: must be a whole number from 1 to 1000000
        error: tracing.max_export_batch_size: must not exceed tracing.max_queue_size (10)
        error: tracing.max_export_batch_size: must be a whole number from 1 to 100000
        error: tracing.schedule_delay_ms: must be a whole number from 1 to 600000
        error: tracing.export_timeout_ms: must be a whole number from 1 to 600000
        error: tracing.sample_rate: unknown setting (known here: endpoint, export_timeout_ms, exporter, max_export_batch_size, max_queue_size, sampling, schedule_delay_ms)
        error: logging.level: must be one of trace, debug, info, notice, warning, error, critical
        error: logging.format: unknown setting (known here: level)
        error: APNS_RELAY_INGRESS_LISTEN: must be host:port (e.g. 127.0.0.1:8080), got nope
        error: APNS_RELAY_METRICS_LISTEN: must be host:port with a port from 0 to 65535, got 127.0.0.1:99999
        error: metrics.listen: must differ from ingress.listen (127.0.0.1:8080)
        error: APNS_RELAY_AUDIT_JOURNAL_SYNC: must be interval or always, got fsync
        error: logging.level: must be one of trace, debug, info, notice, warning, error, critical
        # resolved from $DIR/relay.yaml and the environment
        """
}
