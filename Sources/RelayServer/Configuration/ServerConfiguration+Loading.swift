public import APNs
import Audit
import Foundation
import Ingress
import Relay
import RelayJSON

extension ServerConfiguration {
    /// Environment variables that override the file (see deploy/apns-relay.example.yaml).
    public enum Variable {
        public static let configFile = "APNS_RELAY_CONFIG"
        public static let instance = "APNS_RELAY_INSTANCE"
        public static let ingressListen = "APNS_RELAY_INGRESS_LISTEN"
        public static let metricsListen = "APNS_RELAY_METRICS_LISTEN"
        public static let databaseURL = "APNS_RELAY_DATABASE_URL"
        public static let spoolDirectory = "APNS_RELAY_SPOOL_DIRECTORY"
        public static let auditJournalSync = "APNS_RELAY_AUDIT_JOURNAL_SYNC"
        public static let logLevel = "APNS_RELAY_LOG_LEVEL"

        /// `APNS_RELAY_APP_<NAME>_<SETTING>` for per-app credentials.
        public static func app(_ name: String, _ setting: String) -> String {
            let upper = name.uppercased().unicodeScalars.map { ("A"..."Z").contains($0) || ("0"..."9").contains($0) ? Character($0) : "_" }
            return "APNS_RELAY_APP_\(String(upper))_\(setting)"
        }
    }

