import APNs
import Relay

extension ServerConfiguration {
    /// Opens every app's key and checks its bundle id, as start-up will.
    public func checkCredentials() throws {
        for app in apps {
            _ = try RequestBuilder(bundleID: app.bundleID)
            _ = try ProviderCredentials(keyID: app.keyID, teamID: app.teamID, keyPath: app.keyPath)
        }
    }

    /// The resolved settings as YAML, with the database password masked and
    /// API keys shown by name and hash prefix only.
    public var maskedDescription: String {
        var lines: [String] = []
        lines.append("# resolved from \(sourceFile ?? "(no file)") and the environment")
        lines.append("instance: \(instance)")
        lines.append("ingress:")
        lines.append("  listen: \(ingress.listen)")
        lines.append("  max_body_bytes: \(ingress.maximumBodyBytes)")
        lines.append("  max_batch_items: \(ingress.maximumBatchItems)")
        lines.append("  max_concurrent_requests: \(ingress.maximumConcurrentRequests)")
        lines.append("  max_sends_in_flight: \(ingress.maximumSendsInFlight)")
        lines.append("  max_batch_sends_running: \(ingress.maximumBatchSendsRunning)")
        lines.append("  batch_concurrency: \(ingress.batchConcurrency.map(String.init) ?? "max_batch_sends_running / 8")")
        lines.append("  batch_deadline_seconds: \(ingress.batchDeadlineSeconds)")
        lines.append("  idempotency_window_seconds: \(ingress.idempotencyWindowSeconds)")
        lines.append("  connection_timeout_seconds: \(ingress.connectionTimeoutSeconds)")
        lines.append("  request_timeout_seconds: \(ingress.requestTimeoutSeconds)")
        lines.append("  max_connections_per_client: \(ingress.maximumConnectionsPerClient)")
        lines.append("  threads: \(ingress.threads)")
        lines.append("metrics:")
        lines.append("  listen: \(metrics.listen)")
        lines.append("apns_ingress:")
        if let listen = apnsIngress.listen {
            lines.append("  listen: \(listen)")
            lines.append("  tls: \(apnsIngress.tls)\(apnsIngress.tls ? "" : "  # cleartext HTTP/2 with prior knowledge")")
            if apnsIngress.tls {
                lines.append("  certificate_file: \(apnsIngress.certificateFile ?? "(missing)")")
                lines.append("  private_key_file: \(apnsIngress.privateKeyFile ?? "(missing)")")
                if let file = apnsIngress.clientCAFile { lines.append("  client_ca_file: \(file)") }
            }
            lines.append("  environment: \(apnsIngress.environment?.rawValue ?? "(the app's only one)")")
            lines.append("  max_concurrent_streams: \(apnsIngress.maximumConcurrentStreams)")
            lines.append("  max_header_list_bytes: \(apnsIngress.maximumHeaderListBytes)")
            lines.append("  max_body_bytes: \(apnsIngress.maximumBodyBytes)")
            lines.append("  max_connections_per_client: \(apnsIngress.maximumConnectionsPerClient)")
            lines.append("  max_connections: \(apnsIngress.maximumConnections)")
            lines.append("  request_timeout_seconds: \(apnsIngress.requestTimeoutSeconds)")
        } else {
            lines.append("  listen: \"\"  # off")
        }
        lines.append("apns:")
        lines.append("  connections_per_origin: \(apns.connectionsPerOrigin)")
        lines.append("  request_timeout_seconds: \(apns.requestTimeoutSeconds)")
        lines.append("  send_deadline_seconds: \(apns.sendDeadlineSeconds)")
        lines.append("  timestamp_policy: \(apns.timestampPolicy.rawValue)")
        lines.append("  timestamp_max_lead_seconds: \(apns.timestampMaximumLeadSeconds)")
        if !apns.origins.isEmpty {
            lines.append("  origins:")
            for (environment, origin) in apns.origins.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                lines.append("    \(environment.rawValue): \(origin.host):\(origin.port)")
            }
        }
        if let caFile = apns.caFile { lines.append("  ca_file: \(caFile)") }
        lines.append("retry:")
        lines.append("  max_retries: \(retry.maxRetries)")
        lines.append("  base_delay_ms: \(Int(retry.baseDelay * 1000))")
        lines.append("  max_delay_ms: \(Int(retry.maxDelay * 1000))")
        lines.append("apps:")
        for app in apps {
            lines.append("  - name: \(app.name)")
            lines.append("    bundle_id: \(app.bundleID)")
            lines.append("    team_id: \(app.teamID ?? "(missing)")")
            lines.append("    key_id: \(app.keyID ?? "(missing)")")
            lines.append("    key_path: \(app.keyPath ?? "(missing)")")
            lines.append("    environments: [\(app.environments.map(\.rawValue).sorted().joined(separator: ", "))]")
        }
        lines.append("api_keys:")
        for key in apiKeys {
            let hash = key.hash.prefix(4).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            lines.append("  - name: \(key.name)")
            lines.append("    sha256: \(hash)…  # masked")
            lines.append("    apps: [\(key.apps.map { $0.sorted().joined(separator: ", ") } ?? "\"*\"")]")
            lines.append("    admin: \(key.isAdmin)")
            if let rate = key.ratePerSecond { lines.append("    rate_per_second: \(rate)") }
            if let burst = key.burst { lines.append("    burst: \(burst)") }
            if let provider = key.providerKey {
                lines.append("    provider_key:")
                lines.append("      key_id: \(provider.keyID)")
                lines.append("      team_id: \(provider.teamID)")
                lines.append("      public_key_file: \(provider.publicKeyFile ?? "(inline)")")
            }
            switch key.clientCertificate {
            case .sha256(let fingerprint): lines.append("    client_certificate: {sha256: \(fingerprint)}")
            case .subject(let subject): lines.append("    client_certificate: {subject: \"\(subject)\"}")
            case nil: break
            }
        }
        lines.append("audit:")
        lines.append("  database_url: \(audit.databaseURL.map(Self.maskPassword) ?? "\"\"  # none: rows stay in the spool")")
        lines.append("  spool_directory: \(audit.spoolDirectory)")
        lines.append("  migrate_on_start: \(audit.migrateOnStart)")
        lines.append("  retention_days: \(audit.retentionDays.map(String.init) ?? "(keep forever)")")
        lines.append("  batch_size: \(audit.batchSize)")
        lines.append("  flush_interval_ms: \(audit.flushIntervalMilliseconds)")
        lines.append("  journal_sync: \(audit.journalSync.rawValue)")
        lines.append("  journal_sync_interval_ms: \(audit.journalSyncIntervalMilliseconds)\(audit.journalSync == .always ? "  # unused: always syncs before the send goes on" : "")")
        lines.append("tracing:")
        lines.append("  exporter: \(tracing.exporter.rawValue)\(tracing.exporterSource == .file ? "" : "  # from \(tracing.exporterSource.rawValue)")")
        for warning in tracing.environmentWarnings { lines.append("  # warning: \(warning)") }
        lines.append("  endpoint: \(tracing.endpoint.map(Self.maskPassword) ?? "(OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)")")
        lines.append("  sampling: {ratio: \(tracing.samplingRatio), parent_based: \(tracing.parentBased)}")
        lines.append("  max_queue_size: \(tracing.maximumQueueSize)")
        lines.append("  max_export_batch_size: \(tracing.maximumExportBatchSize)")
        lines.append("  schedule_delay_ms: \(tracing.scheduleDelayMilliseconds)")
        lines.append("  export_timeout_ms: \(tracing.exportTimeoutMilliseconds)")
        lines.append("shutdown:")
        lines.append("  drain_timeout_seconds: \(drainTimeoutSeconds)")
        lines.append("logging:")
        lines.append("  level: \(logLevel)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `postgres://user:secret@host/db` → `postgres://user:****@host/db`;
    /// `host=x password=secret` → `host=x password=****`.
    public static func maskPassword(_ conninfo: String) -> String {
        if let scheme = conninfo.range(of: "://") {
            let rest = conninfo[scheme.upperBound...]
            guard let at = rest.firstIndex(of: "@") else { return conninfo }
            let userInfo = rest[..<at]
            guard let colon = userInfo.firstIndex(of: ":") else { return conninfo }
            return String(conninfo[..<scheme.upperBound]) + userInfo[..<colon] + ":****" + rest[at...]
        }
        var words: [String] = []
        var maskNext = false
        for word in conninfo.split(separator: " ", omittingEmptySubsequences: false) {
            if maskNext {
                words.append("****")
                maskNext = false
            } else if word.lowercased().hasPrefix("password") {
                let parts = word.split(separator: "=", maxSplits: 1)
                if parts.count == 2, !parts[1].isEmpty { words.append("\(parts[0])=****") } else { words.append(String(word)); maskNext = parts.count == 1 }
            } else {
                words.append(String(word))
            }
        }
        return words.joined(separator: " ")
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