    /// Reads `file` (YAML) and applies `environment` on top.
    public static func load(file: String, environment: [String: String]) throws(ConfigurationError) -> ServerConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ConfigurationError(field: file, "cannot be read: \(error.localizedDescription)")
        }
        return try parse(yaml: text, file: file, environment: environment)
    }

    /// Parses YAML text; relative key paths are read from `file`'s directory.
    public static func parse(yaml: String, file: String, environment: [String: String]) throws(ConfigurationError) -> ServerConfiguration {
        var root = try ConfigurationReader(ConfigurationReader.parse(yaml: yaml, file: file), path: "")
        let host = ProcessInfo.processInfo.hostName
        var configuration = ServerConfiguration(instance: try root.string("instance") ?? (host.isEmpty ? "apns-relay" : host))
        configuration.sourceFile = file
        let directory = (file as NSString).deletingLastPathComponent

        if var ingress = try root.child("ingress") {
            if let listen = try ingress.string("listen") { configuration.ingress.listen = try Address(parsing: listen, field: ingress.name("listen")) }
            if let value = try ingress.integer("max_body_bytes", in: 1024...(64 << 20)) { configuration.ingress.maximumBodyBytes = value }
            if let value = try ingress.integer("max_batch_items", in: 1...10_000) { configuration.ingress.maximumBatchItems = value }
            if let value = try ingress.integer("max_concurrent_requests", in: 1...100_000) { configuration.ingress.maximumConcurrentRequests = value }
            if let value = try ingress.integer("max_sends_in_flight", in: 1...10_000_000) { configuration.ingress.maximumSendsInFlight = value }
            if let value = try ingress.integer("max_batch_sends_running", in: 1...100_000) { configuration.ingress.maximumBatchSendsRunning = value }
            if let value = try ingress.integer("batch_concurrency", in: 1...100_000) { configuration.ingress.batchConcurrency = value }
            if let value = try ingress.number("batch_deadline_seconds", in: 1...3600) { configuration.ingress.batchDeadlineSeconds = value }
            if let value = try ingress.number("idempotency_window_seconds", in: 1...(30 * 86_400)) { configuration.ingress.idempotencyWindowSeconds = value }
            if let value = try ingress.integer("connection_timeout_seconds", in: 1...3600) { configuration.ingress.connectionTimeoutSeconds = value }
            if let value = try ingress.integer("request_timeout_seconds", in: 1...300) { configuration.ingress.requestTimeoutSeconds = value }
            if let value = try ingress.integer("max_connections_per_client", in: 0...100_000) { configuration.ingress.maximumConnectionsPerClient = value }
            if let value = try ingress.integer("threads", in: 1...64) { configuration.ingress.threads = value }
            try ingress.rejectUnknown()
        }
        if var metrics = try root.child("metrics") {
            if let listen = try metrics.string("listen") { configuration.metrics.listen = try Address(parsing: listen, field: metrics.name("listen")) }
            try metrics.rejectUnknown()
        }
        if var h2 = try root.child("apns_ingress") {
            if let listen = try h2.string("listen"), !listen.isEmpty { configuration.apnsIngress.listen = try Address(parsing: listen, field: h2.name("listen")) }
            if let value = try h2.bool("tls") { configuration.apnsIngress.tls = value }
            if let value = try h2.string("certificate_file") { configuration.apnsIngress.certificateFile = resolve(value, against: directory) }
            if let value = try h2.string("private_key_file") { configuration.apnsIngress.privateKeyFile = resolve(value, against: directory) }
            if let value = try h2.string("client_ca_file"), !value.isEmpty {
                let path = resolve(value, against: directory)
                guard let pem = try? String(contentsOfFile: path, encoding: .utf8), pem.contains("-----BEGIN CERTIFICATE-----") else {
                    throw ConfigurationError(field: h2.name("client_ca_file"), "cannot read a PEM certificate from \(path)")
                }
                configuration.apnsIngress.clientCAFile = path
            }
            if let value = try h2.string("environment") {
                guard let environment = Environment(name: value) else {
                    throw ConfigurationError(field: h2.name("environment"), "must be development or production, not \(value)")
                }
                configuration.apnsIngress.environment = environment
            }
            if let value = try h2.integer("max_concurrent_streams", in: 1...10_000) { configuration.apnsIngress.maximumConcurrentStreams = value }
            if let value = try h2.integer("max_header_list_bytes", in: 1024...(1 << 20)) { configuration.apnsIngress.maximumHeaderListBytes = value }
            if let value = try h2.integer("max_body_bytes", in: 5120...(1 << 20)) { configuration.apnsIngress.maximumBodyBytes = value }
            if let value = try h2.integer("max_connections_per_client", in: 1...100_000) { configuration.apnsIngress.maximumConnectionsPerClient = value }
            if let value = try h2.integer("max_connections", in: 1...100_000) { configuration.apnsIngress.maximumConnections = value }
            if let value = try h2.number("request_timeout_seconds", in: 0.1...300) { configuration.apnsIngress.requestTimeoutSeconds = value }
            try h2.rejectUnknown()
            if configuration.apnsIngress.listen != nil, configuration.apnsIngress.tls {
                guard configuration.apnsIngress.certificateFile != nil, configuration.apnsIngress.privateKeyFile != nil else {
                    throw ConfigurationError(
                        field: h2.name(configuration.apnsIngress.certificateFile == nil ? "certificate_file" : "private_key_file"),
                        "is required with tls: true (PEM files; or tls: false for cleartext HTTP/2 on loopback or a mesh)")
                }
            }
            if configuration.apnsIngress.clientCAFile != nil, !configuration.apnsIngress.tls {
                throw ConfigurationError(field: h2.name("client_ca_file"), "needs tls: true (client certificates are a TLS feature)")
            }
        }
        if var apns = try root.child("apns") {
            if let value = try apns.integer("connections_per_origin", in: 1...64) { configuration.apns.connectionsPerOrigin = value }
            if let value = try apns.number("request_timeout_seconds", in: 0.1...300) { configuration.apns.requestTimeoutSeconds = value }
            if let value = try apns.number("send_deadline_seconds", in: 0.1...3600) { configuration.apns.sendDeadlineSeconds = value }
            if let text = try apns.string("timestamp_policy") {
                guard let policy = TimestampPolicy(rawValue: text) else {
                    throw ConfigurationError(field: apns.name("timestamp_policy"), "must be reject, warn or allow")
                }
                configuration.apns.timestampPolicy = policy
            }
            if let value = try apns.integer("timestamp_max_lead_seconds", in: 0...86_400) { configuration.apns.timestampMaximumLeadSeconds = value }
            if var origins = try apns.child("origins") {
                for environment in Environment.allCases {
                    if let text = try origins.string(environment.rawValue) {
                        let address = try Address(parsing: text, field: origins.name(environment.rawValue))
                        configuration.apns.origins[environment] = Origin(host: address.host, port: Int(address.port))
                    }
                }
                try origins.rejectUnknown()
            }
            if let caFile = try apns.string("ca_file") { configuration.apns.caFile = resolve(caFile, against: directory) }
            try apns.rejectUnknown()
        }
        if var retry = try root.child("retry") {
            if let value = try retry.integer("max_retries", in: 0...10) { configuration.retry.maxRetries = value }
            if let value = try retry.integer("base_delay_ms", in: 1...60_000) { configuration.retry.baseDelay = Double(value) / 1000 }
            if let value = try retry.integer("max_delay_ms", in: 1...600_000) { configuration.retry.maxDelay = Double(value) / 1000 }
            try retry.rejectUnknown()
        }
        if let apps = try root.list("apps") {
            for (index, item) in apps.enumerated() {
                configuration.apps.append(try app(item, path: "apps[\(index)]", directory: directory, environment: environment))
            }
        }
        if let keys = try root.list("api_keys") {
            for (index, item) in keys.enumerated() {
                configuration.apiKeys.append(try apiKey(item, path: "api_keys[\(index)]", directory: directory))
            }
        }
        if var audit = try root.child("audit") {
            if let url = try audit.string("database_url"), !url.isEmpty { configuration.audit.databaseURL = url }
            if let directory = try audit.string("spool_directory") { configuration.audit.spoolDirectory = directory }
            if let value = try audit.bool("migrate_on_start") { configuration.audit.migrateOnStart = value }
            if let value = try audit.integer("retention_days", in: 1...3650) { configuration.audit.retentionDays = value }
            if let value = try audit.integer("batch_size", in: 1...100_000) { configuration.audit.batchSize = value }
            if let value = try audit.integer("flush_interval_ms", in: 1...60_000) { configuration.audit.flushIntervalMilliseconds = value }
            if let text = try audit.string("journal_sync") {
                configuration.audit.journalSync = try journalSync(text, field: audit.name("journal_sync"))
            }
            if let value = try audit.integer("journal_sync_interval_ms", in: 1...10_000) { configuration.audit.journalSyncIntervalMilliseconds = value }
            try audit.rejectUnknown()
        }
        if var shutdown = try root.child("shutdown") {
            if let value = try shutdown.number("drain_timeout_seconds", in: 0...3600) { configuration.drainTimeoutSeconds = value }
            try shutdown.rejectUnknown()
        }
        if var tracing = try root.child("tracing") {
            if let text = try tracing.string("exporter") {
                guard let exporter = TracingSettings.Exporter(rawValue: text) else {
                    throw ConfigurationError(field: tracing.name("exporter"), "must be otlp, log or none, got \(text)")
                }
                configuration.tracing.exporter = exporter
            }
            if let endpoint = try tracing.string("endpoint"), !endpoint.isEmpty {
                guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else {
                    throw ConfigurationError(field: tracing.name("endpoint"), "must be an http:// or https:// URL (OTLP/HTTP), got \(endpoint)")
                }
                configuration.tracing.endpoint = endpoint
            }
            if var sampling = try tracing.child("sampling") {
                if let value = try sampling.number("ratio", in: 0...1) { configuration.tracing.samplingRatio = value }
                if let value = try sampling.bool("parent_based") { configuration.tracing.parentBased = value }
                try sampling.rejectUnknown()
            }
            if let value = try tracing.integer("max_queue_size", in: 1...1_000_000) { configuration.tracing.maximumQueueSize = value }
            if let value = try tracing.integer("max_export_batch_size", in: 1...100_000) { configuration.tracing.maximumExportBatchSize = value }
            if let value = try tracing.integer("schedule_delay_ms", in: 1...600_000) { configuration.tracing.scheduleDelayMilliseconds = value }
            if let value = try tracing.integer("export_timeout_ms", in: 1...600_000) { configuration.tracing.exportTimeoutMilliseconds = value }
            try tracing.rejectUnknown()
            guard configuration.tracing.maximumExportBatchSize <= configuration.tracing.maximumQueueSize else {
                throw ConfigurationError(field: tracing.name("max_export_batch_size"), "must not exceed tracing.max_queue_size (\(configuration.tracing.maximumQueueSize))")
            }
        }
        if var logging = try root.child("logging") {
            if let level = try logging.string("level") { configuration.logLevel = level }
            try logging.rejectUnknown()
        }
        try root.rejectUnknown()
        try configuration.apply(environment: environment)
        try configuration.validate()
        return configuration
    }

    private static func app(_ value: JSONValue, path: String, directory: String, environment: [String: String]) throws(ConfigurationError) -> AppConfiguration {
        var reader = try ConfigurationReader(value, path: path)
        guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), name.count <= 64 else {
            throw ConfigurationError(field: reader.name("name"), "must be 1 to 64 letters, digits, '-', '_' or '.'")
        }
        guard let bundleID = try reader.string("bundle_id"), !bundleID.isEmpty else { throw ConfigurationError(field: reader.name("bundle_id"), "is required") }
        var environments: Set<Environment> = [.development, .production]
        if let names = try reader.strings("environments") {
            environments = []
            for (index, text) in names.enumerated() {
                guard let environment = Environment(name: text) else {
                    throw ConfigurationError(field: "\(reader.name("environments"))[\(index)]", "must be development or production")
                }
                environments.insert(environment)
            }
            guard !environments.isEmpty else { throw ConfigurationError(field: reader.name("environments"), "must name at least one environment") }
        }
        // Read the file's values first so they count as known even when the environment overrides them.
        let fileTeamID = try reader.string("team_id")
        let fileKeyID = try reader.string("key_id")
        let fileKeyPath = try reader.string("key_path").map { resolve($0, against: directory) }
        let teamID = environment[Variable.app(name, "TEAM_ID")] ?? fileTeamID
        let keyID = environment[Variable.app(name, "KEY_ID")] ?? fileKeyID
        let keyPath = environment[Variable.app(name, "KEY_PATH")] ?? fileKeyPath
        try reader.rejectUnknown()
        return AppConfiguration(name: name, bundleID: bundleID, teamID: teamID, keyID: keyID, keyPath: keyPath, environments: environments)
    }

    private static func apiKey(_ value: JSONValue, path: String, directory: String) throws(ConfigurationError) -> APIKey {
        var reader = try ConfigurationReader(value, path: path)
        guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
        guard let hash = try reader.string("sha256") else {
            throw ConfigurationError(field: reader.name("sha256"), "is required: the SHA-256 of the key in hex; \(Self.generateKeyHint(name))")
        }
        if let word = WeakAPIKeys.preimage(ofSHA256Hex: hash) {
            let shown = word.isEmpty ? "the empty string (was KEY unset?)" : word.hasSuffix("\n") ? "\"\(word.dropLast())\" plus a newline" : "\"\(word)\""
            throw ConfigurationError(
                field: reader.name("sha256"),
                "is the SHA-256 of \(shown), a key anyone could guess; \(Self.generateKeyHint(name))")
        }
        let apps = try reader.strings("apps") ?? ["*"]
        let isAdmin = try reader.bool("admin") ?? false
        let rate = try reader.number("rate_per_second", in: 0.001...1_000_000)
        let burst = try reader.number("burst", in: 1...10_000_000)
        let providerKey = try reader.child("provider_key").map { reader throws(ConfigurationError) in try Self.providerKey(reader, directory: directory) }
        let clientCertificate = try reader.child("client_certificate").map { reader throws(ConfigurationError) in try Self.clientCertificate(reader) }
        try reader.rejectUnknown()
        guard var key = APIKey(name: name, sha256Hex: hash, apps: apps.contains("*") ? nil : Set(apps), isAdmin: isAdmin, ratePerSecond: rate, burst: burst ?? rate.map { max(1, $0) }) else {
            throw ConfigurationError(
                field: reader.name("sha256"), "must be 64 hex digits (a SHA-256), not the key itself or a placeholder; \(Self.generateKeyHint(name))")
        }
        key.providerKey = providerKey
        key.clientCertificate = clientCertificate
        return key
    }

    /// `client_certificate:` of an API key: the TLS client certificate that
    /// stands for it on the HTTP/2 APNs ingress, by `sha256` fingerprint
    /// (hex, colons allowed: `openssl x509 -noout -fingerprint -sha256`) or
    /// by `subject` (OpenSSL's one-line form); one of the two.
    private static func clientCertificate(_ reader: ConfigurationReader) throws(ConfigurationError) -> APIKey.ClientCertificateMatch {
        var reader = reader
        let sha256 = try reader.string("sha256")
        let subject = try reader.string("subject")
        try reader.rejectUnknown()
        switch (sha256, subject) {
        case (let fingerprint?, nil):
            let hex = fingerprint.filter { $0 != ":" }.lowercased()
            guard hex.count == 64, hex.allSatisfy(\.isHexDigit) else {
                throw ConfigurationError(field: reader.name("sha256"), "must be the certificate's SHA-256 fingerprint, 64 hex digits (colons allowed)")
            }
            return .sha256(hex)
        case (nil, let name?):
            guard name.hasPrefix("/"), name.count > 1 else {
                throw ConfigurationError(field: reader.name("subject"), "must be the subject in OpenSSL's one-line form, e.g. /O=Example/CN=backend")
            }
            return .subject(name)
        default:
            throw ConfigurationError(field: reader.name("sha256"), "give sha256 or subject, one of the two")
        }
    }

    /// `provider_key:` of an API key: the backend's own APNs key (id, team,
    /// public key file) it signs provider tokens with for the HTTP/2 APNs ingress.
    private static func providerKey(_ reader: ConfigurationReader, directory: String) throws(ConfigurationError) -> APIKey.ProviderKey {
        var reader = reader
        guard let keyID = try reader.string("key_id"), keyID.count == 10, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw ConfigurationError(field: reader.name("key_id"), "is required: the provider key's 10-character id (the token's kid)")
        }
        guard let teamID = try reader.string("team_id"), teamID.count == 10, teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw ConfigurationError(field: reader.name("team_id"), "is required: the 10-character team id (the token's iss)")
        }
        guard let file = try reader.string("public_key_file") else {
            throw ConfigurationError(field: reader.name("public_key_file"), "is required: the key's P-256 public key, PEM (openssl ec -in AuthKey.p8 -pubout)")
        }
        try reader.rejectUnknown()
        let path = resolve(file, against: directory)
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8), pem.contains("-----BEGIN PUBLIC KEY-----") else {
            throw ConfigurationError(field: reader.name("public_key_file"), "cannot read a PEM public key from \(path)")
        }
        var key = APIKey.ProviderKey(keyID: keyID, teamID: teamID, publicKeyPEM: pem)
        key.publicKeyFile = path
        return key
    }

    /// How to make a key: the command prints the key once and its `api_keys` entry.
    static func generateKeyHint(_ name: String) -> String {
        "generate a key and its entry with: apns-relay api-key new --name \(name)"
    }

    private mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        if let value = environment[Variable.instance], !value.isEmpty { instance = value }
        if let value = environment[Variable.ingressListen], !value.isEmpty { ingress.listen = try Address(parsing: value, field: Variable.ingressListen) }
        if let value = environment[Variable.metricsListen], !value.isEmpty { metrics.listen = try Address(parsing: value, field: Variable.metricsListen) }
        if let value = environment[Variable.databaseURL] { audit.databaseURL = value.isEmpty ? nil : value }
        if let value = environment[Variable.spoolDirectory], !value.isEmpty { audit.spoolDirectory = value }
        if let value = environment[Variable.auditJournalSync], !value.isEmpty {
            audit.journalSync = try Self.journalSync(value, field: Variable.auditJournalSync)
        }
        if let value = environment[Variable.logLevel], !value.isEmpty { logLevel = value }
        tracing.environmentWarnings = tracing.applyOpenTelemetryEnvironment(environment)
    }

    private func validate() throws(ConfigurationError) {
        guard !apps.isEmpty else { throw ConfigurationError(field: "apps", "at least one app is required") }
        var names = Set<String>()
        for (index, app) in apps.enumerated() where !names.insert(app.name).inserted {
            throw ConfigurationError(field: "apps[\(index)].name", "\(app.name) is configured twice")
        }
        guard !apiKeys.isEmpty else {
            throw ConfigurationError(field: "api_keys", "at least one key is required: the ingress refuses every request without one")
        }
        var keyNames = Set<String>()
        for (index, key) in apiKeys.enumerated() {
            guard keyNames.insert(key.name).inserted else { throw ConfigurationError(field: "api_keys[\(index)].name", "\(key.name) is configured twice") }
            for app in key.apps ?? [] where !names.contains(app) {
                throw ConfigurationError(field: "api_keys[\(index)].apps", "names \(app), which is not in apps")
            }
        }
        let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
        guard levels.contains(logLevel) else { throw ConfigurationError(field: "logging.level", "must be one of \(levels.joined(separator: ", "))") }
        if ingress.listen == metrics.listen, ingress.listen.port != 0 {
            throw ConfigurationError(field: "metrics.listen", "must differ from ingress.listen (\(ingress.listen))")
        }
    }

    static func journalSync(_ text: String, field: String) throws(ConfigurationError) -> AuditWriter.JournalSync {
        guard let mode = AuditWriter.JournalSync(rawValue: text) else {
            throw ConfigurationError(field: field, "must be interval or always, got \(text)")
        }
        return mode
    }

    static func resolve(_ path: String, against directory: String) -> String {
        path.hasPrefix("/") || directory.isEmpty ? path : (directory as NSString).appendingPathComponent(path)
    }
}

extension ServerConfiguration.Address {
    /// `host:port`, `[v6]:port`.
    init(parsing text: String, field: String) throws(ConfigurationError) {
        var host: Substring
        var port: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(after: close)...].drop(while: { $0 == ":" })
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        } else {
            throw ConfigurationError(field: field, "must be host:port (e.g. 127.0.0.1:8080), got \(text)")
        }
        guard let number = UInt16(port), !host.isEmpty else {
            throw ConfigurationError(field: field, "must be host:port with a port from 0 to 65535, got \(text)")
        }
        if host == "*" { host = "0.0.0.0" }
        self.init(host: String(host), port: number)
    }
}
